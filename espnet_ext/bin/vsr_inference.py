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
same decoding options, model files and videos (path, size, modification time) decodes only the videos it
lacks. The output and score files still appear whole, in key order, once every video is decoded; the journal
stays, so a rerun of a finished job rewrites them without loading the model.
``--resume_from GLOB`` (asr.sh: ``DIR/logdir/output.*/journal``) also takes the 1-bests of the job's videos
from the journals of the other jobs of the same decoding, read only (copied into the job's own journal
first): a rerun split over another number of jobs (``--pseudo_label_nj``, ``--inference_nj``) decodes only
the videos that no job decoded.
"""

from espnet_ext.registry import install

# ESPnet2's ASR encoders with ours (LipReadingTask's encoder_choices) and our LMs, before ESPnet is imported
install()

import argparse
import glob
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
    parser.add_argument(
        "--resume_from",
        type=str,
        default=None,
        help="with --resume_file: a glob of the other jobs' journals of this decoding (Python's glob: a "
        "directory named with *?[ needs escaping), whose 1-bests of this job's videos are taken",
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
    args = parser.parse_args(cmd)
    if args.resume_from is not None and args.resume_file is None:
        parser.error("--resume_from needs --resume_file")
    return args


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


# Options that change no 1-best: a journal written under other values of these is resumed. Neither the job's
# key file nor its number is in the signature: the journals of one decoding split otherwise share it.
_NOT_IN_SIGNATURE = {"output_file", "score_file", "resume_file", "resume_from", "key_file", "config",
                     "device", "batch_size", "num_workers", "log_level"}  # fmt: skip
_MODEL_FILES = ("train_config", "model_file", "lm_train_config", "lm_file")
# In the signature. Format 2 entries hold their video's size and modification time; a journal of format 1
# (entries without them) has another signature, so it is emptied and its videos are decoded again.
JOURNAL_FORMAT = 2


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
    blob = json.dumps([JOURNAL_FORMAT, options, files], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def video_stat(video: str) -> list[int] | None:
    """``[size, mtime_ns]`` of a video file (a video replaced at the same path is another video), None when
    it cannot be stat-ed (decoding it then fails, naming its scp line)."""
    try:
        stat = os.stat(video)
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


class JobVideos:
    """The job's keys in order, each with the rest of its scp line (the video), and their current
    ``video_stat``, taken once per key when first asked."""

    def __init__(self, entries: dict[str, str]):
        self.entries = entries
        self._stats: dict[str, list[int] | None] = {}

    def stat(self, key: str) -> list[int] | None:
        if key not in self._stats:
            self._stats[key] = video_stat(self.entries[key])
        return self._stats[key]

    def unchanged(self, key: str, video: str, stat) -> bool:
        """Whether a journal entry of ``key`` (its video and recorded stat) is of this job's video as it is."""
        return self.entries.get(key) == video and stat is not None and self.stat(key) == stat

    def journal_line(self, hypothesis: Hypothesis) -> str:
        # a video that could not be stat-ed is recorded as nulls, which match no stat: decoded again
        size, mtime_ns = self.stat(hypothesis.key) or (None, None)
        line = {**hypothesis._asdict(), "video": self.entries[hypothesis.key]}
        return json.dumps({**line, "size": size, "mtime_ns": mtime_ns}, ensure_ascii=False) + "\n"


def job_entries(args) -> dict[str, str]:
    """The job's keys in order (``--key_file``'s first column, else the video scp's), each with the rest of its
    line in the video scp (the video; the first data file of type video, else the first data file). The video
    comes from the scp, not the key file: utils/pipeline.sh split_keys writes a job's ids only."""
    data = args.data_path_and_name_and_type
    scp = next((path for path, _, kind in data if kind == "video"), data[0][0])
    keys = None
    if args.key_file is not None:
        keys = {}  # key -> its line in the key file, in order
        for number, line in read_utf8_lines(args.key_file):
            fields = line.split(maxsplit=1)
            if fields:
                keys.setdefault(fields[0], number)
    videos = {}
    for _, line in read_utf8_lines(scp):
        fields = line.split(maxsplit=1)
        if fields and (keys is None or fields[0] in keys):
            videos[fields[0]] = fields[1].strip() if len(fields) > 1 else ""
    if keys is None:
        return videos
    for key, number in keys.items():
        if key not in videos:
            raise InputError(f"not in {scp}", path=args.key_file, line=number, key=key)
    return {key: videos[key] for key in keys}


def journal_lines(path: Path) -> tuple[list[bytes], int, int]:
    """The whole lines of a journal (a last line without its newline, cut by a kill or still being written,
    left out), the length of the bytes they span and the file's length."""
    data = path.read_bytes() if path.exists() else b""
    whole = data[: data.rfind(b"\n") + 1]
    # split on newlines only: str.splitlines also splits on U+2028 / U+0085, which json.dumps leaves in text
    return whole.split(b"\n")[:-1], len(whole), len(data)


