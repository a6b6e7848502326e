"""ESPnet2's ``espnet2.bin.lm_train`` on our LM task (``espnet_ext.tasks.lm``: ESPnet's, with our trainer)
with our classes registered."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet_ext.tasks.lm import LMTask


def main(cmd=None):
    LMTask.main(cmd=cmd)


if __name__ == "__main__":
    main()
