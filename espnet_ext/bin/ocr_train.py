"""Train a text recognizer (image to token sequence) with ESPnet2's trainer:
``python -m espnet_ext.bin.ocr_train --config conf/x.yaml ...``.

The options are ESPnet2's (``--output_dir``, ``--resume``, ``--ngpu``, ``--dist_launcher``, ...) plus
ImageToSequenceTask's; ``--print_config`` lists them all.
"""

from espnet_ext.registry import install

install(tasks=())  # typeguard's checks off before ESPnet is imported (espnet_ext.registry)

from espnet_ext.tasks.image_to_sequence import ImageToSequenceTask


def main(cmd=None):
    ImageToSequenceTask.main(cmd=cmd)


if __name__ == "__main__":
    main()
