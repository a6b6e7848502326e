"""Video decoding (PyAV): grey conversion as OpenCV's, the 25 fps check and frame-selection resampling."""

import numpy as np
import pytest

from espnet_ext.data import video

LEVELS = [20, 40, 60, 80, 100, 120, 140, 160, 180, 200]


def flat_video(path, fps, levels=LEVELS, size=(16, 24)):
    frames = np.stack([np.full(size, level, np.uint8) for level in levels])
    video.write_video(path, frames, fps)
    return path


def levels_of(frames):
    return [int(round(v)) for v in frames.mean(axis=(1, 2))]


def test_grey_conversion_matches_opencv():
    cv2 = pytest.importorskip("cv2")
    rgb = np.random.default_rng(0).integers(0, 256, size=(3, 5, 7, 3), dtype=np.uint8)
    reference = np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in rgb])
    assert np.abs(video.to_grey(rgb).astype(int) - reference).max() <= 1  # OpenCV: fixed point
    assert np.array_equal(video.to_grey(rgb[..., :1]), rgb[..., 0])
    with pytest.raises(ValueError, match="uint8"):
        video.to_grey(rgb.astype(np.float32))
    with pytest.raises(ValueError, match="shape"):
        video.to_grey(rgb[..., :2])


def test_25fps_mp4_decodes_to_its_grey_frames(tmp_path):
    frames = video.read_video(flat_video(tmp_path / "a.mp4", 25))
    assert frames.dtype == np.uint8 and frames.shape == (10, 16, 24)
    # lossless H.264 in yuv420p: grey levels survive up to the limited-range rounding
    assert np.abs(np.array(levels_of(frames)) - LEVELS).max() <= 1


def test_other_frame_rates_are_refused_or_resampled_by_frame_selection(tmp_path):
    for fps in (30, 50, 20):
        path = flat_video(tmp_path / f"v{fps}.mp4", fps)
        with pytest.raises(ValueError, match=f"frame rate {fps}.000 fps, expected 25"):
            video.read_video(path)
        got = levels_of(video.read_video(path, fps_policy="resample"))
        # Output frame k shows the source frame on screen at k / 25 s: index floor(k * fps / 25).
        count = round(len(LEVELS) * 25 / fps)
        expected = [LEVELS[int(k * fps / 25 + 1e-9)] for k in range(count)]
        assert np.abs(np.array(got) - expected).max() <= 1, (fps, got, expected)
    with pytest.raises(ValueError, match="fps policy"):
        video.read_video(path, fps_policy="blend")


def test_select_frames_by_hand():
    thirty = np.arange(10) / 30  # 0.333 s at 30 fps -> 8 frames at 25 fps
    assert video.select_frames(thirty).tolist() == [0, 1, 2, 3, 4, 6, 7, 8]
    twenty = np.arange(4) / 20 + 1.0  # start time offset: relative times count
    assert video.select_frames(twenty).tolist() == [0, 0, 1, 2, 3]
    assert video.select_frames(np.array([0.0])).tolist() == [0]


def test_npy_frames_count_as_25fps(tmp_path):
    rgb = np.random.default_rng(1).integers(0, 256, size=(2, 4, 4, 3), dtype=np.uint8)
    np.save(tmp_path / "c.npy", rgb)
    assert np.array_equal(video.read_video(tmp_path / "c.npy"), video.to_grey(rgb))
    np.save(tmp_path / "empty.npy", np.zeros((0, 4, 4), np.uint8))
    with pytest.raises(ValueError, match="no frames"):
        video.read_video(tmp_path / "empty.npy")


def test_corrupt_missing_and_empty_videos_are_errors(tmp_path):
    good = flat_video(tmp_path / "good.mp4", 25).read_bytes()
    (tmp_path / "cut.mp4").write_bytes(good[: len(good) // 3])
    (tmp_path / "junk.mp4").write_bytes(b"not a video at all" * 20)
    for name in ("cut.mp4", "junk.mp4"):
        with pytest.raises(ValueError):
            video.read_video(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        video.read_video(tmp_path / "missing.mp4")
    for name in ("none.mp4", "none.mkv"):  # mp4 keeps no stream without frames, Matroska does
        video.write_video(tmp_path / name, np.zeros((0, 16, 24), np.uint8))
        with pytest.raises(ValueError, match="no frames|no video stream|End of file"):
            video.read_video(tmp_path / name)
