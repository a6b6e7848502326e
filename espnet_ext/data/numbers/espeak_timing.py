"""Phoneme timings of espeak-ng speech, exactly as the ``espeak-ng`` program would time the utterance.

``phoneme_timings(jobs, nj)`` gives, for each (text, voice, rate, pitch), espeak-ng's phonemes with
their start times in ms (the library's ``espeakEVENT_PHONEME`` events, read through ctypes) and the
number of audio samples (22.05 kHz) of the synthesis, including the end-of-text pause the program adds.

Why a fresh process per utterance: the library keeps synthesis state (pitch-period phase, voice
settings) from one utterance to the next, which moves phonemes by up to ~60 ms (measured over 60
utterances of the numbers world) depending on what was said before. A process that has initialised the
library but never synthesised gives exactly the audio length of the ``espeak-ng`` program, which the
speech modality runs once per utterance (checked in the tests). So a helper process initialises the
library once and forks one child per utterance (``nj`` at a time). Forking costs grow with the forking
process' memory, so the helper is this file run as a script: standard library only, no package import
(the caller's process, with NumPy/SciPy loaded, would take several times longer per fork). Needs a
POSIX ``fork`` and the libespeak-ng shared library (Debian ``libespeak-ng1``, installed with
``espeak-ng``).

Standard library only: this file runs as ``python -I espeak_timing.py <nj>`` with JSON jobs on stdin.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import functools
import json
import os
import pickle
import struct
import subprocess
import sys
from collections.abc import Sequence

# espeak_EVENT of speak_lib.h and the constants used here.
_EVENT_LIST_TERMINATED, _EVENT_PHONEME = 0, 7
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_POS_CHARACTER = 1
_CHARS_UTF8, _ENDPAUSE = 1, 0x1000  # ENDPAUSE: the pause the espeak-ng program adds after the text
_RATE, _PITCH = 1, 3

Timing = tuple[list[tuple[int, str]], int, int]  # (start ms, phoneme) list, samples, sample rate


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


class _Voice(ctypes.Structure):  # espeak_VOICE
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_char_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    ]


_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


@functools.lru_cache(maxsize=1)
def _espeak_library() -> tuple[ctypes.CDLL, int]:
    """The library, initialised once in this process (synchronous, phoneme events on), and its rate."""
    name = ctypes.util.find_library("espeak-ng") or "libespeak-ng.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise RuntimeError(
            f"cannot load the espeak-ng library ({e}); Debian package 'libespeak-ng1' "
            "(installed with 'espeak-ng', see tools/apt-packages.txt)"
        ) from None
    rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None, _INITIALIZE_PHONEME_EVENTS)
    if rate <= 0:
        raise RuntimeError("espeak-ng library failed to initialise (phoneme data not found?)")
    return lib, rate


def synthesize_timing(text: str, voice: str, rate: int, pitch: int) -> Timing:
    """Synthesise ``text`` in this process and collect its phoneme events.

    Exact only in a process that has not synthesised before (see the module doc).
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
        # What the espeak-ng program does with -v when no voice has that name (e.g. "fr-fr+m4"):
        # select by language.
        properties = _Voice(languages=voice.encode())
        if lib.espeak_SetVoiceByProperties(ctypes.byref(properties)) != 0:
            raise RuntimeError(f"espeak-ng has no voice '{voice}'")
    lib.espeak_SetParameter(_RATE, rate, 0)
    lib.espeak_SetParameter(_PITCH, pitch, 0)
    data = text.encode("utf-8")
    flags = _CHARS_UTF8 | _ENDPAUSE
    status = lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, flags, None, None)
    lib.espeak_Synchronize()
    if status != 0 or num_samples == 0:
        raise RuntimeError(f"espeak-ng synthesis of {text!r} failed (status {status})")
    return phonemes, num_samples, sample_rate


def run_forked(function, jobs: Sequence[tuple], nj: int) -> list:
    """``[function(*job) for job in jobs]``, each call in its own child forked from this process.

    At most ``nj`` children at once. A call's exception comes back as an ``Exception`` in its place
    (results travel pickled through a pipe). The espeak-ng library is initialised here first, so the
    children inherit its loaded, unused state.
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
                except Exception as e:  # travels back to the parent
                    result = e
                payload = pickle.dumps(result)
                view = memoryview(struct.pack("<I", len(payload)) + payload)
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


def phoneme_timings(jobs: Sequence[tuple[str, str, int, int]], nj: int = 1) -> list:
    """``synthesize_timing`` of each (text, voice, rate, pitch), each in a fresh child of a lean helper
    process; a job that failed gives a ``RuntimeError`` in its place."""
    proc = subprocess.run(
        [sys.executable, "-I", __file__, str(nj)],
        input=json.dumps([list(job) for job in jobs]).encode(),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(
            f"the espeak-ng timing helper failed: {lines[-1] if lines else proc.returncode}"
        )
    out = []
    for result in json.loads(proc.stdout):
        if "error" in result:
            out.append(RuntimeError(result["error"]))
        else:
            phonemes = [(int(ms), str(name)) for ms, name in result["phonemes"]]
            out.append((phonemes, result["samples"], result["rate"]))
    return out


def _helper_main(nj: int) -> None:
    jobs = [tuple(job) for job in json.load(sys.stdin)]
    results = []
    for result in run_forked(synthesize_timing, jobs, nj):
        if isinstance(result, Exception):
            results.append({"error": str(result)})
        else:
            phonemes, samples, rate = result
            results.append({"phonemes": phonemes, "samples": samples, "rate": rate})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    _helper_main(int(sys.argv[1]))
