"""Average the last N epochs of an ESPnet training directory, or the given files, into one model file.

    python -m espnet_ext.bin.average_checkpoints --exp_dir exp/mt_x --last 5 --out exp/mt_x/last5.pth
    python -m espnet_ext.bin.average_checkpoints --out avg.pth exp/mt_x/9epoch.pth exp/mt_x/10epoch.pth
    python -m espnet_ext.bin.average_checkpoints --exp_dir exp/mt_x --model last5.pth

``--model NAME`` is the pipelines' ``--inference_model``: ``last<N>.pth`` is (re)made from the last N
epochs in ``--exp_dir``, ``window<N>.<phase>.<key>.<max|min>.pth`` (e.g. ``window10.valid.bleu.max.pth``)
from the N consecutive epochs with the best mean ``phase.key`` in ESPnet's reporter; any other name is left
alone (ESPnet's own files, e.g. valid.acc.ave.pth).

    python -m espnet_ext.bin.average_checkpoints --exp_dir exp/mt_x --model window10.valid.bleu.max.pth

The last epoch is the target of ``latest.pth`` (``--upto_epoch`` overrides). See
espnet_ext.decoding.checkpoint_average.

    python -m espnet_ext.bin.average_checkpoints training_args --model last10.pth -- TRAINING COMMAND...

prints, one per line, the options that make that ESPnet training keep its last 10 epoch files (none for a
model not named ``last<N>.pth``), or fails naming the config when it trains fewer than 10 epochs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.decoding.checkpoint_average import (
    last_epoch_files,
    last_n,
    training_args,
    window_files,
    window_spec,
    write_average,
)
from espnet_ext.errors import reports_input_errors


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="average_checkpoints",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--exp_dir", type=Path, help="ESPnet training output (<e>epoch.pth files)")
    parser.add_argument("--last", type=int, help="number of last epochs to average")
    parser.add_argument("--upto_epoch", type=int, help="last epoch of the range (default: latest)")
    parser.add_argument("--out", type=Path, help="averaged model file to write")
    parser.add_argument("--model", help="inference model name: last<N>.pth is made in --exp_dir")
    parser.add_argument("files", nargs="*", type=Path, help="model files (instead of --exp_dir)")
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["training_args"]:
        keep = argparse.ArgumentParser(prog="average_checkpoints training_args")
        keep.add_argument("--model", required=True, help="the inference model (last<N>.pth)")
        keep.add_argument("training", nargs=argparse.REMAINDER, help="-- then the training command")
        args = keep.parse_args(argv[1:])
        command = args.training[1:] if args.training[:1] == ["--"] else args.training
        for arg in training_args(command, args.model):
            print(arg)
        return
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.model is not None:
        if args.exp_dir is None or args.files or args.out or args.last:
            parser.error("--model goes with --exp_dir only")
        spec = window_spec(args.model)
        if spec is not None:
            files = window_files(args.exp_dir, *spec)
            write_average(files, args.exp_dir / args.model)
            print(
                f"averaged the window of {len(files)} epochs with the best mean {'.'.join(spec[1:3])} "
                f"({', '.join(p.name for p in files)}) -> {args.exp_dir / args.model}"
            )
            return
        if last_n(args.model) is None:
            return
        args.last, args.out = last_n(args.model), args.exp_dir / args.model
    if args.out is None:
        parser.error("--out is required")
    if bool(args.files) == (args.exp_dir is not None):
        parser.error("give either --exp_dir with --last, or model files")
    if args.exp_dir is not None and args.last is None:
        parser.error("--exp_dir needs --last")
    files = args.files or last_epoch_files(args.exp_dir, args.last, args.upto_epoch)
    write_average(files, args.out)
    print(f"averaged {len(files)} models ({', '.join(p.name for p in files)}) -> {args.out}")


if __name__ == "__main__":
    sys.exit(main())
