"""Train an image classifier with ESPnet2's trainer:
``python -m espnet_ext.bin.cls_train --config conf/x.yaml ...``.

The options are ESPnet2's (``--output_dir``, ``--resume``, ``--ngpu``, ``--dist_launcher``, ...) plus
ImageClassificationTask's; ``--print_config`` lists them all.
"""

from espnet_ext.registry import install

install(tasks=())  # typeguard's checks off before ESPnet is imported (espnet_ext.registry)

from espnet_ext.tasks.image_classification import ImageClassificationTask


def main(cmd=None):
    ImageClassificationTask.main(cmd=cmd)


if __name__ == "__main__":
    main()
