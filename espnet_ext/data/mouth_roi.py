"""Mouth regions of interest (ROIs) from facial landmarks, the procedure of AV-HuBERT's preparation.

Inputs, in the format AV-HuBERT's ``detect_landmark.py`` writes: one pickle per video holding a list
with one entry per decoded frame, either a (68, 2) array of (x, y) pixel positions in the iBUG 68-point
scheme (dlib / face_alignment) or None where no face was found; and a reference "mean face", a (68, 2)
``.npy`` in a 256x256 frame (AV-HuBERT uses ``20words_mean_face.npy`` of Ma et al.'s LRW preprocessing).

Per video (``mouth_rois``):

1. Frames without landmarks get them by linear interpolation between the nearest detected frames; the
   first/last detected frame's landmarks extend to the ends. No landmark in any frame is an error
   (AV-HuBERT would fall back to resizing the whole frame, which is no mouth crop at all).
2. Smoothing: frame i is aligned with the mean landmarks of frames i .. i+11 (a window of 12, or the
   whole video when shorter); the last 11 frames reuse the last window's alignment.
3. Alignment: the similarity transform (rotation, uniform scale, translation; least squares, Umeyama
   1991) taking the smoothed stable points (nose tip 33 and eye corners 36, 39, 42, 45) onto the mean
   face's maps the frame into a 256x256 reference frame (bilinear, black outside the image).
4. Crop: 96x96 around the mean of the frame's own mouth landmarks 48-67 (transformed), then the centre
   88x88 (what AV-HuBERT's loader does at test time), grey.

A crop box that sticks out of the 256x256 aligned frame is moved inside when it sticks out by at most
5 pixels (AV-HuBERT's tolerance) and refused beyond that: such a frame has its mouth at the edge of the
picture, and a crop of black border would teach the model nothing. (AV-HuBERT's check for this case
never fires, since the box is moved first; we make the tolerance real.)
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

NUM_LANDMARKS = 68
STABLE_POINTS = [33, 36, 39, 42, 45]  # nose tip, outer/inner corners of both eyes
MOUTH_POINTS = slice(48, 68)
REFERENCE_SIZE = 256  # the aligned frame, square, in the mean face's coordinates
SMOOTHING_WINDOW = 12  # frames
CROP_SIZE = 96
ROI_SIZE = 88
CROP_TOLERANCE = 5  # pixels a crop box may stick out of the aligned frame before it is refused


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickles lists, None and numpy arrays only: a landmark file cannot run code."""

    ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
    }

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(
                f"a landmark file may hold numpy arrays only, not {module}.{name}"
            )
        return super().find_class(module, name)


def load_landmarks(path: str | Path) -> list[np.ndarray | None]:
    """Per-frame landmarks of one video: (68, 2) float64 arrays, None where none were detected.

    ``ValueError`` naming the frame for anything else.
    """
    with open(path, "rb") as f:
        try:
            entries = _NumpyOnlyUnpickler(f).load()
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError) as e:
            raise ValueError(f"not a landmark pickle: {e}") from None
    if not isinstance(entries, (list, tuple)):
        raise ValueError(f"expected a list of per-frame landmarks, got {type(entries).__name__}")
    landmarks = []
    for k, entry in enumerate(entries):
        if entry is None:
            landmarks.append(None)
            continue
        points = np.asarray(entry, dtype=np.float64) if _numeric(entry) else None
        if points is None or points.shape != (NUM_LANDMARKS, 2) or not np.isfinite(points).all():
            shape = getattr(entry, "shape", type(entry).__name__)
            raise ValueError(
                f"frame {k}: expected None or {NUM_LANDMARKS}x2 finite numbers, got {shape}"
            )
        landmarks.append(points)
    return landmarks


def _numeric(entry) -> bool:
    try:
        return np.asarray(entry).dtype.kind in "iuf"
    except (ValueError, TypeError):
        return False


def load_mean_face(path: str | Path) -> np.ndarray:
    """The reference landmarks: a (68, 2) ``.npy`` in the 256x256 aligned frame."""
    face = np.load(path, allow_pickle=False)
    if face.shape != (NUM_LANDMARKS, 2) or face.dtype.kind not in "iuf":
        raise ValueError(
            f"expected a {NUM_LANDMARKS}x2 array of numbers, got {face.dtype} {face.shape}"
        )
    return face.astype(np.float64)


def interpolate_landmarks(landmarks: Sequence[np.ndarray | None]) -> np.ndarray:
    """(T, 68, 2): missing frames linearly interpolated, ends held at the nearest detection."""
    detected = [k for k, points in enumerate(landmarks) if points is not None]
    if not detected:
        raise ValueError(f"no landmarks in any of the {len(landmarks)} frames")
    known = np.stack([landmarks[k] for k in detected])  # (D, 68, 2)
    frames = np.arange(len(landmarks))
    flat = known.reshape(len(detected), -1)
    # np.interp holds the end values constant outside the detected range: the ends rule above.
    columns = [np.interp(frames, detected, flat[:, c]) for c in range(flat.shape[1])]
    return np.stack(columns, axis=1).reshape(len(landmarks), NUM_LANDMARKS, 2)


