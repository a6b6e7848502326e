"""Lip-video modality: 88x88 grey mouth videos at 25 fps, the mouth moving with espeak-ng's phonemes.

For each utterance espeak-ng synthesises the same text with the same voice, rate and pitch as the speech
modality (``speech.utterance_prosody``) and reports each phoneme with its start time (the library's
``espeakEVENT_PHONEME`` events, read through ctypes). Phonemes map to visemes (mouth shapes, table below);
a viseme is a target of seven mouth parameters (lip opening, width, rounding, teeth, tongue, lower lip
under the teeth, pressed lips). The piecewise-constant targets are smoothed with a Gaussian (coarticulation:
the mouth moves towards the next shape before its sound starts) and averaged over each frame's 40 ms, then
drawn at twice the resolution and shrunk (anti-aliasing). The video has ``round(audio seconds x 25)`` frames,
so frame k shows the mouth during [40k, 40k + 40) ms of the utterance's wav.

Per-speaker look (drawn from the speaker's identity): skin, lip, mouth-cavity and teeth shades, mouth width,
lip thickness, largest opening, mouth position, head-jitter amplitude, camera-noise level. Per utterance
(from its seed): the head jitter path, the camera noise and a small gain. So the same utterance renders the
same bytes whatever ``nj`` or the processing order is.

Why a fresh process per utterance: the espeak-ng library keeps synthesis state (pitch-period phase,
voice) from one utterance to the next, which shifts phoneme times by up to ~10 ms depending on what was
said before. The generator initialises the library once (phoneme tables loaded, nothing synthesised) and
forks one child per utterance: each child starts from that clean state, which gives exactly the audio
length of the ``espeak-ng`` program the speech modality runs (checked in the tests), and writes its
``.npy``. ``nj`` children run at once. Needs a POSIX ``fork`` and the libespeak-ng shared library
(Debian ``libespeak-ng1``, installed with ``espeak-ng``).
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import functools
import hashlib
import os
import pickle
import struct
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from espnet_ext.data.datadir import write_kaldi_map
from espnet_ext.data.numbers.modality import Modality, Speaker, Utterance
from espnet_ext.data.numbers.speech import ESPEAK_VOICES, espeak_ng_version, utterance_prosody
from espnet_ext.data.numbers.words import number_to_words
from espnet_ext.errors import ConfigError, InputError

FPS = 25
SIZE = 88  # pixels, square: the mouth-ROI size of AV-HuBERT's preparation
RENDER_VERSION = 1  # bump when the same utterance would render differently
SUPERSAMPLE = 2  # drawn at SIZE * SUPERSAMPLE, then shrunk with area averaging
MAX_JITTER = 3.0  # pixels the head jitter may move the mouth each way
NOISE_BANK = 256  # frames of camera noise utterances draw from
COARTICULATION_MS = 20.0  # standard deviation of the Gaussian smoothing the mouth-parameter track

# --- visemes ---------------------------------------------------------------------------------------
# Viseme classes and their phonemes follow the Microsoft Speech API viseme set (IDs 0-21), as listed in
# Azure AI Speech's "Get facial position with viseme" docs (en-US phoneme -> viseme ID table). Keys are
# espeak-ng's phoneme mnemonics (its ASCII phoneme names, as `espeak-ng -x` prints them); a name not in
# the table is looked up without its length/variant marks (see `viseme_of`). Non-English vowels and
# consonants are placed by place of articulation (e.g. French "y" rounded like u, Spanish "B" bilabial).
PHONEME_VISEMES = {
    # 1: ae, ah, schwa
    **dict.fromkeys(["a", "a#", "&", "@", "@-", "@L", "V", "3"], 1),
    # 2: aa (open back)
    **dict.fromkeys(["A", "aa", "0"], 2),
    # 3: ao (open-mid rounded)
    **dict.fromkeys(["O", "O@", "o@"], 3),
    # 4: eh, ey, uh
    **dict.fromkeys(["E", "e", "eI", "e@", "U", "U@", "&U"], 4),
    # 5: er
    **dict.fromkeys(["3:", "VR"], 5),
    # 6: iy, ih, y (palatal glide)
    **dict.fromkeys(["i", "I", "I#", "I2", "i@", "iI", "j", "C"], 6),
    # 7: uw, w, front rounded u
    **dict.fromkeys(["u", "w", "y"], 7),
    # 8: ow, front rounded o
    **dict.fromkeys(["o", "oU", "W", "Y"], 8),
    # 9, 10, 11: diphthongs aw, oy, ay (drawn as a glide between two shapes, see DIPHTHONGS)
    "aU": 9,
    **dict.fromkeys(["OI", "OY", "oI"], 10),
    "aI": 11,
    # 12: h (and the glottal stop, the pharyngeal fricative)
    **dict.fromkeys(["h", "?", "H"], 12),
    # 13: r (approximant / uvular r)
    **dict.fromkeys(["r", "R"], 13),
    # 14: l
    **dict.fromkeys(["l", "l^"], 14),
    # 15: s, z
    **dict.fromkeys(["s", "z", "ss", "s#", "z2"], 15),
    # 16: sh, ch, jh, zh
    **dict.fromkeys(["S", "Z", "tS", "dZ"], 16),
    # 17: dh
    "D": 17,
    # 18: f, v
    **dict.fromkeys(["f", "v"], 18),
    # 19: d, t, n, th (and alveolar taps, affricates, palatal n)
    **dict.fromkeys(["t", "d", "n", "T", "t#", "*", "ts", "dz", "n^", "N^"], 19),
    # 20: k, g, ng (and velar/uvular fricatives)
    **dict.fromkeys(["k", "g", "N", "x", "X", "Q"], 20),
    # 21: p, b, m (and bilabial fricative)
    **dict.fromkeys(["p", "b", "m", "B"], 21),
}
SILENCE = 0
DIPHTHONGS = {9: (2, 7), 10: (3, 6), 11: (2, 6)}  # viseme -> (first half, second half)
_MARKS = ":#;^~!-_0123456789"  # length, stress, palatalisation, nasalisation, variant marks

# Mouth-parameter targets per viseme: open (lip gap, fraction of the speaker's largest), width (of the
# speaker's rest width), round (protrusion: narrower, thicker lips), teeth (upper teeth shown), tongue
# (tongue shown), bite (lower lip raised under the upper teeth), press (lips pressed together, thinner).
PARAMS = ("open", "width", "round", "teeth", "tongue", "bite", "press")
VISEME_TARGETS = {
    0: (0.00, 1.00, 0.0, 0.0, 0.0, 0.0, 0.0),
    1: (0.55, 1.00, 0.1, 0.5, 0.2, 0.0, 0.0),
    2: (0.95, 0.95, 0.0, 0.4, 0.3, 0.0, 0.0),
    3: (0.70, 0.80, 0.6, 0.2, 0.1, 0.0, 0.0),
    4: (0.45, 1.05, 0.1, 0.6, 0.2, 0.0, 0.0),
    5: (0.35, 0.85, 0.5, 0.4, 0.0, 0.0, 0.0),
    6: (0.25, 1.15, 0.0, 0.9, 0.1, 0.0, 0.0),
    7: (0.20, 0.70, 1.0, 0.0, 0.0, 0.0, 0.0),
    8: (0.50, 0.75, 0.8, 0.1, 0.1, 0.0, 0.0),
    12: (0.40, 1.00, 0.0, 0.3, 0.1, 0.0, 0.0),
    13: (0.30, 0.85, 0.6, 0.5, 0.0, 0.0, 0.0),
    14: (0.40, 1.00, 0.0, 0.6, 0.9, 0.0, 0.0),
    15: (0.12, 1.10, 0.0, 1.0, 0.0, 0.0, 0.0),
    16: (0.22, 0.80, 0.8, 1.0, 0.0, 0.0, 0.0),
    17: (0.22, 1.00, 0.0, 1.0, 1.0, 0.0, 0.0),
    18: (0.10, 0.95, 0.0, 1.0, 0.0, 1.0, 0.0),
    19: (0.30, 1.00, 0.0, 0.7, 0.5, 0.0, 0.0),
    20: (0.35, 1.00, 0.0, 0.5, 0.0, 0.0, 0.0),
    21: (0.00, 0.95, 0.1, 0.0, 0.0, 0.0, 1.0),
}


def viseme_of(phoneme: str) -> int | None:
    """Viseme ID of an espeak-ng phoneme mnemonic; pauses ("_", "_:", "_!") are silence, a bare
    modifier (";" palatalises the phoneme before it) is None: no mouth shape of its own.

    Tried in order: the name itself, the name without marks, its first two and its first character
    (without marks). ``KeyError`` when none is in the table.
    """
    if phoneme.startswith("_"):
        return SILENCE
    if all(c in _MARKS for c in phoneme):
        return None
    bare = phoneme[0] + "".join(c for c in phoneme[1:] if c not in _MARKS)
    for name in (phoneme, bare, bare[:2], bare[:1]):
        if name in PHONEME_VISEMES:
            return PHONEME_VISEMES[name]
    raise KeyError(f"espeak-ng phoneme {phoneme!r} has no viseme")


# --- espeak-ng timed phonemes through the library ---------------------------------------------------
# espeak_EVENT of speak_lib.h and the constants used here.
_EVENT_LIST_TERMINATED, _EVENT_PHONEME = 0, 7
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_POS_CHARACTER = 1
_CHARS_UTF8, _ENDPAUSE = 1, 0x1000  # ENDPAUSE: the pause the espeak-ng program adds after the text
_RATE, _PITCH = 1, 3


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),  # ms from the start of the synthesis
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


@dataclass(frozen=True)
class TimedPhonemes:
    """What espeak-ng said: ``(start ms, phoneme mnemonic)`` in order, and the audio length."""

    phonemes: tuple[tuple[int, str], ...]
    num_samples: int
    sample_rate: int

    @property
    def seconds(self) -> float:
        return self.num_samples / self.sample_rate

    @property
    def num_frames(self) -> int:
        return max(1, round(self.seconds * FPS))


@functools.lru_cache(maxsize=1)
def _espeak_library() -> tuple[ctypes.CDLL, int]:
    """The library, initialised once in this process (synchronous, phoneme events on), and its rate."""
    name = ctypes.util.find_library("espeak-ng") or "libespeak-ng.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise ConfigError(
            f"cannot load the espeak-ng library ({e}); Debian package 'libespeak-ng1' "
            "(installed with 'espeak-ng', see tools/apt-packages.txt)"
        ) from None
    rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None, _INITIALIZE_PHONEME_EVENTS)
    if rate <= 0:
        raise ConfigError("espeak-ng library failed to initialise (phoneme data not found?)")
    return lib, rate


def timed_phonemes(text: str, voice: str, rate: int, pitch: int) -> TimedPhonemes:
    """Synthesise ``text`` in this process and collect its phoneme events.

    Exact (the same audio length as the ``espeak-ng`` program) only in a process that has not
    synthesised before: run it through ``run_forked``.
    """
    lib, sample_rate = _espeak_library()
    phonemes: list[tuple[int, str]] = []
    num_samples = 0

    def on_audio(_wav, count, events):
        nonlocal num_samples
        num_samples += count
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            if events[i].type == _EVENT_PHONEME:
                name = events[i].id.string.decode("utf-8", "replace")
                phonemes.append((events[i].audio_position, name))
            i += 1
        return 0

    callback = _SynthCallback(on_audio)  # kept alive until the synthesis returns
    lib.espeak_SetSynthCallback(callback)
    if lib.espeak_SetVoiceByName(voice.encode()) != 0:
        raise RuntimeError(f"espeak-ng has no voice '{voice}'")
    lib.espeak_SetParameter(_RATE, rate, 0)
    lib.espeak_SetParameter(_PITCH, pitch, 0)
    data = text.encode("utf-8")
    flags = _CHARS_UTF8 | _ENDPAUSE
    status = lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, flags, None, None)
    lib.espeak_Synchronize()
    if status != 0 or num_samples == 0:
        raise RuntimeError(f"espeak-ng synthesis of {text!r} failed (status {status})")
    return TimedPhonemes(tuple(phonemes), num_samples, sample_rate)


def run_forked(function, jobs: Sequence[tuple], nj: int) -> list:
    """``[function(*job) for job in jobs]``, each call in its own child forked from this process.

    At most ``nj`` children at once. A call's exception comes back as an ``Exception`` in its place
    (the children's results travel pickled through a pipe). The espeak-ng library is initialised here
    first, so children inherit its loaded, unused state.
    """
    _espeak_library()
    results: list = [None] * len(jobs)
    running: collections.deque = collections.deque()  # (index, pid, read fd), oldest first

    def collect():
        index, pid, fd = running.popleft()
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        os.close(fd)
        _, status = os.waitpid(pid, 0)
        data = b"".join(chunks)
        if len(data) >= 4 and len(data) == 4 + struct.unpack("<I", data[:4])[0]:
            results[index] = pickle.loads(data[4:])
        else:
            results[index] = RuntimeError(f"worker process ended with status {status}")

    for index, job in enumerate(jobs):
        if len(running) >= nj:
            collect()
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns into the caller
            code = 1
            try:
                os.close(read_fd)
                try:
                    result = function(*job)
                except Exception as e:  # travels back to the parent, which raises it
                    result = e
                payload = pickle.dumps(result)
                os.write(write_fd, struct.pack("<I", len(payload)))
                view = memoryview(payload)
                while view:
                    view = view[os.write(write_fd, view) :]
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        running.append((index, pid, read_fd))
    while running:
        collect()
    return results


# --- rendering --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Look:
    """A speaker's appearance, in pixels of the 88x88 frame and grey levels."""

    skin: float
    lip: float
    cavity: float
    teeth: float
    tongue: float
    half_width: float  # mouth half-width at rest
    lip_thickness: float
    max_gap: float  # lip gap at open = 1
    center: tuple[float, float]  # mouth centre (x, y)
    jitter: float  # head-jitter standard deviation
    noise: float  # camera-noise standard deviation

    @classmethod
    def of_speaker(cls, speaker: Speaker) -> Look:
        identity = f"{speaker.spk_id}|{speaker.variant}|{speaker.rate}|{speaker.pitch}"
        digest = hashlib.sha256(identity.encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        skin = rng.uniform(105, 195)
        lip = skin - rng.uniform(30, 65)
        return cls(
            skin=skin,
            lip=lip,
            cavity=rng.uniform(10, 40),
            teeth=rng.uniform(185, 240),
            tongue=lip - rng.uniform(5, 20),
            half_width=rng.uniform(18, 25),
            lip_thickness=rng.uniform(3.5, 6.0),
            max_gap=rng.uniform(16, 24),
            center=(44 + rng.uniform(-3, 3), 48 + rng.uniform(-3, 3)),
            jitter=rng.uniform(0.3, 1.5),
            noise=rng.uniform(1.5, 5.0),
        )


def mouth_track(phonemes: TimedPhonemes) -> np.ndarray:
    """(T, len(PARAMS)) mouth parameters per frame: viseme targets, smoothed, averaged over each frame.

    Before the first phoneme and after the last one the targets are the silence (closed mouth); a
    modifier without a phoneme of its own (e.g. ";") extends the previous phoneme.
    """
    frame_ms = 1000 // FPS
    total_ms = phonemes.num_frames * frame_ms
    targets = np.tile(np.array(VISEME_TARGETS[SILENCE]), (total_ms, 1))
    segments = [(start, viseme_of(name)) for start, name in phonemes.phonemes]
    segments = [(start, v) for start, v in segments if v is not None]
    ends = [start for start, _ in segments[1:]] + [total_ms]
    for (start, viseme), end in zip(segments, ends):
        start, end = min(start, total_ms), min(max(end, start), total_ms)
        if viseme in DIPHTHONGS:
            first, second = DIPHTHONGS[viseme]
            middle = (start + end) // 2
            targets[start:middle] = VISEME_TARGETS[first]
            targets[middle:end] = VISEME_TARGETS[second]
        else:
            targets[start:end] = VISEME_TARGETS[viseme]
    radius = int(3 * COARTICULATION_MS)
    kernel = np.exp(-0.5 * (np.arange(-radius, radius + 1) / COARTICULATION_MS) ** 2)
    kernel /= kernel.sum()
    silence = np.tile(np.array(VISEME_TARGETS[SILENCE]), (radius, 1))
    padded = np.concatenate([silence, targets, silence])
    smooth = np.stack(
        [np.convolve(padded[:, p], kernel, mode="valid") for p in range(len(PARAMS))], axis=1
    )
    frames = smooth.reshape(phonemes.num_frames, frame_ms, len(PARAMS)).mean(axis=1)
    silent = np.all(np.abs(frames - VISEME_TARGETS[SILENCE]) < 1e-9, axis=1)
    frames[silent] = VISEME_TARGETS[SILENCE]  # exactly closed where only silence is in reach
    return frames


_SHIFT = 4  # fractional bits of cv2 drawing coordinates: sub-pixel positions


def _ellipse(canvas: np.ndarray, center, axes, shade: float) -> None:
    scale = 1 << _SHIFT
    c = (round(center[0] * scale), round(center[1] * scale))
    a = (max(0, round(axes[0] * scale)), max(0, round(axes[1] * scale)))
    cv2 = _cv2()
    cv2.ellipse(canvas, c, a, 0, 0, 360, float(shade), -1, cv2.LINE_8, _SHIFT)


@functools.lru_cache(maxsize=1)
def _cv2():
    import cv2

    return cv2


@functools.lru_cache(maxsize=4)
def _face(look: Look) -> tuple[np.ndarray, np.ndarray]:
    """The speaker's skin with nose and chin shadows, no mouth: float32 (SIZE, SIZE) and the same
    SUPERSAMPLE times larger."""
    s = SUPERSAMPLE
    big = np.full((SIZE * s, SIZE * s), look.skin, dtype=np.float32)
    cx, cy = look.center
    _ellipse(big, (cx * s, (cy - 30) * s), (12 * s, 6 * s), look.skin - 18)
    _ellipse(big, (cx * s, (cy + 34) * s), (34 * s, 7 * s), look.skin - 12)
    big = _cv2().GaussianBlur(big, (0, 0), 3.0 * s)
    return _cv2().resize(big, (SIZE, SIZE), interpolation=_cv2().INTER_AREA), big


def _mouth_box(look: Look) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) in frame pixels of the region any mouth shape of ``look`` stays in."""
    half_w = int(np.ceil(look.half_width * 1.15 + MAX_JITTER)) + 2
    half_h = int(np.ceil(look.max_gap / 2 + 2.5 * look.lip_thickness + MAX_JITTER)) + 2
    cx, cy = round(look.center[0]), round(look.center[1])
    return max(cx - half_w, 0), max(cy - half_h, 0), min(cx + half_w, SIZE), min(cy + half_h, SIZE)


def render_mouth(params: np.ndarray, look: Look, offset=(0.0, 0.0)) -> np.ndarray:
    """float32 pixels of ``_mouth_box(look)``: the mouth with ``params`` (one row of ``mouth_track``),
    moved by ``offset`` pixels (head jitter, at most MAX_JITTER each way).

    Drawn at SUPERSAMPLE times the size, then shrunk by area averaging (anti-aliasing).
    """
    opening, width, rounding, teeth, tongue, bite, press = (float(v) for v in params)
    s = SUPERSAMPLE
    x0, y0, x1, y1 = _mouth_box(look)
    roi = _face(look)[1][y0 * s : y1 * s, x0 * s : x1 * s].copy()
    cx, cy = (look.center[0] + offset[0] - x0) * s, (look.center[1] + offset[1] - y0) * s
    half_width = look.half_width * width * (1 - 0.25 * rounding) * s
    lip = look.lip_thickness * (1 + 0.5 * rounding) * (1 - 0.6 * press) * s
    gap = opening * look.max_gap * s
    # Lips: two ellipses whose overlap closes the mouth when gap = 0.
    _ellipse(roi, (cx, cy - gap / 2 - lip / 2), (half_width, lip), look.lip)
    lower = (half_width * 0.95, lip * (1 + 0.4 * bite))
    _ellipse(roi, (cx, cy + gap / 2 + lip / 2 - bite * 0.5 * lip), lower, look.lip)
    if gap > 0.2 * s:
        cavity = np.zeros_like(roi)
        _ellipse(cavity, (cx, cy), (half_width * 0.85, gap / 2), 1.0)
        inside = np.full_like(roi, look.cavity)
        # Upper teeth: a band hanging from the upper lip; the tongue rises from below.
        if teeth > 0.05:
            _ellipse(inside, (cx, cy - gap / 2), (half_width * 0.7, gap * 0.45 * teeth), look.teeth)
        if tongue > 0.05:
            _ellipse(
                inside, (cx, cy + gap / 2), (half_width * 0.5, gap * 0.5 * tongue), look.tongue
            )
        if bite > 0.05:  # the lower lip reaches up under the upper teeth
            _ellipse(inside, (cx, cy + gap / 2), (half_width * 0.8, gap * 0.6 * bite), look.lip)
        roi = np.where(cavity > 0, inside, roi)
    elif press > 0.05:  # pressed lips: a dark line between them
        _ellipse(roi, (cx, cy), (half_width * 0.8, (0.3 + 0.4 * press) * s), look.lip - 25)
    return _cv2().resize(roi, (x1 - x0, y1 - y0), interpolation=_cv2().INTER_AREA)


def render_frame(params: np.ndarray, look: Look, offset=(0.0, 0.0)) -> np.ndarray:
    """float32 (SIZE, SIZE) grey frame, no noise: the face with the mouth of ``render_mouth``."""
    frame = _face(look)[0].copy()
    x0, y0, x1, y1 = _mouth_box(look)
    frame[y0:y1, x0:x1] = render_mouth(params, look, offset)
    return frame


@functools.lru_cache(maxsize=1)
def _noise_bank() -> np.ndarray:
    """Fixed standard-normal camera-noise frames; utterances draw frames from it at random (much
    cheaper than fresh noise for every pixel; computed once in the process the renderers fork from)."""
    rng = np.random.default_rng(0x5EED)
    return rng.standard_normal((NOISE_BANK, SIZE, SIZE), dtype=np.float32)


def render_video(track: np.ndarray, look: Look, seed: int) -> np.ndarray:
    """uint8 (T, SIZE, SIZE): the frames of ``track`` with head jitter, gain and camera noise from ``seed``."""
    rng = np.random.default_rng([seed, 0x71D])  # a stream of its own (prosody uses the bare seed)
    num_frames = len(track)
    # Head jitter: a slow AR(1) walk, stationary with std look.jitter, clipped to MAX_JITTER.
    steps = rng.normal(0.0, look.jitter * np.sqrt(1 - 0.8**2), (num_frames, 2))
    offsets = np.zeros((num_frames, 2))
    offsets[0] = rng.normal(0.0, look.jitter, 2)
    for k in range(1, num_frames):
        offsets[k] = 0.8 * offsets[k - 1] + steps[k]
    offsets = np.clip(offsets, -MAX_JITTER, MAX_JITTER)
    gain = rng.uniform(0.92, 1.08)
    noise_frames = rng.integers(0, NOISE_BANK, num_frames)
    noise_signs = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), num_frames)
    frames = np.empty((num_frames, SIZE, SIZE), dtype=np.float32)
    frames[:] = _face(look)[0]
    x0, y0, x1, y1 = _mouth_box(look)
    for k in range(num_frames):
        frames[k, y0:y1, x0:x1] = render_mouth(track[k], look, offsets[k])
    frames *= gain
    noise = _noise_bank()[noise_frames] * (noise_signs * look.noise)[:, None, None]
    frames += noise
    return np.clip(np.round(frames), 0, 255).astype(np.uint8)


def _render_utterance(
    text: str, voice: str, rate: int, pitch: int, speaker: Speaker, seed: int, path: str
):
    """Child-process job: phoneme events -> mouth track -> frames -> ``path``. Returns the frame count."""
    phonemes = timed_phonemes(text, voice, rate, pitch)
    frames = render_video(mouth_track(phonemes), Look.of_speaker(speaker), seed)
    np.save(path, frames, allow_pickle=False)
    return len(frames)


def render_in_helper(jobs: Sequence[tuple], nj: int) -> list:
    """``_render_utterance`` of each job, forked from a fresh helper process (this module as a program).

    Forking costs grow with the forking process' memory (~40 ms per fork from a process with SciPy
    loaded on 2 CPU cores, ~15 ms from this module alone), so the children come from a lean helper
    started once per call rather than from the caller.
    """
    package_root = str(Path(__file__).resolve().parents[3])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", __name__ if __name__ != "__main__" else _MODULE, str(nj)],
        input=pickle.dumps(list(jobs)),
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=path),
        check=False,
    )
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(
            f"the lip-video helper process failed: {message[-1] if message else proc.returncode}"
        )
    return pickle.loads(proc.stdout)


_MODULE = "espnet_ext.data.numbers.video"


def _helper_main(nj: int) -> None:
    """The helper: jobs pickled on stdin, results pickled on stdout."""
    jobs = pickle.load(sys.stdin.buffer)
    _cv2()  # imported and computed here once, not in every child
    _noise_bank()
    sys.stdout.buffer.write(pickle.dumps(run_forked(_render_utterance, jobs, nj)))


# --- the modality -----------------------------------------------------------------------------------
def _signature_of_tables() -> str:
    tables = repr((sorted(PHONEME_VISEMES.items()), sorted(VISEME_TARGETS.items()), DIPHTHONGS))
    return hashlib.sha256(tables.encode()).hexdigest()[:16]


@dataclass
class VideoModality(Modality):
    """``<video_dir>/<split>/<utt_id>.npy`` (uint8 (T, 88, 88), 25 fps) and ``video.scp`` listing them.

    ``<video_dir>/<split>/`` belongs to the generator: videos there that the new corpus does not list are
    removed.
    """

    lang: str
    video_dir: Path
    nj: int = 1  # child processes rendering at once; does not change the output
    name = "video"

    def __post_init__(self):
        if self.lang not in ESPEAK_VOICES:
            raise ConfigError(f"no espeak-ng voice for language '{self.lang}'")
        if self.nj < 1:
            raise ConfigError(f"nj must be >= 1, got {self.nj}")
        self.video_dir = Path(self.video_dir).absolute()

    def signature(self) -> dict:
        return {
            "lang": self.lang,
            "voice": ESPEAK_VOICES[self.lang],
            "video_dir": str(self.video_dir),
            "espeak-ng": espeak_ng_version(),
            "fps": FPS,
            "size": SIZE,
            "render_version": RENDER_VERSION,
            "visemes": _signature_of_tables(),
        }

    def video_path(self, utt: Utterance) -> Path:
        return self.video_dir / utt.split / f"{utt.utt_id}.npy"

    def generate(self, utterances: Sequence[Utterance], out_dir: Path) -> None:
        language_voice = ESPEAK_VOICES[self.lang]
        jobs = []
        for utt in utterances:
            rate, pitch = utterance_prosody(utt)
            text = number_to_words(utt.number, self.lang)
            voice = f"{language_voice}+{utt.speaker.variant}"
            jobs.append(
                (text, voice, rate, pitch, utt.speaker, utt.seed, str(self.video_path(utt)))
            )
        for split in {u.split for u in utterances}:
            (self.video_dir / split).mkdir(parents=True, exist_ok=True)
        for utt, result in zip(utterances, render_in_helper(jobs, self.nj)):
            if isinstance(result, KeyError):  # a phoneme the viseme table lacks
                raise InputError(f"{result.args[0]} (language '{self.lang}')", key=utt.utt_id)
            if isinstance(result, Exception):
                raise InputError(f"rendering the lip video failed: {result}", key=utt.utt_id)
        keep = {self.video_path(u) for u in utterances}
        for split in {u.split for u in utterances}:
            for stale in set((self.video_dir / split).glob("*.npy")) - keep:
                stale.unlink()
        write_kaldi_map(
            out_dir / "video.scp", {u.utt_id: str(self.video_path(u)) for u in utterances}
        )


if __name__ == "__main__":
    _helper_main(int(sys.argv[1]))
