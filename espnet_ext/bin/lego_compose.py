"""Compose LegoNN module artefacts (encoders in order, then a decoder) into one ESPnet2 MT model.

    python -m espnet_ext.bin.lego_compose --modules ro_en/modules/encoder0.pt \
        de_en/modules/decoder.pt --output_dir exp/ro_en_composed

writes ``config.yaml`` + ``model.pth``: decode them as any MT model (``mt_inference --mt_train_config
config.yaml --mt_model_file model.pth``) or fine-tune with ``mt_train --config config.yaml --init_param
model.pth``. Interface vocabularies must match between neighbours; artefacts of another format version
are refused.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from espnet_ext.errors import reports_input_errors
from espnet_ext.nets.lego.inventory import compose


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", required=True, help="artefacts, decoder last")
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args(argv)
    for path in compose(args.modules, args.output_dir):
        print(path)


if __name__ == "__main__":
    sys.exit(main())
