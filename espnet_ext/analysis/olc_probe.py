"""Short CTC-only training of a speech LegoNN config's first encoder module, to compare OLC settings.

    python -m espnet_ext.analysis.olc_probe --config conf/train_legonn_mini.yaml \
        --train_dir dump/fbank/train_filtered --valid_dir dump/fbank/dev_filtered --targets phn_int \
        --updates 150 --eval_every 50 [--olc query_scale=1 alignment_prior=0 | --no_olc] --output probe.json

The module is ``encoder_conf.modules[0]`` of the config (``--olc KEY=VALUE`` overrides keys of its OLC,
``--no_olc`` drops it), trained alone on its CTC loss (eq. 7) with the config's Adam settings, ESPnet's
warmuplr schedule, ``grad_clip`` and ``batch_size`` (batches of similar length, shuffled each epoch);
features normalised with the training set's mean and variance, as ``global_mvn``; no SpecAugment. Every
``--eval_every`` updates it records the valid CTC loss per utterance and the greedy error rate (%) over the
interface tokens (phone error rate for a phoneme module). One thread, CPU, seeded: a diagnostic for the
small-data behaviour of an OLC (``egs/europarl/asr1/RESULTS.md``), minutes instead of a recipe run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
import yaml

from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write, read_utf8_lines
from espnet_ext.nets.lego.encoder import LegoEncoderModule
from espnet_ext.nets.lego.interface import ctc_loss, greedy_decode
from espnet_ext.scoring.ref_hyp import Pair
from espnet_ext.scoring.wer import score_wer


def read_targets(path: Path) -> dict[str, list[int]]:
    targets = {}
    for number, line in read_utf8_lines(path):
        utt, *ids = line.split()
        try:
            targets[utt] = [int(i) for i in ids]
        except ValueError:
            raise InputError("expected 'utt-id int int ...'", path=path, line=number) from None
        if not ids:
            raise InputError("empty target", path=path, line=number)
    return targets


def read_set(data_dir: Path, targets_name: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(features (T, F), targets (L,)) of every utterance of a dump dir, in feats.scp order."""
    import kaldiio

    targets = read_targets(data_dir / targets_name)
    items = []
    for utt, feats in kaldiio.load_scp_sequential(str(data_dir / "feats.scp")):
        if utt not in targets:
            raise InputError(f"utterance {utt} has no target", path=data_dir / targets_name)
        items.append((torch.tensor(feats, dtype=torch.float32), torch.tensor(targets[utt])))
    if not items:
        raise InputError("no utterances", path=data_dir / "feats.scp")
    return items


def parse_overrides(pairs: Sequence[str]) -> dict:
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected KEY=VALUE, not {pair!r}", key="--olc")
        overrides[key] = yaml.safe_load(value)
    return overrides


def module_conf(config: dict, overrides: dict, no_olc: bool) -> dict:
    try:
        conf = dict(config["encoder_conf"]["modules"][0])
    except (KeyError, IndexError, TypeError):
        raise ConfigError("no first LegoNN encoder module", key="encoder_conf.modules[0]") from None
    if no_olc:
        conf.pop("olc", None)
    elif overrides:
        if "olc" not in conf:
            raise ConfigError(
                "the module has no OLC to override", key="encoder_conf.modules[0].olc"
            )
        conf["olc"] = {**conf["olc"], **overrides}
    return conf


def batches(items, batch_size: int, rng: random.Random) -> list[list[int]]:
    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    groups = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(groups)
    return groups


def collate(items, normalise):
    feats = [normalise(f) for f, _ in items]
    xs = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True)
    ys = torch.nn.utils.rnn.pad_sequence([y for _, y in items], batch_first=True, padding_value=-1)
    return xs, torch.tensor([len(f) for f in feats]), ys, torch.tensor([len(y) for _, y in items])


