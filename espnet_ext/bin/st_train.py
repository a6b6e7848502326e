"""ESPnet2's ``espnet2.bin.st_train`` on our ST task (``espnet_ext.tasks.st``: ``--model espnet|task_conditioned``)
with our classes registered; st.sh runs it for statistics collection and training."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet_ext.tasks.st import STTask


def main(cmd=None):
    STTask.main(cmd=cmd)


if __name__ == "__main__":
    main()
