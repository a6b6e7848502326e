"""Lip-read the videos of an scp with ESPnet's beam search; writes ``<id> <text>`` lines (Kaldi text).

    python -m espnet_ext.bin.vsr_inference --data_path_and_name_and_type dump/test/video.scp,video,video \
        --model_file exp/vsr/valid.acc.ave.pth --output_file exp/vsr/decode_test/text \
        --beam_size 10 --ctc_weight 0.3 [--lm_train_config exp/lm/config.yaml --lm_file exp/lm/x.pth --lm_weight 0.5]
        [--config conf/decode.yaml] [--score_file exp/vsr/decode_test/score] [--matched_inference true]

Scorers as in ESPnet's ASR decoding: attention decoder (1 - ctc_weight), CTC prefix score (ctc_weight),
optional LM (lm_weight) and a length bonus (penalty); ``BatchBeamSearch`` batches the beam of one video.
``--config`` is a YAML of these options (the command line wins), as ESPnet's decoding configs.
``--score_file`` gets ``<id> <score> <tokens>`` per video: the 1-best's total beam-search score and its
length in tokens (with <eos>), from which self-training's confidence filter is computed.
``--matched_inference true|false`` relaxes (or not) the model's relaxed attention at test time.
``--resume_file`` makes a job resumable (asr.sh passes it: stage 13 decodes ~1M videos in jobs that a time
limit may kill): each 1-best is appended to it, flushed, as one JSON line when decoded, and a rerun with the
same decoding options, model files and videos decodes only the videos it lacks. The output and score files
still appear whole, in key order, once every video is decoded; the journal stays, so a rerun of a finished
job rewrites them without loading the model.
"""

from espnet_ext.registry import install

# ESPnet2's ASR encoders with ours (LipReadingTask's encoder_choices) and our LMs, before ESPnet is imported
install()

import argparse
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import torch
import yaml
from espnet.nets.batch_beam_search import BatchBeamSearch
from espnet.nets.beam_search import BeamSearch
from espnet.nets.scorer_interface import BatchScorerInterface, PartialScorerInterface
from espnet.nets.scorers.ctc import CTCPrefixScorer
from espnet.nets.scorers.length_bonus import LengthBonus
from espnet2.tasks.lm import LMTask
from espnet2.utils.types import str2bool

from espnet_ext.attention import matched_inference
from espnet_ext.decoding import options as decoding_options
from espnet_ext.decoding.beam_search import apply_rules
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.fileio import atomic_write, read_utf8_lines
from espnet_ext.tasks.abs_ext_task import (
    TextPreprocessor,
    inference_batches,
    inference_parser,
    load_state_dict_strictly,
)
from espnet_ext.tasks.lip_reading import LipReadingTask


def get_parser():
    parser = inference_parser(__doc__.splitlines()[0])
    group = parser.add_argument_group("Beam search")
    group.add_argument("--beam_size", type=int, default=10)
    group.add_argument(
        "--ctc_weight", type=float, default=0.3, help="CTC prefix score weight (1.0: CTC only)"
    )
    group.add_argument("--lm_weight", type=float, default=0.0, help="LM shallow fusion weight")
    group.add_argument("--penalty", type=float, default=0.0, help="Length bonus per token")
    group.add_argument(
        "--maxlenratio", type=float, default=0.0, help="Max output length / input frames (0: auto)"
    )
    group.add_argument("--minlenratio", type=float, default=0.0)
    group.add_argument(
        "--lm_train_config", type=str, default=None, help="config.yaml of an ESPnet LM"
    )
    group.add_argument("--lm_file", type=str, default=None)
    # fairseq's / espresso's rules (espnet_ext.decoding.beam_search), as in our other inference entry points
    for key, default, help_text in (
        ("lenpen", None, "rank ended hypotheses by score / length**lenpen (none: ESPnet's)"),
        ("eos_threshold", None, "EOS only if its score >= this x the best token's (none: off)"),
        ("fairseq_stop", False, "a video is done once beam_size hypotheses have ended"),
    ):
        group.add_argument(
            f"--{key}",
            type=lambda text, key=key: decoding_options.checked_value(text, key),
            default=default,
            help=help_text,
        )
    parser.add_argument(
        matched_inference.OPTION,
        type=str2bool,
        default=None,
        help="relax the model's relaxed attention at test time (default: as in training)",
    )
    parser.add_argument("--config", type=str, default=None, help="YAML of the options above")
    parser.add_argument(
        "--score_file", type=str, default=None, help="'<id> <score> <tokens>' of each 1-best"
    )
    parser.add_argument(
        "--resume_file",
        type=str,
        default=None,
        help="journal of the decoded videos: a rerun decodes only those it lacks (kept)",
    )
    return parser


