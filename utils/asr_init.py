#!/usr/bin/env python3
"""Checked ESPnet ``--init_param`` options that start an ST model from a trained ASR model.

    utils/asr_init.py --asr_model exp/asr_x/valid.acc.ave.pth -- <the st_train options>
    -> --init_param exp/asr_x/valid.acc.ave.pth:normalize:normalize exp/asr_x/valid.acc.ave.pth:encoder:encoder

ESPnet's ``--init_param FILE:SRC:DST`` updates the module's state dict with the checkpoint's matching keys and
leaves keys the checkpoint lacks at their random initialisation, so an ASR model of another architecture
(fewer blocks, say) would silently give a half-random encoder. Here the ST model is built from its training
options and every parameter and buffer under ``encoder.``, ``frontend.`` and ``normalize.`` must be in the
checkpoint with the same shape, and the checkpoint may hold no other key under them; otherwise InputError
names the checkpoint file and the mismatching keys. The decoder starts from scratch, as in ESPnet's st.sh.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Standard output carries only the answer: ESPnet and its dependencies print notices (e.g. about
# Flash Attention) on stdout while they import, which the calling pipeline would read as options.
_answer, sys.stdout = sys.stdout, sys.stderr

try:
    import espnet_ext  # noqa: F401
except ImportError:  # not installed: use the checkout this script belongs to
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from espnet_ext.errors import InputError, reports_input_errors  # noqa: E402 (after the stdout swap)

INIT_MODULES = ("frontend", "normalize", "encoder")
SHOWN_KEYS = 8  # mismatching keys named in the error (then "... and N more")


def _under(state: dict, module: str) -> dict:
    return {k: v for k, v in state.items() if k.startswith(module + ".")}


def _listing(keys: list[str]) -> str:
    more = len(keys) - SHOWN_KEYS
    return ", ".join(keys[:SHOWN_KEYS]) + (f" ... and {more} more" if more > 0 else "")


def check_init(asr_state: dict, st_state: dict, asr_model: str | Path) -> list[str]:
    """The modules (of INIT_MODULES) to copy; InputError unless their keys and shapes match exactly."""
    modules, problems = [], []
    for module in INIT_MODULES:
        asr, st = _under(asr_state, module), _under(st_state, module)
        if not asr and not st:
            continue
        missing = sorted(set(st) - set(asr))
        extra = sorted(set(asr) - set(st))
        shapes = sorted(
            f"{k} {tuple(asr[k].shape)} vs {tuple(st[k].shape)}"
            for k in set(asr) & set(st)
            if tuple(asr[k].shape) != tuple(st[k].shape)
        )
        if missing:
            problems.append(f"ST keys missing from the checkpoint: {_listing(missing)}")
        if extra:
            problems.append(f"checkpoint keys the ST model lacks: {_listing(extra)}")
        if shapes:
            problems.append(f"shape mismatch (checkpoint vs ST): {_listing(shapes)}")
        modules.append(module)
    if "encoder" not in modules:
        problems.append("the checkpoint has no encoder.* parameters")
    if problems:
        raise InputError(
            "not an ASR model of the ST model's encoder architecture: " + "; ".join(problems),
            path=asr_model,
        )
    return modules


@reports_input_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asr_model", type=Path, required=True, help="the ASR model file (.pth)")
    parser.add_argument("st_options", nargs=argparse.REMAINDER, help="-- then the st_train options")
    args = parser.parse_args(argv)
    st_options = args.st_options[1:] if args.st_options[:1] == ["--"] else args.st_options

    import torch

    from espnet_ext.registry import build_model

    if not args.asr_model.is_file():
        raise InputError("no such ASR model file", path=args.asr_model)
    asr_state = torch.load(args.asr_model, map_location="cpu", weights_only=True)
    st_state = build_model("st", st_options).state_dict()
    modules = check_init(asr_state, st_state, args.asr_model)
    # One --init_param with every value: ESPnet's option takes nargs="*", a repeated one replaces the last.
    print("--init_param", " ".join(f"{args.asr_model}:{m}:{m}" for m in modules), file=_answer)


if __name__ == "__main__":
    sys.exit(main())
