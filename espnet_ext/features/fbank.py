"""Kaldi-compatible log-Mel filterbank features of a Kaldi data dir, computed in parallel shards.

    python -m espnet_ext.features.fbank compute --data_dir D --out_dir O --nj N --job J
    python -m espnet_ext.features.fbank merge   --data_dir D --out_dir O --nj N

``compute`` takes the J-th (1-based) of N contiguous shards of the data dir's utterances sorted by id
(``segments`` ids when that file exists, else ``wav.scp`` ids) and writes ``O/data/feats.J.ark``,
``O/data/feats.J.utt2num_frames`` and, last, ``O/data/feats.J.scp``: a shard whose ``.scp`` exists is whole.
``merge`` checks that every shard is whole and covers exactly its utterances, then writes the feature data
dir ``O``: ``feats.scp``, ``utt2num_frames``, ``feats_dim`` and copies of D's other files.

``wav.scp`` values are audio file paths (anything libsndfile reads: wav, flac, ...) or Kaldi pipes
``command |`` run through /bin/sh whose stdout is an audio file.
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np
import soundfile

from espnet_ext.data import compressed_audio
from espnet_ext.data.datadir import Entry, read_kaldi_entries
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

# Kaldi's extract-segments tolerates a segment ending this far past the end of its recording.
MAX_SEGMENT_OVERSHOOT_S = 0.5
# Files merge writes itself instead of copying them from the data dir.
FEATURE_FILES = ("feats.scp", "utt2num_frames", "feats_dim")


@dataclass(frozen=True)
class FbankOptions:
    n_mels: int = 80
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    sample_rate: int = 16000
    dither: float = 0.0  # 0 keeps features deterministic

    @property
    def window_samples(self) -> int:
        return int(self.sample_rate * self.frame_length_ms / 1000)


def compute_fbank(waveform: np.ndarray, opts: FbankOptions = FbankOptions()) -> np.ndarray:
    """Mono waveform in [-1, 1], shape (num_samples,) -> log-Mel features (num_frames, n_mels), float32."""
    import torch  # here, so that merge and argument errors do not pay for importing torch
    from torchaudio.compliance import kaldi

    # Kaldi reads 16-bit PCM as integer values; scaling to that range keeps the energy floor and the
    # log values identical to compute-fbank-feats.
    samples = torch.from_numpy(np.asarray(waveform, dtype=np.float32) * 32768.0).unsqueeze(0)
    feats = kaldi.fbank(
        samples,
        num_mel_bins=opts.n_mels,
        frame_length=opts.frame_length_ms,
        frame_shift=opts.frame_shift_ms,
        sample_frequency=opts.sample_rate,
        dither=opts.dither,
    )
    return feats.numpy().astype(np.float32, copy=False)


@dataclass(frozen=True)
class Utterance:
    utt_id: str
    recording_id: str
    source: str  # the wav.scp value: a path or a "command |" pipe
    wav_scp_line: int
    start_s: float = 0.0
    end_s: float | None = None  # None: to the end of the recording
    segments_line: int | None = None


def _read_table(path: Path) -> dict[str, Entry]:
    return {entry.key: entry for entry in read_kaldi_entries(path)}


def read_utterances(data_dir: Path) -> list[Utterance]:
    """The utterances of a data dir, sorted by id, with where their audio comes from."""
    wav_scp = data_dir / "wav.scp"
    recordings = _read_table(wav_scp)
    segments = data_dir / "segments"
    if not segments.exists():
        utts = [Utterance(key, key, e.value, e.line) for key, e in recordings.items()]
        return sorted(utts, key=lambda u: u.utt_id)

    utts = []
    for utt_id, (line, _, value) in _read_table(segments).items():
        fields = value.split()
        try:
            if len(fields) != 3:
                raise ValueError
            recording_id, start_s, end_s = fields[0], float(fields[1]), float(fields[2])
        except ValueError:
            raise InputError(
                "expected '<utt> <recording> <start> <end>'", path=segments, line=line, key=utt_id
            ) from None
        if recording_id not in recordings:
            raise InputError(
                f"recording '{recording_id}' is not in {wav_scp}",
                path=segments,
                line=line,
                key=utt_id,
            )
        if start_s < 0 or (end_s != -1 and end_s <= start_s):
            raise InputError(
                f"bad segment times {start_s}..{end_s}", path=segments, line=line, key=utt_id
            )
        wav = recordings[recording_id]
        utts.append(
            Utterance(
                utt_id,
                recording_id,
                wav.value,
                wav.line,
                start_s,
                None if end_s == -1 else end_s,
                line,
            )
        )
    return sorted(utts, key=lambda u: u.utt_id)


def shard(items: Sequence, nj: int, job: int) -> list:
    """The job-th (1-based) of nj contiguous, near-equal parts of ``items`` (empty when nj > len(items))."""
    if not 1 <= job <= nj:
        raise InputError(f"--job {job} is not in 1..{nj}")
    return list(items[(job - 1) * len(items) // nj : job * len(items) // nj])


def load_recording(source: str, sample_rate: int, wav_scp: Path, line: int, key: str) -> np.ndarray:
    """Mono float waveform of one wav.scp entry, checked for readability, channels and sample rate."""

    def fail(message: str) -> InputError:
        return InputError(message, path=wav_scp, line=line, key=key)

    piped = compressed_audio.piped_file(source)
    if piped is not None:  # our own decoder's pipe: decoded here, the samples the pipe would give
        if sample_rate != compressed_audio.SAMPLE_RATE:
            raise fail(
                f"'{source}' gives {compressed_audio.SAMPLE_RATE} Hz; expected {sample_rate} Hz"
            )
        try:
            samples = compressed_audio.decode(piped)
        except InputError as e:
            raise fail(f"cannot decode {piped}: {e}") from e
        return samples.astype(np.float32) / 32768.0  # as soundfile reads the pipe's 16-bit WAV
    if source.endswith("|"):
        command = source[:-1].strip()
        run = subprocess.run(command, shell=True, capture_output=True)
        if run.returncode != 0:
            stderr = run.stderr.decode(errors="replace").strip()[-500:]
            raise fail(f"command '{command}' failed with exit code {run.returncode}: {stderr}")
        audio, what = io.BytesIO(run.stdout), f"output of '{command}'"
    else:
        if not Path(source).is_file():
            raise fail(f"audio file {source} does not exist")
        audio, what = source, f"audio file {source}"
    try:
        waveform, rate = soundfile.read(audio, dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, ValueError) as e:
        raise fail(f"cannot read {what}: {e}") from e
    if waveform.shape[1] != 1:
        raise fail(f"{what} has {waveform.shape[1]} channels; expected mono")
    if rate != sample_rate:
        raise fail(f"{what} has sample rate {rate} Hz; expected {sample_rate} Hz")
    if waveform.shape[0] == 0:
        raise fail(f"{what} is empty")
    return waveform[:, 0]


def _utterance_waveform(
    utt: Utterance, recording: np.ndarray, data_dir: Path, opts: FbankOptions
) -> np.ndarray:
    if utt.segments_line is None:
        return recording
    duration_s = len(recording) / opts.sample_rate
    end_s = duration_s if utt.end_s is None else utt.end_s
    if end_s > duration_s + MAX_SEGMENT_OVERSHOOT_S:
        raise InputError(
            f"segment ends at {end_s} s, after the end of recording '{utt.recording_id}' ({duration_s:.3f} s)",
            path=data_dir / "segments",
            line=utt.segments_line,
            key=utt.utt_id,
        )
    return recording[
        int(round(utt.start_s * opts.sample_rate)) : int(round(end_s * opts.sample_rate))
    ]


def shard_paths(out_dir: Path, job: int) -> dict[str, Path]:
    base = Path(out_dir) / "data"
    return {kind: base / f"feats.{job}.{kind}" for kind in ("ark", "scp", "utt2num_frames")}


def compute_shard(
    data_dir: Path, out_dir: Path, nj: int, job: int, opts: FbankOptions = FbankOptions()
) -> int:
    """Write the features of shard ``job`` of ``nj``; returns its number of utterances."""
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    utts = shard(read_utterances(data_dir), nj, job)
    paths = shard_paths(out_dir, job)
    paths["ark"].parent.mkdir(parents=True, exist_ok=True)
    # A rerun must not leave the previous run's shard looking finished while this one is in progress.
    for path in (paths["scp"], paths["utt2num_frames"], paths["ark"]):
        path.unlink(missing_ok=True)

    tmp_ark = paths["ark"].with_name(f".{paths['ark'].name}.tmp")
    tmp_scp = paths["scp"].with_name(f".{paths['scp'].name}.tmp")
    num_frames: dict[str, int] = {}
    cached: tuple[str | None, np.ndarray | None] = (None, None)  # segments share recordings
    try:
        with kaldiio.WriteHelper(f"ark,scp:{tmp_ark},{tmp_scp}") as writer:
            for utt in utts:
                if cached[0] != utt.recording_id:
                    recording = load_recording(
                        utt.source,
                        opts.sample_rate,
                        data_dir / "wav.scp",
                        utt.wav_scp_line,
                        utt.recording_id,
                    )
                    cached = (utt.recording_id, recording)
                waveform = _utterance_waveform(utt, cached[1], data_dir, opts)
                if len(waveform) < opts.window_samples:
                    where = (
                        (data_dir / "segments", utt.segments_line)
                        if utt.segments_line is not None
                        else (data_dir / "wav.scp", utt.wav_scp_line)
                    )
                    raise InputError(
                        f"audio has {len(waveform)} samples, fewer than one {opts.frame_length_ms} ms frame "
                        f"({opts.window_samples} samples)",
                        path=where[0],
                        line=where[1],
                        key=utt.utt_id,
                    )
                feats = compute_fbank(waveform, opts)
                writer(utt.utt_id, feats)
                num_frames[utt.utt_id] = feats.shape[0]
        # The scp written alongside points into the temporary ark; offsets stay valid after the rename.
        written = read_kaldi_entries(tmp_scp)
        tmp_ark.replace(paths["ark"])
        with atomic_write(paths["utt2num_frames"]) as f:
            f.writelines(f"{e.key} {num_frames[e.key]}\n" for e in written)
        with atomic_write(paths["scp"]) as f:
            f.writelines(f"{e.key} {paths['ark']}:{e.value.rsplit(':', 1)[1]}\n" for e in written)
    finally:
        tmp_ark.unlink(missing_ok=True)
        tmp_scp.unlink(missing_ok=True)
    return len(utts)


def merge_shards(data_dir: Path, out_dir: Path, nj: int) -> int:
    """Check the nj shards and write the feature data dir ``out_dir``; returns the number of utterances."""
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    utt_ids = [u.utt_id for u in read_utterances(data_dir)]
    utt_list = data_dir / ("segments" if (data_dir / "segments").exists() else "wav.scp")
    (out_dir / "feats.scp").unlink(
        missing_ok=True
    )  # an earlier merge must not look current if this one fails
    scp_lines: dict[str, str] = {}
    frame_lines: dict[str, str] = {}
    for job in range(1, nj + 1):
        paths = shard_paths(out_dir, job)
        if not paths["scp"].exists():
            raise InputError(
                f"shard {job} of {nj} is missing or unfinished: rerun its compute job",
                path=paths["scp"],
            )
        if not paths["ark"].exists():
            raise InputError(
                f"shard {job} of {nj}: its archive {paths['ark']} is gone", path=paths["scp"]
            )
        shard_scp = _read_table(paths["scp"])
        shard_frames = _read_table(paths["utt2num_frames"])
        expected = set(shard(utt_ids, nj, job))
        missing = sorted(expected - set(shard_scp))
        extra = sorted(set(shard_scp) - expected)
        if missing or extra:
            raise InputError(
                f"shard {job} of {nj} does not match the utterances of {utt_list}: "
                f"{len(missing)} without features ({_some(missing)}), {len(extra)} not in the data dir "
                f"({_some(extra)}); was it computed with another --nj or data dir?",
                path=paths["scp"],
            )
        if set(shard_frames) != set(shard_scp):
            raise InputError(
                f"does not list the same utterances as {paths['scp']}", path=paths["utt2num_frames"]
            )
        for utt, entry in shard_scp.items():
            scp_lines[utt] = entry.value
            frame_lines[utt] = shard_frames[utt].value
    if not utt_ids:
        raise InputError("no utterances", path=utt_list)
    feats_dim = kaldiio.load_mat(scp_lines[utt_ids[0]]).shape[1]

    out_dir.mkdir(parents=True, exist_ok=True)
    if out_dir.resolve() != data_dir.resolve():
        for source in sorted(data_dir.iterdir()):
            if (
                source.is_file()
                and not source.name.startswith(".")
                and source.name not in FEATURE_FILES
            ):
                with (
                    open(source, "rb") as src,
                    atomic_write(out_dir / source.name, mode="wb") as dst,
                ):
                    shutil.copyfileobj(src, dst)
    with atomic_write(out_dir / "utt2num_frames") as f:
        f.writelines(f"{utt} {frame_lines[utt]}\n" for utt in utt_ids)
    with atomic_write(out_dir / "feats_dim") as f:
        f.write(f"{feats_dim}\n")
    # Written last: a feature dir with feats.scp is complete.
    with atomic_write(out_dir / "feats.scp") as f:
        f.writelines(f"{utt} {scp_lines[utt]}\n" for utt in utt_ids)
    return len(utt_ids)


def _some(ids: list[str], limit: int = 5) -> str:
    return ", ".join(ids[:limit]) + (", ..." if len(ids) > limit else "") if ids else "none"


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.features.fbank",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("compute", "features of one shard of a data dir"),
        ("merge", "check the shards and write the feature data dir"),
    ):
        sub = commands.add_parser(
            name, help=help_text, formatter_class=argparse.ArgumentDefaultsHelpFormatter
        )
        sub.add_argument(
            "--data_dir", type=Path, required=True, help="Kaldi data dir with wav.scp [segments]"
        )
        sub.add_argument("--out_dir", type=Path, required=True, help="feature data dir to write")
        sub.add_argument("--nj", type=int, required=True, help="number of shards")
        if name == "compute":
            sub.add_argument("--job", type=int, required=True, help="shard to compute, 1..nj")
            sub.add_argument("--n_mels", type=int, default=FbankOptions.n_mels, help="Mel bins")
            sub.add_argument(
                "--frame_length", type=float, default=FbankOptions.frame_length_ms, help="ms"
            )
            sub.add_argument(
                "--frame_shift", type=float, default=FbankOptions.frame_shift_ms, help="ms"
            )
            sub.add_argument(
                "--sample_rate", type=int, default=FbankOptions.sample_rate, help="Hz, enforced"
            )
            sub.add_argument(
                "--dither", type=float, default=FbankOptions.dither, help="0: deterministic"
            )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    if args.nj < 1:
        raise InputError(f"--nj must be >= 1, got {args.nj}")
    if args.command == "compute":
        opts = FbankOptions(
            args.n_mels, args.frame_length, args.frame_shift, args.sample_rate, args.dither
        )
        count = compute_shard(args.data_dir, args.out_dir, args.nj, args.job, opts)
        scp = shard_paths(args.out_dir, args.job)["scp"]
        print(f"fbank: shard {args.job}/{args.nj}: {count} utterances -> {scp}")
    else:
        count = merge_shards(args.data_dir, args.out_dir, args.nj)
        print(f"fbank: {count} utterances -> {args.out_dir / 'feats.scp'}")


if __name__ == "__main__":
    sys.exit(main())
