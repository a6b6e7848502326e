"""ESPnet2's ``espnet2.bin.mt_inference`` with our classes registered and the LM vocabulary checked."""

import sys

import espnet_ext  # noqa: F401  (registers our classes before ESPnet2 builds the model)
from espnet2.bin.mt_inference import main

from espnet_ext.lm_vocabulary import refuse_mismatched_lm

if __name__ == "__main__":
    refuse_mismatched_lm(sys.argv[1:], "--mt_train_config")
    main()