def journal_signature(lines: list[bytes]) -> str | None:
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    return header.get("signature") if isinstance(header, dict) else None


def journal_entry(line: bytes) -> tuple[Hypothesis, str, object]:
    """A journal line's 1-best, its video and the ``[size, mtime_ns]`` recorded with it; raises ValueError,
    KeyError or TypeError for a line that is not one."""
    entry = json.loads(line.decode("utf-8"))
    hypothesis = Hypothesis(
        entry["key"], entry["text"], float(entry["score"]), int(entry["tokens"])
    )
    return hypothesis, entry["video"], [entry["size"], entry["mtime_ns"]]


def read_journal(path: Path, signature: str, videos: JobVideos) -> dict[str, Hypothesis]:
    """The 1-bests of an earlier run in ``path`` that this run would decode alike: same signature, a key of
    ``videos`` with the same video (path, size, modification time). A line cut by a kill is cut off the file;
    a journal of other options is emptied (logged). Returns ``{}`` when there is nothing to resume, leaving
    ``path`` ready to append to."""
    lines, whole, size = journal_lines(path)
    if journal_signature(lines) != signature:
        if lines:
            logging.warning(
                f"{path}: written with other options, models or journal format; decoding every video again"
            )
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps({"signature": signature}) + "\n")
        return {}
    if whole < size:
        with open(path, "r+b") as f:
            f.truncate(whole)
    done = {}
    for number, line in enumerate(lines[1:], start=2):
        try:
            hypothesis, video, stat = journal_entry(line)
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(
                f"not a journal line ({e}): remove the file to decode again", path=path, line=number
            ) from e
        if videos.unchanged(hypothesis.key, video, stat):
            done[hypothesis.key] = hypothesis
    return done


def read_other_journals(
    paths: list[Path], signature: str, videos: JobVideos, wanted: set[str]
) -> dict[str, Hypothesis]:
    """The 1-bests of keys of ``wanted`` in other jobs' journals of the same signature, their videos
    unchanged. These are read only, and their jobs may be appending to them: a last line without its
    newline is left out. A bad line is logged and skipped, not an error: these journals only spare this job
    some decoding, and each job refuses its own journal's bad lines when it resumes it."""
    found: dict[str, Hypothesis] = {}
    for path in paths:
        if len(found) == len(wanted):
            break
        lines, _, _ = journal_lines(path)
        if journal_signature(lines) != signature:
            if lines:
                logging.info(f"{path}: written with other options or models; not resumed from")
            continue
        for number, line in enumerate(lines[1:], start=2):
            try:
                hypothesis, video, stat = journal_entry(line)
            except (ValueError, KeyError, TypeError) as e:
                logging.warning(f"{path}:{number}: not a journal line ({e}); skipped")
                continue
            key = hypothesis.key
            if key in wanted and key not in found and videos.unchanged(key, video, stat):
                found[key] = hypothesis
    return found


def other_journals(args, journal: Path) -> list[Path]:
    """The journals ``--resume_from`` names, but the job's own."""
    if args.resume_from is None:
        return []
    own = journal.resolve()
    paths = (Path(p) for p in sorted(glob.glob(args.resume_from)))
    return [p for p in paths if p.is_file() and p.resolve() != own]


def resumed(args) -> list[Hypothesis]:
    """Every 1-best of the job: those of ``--resume_file`` read, those of the other journals of
    ``--resume_from`` copied into it, the others decoded and appended to it."""
    journal = Path(args.resume_file)
    journal.parent.mkdir(parents=True, exist_ok=True)
    entries = job_entries(args)
    videos = JobVideos(entries)
    signature = resume_signature(args)
    done = read_journal(journal, signature, videos)
    wanted = {key for key in entries if key not in done}
    borrowed = read_other_journals(other_journals(args, journal), signature, videos, wanted)
    todo = [key for key in entries if key not in done and key not in borrowed]
    logging.info(
        f"{journal}: {len(done) + len(borrowed)} of {len(entries)} videos decoded before "
        f"({len(borrowed)} of them in other jobs' journals), {len(todo)} to decode"
    )
    with open(journal, "a", encoding="utf-8") as f:
        # the journal holds every 1-best of the job, so a rerun needs no other job's journal
        f.writelines(videos.journal_line(borrowed[key]) for key in entries if key in borrowed)
        f.flush()
        done.update(borrowed)
        if todo:
            for key in todo:  # stat-ed before decoding: a video changed meanwhile is decoded again
                videos.stat(key)
            keys = journal.with_name(journal.name + ".keys")  # the rest of the job's key file
            with atomic_write(keys) as k:
                k.writelines(f"{key} {entries[key]}\n" for key in todo)
            for hypothesis in decode_videos(args, str(keys)):
                f.write(videos.journal_line(hypothesis))
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
