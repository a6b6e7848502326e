"""Speech modality: espeak-ng reads the number words, at 16 kHz, with speaker variety.

A speaker is an espeak-ng voice variant (m1..m7, f1..f4: different formants and voicing) with its own
base rate and pitch; each utterance jitters rate and pitch a little around the speaker's, drawn from the
utterance's seed, so the audio is the same byte for byte whatever ``nj`` is.

``snr_db`` (lo, hi) adds white Gaussian noise to every utterance at a signal-to-noise ratio drawn uniformly
from that range, from the utterance's seed as well. Clean synthetic speech leaves an ASR model certain of
every word it has learnt, so shallow fusion has nothing to decide; noise masks the consonants that tell
number words apart ("six"/"seven", "-teen"/"-ty") and leaves the acoustic evidence weak enough for a
language model to matter.

Each utterance is one run of the ``espeak-ng`` program (WAV at 22.05 kHz on stdout), resampled here to
16 kHz mono 16-bit PCM with a polyphase filter. One program run per utterance costs ~12 ms of start-up
(loading phoneme tables), but it is stateless: the in-process library carries synthesis state from one
utterance to the next, so its audio would depend on processing order. ``nj`` threads each drive one
espeak-ng process at a time; the Python part (resampling, writing) is small, so threads keep ``nj``
processes busy without the start-up cost of a process pool.
"""

from __future__ import annotations

import functools
import math
import shutil
import struct
import subprocess
import wave
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from espnet_ext.data.datadir import write_kaldi_map
from espnet_ext.data.numbers.modality import Modality, Speaker, Utterance
from espnet_ext.data.numbers.words import number_to_words
from espnet_ext.errors import ConfigError, InputError

SAMPLE_RATE = 16000
ESPEAK_VOICES = {
    "en": "en-us",
    "de": "de",
    "es": "es",
    "fr": "fr-fr",
    "it": "it",
    "pt": "pt",
    "ru": "ru",
    "ar": "ar",
    "ro": "ro",
    "el": "el",
}
VOICE_VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4")
BASE_RATE = (135, 185)  # speaker's words per minute, inclusive range
BASE_PITCH = (35, 65)  # speaker's espeak-ng pitch, inclusive range
RATE_JITTER = 15  # per utterance, +- words per minute
PITCH_JITTER = 5  # per utterance, +- pitch steps
NOISE_STREAM = 1  # the utterance seed's stream for noise (prosody draws from the seed itself)


def random_speakers(spk_ids: Sequence[str], rng: np.random.Generator) -> list[Speaker]:
    """Speakers with variants cycling through a shuffled variant list (every variant used when possible)."""
    variants = [VOICE_VARIANTS[i] for i in rng.permutation(len(VOICE_VARIANTS))]
    return [
        Speaker(
            spk_id=spk_id,
            variant=variants[k % len(variants)],
            rate=int(rng.integers(BASE_RATE[0], BASE_RATE[1] + 1)),
            pitch=int(rng.integers(BASE_PITCH[0], BASE_PITCH[1] + 1)),
        )
        for k, spk_id in enumerate(spk_ids)
    ]


def utterance_prosody(utt: Utterance) -> tuple[int, int]:
    """(rate, pitch) of one utterance: the speaker's, jittered from the utterance's own seed."""
    rng = np.random.default_rng(utt.seed)
    rate = utt.speaker.rate + int(rng.integers(-RATE_JITTER, RATE_JITTER + 1))
    pitch = utt.speaker.pitch + int(rng.integers(-PITCH_JITTER, PITCH_JITTER + 1))
    return rate, min(max(pitch, 0), 99)


def utterance_snr(utt: Utterance, snr_db: tuple[float, float]) -> float:
    """The utterance's signal-to-noise ratio in dB, uniform in ``snr_db`` from its own seed."""
    rng = np.random.default_rng([utt.seed, NOISE_STREAM])
    return float(rng.uniform(snr_db[0], snr_db[1]))


