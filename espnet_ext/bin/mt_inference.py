"""ESPnet2's ``espnet2.bin.mt_inference`` with our classes registered."""

import espnet_ext  # noqa: F401  (registers our classes before ESPnet2 parses the config)
from espnet2.bin.mt_inference import main

if __name__ == "__main__":
    main()
