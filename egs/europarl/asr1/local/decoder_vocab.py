#!/usr/bin/env python3
"""The output vocabulary of a LegoNN decoder artefact as an ASR token dir (tokens.txt + bpe.model).

A decoder emits only the tokens it was trained on, and it ingests distributions over its encoder's interface
vocabulary: an ASR model whose last encoder module is to feed it must use that vocabulary, so the recipe's
token list is the decoder's (the paper applies one English BPE to both tasks, §V-C2).

    local/decoder_vocab.py --artefact ../../wmt/mt1/exp/lego_deen/mt_x/modules/decoder.pt \
        --base_dir ../../wmt/mt1 --out_dir data/token_list/bpe
"""

import argparse
import shutil
import sys
from pathlib import Path

from espnet_ext.errors import InputError
from espnet_ext.fileio import atomic_write
from espnet_ext.nets.lego.inventory import load_artefact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artefact", required=True)
    parser.add_argument(
        "--base_dir", default=".", help="relative paths in the artefact are from here"
    )
    parser.add_argument("--out_dir", required=True, type=Path)
    args = parser.parse_args()
    try:
        decoder = load_artefact(args.artefact)
        if decoder["kind"] != "decoder":
            raise InputError(f"is a {decoder['kind']} module, not a decoder", path=args.artefact)
        target = decoder["target"]
        if decoder["output_vocab"] != decoder["input_vocab"]:
            raise InputError(
                "ingests another vocabulary than it emits; an ASR encoder module can feed it only "
                "with an interface of its input vocabulary, which this recipe does not build",
                path=args.artefact,
            )
        if target["token_type"] != "bpe":
            raise InputError(
                f"token_type {target['token_type']!r}: the recipe needs bpe", path=args.artefact
            )
        bpemodel = Path(args.base_dir) / target["bpemodel"]
        if not bpemodel.is_file():
            raise InputError(f"its BPE model {bpemodel} does not exist", path=args.artefact)
        args.out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bpemodel, args.out_dir / "bpe.model")
        with atomic_write(args.out_dir / "tokens.txt") as f:
            f.write("".join(f"{t}\n" for t in decoder["output_vocab"]))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.out_dir}: {len(decoder['output_vocab'])} tokens of {args.artefact}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