def add_noise(samples: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    """int16 ``samples`` + white Gaussian noise whose power is the samples' mean power / 10^(snr_db/10).

    The mean power is taken over the whole utterance (espeak-ng writes little silence around the words).
    Clipped to int16.
    """
    signal = samples.astype(np.float64)
    noise_power = float(np.mean(signal**2)) / 10 ** (snr_db / 10)
    noise = np.random.default_rng([seed, NOISE_STREAM]).normal(
        0.0, math.sqrt(noise_power), signal.shape
    )
    return np.clip(np.round(signal + noise), -32768, 32767).astype("<i2")


@functools.lru_cache(maxsize=1)
def espeak_ng_version() -> str:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise ConfigError(
            "espeak-ng is not installed (Debian package 'espeak-ng'; see tools/apt-packages.txt)"
        )
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    return out.split("Data at")[0].strip()


def parse_wav(data: bytes) -> tuple[int, np.ndarray]:
    """(sample rate, int16 samples) of a mono 16-bit PCM WAV as espeak-ng writes it to stdout.

    espeak-ng cannot seek back on a pipe, so its size fields are placeholders: the samples are
    everything after the 'data' chunk header.
    """
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a WAV file")
    pos, rate = 12, None
    while pos + 8 <= len(data):
        chunk, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        if chunk == b"fmt ":
            fmt, channels, rate = struct.unpack_from("<HHI", data, pos + 8)
            (bits,) = struct.unpack_from("<H", data, pos + 22)
            if (fmt, channels, bits) != (1, 1, 16):
                raise ValueError(
                    f"expected mono 16-bit PCM, got format {fmt}, {channels} channels, {bits} bits"
                )
        elif chunk == b"data":
            if rate is None:
                raise ValueError("WAV data before its fmt chunk")
            body = data[pos + 8 :]
            return rate, np.frombuffer(body[: len(body) // 2 * 2], dtype="<i2")
        pos += 8 + size + (size & 1)
    raise ValueError("no data chunk in WAV")


@functools.lru_cache(maxsize=4)
def _lowpass(up: int, down: int) -> np.ndarray:
    """scipy's default resample_poly anti-aliasing filter, designed once instead of per utterance."""
    from scipy.signal import firwin

    max_rate = max(up, down)
    return firwin(2 * 10 * max_rate + 1, 1.0 / max_rate, window=("kaiser", 5.0))


def resample_to(samples: np.ndarray, rate: int, target: int = SAMPLE_RATE) -> np.ndarray:
    """int16 -> int16 at ``target`` Hz with a polyphase filter (deterministic)."""
    from scipy.signal import resample_poly

    g = math.gcd(rate, target)
    up, down = target // g, rate // g
    y = resample_poly(samples.astype(np.float64), up, down, window=_lowpass(up, down))
    return np.clip(np.round(y), -32768, 32767).astype("<i2")


def write_wav(path: Path, samples: np.ndarray, rate: int = SAMPLE_RATE) -> None:
    """16-bit mono PCM WAV.

    Not fsync'ed one by one (thousands of small files): a wav only counts once the split's ``wav.scp``
    and ``.complete`` marker, written after all of them, exist.
    """
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())


def synthesize(text: str, voice: str, rate: int, pitch: int) -> np.ndarray:
    """int16 samples at 16 kHz of espeak-ng speaking ``text``; RuntimeError with espeak-ng's message."""
    cmd = ["espeak-ng", "-v", voice, "-s", str(rate), "-p", str(pitch), "--stdout"]
    proc = subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True, timeout=120)
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"'{' '.join(cmd)}' exited with {proc.returncode}: {message}")
    in_rate, samples = parse_wav(proc.stdout)
    if samples.size == 0:
        raise RuntimeError(f"'{' '.join(cmd)}' produced no audio for {text!r}")
    return resample_to(samples, in_rate)


