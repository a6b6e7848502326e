"""Video decoding shared by the ``video`` data type and the LRS3 reader: grey uint8 frames at 25 fps.

Lip-reading models (AV-HuBERT and ours) take grey mouth crops at 25 fps, LRS3's frame rate. Files are
decoded with PyAV (FFmpeg's libraries, in process; no shell pipes), or read from ``.npy`` arrays of uint8
frames (what our readers and the numbers world write; an ``.npy`` carries no frame rate and counts as
25 fps). Colour becomes grey with the ITU-R BT.601 luma weights, rounded, as OpenCV's
``cvtColor(BGR2GRAY)`` does (AV-HuBERT's loader).

Frame rate: a container whose rate is not 25 fps is refused by default (``fps_policy="refuse"``): a
model trained at 25 fps would see every movement at the wrong speed, and a silent conversion would hide
that the data differs from LRS3. ``fps_policy="resample"`` converts by frame selection instead: output
frame k shows the source frame on screen at time k / 25 s (the last one starting at or before it), as a
player would, so frames are repeated (< 25 fps) or dropped (> 25 fps), never blended.

Errors are ``ValueError``/``OSError`` without location; callers add the file/line (``types``, ``lrs3``).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

FPS = 25
FPS_POLICIES = ("refuse", "resample")
FPS_TOLERANCE = (
    0.01  # frames per second: 25 +- this counts as 25 (29.97-style rounding of timebases)
)
_LUMA_RGB = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R BT.601, as OpenCV


def to_grey(frames: np.ndarray) -> np.ndarray:
    """uint8 (T, H, W) from uint8 (T, H, W), (T, H, W, 1) or RGB (T, H, W, 3) frames."""
    if frames.dtype != np.uint8:
        raise ValueError(f"expected uint8 frames, got {frames.dtype}")
    if frames.ndim == 3:
        return frames
    if frames.ndim == 4 and frames.shape[-1] == 1:
        return frames[..., 0]
    if frames.ndim == 4 and frames.shape[-1] == 3:
        return np.clip(np.rint(frames.astype(np.float32) @ _LUMA_RGB), 0, 255).astype(np.uint8)
    raise ValueError(f"expected frames (T, H, W) or (T, H, W, 1|3), got shape {frames.shape}")


def select_frames(times: np.ndarray, fps: float = FPS) -> np.ndarray:
    """Indices of the source frames shown at times 0, 1/fps, 2/fps, ... (frame-selection resampling).

    ``times``: (N,) increasing start times in seconds of the source frames (the first is the video's
    start). The output covers the source's duration: round(N x fps / source fps) frames, the source
    rate estimated from the times (mean frame interval).
    """
    times = np.asarray(times, dtype=np.float64)
    if len(times) < 2:
        return np.zeros(len(times), dtype=np.int64)
    source_fps = (len(times) - 1) / (times[-1] - times[0])
    count = max(1, round(len(times) * fps / source_fps))
    wanted = times[0] + np.arange(count) / fps
    # A hair of tolerance: a frame due at 0.04 s stamped 0.0399999 is the one shown at 0.04 s.
    index = np.searchsorted(times, wanted + 1e-6, side="right") - 1
    return np.clip(index, 0, len(times) - 1)


def check_fps_policy(policy: str) -> str:
    if policy not in FPS_POLICIES:
        raise ValueError(f"fps policy must be one of {', '.join(FPS_POLICIES)}, got '{policy}'")
    return policy


def read_video(path: str | Path, fps_policy: str = "refuse") -> np.ndarray:
    """uint8 grey frames (T, H, W) at 25 fps of a ``.npy`` or any file FFmpeg decodes; T >= 1."""
    check_fps_policy(fps_policy)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError("no such file")
    if path.suffix.lower() == ".npy":
        frames = to_grey(np.load(path, allow_pickle=False))
    else:
        frames = conform_fps(*decode(path), fps_policy)
    if frames.shape[0] == 0:
        raise ValueError("the video has no frames")
    return frames


def frame_count(path: str | Path) -> int:
    """The number of frames ``read_video`` gives, with its checks. A ``.npy`` is only memory-mapped: its
    header, its dtype and shape, and a file long enough for them (a file cut short raises), not its
    frames read (LRS3's 433 h of mouth crops are ~300 GB); any other video is decoded."""
    path = Path(path)
    if path.suffix.lower() != ".npy":
        return len(read_video(path))
    if not path.is_file():
        raise FileNotFoundError("no such file")
    frames = np.load(path, mmap_mode="r", allow_pickle=False)
    if frames.dtype != np.uint8:
        raise ValueError(f"expected uint8 frames, got {frames.dtype}")
    if not (frames.ndim == 3 or (frames.ndim == 4 and frames.shape[-1] in (1, 3))):
        raise ValueError(f"expected frames (T, H, W) or (T, H, W, 1|3), got shape {frames.shape}")
    if frames.shape[0] == 0:
        raise ValueError("the video has no frames")
    return frames.shape[0]


def conform_fps(frames: np.ndarray, times: np.ndarray, rate: Fraction, fps_policy: str):
    """``frames`` (decoded at ``rate``, starting at ``times``) at 25 fps under ``fps_policy``.

    Works on anything indexed by frame (e.g. mouth crops made from the decoded frames).
    """
    if not needs_resampling(rate, fps_policy):
        return frames
    return frames[select_frames(times)]


def needs_resampling(rate: Fraction, fps_policy: str) -> bool:
    """False at 25 fps; True for another rate under the 'resample' policy; ValueError under 'refuse'."""
    if abs(rate - FPS) <= FPS_TOLERANCE:
        return False
    if check_fps_policy(fps_policy) == "refuse":
        raise ValueError(
            f"frame rate {float(rate):.3f} fps, expected {FPS} (convert the video, or "
            "resample by frame selection with the 'resample' fps policy)"
        )
    return True


def decode(path: str | Path) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """(uint8 grey frames (T, H, W), their start times in s, nominal frame rate) of the first video
    stream, T >= 1, at the file's own rate."""
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise ValueError("no video stream")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            if not rate:
                raise ValueError("the video stream declares no frame rate")
            frames, times = [], []
            for k, frame in enumerate(container.decode(stream)):
                # grey one frame at a time: a long clip's RGB frames in float32 took ~1.1 MB a 224x224
                # frame at once (1.6 GB for a minute), its grey frames take 50 KB
                frames.append(to_grey(frame.to_ndarray(format="rgb24")[None])[0])
                times.append(frame.time if frame.time is not None else k / float(rate))
    except av.error.FFmpegError as e:
        raise ValueError(f"cannot decode: {e}") from None
    if not frames:
        raise ValueError("the video has no frames")
    return np.stack(frames), np.asarray(times, dtype=np.float64), Fraction(rate)


def write_video(path: str | Path, frames: np.ndarray, fps: float = FPS, codec: str = "libx264"):
    """Encode uint8 grey (T, H, W) or RGB (T, H, W, 3) frames (even H and W for yuv420p) with PyAV."""
    import av

    rgb = frames if frames.ndim == 4 else np.repeat(frames[..., None], 3, axis=-1)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height = rgb.shape[2], rgb.shape[1]
        stream.pix_fmt = "yuv420p"
        if codec == "libx264":
            stream.options = {"crf": "0", "preset": "ultrafast"}  # lossless luma: exact tests
        container.start_encoding()  # the header even without frames (zero-frame test files)
        for image in rgb:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
