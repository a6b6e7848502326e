"""ESPnet2's ``espnet2.bin.lm_calc_perplexity`` with our classes registered."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet2.bin.lm_calc_perplexity import main

if __name__ == "__main__":
    main()
