"""Mouth-ROI extraction from landmarks (AV-HuBERT's procedure): alignment, smoothing, interpolation, crop."""

import os
import pickle

import numpy as np
import pytest
from lrs3_fixtures import DOT, MOUTH, draw_face, face_landmarks, mean_face, similarity

from espnet_ext.data import mouth_roi


def test_similarity_transform_recovers_a_known_one_and_matches_opencv():
    cv2 = pytest.importorskip("cv2")
    src = np.random.default_rng(0).uniform(0, 200, (5, 2))
    truth = similarity(1.7, 23.0, (-12.0, 40.0))
    dst = src @ truth[:, :2].T + truth[:, 2]
    np.testing.assert_allclose(mouth_roi.similarity_transform(src, dst), truth, atol=1e-9)
    # With noise: least squares, so no other similarity (OpenCV's robust LMedS one, small
    # perturbations of ours) fits the points better.
    noisy = dst + np.random.default_rng(1).normal(0, 2.0, dst.shape)
    ours = mouth_roi.similarity_transform(src, noisy)
    theirs, _ = cv2.estimateAffinePartial2D(src, noisy, method=cv2.LMEDS)

    def error(m):
        return ((mouth_roi.transform_points(m, src) - noisy) ** 2).sum()

    assert error(ours) <= error(theirs)
    for step in np.eye(6).reshape(6, 2, 3) * 1e-3:
        rotation_step = step.copy()
        rotation_step[:, :2] = [[step[0, 0], -step[1, 0]], [step[1, 0], step[0, 0]]]
        assert error(ours) <= min(error(ours + rotation_step), error(ours - rotation_step))
    # A mirror image is not a similarity: the fit stays a rotation (det > 0).
    mirrored = mouth_roi.similarity_transform(src, src * [-1, 1])
    assert np.linalg.det(mirrored[:, :2]) > 0
    with pytest.raises(ValueError, match="coincide"):
        mouth_roi.similarity_transform(np.ones((5, 2)), src)


def test_missing_landmarks_are_interpolated_and_held_at_the_ends():
    a, b = np.zeros((68, 2)), np.full((68, 2), 3.0)
    got = mouth_roi.interpolate_landmarks([None, a, None, None, b, None])
    np.testing.assert_allclose(got[:, 0, 0], [0, 0, 1, 2, 3, 3])
    with pytest.raises(ValueError, match="no landmarks in any of the 3 frames"):
        mouth_roi.interpolate_landmarks([None, None, None])


def test_alignment_uses_the_mean_of_the_next_12_frames_and_repeats_the_last():
    face = mean_face()
    shifts = np.arange(20, dtype=float)  # frame k: the mean face moved right by k pixels
    landmarks = np.stack([face + [k, 0] for k in shifts])
    matrices = mouth_roi.alignments(landmarks, face)
    # Window of frames i..i+11 has mean shift i + 5.5, undone by the alignment.
    np.testing.assert_allclose(matrices[:9, 0, 2], -(shifts[:9] + 5.5), atol=1e-9)
    np.testing.assert_allclose(matrices[9:, 0, 2], -(8 + 5.5), atol=1e-9)  # last full window
    short = mouth_roi.alignments(landmarks[:4], face)  # shorter than the window: one mean of all
    np.testing.assert_allclose(short[:, 0, 2], -1.5, atol=1e-9)


def test_crop_box_moves_inside_up_to_5_pixels_and_refuses_beyond():
    assert mouth_roi.crop_box(np.array([128.0, 128.4]), 96, 256) == (80, 80)
    assert mouth_roi.crop_box(np.array([45.0, 255.0 - 45]), 96, 256) == (0, 160)  # 3 px out
    assert mouth_roi.crop_box(np.array([43.0, 128.0]), 96, 256) == (0, 80)  # 5 px out: moved
    with pytest.raises(ValueError, match="x=42 lies 6 px outside the 256x256 aligned frame"):
        mouth_roi.crop_box(np.array([42.0, 128.0]), 96, 256)


def test_rois_are_centred_on_the_mouth_of_a_moving_face():
    landmarks = face_landmarks(15)
    frames = np.stack([draw_face(p) for p in landmarks])
    rois = mouth_roi.mouth_rois(frames, landmarks, mean_face())
    assert rois.shape == (15, 88, 88) and rois.dtype == np.uint8
    for roi in rois:
        bright = np.argwhere(roi > (DOT + MOUTH) / 2)
        # The dot drawn at the mouth centre lands at the ROI centre (88 / 2), up to smoothing.
        assert np.abs(bright.mean(axis=0) - 43.5).max() < 1.5
        # The mouth, 60 px wide in the reference frame, is dark across the middle of the ROI.
        assert (roi[44, 20:68] < 100).mean() > 0.5 and roi[5, 5] > 100


def test_roi_errors_name_the_problem():
    landmarks = face_landmarks(4)
    frames = np.stack([draw_face(p) for p in landmarks])
    with pytest.raises(ValueError, match="3 frames of landmarks for a video of 4 frames"):
        mouth_roi.mouth_rois(frames, landmarks[:3], mean_face())
    with pytest.raises(ValueError, match="no landmarks in any of the 4 frames"):
        mouth_roi.mouth_rois(frames, [None] * 4, mean_face())
    # Mouth far below the face: the crop box leaves the aligned frame.
    low_mouth = [p.copy() for p in landmarks]
    for p in low_mouth:
        p[48:68, 1] += 40
    with pytest.raises(ValueError, match="frame 0: the 96x96 mouth crop .* outside"):
        mouth_roi.mouth_rois(frames, low_mouth, mean_face())


def test_landmark_pickles_hold_arrays_or_none_and_nothing_else(tmp_path):
    good = [np.zeros((68, 2)), None, np.ones((68, 2), np.float32)]
    (tmp_path / "good.pkl").write_bytes(pickle.dumps(good))
    loaded = mouth_roi.load_landmarks(tmp_path / "good.pkl")
    assert loaded[1] is None and loaded[2].dtype == np.float64 and loaded[2].shape == (68, 2)
    (tmp_path / "shape.pkl").write_bytes(pickle.dumps([np.zeros((68, 2)), np.zeros((5, 2))]))
    with pytest.raises(ValueError, match="frame 1: expected None or 68x2"):
        mouth_roi.load_landmarks(tmp_path / "shape.pkl")
    (tmp_path / "dict.pkl").write_bytes(pickle.dumps({"frames": good}))
    with pytest.raises(ValueError, match="expected a list"):
        mouth_roi.load_landmarks(tmp_path / "dict.pkl")

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    (tmp_path / "evil.pkl").write_bytes(pickle.dumps([Evil()]))
    with pytest.raises(ValueError, match="numpy arrays only"):
        mouth_roi.load_landmarks(tmp_path / "evil.pkl")
    (tmp_path / "cut.pkl").write_bytes(pickle.dumps(good)[:20])
    with pytest.raises(ValueError, match="not a landmark pickle"):
        mouth_roi.load_landmarks(tmp_path / "cut.pkl")


def test_mean_face_file_is_checked(tmp_path):
    np.save(tmp_path / "face.npy", mean_face())
    np.testing.assert_array_equal(mouth_roi.load_mean_face(tmp_path / "face.npy"), mean_face())
    np.save(tmp_path / "bad.npy", mean_face()[:60])
    with pytest.raises(ValueError, match="68x2"):
        mouth_roi.load_mean_face(tmp_path / "bad.npy")
