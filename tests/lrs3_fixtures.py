"""A tiny corpus in the LRS3 release layout, with landmark pickles and ROI videos, for the reader tests.

``python tests/lrs3_fixtures.py`` (from the repository root) writes ``tests/fixtures/lrs3/`` once; the
tests read the committed files and use the helpers below to build variants (bad inputs).

Faces are drawn from landmarks: the 68 points of a synthetic mean face (in the 256x256 reference frame)
mapped into each video frame by a known similarity transform, with a dark mouth ellipse through the
mouth points and a bright dot at the mouth centre, so tests can tell where the crop landed.
"""

import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "lrs3"
FRAME = (96, 128)  # height, width of the "camera" frames
SKIN, MOUTH, DOT = 150, 40, 250


def mean_face() -> np.ndarray:
    """(68, 2) synthetic reference landmarks in the 256x256 frame: jaw, brows, nose, eyes, mouth."""
    points = np.zeros((68, 2))
    angles = np.linspace(np.pi * 0.05, np.pi * 0.95, 17)
    points[:17] = np.stack([128 - 100 * np.cos(angles), 110 + 110 * np.sin(angles)], axis=1)
    points[17:27] = np.stack([np.linspace(60, 196, 10), np.full(10, 80.0)], axis=1)  # brows
    points[27:36] = np.stack([np.full(9, 128.0), np.linspace(100, 150, 9)], axis=1)  # nose
    points[33] = (128, 150)  # nose tip
    eyes = np.array([[80, 105], [95, 100], [110, 100], [120, 105], [110, 110], [95, 110]], float)
    points[36:42] = eyes
    points[42:48] = eyes * [-1, 1] + [256, 0]
    mouth = np.linspace(0, 2 * np.pi, 20, endpoint=False)
    points[48:68] = np.stack([128 + 30 * np.cos(mouth), 190 + 12 * np.sin(mouth)], axis=1)
    return points


def similarity(scale: float, angle_deg: float, shift) -> np.ndarray:
    a = np.deg2rad(angle_deg)
    rotation = scale * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return np.hstack([rotation, np.asarray(shift, float)[:, None]])


def face_landmarks(num_frames: int, seed: int = 0) -> list[np.ndarray]:
    """Per-frame landmarks of a face drifting slowly in a FRAME-sized picture."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(num_frames):
        m = similarity(0.4 + 0.002 * k, 5 - 0.5 * k, (18 + 0.5 * k, -20 + 0.3 * k))
        out.append(mean_face() @ m[:, :2].T + m[:, 2] + rng.normal(0, 0.2, (68, 2)))
    return out


def draw_face(points: np.ndarray) -> np.ndarray:
    """uint8 grey FRAME: skin, the mouth polygon dark, a bright dot at the mouth centre."""
    import cv2

    frame = np.full(FRAME, SKIN, np.uint8)
    cv2.fillPoly(frame, [np.round(points[48:60] * 16).astype(np.int32)], MOUTH, cv2.LINE_8, 4)
    center = np.round(points[48:68].mean(axis=0) * 16).astype(int)
    cv2.circle(frame, tuple(int(c) for c in center), 2 * 16, DOT, -1, cv2.LINE_8, 4)
    return frame


def release_txt(words: list[tuple[str, float, float]], conf: int = 4) -> str:
    """An LRS3 .txt: 'Text:', 'Conf:', then the word table with ASD scores."""
    lines = [
        f"Text:  {' '.join(w for w, _, _ in words)}",
        f"Conf:  {conf}",
        "",
        "WORD START END ASDSCORE",
    ]
    lines += [f"{w} {start:.2f} {end:.2f} {5.5 + i:.1f}" for i, (w, start, end) in enumerate(words)]
    return "\n".join(lines) + "\n"


# part -> video id -> utterance -> (frames, words)
UTTERANCES = {
    "trainval": {
        "aB3-x_Yz09Q": {
            "00001": (8, [("THE", 0.02, 0.10), ("FIRST", 0.10, 0.22), ("TIME", 0.22, 0.30)]),
            "00002": (6, [("YES", 0.04, 0.20)]),
        },
        "Zq0kLm4Pw1E": {"00001": (7, [("I", 0.00, 0.05), ("KNOW", 0.05, 0.25)])},
    },
    "test": {"0Fi83BHQsMA": {"00003": (5, [("THANK", 0.00, 0.10), ("YOU", 0.10, 0.18)])}},
    "pretrain": {
        "5eQ_tL8vR2c": {
            "00004": (
                30,
                [
                    ("HELLO", 0.0, 0.2),
                    ("THERE", 0.22, 0.40),
                    ("GOOD", 0.9, 1.0),
                    ("BYE", 1.02, 1.15),
                ],
            )
        }
    },
}


def write_fixture(root: Path = FIXTURE) -> None:
    from espnet_ext.data.mouth_roi import mouth_rois
    from espnet_ext.data.video import write_video

    root.mkdir(parents=True, exist_ok=True)
    np.save(root / "mean_face.npy", mean_face())
    for part, videos in UTTERANCES.items():
        for seed, (vid, utterances) in enumerate(videos.items()):
            for utt, (num_frames, words) in utterances.items():
                for sub in ("lrs3", "landmarks", "roi"):
                    (root / sub / part / vid).mkdir(parents=True, exist_ok=True)
                landmarks = face_landmarks(num_frames, seed)
                frames = np.stack([draw_face(p) for p in landmarks])
                write_video(root / "lrs3" / part / vid / f"{utt}.mp4", frames)
                (root / "lrs3" / part / vid / f"{utt}.txt").write_text(release_txt(words))
                detected = [None if k % 3 == 1 else p for k, p in enumerate(landmarks)]
                with open(root / "landmarks" / part / vid / f"{utt}.pkl", "wb") as f:
                    pickle.dump(detected, f)
                # Pre-cropped ROI videos, as AV-HuBERT's align_mouth.py writes them (96x96 there).
                rois = mouth_rois(frames, landmarks, mean_face())
                write_video(root / "roi" / part / vid / f"{utt}.mp4", rois)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    write_fixture()
