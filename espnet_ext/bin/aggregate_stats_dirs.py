"""ESPnet2's ``espnet2.bin.aggregate_stats_dirs`` with ESPnet's type checks off as in our other entry points."""

from espnet_ext.registry import install

install(tasks=())  # typeguard's checks off before ESPnet is imported (espnet_ext.registry)

from espnet2.bin.aggregate_stats_dirs import main

if __name__ == "__main__":
    main()
