"""Parameter counts of ESPnet2 training configs, built exactly as training builds them.

    python -m espnet_ext.analysis.param_count egs/mustc/st1/conf/tuning/train_st_*.yaml [--vocab 8000]

The task comes from the recipe directory (``st1`` -> st, ``asr1`` -> asr) unless ``--task`` is given; the
model is built through ESPnet2's task with a token list of ``--vocab`` entries and ``--input_size``
feature dimensions. Prints one row per config: encoder, decoder, CTC heads (built by ESPnet even when
their loss weight is 0, so listed apart) and the total without them.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import torch

from espnet_ext.errors import ConfigError
from espnet_ext.registry import build_model


def task_of(config: Path) -> str:
    match = re.search(r"/(st|asr|mt)1/", str(config.resolve()))
    if not match:
        raise ConfigError("cannot tell the task from the path; give --task", path=config)
    return match.group(1)


def count(module: torch.nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def parameter_counts(
    config: Path, task: str | None = None, vocab: int = 8000, input_size: int = 80
):
    """{encoder, decoder, ctc, total} for ``config`` built as ESPnet2 ``task`` builds it."""
    task = task or task_of(config)
    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens.txt"
        words = ["<blank>", "<unk>", *(f"t{i}" for i in range(vocab - 3)), "<sos/eos>"]
        tokens.write_text("\n".join(words) + "\n", encoding="utf-8")
        args = [
            "--config",
            str(config),
            "--token_list",
            str(tokens),
            "--input_size",
            str(input_size),
        ]
        if task == "st":  # ESPnet's ST model needs a source vocabulary (for its ASR CTC head)
            args += ["--src_token_list", str(tokens)]
        model = build_model(task, args)
    ctc = count(getattr(model, "ctc", None)) + count(getattr(model, "st_ctc", None))
    counts = {"encoder": count(model.encoder), "decoder": count(model.decoder), "ctc": ctc}
    counts["total"] = count(model) - ctc
    return counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--task", choices=["st", "asr", "mt"])
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--input_size", type=int, default=80)
    args = parser.parse_args(argv)
    print("| config | encoder | decoder | total (M) | CTC heads, unused (M) |")
    print("|---|---:|---:|---:|---:|")
    for config in args.configs:
        c = parameter_counts(config, args.task, args.vocab, args.input_size)
        print(
            f"| {config.stem} | {c['encoder']:,} | {c['decoder']:,} | {c['total'] / 1e6:.2f} "
            f"| {c['ctc'] / 1e6:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
