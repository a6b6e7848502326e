"""Save every module of a trained LegoNN model (``model: legonn`` or the encoder-only ``legonn_ctc``) as its
own inventory artefact.

    python -m espnet_ext.bin.lego_export --config exp/x/config.yaml \
        --model_file exp/x/valid.acc.ave.pth --output_dir exp/x/modules
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from espnet_ext.errors import reports_input_errors
from espnet_ext.nets.lego.inventory import export_modules


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the experiment's config.yaml")
    parser.add_argument("--model_file", required=True, help="its model .pth (state dict)")
    parser.add_argument("--output_dir", required=True, help="encoder<i>.pt and decoder.pt go here")
    args = parser.parse_args(argv)
    for path in export_modules(args.config, args.model_file, args.output_dir):
        print(path)


if __name__ == "__main__":
    sys.exit(main())
