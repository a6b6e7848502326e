"""Greedy CTC decoding of a LegoNN encoder module alone (no decoder), as the encoder-only rows of Table VII.

    python -m espnet_ext.bin.lego_ctc_decode --mt_train_config exp/x/config.yaml \
        --mt_model_file exp/x/valid.acc.ave.pth --src_text dump/test/src_text --output exp/x/ctc/text

``--src_text``: Kaldi-style ``utt-id tokens...`` lines, tokenized with the model's source tokenizer. Each
output line is ``utt-id`` and the best path of module ``--module`` (default: the last encoder module) in
its interface vocabulary, repeats merged and blanks dropped, tokens joined by spaces.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.fileio import atomic_write, read_utf8_lines
from espnet_ext.nets.lego.interface import greedy_decode
from espnet_ext.nets.lego.source import source_encoder


def read_source(path: str) -> list[tuple[str, str]]:
    utterances = []
    for number, line in read_utf8_lines(path):
        utt, _, text = line.partition(" ")
        if not utt or not text.strip():
            raise InputError("expected 'utt-id text' with a non-empty text", path=path, line=number)
        utterances.append((utt, text.strip()))
    return utterances


def decode(model, to_ids, utterances, module: int, device: str):
    """-> [(utt-id, interface tokens)] for every source sentence, one at a time."""
    token_list = model.encoder.encoder_modules[module].token_list
    for utt, text in utterances:
        src = to_ids(text).to(device)[None]
        with torch.no_grad():
            log_probs, lengths = model.interfaces(src, torch.tensor([src.size(1)], device=device))[
                module
            ]
        yield utt, [token_list[i] for i in greedy_decode(log_probs, lengths)[0]]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mt_train_config", required=True)
    parser.add_argument("--mt_model_file", required=True)
    parser.add_argument("--src_text", required=True, help="utt-id + source text per line")
    parser.add_argument("--output", required=True, help="utt-id + CTC best path per line")
    parser.add_argument(
        "--module", type=int, default=-1, help="encoder module index (default last)"
    )
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        from espnet2.tasks.mt import MTTask

        import espnet_ext.registry

        espnet_ext.registry.install()
        model, train_args = MTTask.build_model_from_file(
            args.mt_train_config, args.mt_model_file, args.device
        )
        if getattr(train_args, "model", None) != "legonn":
            raise ConfigError(f"{args.mt_train_config} is not a LegoNN model", key="model")
        n_modules = len(model.encoder.encoder_modules)
        if not -n_modules <= args.module < n_modules:
            raise ConfigError(f"the model has {n_modules} encoder modules", key="--module")
        to_ids = source_encoder(train_args)
        utterances = read_source(args.src_text)
        model.eval()
        with atomic_write(args.output) as f:
            for utt, tokens in decode(model, to_ids, utterances, args.module, args.device):
                f.write(f"{utt} {' '.join(tokens)}\n")
    except (ConfigError, InputError) as e:
        raise SystemExit(f"error: {e}") from e


if __name__ == "__main__":
    main()
