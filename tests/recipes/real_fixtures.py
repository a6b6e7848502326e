"""Corpora in the real releases' layouts for the real-mode recipe runs (test_real_modes.py), built from the
committed reader fixtures (tests/fixtures/*): where a recipe's real mode reads parts a reader fixture leaves
out (LibriSpeech's train-clean-100, dev-other, test-other), they are added in the same format, with audio
from the fixture's own generator."""

import gzip
import importlib.util
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import soundfile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _fixture_module(name: str, relative: str):
    spec = importlib.util.spec_from_file_location(name, FIXTURES / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# LibriSpeech parts the reader fixture lacks: part -> (reader, chapter, [transcripts]); readers as the
# release's SPEAKERS.TXT lists them (19 and 60 are in the fixture's, 116 and 1688 are added).
_LIBRISPEECH_PARTS = {
    "train-clean-100": [
        ("19", "198", ["HE HOPED THERE WOULD BE STEW FOR DINNER", "STUFF IT INTO YOU HIS BELLY COUNSELLED HIM",
                       "NOR IS MISTER QUILTER'S MANNER LESS INTERESTING THAN HIS MATTER"]),
        ("60", "121082", ["HARANGUE THE TIRESOME PRODUCT OF A TIRELESS TONGUE",
                          "HUGH'S WRITTEN A DELIGHTFUL PART FOR HER", "HE TELLS US THAT AT THIS FESTIVE SEASON"]),
    ],
    "dev-other": [("116", "288045", ["AS I APPROACHED THE CITY I HEARD BELLS RINGING"])],
    "test-other": [("1688", "142285", ["THERE THEY SAT IN THE LAMPLIGHT"])],
}  # fmt: skip
_LIBRISPEECH_READERS = (
    "116  | M | dev-other        | 8.00  | Steve Karafit\n"
    "1688 | M | test-other       | 8.00  | Mark\n"
)


def librispeech_release(dest: Path) -> Path:
    """dest/LibriSpeech with the five parts of the 100 h setup (the reader fixture's dev-clean and
    test-clean, the others added in the release format) and the SLR11 LM text: the LIBRISPEECH (=
    LIBRISPEECH_LM) root."""
    make = _fixture_module("librispeech_make_fixture", "librispeech/make_fixture.py")
    corpus = dest / "LibriSpeech"
    shutil.copytree(FIXTURES / "librispeech" / "LibriSpeech", corpus)
    with open(corpus / "SPEAKERS.TXT", "a", encoding="utf-8") as f:
        f.write(_LIBRISPEECH_READERS)
    lm_lines = []
    for part, chapters in _LIBRISPEECH_PARTS.items():
        for reader, chapter, texts in chapters:
            directory = corpus / part / reader / chapter
            directory.mkdir(parents=True)
            lines = []
            for number, text in enumerate(texts):
                utt_id = f"{reader}-{chapter}-{number:04d}"
                soundfile.write(directory / f"{utt_id}.flac", make.speech_like(utt_id), make.RATE,
                                subtype="PCM_16", format="FLAC")  # fmt: skip
                lines.append(f"{utt_id} {text}\n")
                lm_lines.append(text.lower() + "\n")
            (directory / f"{reader}-{chapter}.trans.txt").write_text(
                "".join(lines), encoding="utf-8"
            )
    with gzip.open(dest / "librispeech-lm-norm.txt.gz", "wt", encoding="utf-8") as f:
        f.writelines(lm_lines)
    return dest


def _write_idx(path: Path, array, compress: bool) -> None:
    header = struct.pack(">I", {3: 2051, 1: 2049}[array.ndim]) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    data = header + array.astype(np.uint8).tobytes()
    if compress:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def mnist_release(dest: Path) -> Path:
    """dest with the MNIST idx files (training set gzipped, test set raw, as both circulate): 20 training
    and 10 test digits, two of each class, stroke-like blobs on a black ground."""
    dest.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for (images, labels), count, compress in (
        (("train-images-idx3-ubyte", "train-labels-idx1-ubyte"), 20, True),
        (("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"), 10, False),
    ):
        digits = np.zeros((count, 28, 28))
        digits[:, 6:22, 9:19] = rng.integers(0, 256, (count, 16, 10))
        suffix = ".gz" if compress else ""
        _write_idx(dest / f"{images}{suffix}", digits, compress)
        _write_idx(dest / f"{labels}{suffix}", np.arange(count) % 10, compress)
    return dest


def cifar100_release(dest: Path) -> Path:
    """dest/cifar-100-python in the release format (the reader fixture's writer): two training images of
    every class (so that one per class can be held out for validation, as the real recipe holds out 50)
    and two test images; the CIFAR100 root."""
    make = _fixture_module("cifar100_make_fixture", "cifar100/make_fixture.py")
    out = dest / "cifar-100-python"
    out.mkdir(parents=True)
    content = {
        "meta": {
            b"fine_label_names": [n.encode() for n in make.NAMES],
            b"coarse_label_names": [f"super_{n}".encode() for n in range(20)],
        },
        "train": make.batch(b"training batch 1 of 1", list(range(100)) * 2, 0),
        "test": make.batch(b"testing batch 1 of 1", [3, 42], 200),
    }
    for name, value in content.items():
        with open(out / name, "wb") as f:
            pickle.dump(value, f, protocol=2)
    return dest