def parse_args(cmd=None) -> argparse.Namespace:
    """The command line over the ``--config`` YAML over the defaults; unknown YAML keys are refused."""
    parser = get_parser()
    given, _ = parser.parse_known_args(cmd)
    if given.config is not None:
        try:
            with open(given.config, encoding="utf-8") as f:
                config = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"cannot read the decoding config: {e}", path=given.config) from e
        known = {action.dest for action in parser._actions}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ConfigError(f"unknown option(s) {', '.join(unknown)}", path=given.config)
        for key in decoding_options.KEYS:  # YAML values are not passed through argparse's type
            if key in config:
                config[key] = decoding_options.checked_value(config[key], key, given.config)
        parser.set_defaults(**config)
    return parser.parse_args(cmd)


def build_beam_search(model, args) -> BeamSearch:
    scorers = dict(
        decoder=model.decoder,
        ctc=CTCPrefixScorer(ctc=model.ctc, eos=model.eos),
        length_bonus=LengthBonus(len(model.token_list)),
    )
    if model.decoder is None and args.ctc_weight != 1.0:
        raise ConfigError("the model has no attention decoder: decode with --ctc_weight 1.0")
    if args.lm_train_config is not None:
        lm, _ = LMTask.build_model_from_file(args.lm_train_config, None, args.device)
        if args.lm_file is not None:
            load_state_dict_strictly(lm, args.lm_file, args.device)
        scorers["lm"] = lm.lm
    weights = dict(
        decoder=1.0 - args.ctc_weight,
        ctc=args.ctc_weight,
        lm=args.lm_weight,
        length_bonus=args.penalty,
    )
    # ESPnet's rule: the beam of one utterance is batched when every full (non-prefix) scorer supports it.
    full_scorers = [
        s for s in scorers.values() if s is not None and not isinstance(s, PartialScorerInterface)
    ]
    search_class = (
        BatchBeamSearch
        if all(isinstance(s, BatchScorerInterface) for s in full_scorers)
        else BeamSearch
    )
    search = search_class(
        scorers=scorers,
        weights=weights,
        beam_size=args.beam_size,
        vocab_size=len(model.token_list),
        sos=model.sos,
        eos=model.eos,
        token_list=model.token_list,
        pre_beam_score_key=None if args.ctc_weight == 1.0 else "full",
    )
    logging.info(f"Beam search: {search_class.__name__}, weights {weights}")
    search = search.to(args.device).eval()
    return apply_rules(search, args.eos_threshold, args.lenpen, bool(args.fairseq_stop))


class Hypothesis(NamedTuple):
    """The 1-best of one video: its text, beam-search score and length in tokens (with <eos>)."""

    key: str
    text: str
    score: float
    tokens: int


@torch.no_grad()
def decode_videos(args, key_file: str | None) -> Iterator[Hypothesis]:
    """The 1-best of each video of ``key_file`` (all of the data when None), in key order, as decoded."""
    model, train_args = LipReadingTask.build_model_from_file(
        args.train_config, args.model_file, args.device
    )
    model.eval()
    matched_inference.apply_matched_inference(model, args.matched_inference)
    search = build_beam_search(model, args)
    text = TextPreprocessor.from_args(train_args, train=False)
    for ids, batch in inference_batches(
        LipReadingTask, train_args, argparse.Namespace(**{**vars(args), "key_file": key_file})
    ):
        for i, key in enumerate(ids):
            length = batch["video_lengths"][i : i + 1]
            encoded, _ = model.encode(
                batch["video"][i : i + 1, : length.item()], length
            )  # alone: no padding
            hypotheses = search(
                x=encoded[0], maxlenratio=args.maxlenratio, minlenratio=args.minlenratio
            )
            token_ids = [] if not hypotheses else hypotheses[0].yseq.tolist()
            token_ids = [t for t in token_ids if t not in (model.sos, model.eos, model.blank_id)]
            score = float(hypotheses[0].score) if hypotheses else float("-inf")
            yield Hypothesis(key, text.ids_to_text(token_ids), score, len(token_ids) + 1)


# Options that change no 1-best: a journal written under other values of these is resumed.
_NOT_IN_SIGNATURE = {"output_file", "score_file", "resume_file", "key_file", "config", "device",
                     "batch_size", "num_workers", "log_level"}  # fmt: skip
