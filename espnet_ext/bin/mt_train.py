"""ESPnet2's ``espnet2.bin.mt_train`` on our MT task (``espnet_ext.tasks.mt``: LegoNN models built without
ESPnet's unused CTC head) with our classes registered; mt.sh runs it for statistics collection and training."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet_ext.tasks.mt import MTTask


def main(cmd=None):
    MTTask.main(cmd=cmd)


if __name__ == "__main__":
    main()
