"""Greedy CTC decoding of a LegoNN encoder module alone (no decoder), as the encoder-only rows of Table VII.

    python -m espnet_ext.bin.lego_ctc_decode --mt_train_config exp/x/config.yaml \
        --mt_model_file exp/x/valid.acc.ave.pth --src_text dump/test/src_text --output exp/x/ctc/text

``--src_text``: Kaldi-style ``utt-id tokens...`` lines, tokenized with the model's source tokenizer. Each
output line is ``utt-id`` and the best path of module ``--module`` (default: the last encoder module) in
its interface vocabulary, repeats merged and blanks dropped, tokens joined by spaces.

A speech encoder (ESPnet2 ASR task) reads features instead:

    python -m espnet_ext.bin.lego_ctc_decode --asr_train_config exp/x/config.yaml \
        --asr_model_file exp/x/valid.acc.ave.pth --feats_scp dump/fbank/test/feats.scp --output ctc/text

``--words`` writes SentencePiece pieces as words (pieces joined, ``▁`` starting a word), for WER and BLEU.
``--key_file`` (one utt-id first on each line, as ESPnet's inference takes it) decodes only those
utterances: the recipes' pipelines shard a test set over jobs that way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write, read_utf8_lines
from espnet_ext.nets.lego.ctc_only import LEGONN_MODELS
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


def read_keys(path: str) -> set[str]:
    return {line.split(maxsplit=1)[0] for _, line in read_utf8_lines(path) if line.strip()}


def text_inputs(to_ids, utterances, keys: set[str] | None = None):
    for utt, text in utterances:
        if keys is None or utt in keys:
            yield utt, to_ids(text)


def speech_inputs(feats_scp: str, keys: set[str] | None = None):
    """(utt-id, features) in the order of ``feats_scp``; with ``keys`` (a job's share of a sharded test
    set) only those utterances' matrices are read, not every job reading the whole set."""
    import kaldiio

    if keys is None:
        for utt, feats in kaldiio.load_scp_sequential(feats_scp):
            yield utt, torch.from_numpy(feats).float()
        return
    table = kaldiio.load_scp(feats_scp)  # lazy: a matrix is read when its key is looked up
    for utt in table:
        if utt in keys:
            yield utt, torch.from_numpy(table[utt]).float()


def decode(model, inputs, module: int, device: str):
    """-> [(utt-id, interface tokens)] for every (utt-id, source tokens or features), one at a time."""
    token_list = model.encoder.encoder_modules[module].token_list
    for utt, src in inputs:
        src = src.to(device)[None]
        with torch.no_grad():
            log_probs, lengths = model.interfaces(src, torch.tensor([src.size(1)], device=device))[
                module
            ]
        yield utt, [token_list[i] for i in greedy_decode(log_probs, lengths)[0]]


def as_words(pieces: list[str]) -> list[str]:
    """SentencePiece pieces -> words (a piece starting with ``▁`` starts a word)."""
    return "".join(pieces).replace("\u2581", " ").split()


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mt_train_config")
    parser.add_argument("--mt_model_file")
    parser.add_argument("--src_text", help="utt-id + source text per line")
    parser.add_argument("--asr_train_config")
    parser.add_argument("--asr_model_file")
    parser.add_argument("--feats_scp", help="features of the utterances (kaldi_ark scp)")
    parser.add_argument("--words", action="store_true", help="write SentencePiece pieces as words")
    parser.add_argument("--output", required=True, help="utt-id + CTC best path per line")
    parser.add_argument(
        "--module", type=int, default=-1, help="encoder module index (default last)"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--key_file", help="decode only these utterances (utt-id first per line)")
    args = parser.parse_args(argv)
    speech = args.asr_train_config is not None
    wanted = (
        ("asr_train_config", "asr_model_file", "feats_scp")
        if speech
        else ("mt_train_config", "mt_model_file", "src_text")
    )
    missing = [f"--{name}" for name in wanted if getattr(args, name) is None]
    if missing:
        parser.error(
            f"{' '.join(missing)} required (MT: --mt_* and --src_text; ASR: --asr_* and --feats_scp)"
        )
    import espnet_ext.registry

    espnet_ext.registry.install()
    if speech:
        from espnet2.tasks.asr import ASRTask as task
    else:
        from espnet_ext.tasks.mt import MTTask as task
    config = args.asr_train_config if speech else args.mt_train_config
    model_file = args.asr_model_file if speech else args.mt_model_file
    model, train_args = task.build_model_from_file(config, model_file, args.device)
    if getattr(train_args, "model", None) not in LEGONN_MODELS:
        raise ConfigError(f"{config} is not a LegoNN model", key="model")
    n_modules = len(model.encoder.encoder_modules)
    if not -n_modules <= args.module < n_modules:
        raise ConfigError(f"the model has {n_modules} encoder modules", key="--module")
    keys = read_keys(args.key_file) if args.key_file else None
    if speech:
        inputs = speech_inputs(args.feats_scp, keys)
    else:
        inputs = text_inputs(source_encoder(train_args), read_source(args.src_text), keys)
    model.eval()
    with atomic_write(args.output) as f:
        for utt, tokens in decode(model, inputs, args.module, args.device):
            f.write(f"{utt} {' '.join(as_words(tokens) if args.words else tokens)}\n")


if __name__ == "__main__":
    sys.exit(main())
