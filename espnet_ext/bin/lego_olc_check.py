"""Check an OLC ratio against a data set before training: how many utterances would get fewer output
frames K than their CTC target needs, and the smallest ratio that fits them all.

    python -m espnet_ext.bin.lego_olc_check --input_shape_file exp/stats/train/src_text_shape \
        --target_shape_file exp/stats/train/text_shape.bpe --ratio 2.0 --max_length 1024 --input_offset 1

Shape files are ESPnet's ``utt-id length[,dim]`` lines. ``--input_offset`` adds frames the model adds
(ESPnet's MT model appends <eos> to the source: 1); ``--input_subsampling 4`` accounts for a conv2d input
layer. Target lengths are a lower bound of what CTC needs (adjacent repeats need one blank more each; the
training-time check counts those). Exit status 1 when any utterance is too short.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines
from espnet_ext.nets.lego.olc import smallest_safe_ratio, too_short


def read_shape(path: str) -> dict[str, int]:
    lengths = {}
    for number, line in read_utf8_lines(path):
        fields = line.split()
        if not fields:
            continue
        try:
            if len(fields) != 2:
                raise ValueError
            lengths[fields[0]] = int(fields[1].split(",")[0])
        except ValueError:
            raise InputError("expected 'utt-id length[,dim]'", path=path, line=number) from None
    if not lengths:
        raise InputError("no utterances", path=path)
    return lengths


def check(
    inputs: dict, targets: dict, ratio: float, max_length: int, offset: int, subsampling: int
):
    """-> (ids of too-short utterances, smallest safe ratio)."""
    if set(inputs) != set(targets):
        missing = sorted(set(inputs) ^ set(targets))[:3]
        raise InputError(f"input and target shape files differ in utterance ids, e.g. {missing}")
    ids = sorted(inputs)
    t = torch.tensor([inputs[u] + offset for u in ids])
    if subsampling == 4:
        t = ((t - 1) // 2 - 1) // 2
    elif subsampling != 1:
        raise ConfigError("must be 1 or 4 (conv2d)", key="--input_subsampling")
    needed = torch.tensor([targets[u] for u in ids])
    short = too_short(t.clamp(min=1), needed, ratio, max_length)
    return [u for u, s in zip(ids, short.tolist()) if s], smallest_safe_ratio(
        t.clamp(min=1), needed
    )


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input_shape_file", required=True)
    parser.add_argument("--target_shape_file", required=True)
    parser.add_argument("--ratio", type=float, required=True, help="OLC K/T")
    parser.add_argument("--max_length", type=int, required=True)
    parser.add_argument("--input_offset", type=int, default=0)
    parser.add_argument("--input_subsampling", type=int, default=1)
    args = parser.parse_args(argv)
    short, safe = check(
        read_shape(args.input_shape_file),
        read_shape(args.target_shape_file),
        args.ratio,
        args.max_length,
        args.input_offset,
        args.input_subsampling,
    )
    print(f"too short at ratio {args.ratio}, max_length {args.max_length}: {len(short)} utterances")
    for utt in short[:20]:
        print(f"  {utt}")
    print(f"smallest ratio fitting every target (before max_length): {safe:.4f}")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