_MODEL_FILES = ("train_config", "model_file", "lm_train_config", "lm_file")


def resume_signature(args) -> str:
    """What the 1-bests depend on: the decoding options (``--config``'s included) and the model files (path,
    size, modification time: a retrained model is another file); the videos are checked per key."""
    options = {k: v for k, v in vars(args).items() if k not in _NOT_IN_SIGNATURE}
    files = {}
    for name in _MODEL_FILES:
        path = getattr(args, name, None)
        if path is not None:
            stat = os.stat(path)
            files[name] = [str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns]
    blob = json.dumps([options, files], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def job_entries(args) -> dict[str, str]:
    """The job's keys in order, each with the rest of its line (the video): ``--key_file``'s, else the first
    data file's."""
    path = args.key_file or args.data_path_and_name_and_type[0][0]
    entries = {}
    for _, line in read_utf8_lines(path):
        fields = line.split(maxsplit=1)
        if fields:
            entries[fields[0]] = fields[1].strip() if len(fields) > 1 else ""
    return entries


def read_journal(path: Path, signature: str, entries: dict[str, str]) -> dict[str, Hypothesis]:
    """The 1-bests of an earlier run in ``path`` that this run would decode alike: same signature, a key of
    ``entries`` with the same video. A line cut by a kill is cut off the file; a journal of other options
    is emptied (logged). Returns ``{}`` when there is nothing to resume, leaving ``path`` ready to append to."""
    data = path.read_bytes() if path.exists() else b""
    whole = data[: data.rfind(b"\n") + 1]
    # split on newlines only: str.splitlines also splits on U+2028 / U+0085, which json.dumps leaves in text
    lines = [line.decode("utf-8") for line in whole.split(b"\n")[:-1]]
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("signature") != signature:
        if lines:
            logging.warning(
                f"{path}: written with other options or models; decoding every video again"
            )
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps({"signature": signature}) + "\n")
        return {}
    if len(whole) < len(data):
        with open(path, "r+b") as f:
            f.truncate(len(whole))
    done = {}
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
            hypothesis = Hypothesis(
                entry["key"], entry["text"], float(entry["score"]), int(entry["tokens"])
            )
            video = entry["video"]
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(
                f"not a journal line ({e}): remove the file to decode again", path=path, line=number
            ) from e
        if entries.get(hypothesis.key) == video:
            done[hypothesis.key] = hypothesis
    return done


def resumed(args) -> list[Hypothesis]:
    """Every 1-best of the job, those of ``--resume_file`` read, the others decoded and appended to it."""
    journal = Path(args.resume_file)
    journal.parent.mkdir(parents=True, exist_ok=True)
    entries = job_entries(args)
    done = read_journal(journal, resume_signature(args), entries)
    todo = [key for key in entries if key not in done]
    logging.info(
        f"{journal}: {len(done)} of {len(entries)} videos decoded before, {len(todo)} to decode"
    )
    if todo:
        keys = journal.with_name(journal.name + ".keys")  # the rest of the job's key file
        with atomic_write(keys) as f:
            f.writelines(f"{key} {entries[key]}\n" for key in todo)
        with open(journal, "a", encoding="utf-8") as f:
            for hypothesis in decode_videos(args, str(keys)):
                line = {**hypothesis._asdict(), "video": entries[hypothesis.key]}
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                f.flush()  # a kill loses at most the video being decoded
                done[hypothesis.key] = hypothesis
        keys.unlink()
    missing = [key for key in entries if key not in done]
    if missing:
        raise InputError(f"{len(missing)} keys were not decoded, e.g. {missing[0]!r}", path=journal)
    return [done[key] for key in entries]


def inference(args) -> None:
    """Decode the videos, then write ``--output_file`` (and ``--score_file``) whole, in key order."""
    if args.resume_file is None:
        hypotheses = list(decode_videos(args, args.key_file))
    else:
        hypotheses = resumed(args)
    with atomic_write(args.output_file) as out:
        out.writelines(f"{h.key} {h.text}".rstrip() + "\n" for h in hypotheses)
    if args.score_file is not None:
        with atomic_write(args.score_file) as scores:
            scores.writelines(f"{h.key} {h.score:.6f} {h.tokens}\n" for h in hypotheses)


def main(cmd=None):
    args = parse_args(cmd)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s (%(module)s:%(lineno)d) %(levelname)s: %(message)s",
    )
    inference(args)


if __name__ == "__main__":
    main()
