"""ESPnet2's ``espnet2.bin.asr_train`` on our ASR task (``espnet_ext.tasks.asr``: ESPnet's, with our checks)
with our classes registered."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet_ext.tasks.asr import ASRTask


def main(cmd=None):
    ASRTask.main(cmd=cmd)


if __name__ == "__main__":
    main()
