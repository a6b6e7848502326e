"""Train a lip reader (video to text) with ESPnet2's trainer:
``python -m espnet_ext.bin.vsr_train --config conf/x.yaml ...``.

The options are ESPnet2's (``--output_dir``, ``--resume``, ``--ngpu``, ``--dist_launcher``, ...) plus
LipReadingTask's; ``--print_config`` lists them all.
"""

from espnet_ext.registry import install

install()  # ESPnet2's ASR encoders with ours (LipReadingTask's encoder_choices), before ESPnet is imported

from espnet_ext.tasks.lip_reading import LipReadingTask


def main(cmd=None):
    LipReadingTask.main(cmd=cmd)


if __name__ == "__main__":
    main()