def similarity_transform(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """(2, 3) matrix [sR | t] minimising sum ||s R src_i + t - dst_i||^2, R a rotation (Umeyama 1991).

    src, dst: (N, 2) corresponding points, N >= 2, src not all equal.
    """
    mean_src, mean_dst = src.mean(axis=0), dst.mean(axis=0)
    src_c, dst_c = src - mean_src, dst - mean_dst
    variance = (src_c**2).sum() / len(src)
    if variance == 0:
        raise ValueError("the stable landmarks coincide: no alignment possible")
    u, singular, vt = np.linalg.svd(dst_c.T @ src_c / len(src))
    d = np.array([1.0, np.sign(np.linalg.det(u @ vt)) or 1.0])  # no reflection
    rotation = u @ np.diag(d) @ vt
    scale = (singular * d).sum() / variance
    shift = mean_dst - scale * rotation @ mean_src
    return np.hstack([scale * rotation, shift[:, None]])


def transform_points(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(N, 2) points mapped by a (2, 3) affine matrix."""
    return points @ matrix[:, :2].T + matrix[:, 2]


def crop_box(center: np.ndarray, size: int, frame_size: int, tolerance: int = CROP_TOLERANCE):
    """Top-left (x, y) of the ``size`` square around ``center`` (rounded), moved inside a square frame
    of ``frame_size`` when it sticks out by at most ``tolerance`` pixels; ValueError beyond that."""
    corner = []
    for axis, c in zip("xy", np.round(center).astype(int)):
        start = c - size // 2
        outside = max(-start, start + size - frame_size, 0)
        if outside > tolerance:
            raise ValueError(
                f"the {size}x{size} mouth crop around {axis}={c} lies {outside} px outside the "
                f"{frame_size}x{frame_size} aligned frame (at most {tolerance} px are moved inside)"
            )
        corner.append(min(max(start, 0), frame_size - size))
    return tuple(corner)


def alignments(landmarks: np.ndarray, mean_face: np.ndarray, window: int = SMOOTHING_WINDOW):
    """(T, 2, 3) per-frame similarity transforms from the smoothed stable points (steps 2 and 3)."""
    count = len(landmarks)
    margin = min(count, window)
    # Mean over frames i .. i+margin-1 for every i with a full window, by cumulative sums.
    cumulative = np.concatenate([np.zeros((1, NUM_LANDMARKS, 2)), np.cumsum(landmarks, axis=0)])
    smoothed = (cumulative[margin:] - cumulative[:-margin]) / margin  # (T - margin + 1, 68, 2)
    target = mean_face[STABLE_POINTS]
    matrices = [similarity_transform(s[STABLE_POINTS], target) for s in smoothed]
    matrices += [matrices[-1]] * (count - len(matrices))
    return np.stack(matrices)


def mouth_rois(
    frames: np.ndarray,
    landmarks: Sequence[np.ndarray | None],
    mean_face: np.ndarray,
    roi_size: int = ROI_SIZE,
) -> np.ndarray:
    """uint8 (T, roi_size, roi_size) mouth crops of grey frames (T, H, W) with their per-frame landmarks:
    the centre of the 96x96 crop (``roi_size`` 96: all of it, as AV-HuBERT's ``align_mouth.py`` stores).

    ``ValueError`` naming the frame when the counts differ, no frame has landmarks, or a crop falls
    outside the aligned frame.
    """
    import cv2

    if len(landmarks) != len(frames):
        raise ValueError(
            f"{len(landmarks)} frames of landmarks for a video of {len(frames)} frames"
        )
    if not 1 <= roi_size <= CROP_SIZE:
        raise ValueError(f"roi_size must be 1..{CROP_SIZE}, got {roi_size}")
    points = interpolate_landmarks(landmarks)
    matrices = alignments(points, mean_face)
    margin = (CROP_SIZE - roi_size) // 2
    rois = np.empty((len(frames), roi_size, roi_size), dtype=np.uint8)
    size = (REFERENCE_SIZE, REFERENCE_SIZE)
    for k, (frame, matrix) in enumerate(zip(frames, matrices)):
        aligned = cv2.warpAffine(frame, matrix, size, flags=cv2.INTER_LINEAR, borderValue=0)
        center = transform_points(matrix, points[k, MOUTH_POINTS]).mean(axis=0)
        try:
            x, y = crop_box(center, CROP_SIZE, REFERENCE_SIZE)
        except ValueError as e:
            raise ValueError(f"frame {k}: {e}") from None
        rois[k] = aligned[y + margin : y + margin + roi_size, x + margin : x + margin + roi_size]
    return rois