def error_rate(hyps: list[list[int]], refs: list[list[int]]) -> float:
    """Token error rate (%) by the recipes' WER scorer, token ids as words."""
    join = lambda ids: " ".join(map(str, ids))  # noqa: E731
    pairs = [Pair(str(i), join(r), join(h)) for i, (h, r) in enumerate(zip(hyps, refs))]
    return score_wer(pairs)["wer"]


def evaluate(model, items, normalise, batch_size: int) -> tuple[float, float]:
    model.eval()
    total, hyps, refs = 0.0, [], []
    with torch.no_grad():
        for start in range(0, len(items), batch_size):
            xs, xl, ys, yl = collate(items[start : start + batch_size], normalise)
            log_probs, lengths = model(xs, xl)
            total += float(ctc_loss(log_probs, lengths, ys, yl)) * len(xl)
            hyps += greedy_decode(log_probs, lengths)
            refs += [y[:n].tolist() for y, n in zip(ys, yl.tolist())]
    model.train()
    return total / len(items), error_rate(hyps, refs)


def probe(
    config: dict, conf: dict, train, valid, updates: int, eval_every: int, seed: int
) -> list[dict]:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    feats = torch.cat([f for f, _ in train])
    mean, std = feats.mean(0), feats.std(0).clamp(min=1e-5)
    normalise = lambda f: (f - mean) / std  # noqa: E731
    model = LegoEncoderModule(feats.size(1), **conf)
    optim_conf = dict(config.get("optim_conf", {}))
    optimizer = torch.optim.Adam(model.parameters(), **optim_conf)
    warmup = config.get("scheduler_conf", {}).get("warmup_steps", 25000)
    # ESPnet's warmuplr: lr * warmup^0.5 * min(step^-0.5, step * warmup^-1.5), peaking at lr
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup**0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    batch_size, clip = config.get("batch_size", 32), config.get("grad_clip", 5.0)
    records, step = [], 0
    while step < updates:
        for group in batches(train, batch_size, rng):
            xs, xl, ys, yl = collate([train[i] for i in group], normalise)
            log_probs, lengths = model(xs, xl)
            loss = ctc_loss(log_probs, lengths, ys, yl)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            scheduler.step()
            step += 1
            if step % eval_every == 0 or step == updates:
                valid_loss, rate = evaluate(model, valid, normalise, batch_size)
                records.append(
                    dict(
                        update=step,
                        train_ctc=float(loss.detach()),
                        valid_ctc=valid_loss,
                        error_rate=rate,
                    )
                )
                print(
                    f"update {step}: train CTC {float(loss.detach()):.2f}, valid CTC {valid_loss:.2f}, "
                    f"error rate {rate:.1f} %",
                    flush=True,
                )
            if step >= updates:
                break
    return records


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--train_dir", type=Path, required=True)
    parser.add_argument("--valid_dir", type=Path, required=True)
    parser.add_argument(
        "--targets", default="phn_int", help="text_int file of the module's targets"
    )
    parser.add_argument("--updates", type=int, default=150)
    parser.add_argument("--eval_every", type=int, default=50)
    parser.add_argument(
        "--valid_max", type=int, default=150, help="valid utterances read (first N)"
    )
    parser.add_argument(
        "--olc", nargs="*", default=[], help="KEY=VALUE overrides of the module's OLC"
    )
    parser.add_argument("--no_olc", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, required=True, help="JSON: settings and records")
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    args = get_parser().parse_args(argv)
    if args.updates < 1 or args.eval_every < 1:
        raise ConfigError("--updates and --eval_every must be >= 1", key="--updates")
    torch.set_num_threads(1)
    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    conf = module_conf(config, parse_overrides(args.olc), args.no_olc)
    train = read_set(args.train_dir, args.targets)
    valid = read_set(args.valid_dir, args.targets)[: args.valid_max]
    records = probe(config, conf, train, valid, args.updates, args.eval_every, args.seed)
    result = dict(config=str(args.config), module=conf, updates=args.updates, records=records)
    with atomic_write(args.output) as out:
        json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
