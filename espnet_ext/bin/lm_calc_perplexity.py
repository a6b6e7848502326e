"""ESPnet2's ``espnet2.bin.lm_calc_perplexity`` with our classes registered."""

from espnet2.bin.lm_calc_perplexity import main

import espnet_ext  # noqa: F401  (registers our classes before ESPnet2 parses the config)

if __name__ == "__main__":
    main()