def _synthesize_to_wav(job: tuple[str, str, int, int, str, tuple[float, int] | None]) -> str | None:
    """Synthesize and write one utterance; returns the error message instead of raising.

    ``job``: text, voice, rate, pitch, wav path and (SNR in dB, noise seed), or None for clean audio.
    """
    text, voice, rate, pitch, path, noise = job
    try:
        samples = synthesize(text, voice, rate, pitch)
        write_wav(Path(path), samples if noise is None else add_noise(samples, *noise))
    except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None


@dataclass
class SpeechModality(Modality):
    """Wavs under ``<wav_dir>/<split>/<utt_id>.wav`` and ``wav.scp`` with their absolute paths.

    ``<wav_dir>/<split>/`` belongs to the generator: wavs there that the new corpus does not list are removed.
    """

    lang: str
    wav_dir: Path
    nj: int = 1  # espeak-ng processes running at once; does not change the output
    # White noise at an SNR uniform in [lo, hi] dB; None: clean audio.
    snr_db: tuple[float, float] | None = None
    name = "speech"

    def __post_init__(self):
        if self.lang not in ESPEAK_VOICES:
            raise ConfigError(f"no espeak-ng voice for language '{self.lang}'")
        if self.nj < 1:
            raise ConfigError(f"nj must be >= 1, got {self.nj}")
        if self.snr_db is not None:
            lo, hi = self.snr_db
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ConfigError(
                    f"snr_db must be lo:hi with lo <= hi (dB), got {lo}:{hi}", key="snr_db"
                )
            self.snr_db = (float(lo), float(hi))
        self.wav_dir = Path(self.wav_dir).absolute()

    def signature(self) -> dict:
        signature = {
            "lang": self.lang,
            "voice": ESPEAK_VOICES[self.lang],
            "wav_dir": str(self.wav_dir),
            "espeak-ng": espeak_ng_version(),
            "sample_rate": SAMPLE_RATE,
        }
        if self.snr_db is not None:  # clean corpora keep the signature they always had
            signature["snr_db"] = list(self.snr_db)
        return signature

    def wav_path(self, utt: Utterance) -> Path:
        return self.wav_dir / utt.split / f"{utt.utt_id}.wav"

    def generate(self, utterances: Sequence[Utterance], out_dir: Path) -> None:
        language_voice = ESPEAK_VOICES[self.lang]
        jobs = []
        for utt in utterances:
            rate, pitch = utterance_prosody(utt)
            voice = f"{language_voice}+{utt.speaker.variant}"
            noise = None if self.snr_db is None else (utterance_snr(utt, self.snr_db), utt.seed)
            jobs.append(
                (
                    number_to_words(utt.number, self.lang),
                    voice,
                    rate,
                    pitch,
                    str(self.wav_path(utt)),
                    noise,
                )
            )
        for split in {u.split for u in utterances}:
            (self.wav_dir / split).mkdir(parents=True, exist_ok=True)
        espeak_ng_version()  # a missing espeak-ng is refused here, with its install hint
        resample_to(
            np.zeros(8, dtype=np.int16), 22050
        )  # import scipy and design the filter before the threads
        with ThreadPoolExecutor(self.nj) as pool:
            errors = list(pool.map(_synthesize_to_wav, jobs))
        for utt, error in zip(utterances, errors):
            if error is not None:
                raise InputError(f"espeak-ng failed: {error}", key=utt.utt_id)
        self._remove_stale_wavs(utterances)
        write_kaldi_map(out_dir / "wav.scp", {u.utt_id: str(self.wav_path(u)) for u in utterances})

    def _remove_stale_wavs(self, utterances: Sequence[Utterance]) -> None:
        keep = {self.wav_path(u) for u in utterances}
        for split in {u.split for u in utterances}:
            for path in (self.wav_dir / split).glob("*.wav"):
                if path not in keep:
                    path.unlink()
