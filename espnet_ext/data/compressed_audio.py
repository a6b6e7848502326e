"""Compressed audio (AAC in .m4a, MP3, ...) and audio at other rates -> 16 kHz mono 16-bit WAV, for
``wav.scp`` pipes.

The feature stage reads ``wav.scp`` values with soundfile, which has no AAC decoder and does not
resample. Kaldi/ESPnet recipes put ``ffmpeg -i FILE -ac 1 -ar 16000 -f wav - |`` in ``wav.scp``; the
ffmpeg program is not always installed, so our readers write

    <recording> python -m espnet_ext.data.compressed_audio FILE |

which decodes with PyAV (FFmpeg's libraries, pinned in tools/requirements.txt) and resamples with
FFmpeg's resampler (libswresample) to mono 16 kHz. The AAC encoder's priming samples (1024 at the
start) stay in the signal unless the container's edit list removes them, as with ffmpeg's CLI.
"""

from __future__ import annotations

import io
import shlex
import sys
import wave
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from espnet_ext.errors import InputError, reports_input_errors

SAMPLE_RATE = 16000
PIPE_PROGRAM = ["python", "-m", "espnet_ext.data.compressed_audio"]  # what pipe_command writes


def decode(path: str | Path, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """int16 mono samples of the first audio stream of ``path`` at ``sample_rate``."""
    import av

    path = Path(path)
    if not path.is_file():
        raise InputError("audio file does not exist", path=path)
    chunks = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise InputError("has no audio stream", path=path)
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
            for frame in container.decode(stream):
                chunks.extend(f.to_ndarray() for f in resampler.resample(frame))
            chunks.extend(f.to_ndarray() for f in resampler.resample(None))
    except av.error.FFmpegError as e:
        raise InputError(f"cannot decode: {e}", path=path) from e
    if not chunks:
        raise InputError("decodes to no samples", path=path)
    return np.concatenate(chunks, axis=1)[0]


def wav_bytes(samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(samples.astype("<i2").tobytes())
    return buffer.getvalue()


def pipe_command(path: str | Path) -> str:
    """The ``wav.scp`` value decoding ``path`` (absolute) on the fly."""
    return f"{shlex.join(PIPE_PROGRAM)} {shlex.quote(str(Path(path).absolute()))} |"


def piped_file(value: str) -> Path | None:
    """The file of a ``wav.scp`` value ``pipe_command`` wrote, None for any other value: the feature stage
    decodes it in its own process (``decode``, the same samples) instead of starting a Python process per
    recording (~0.2 s each: hours of start-up over a corpus of 300k clips)."""
    if not value.endswith("|"):
        return None
    try:
        words = shlex.split(value[:-1])
    except ValueError:
        return None
    if len(words) == len(PIPE_PROGRAM) + 1 and words[:-1] == PIPE_PROGRAM:
        return Path(words[3])
    return None


def wav_scp_value(path: str | Path, sample_rate: int, channels: int) -> str:
    """The ``wav.scp`` value of a recording soundfile reads (WAV, FLAC): its absolute path when it is
    16 kHz mono, as the feature stage wants it, and otherwise the pipe that decodes, downmixes and
    resamples it (``pipe_command``, as for the compressed corpora), never a refusal of the corpus."""
    if (sample_rate, channels) == (SAMPLE_RATE, 1):
        return str(Path(path).absolute())
    return pipe_command(path)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print(
            f"usage: python -m espnet_ext.data.compressed_audio FILE  ({__doc__.splitlines()[0]})"
        )
        return 2
    data = wav_bytes(decode(args[0]))
    sys.stdout.buffer.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
