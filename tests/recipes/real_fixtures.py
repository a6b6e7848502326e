"""Corpora in the real releases' layouts for the real-mode recipe runs (test_real_modes.py), built from the
committed reader fixtures (tests/fixtures/*): where a recipe's real mode reads parts a reader fixture leaves
out (LibriSpeech's train-clean-100, dev-other, test-other), they are added in the same format, with audio
from the fixture's own generator."""

import gzip
import importlib.util
import pickle
import shutil
from pathlib import Path

import numpy as np
import soundfile

from tests.data.idx_files import write_idx

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
        write_idx(dest / f"{images}{suffix}", digits, compress=compress)
        write_idx(dest / f"{labels}{suffix}", np.arange(count) % 10, compress=compress)
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


# mTEDx: one sentence per talk, one talk per split, for every language and direction of the real recipes
# (egs/mtedx/asr1: 8 languages; egs/mtedx/st1: 10 trained directions and 3 zero-shot ones, test data only).
_MTEDX_SENTENCES = {
    "ar": "شكرا جزيلا", "de": "Vielen Dank", "el": "Ευχαριστώ πολύ", "es": "Muchas gracias",
    "fr": "Merci beaucoup", "it": "Grazie mille", "pt": "Muito obrigado", "ru": "Большое спасибо",
    "en": "Thank you very much",
}  # fmt: skip
_MTEDX_VOICES = {"fr": "fr-fr"}
MTEDX_LANGS = ["ar", "de", "el", "es", "fr", "it", "pt", "ru"]
MTEDX_ST_TRAINED = [
    "el-en",
    "es-en",
    "es-fr",
    "es-it",
    "es-pt",
    "fr-en",
    "fr-es",
    "fr-pt",
    "pt-en",
    "ru-en",
]
MTEDX_ST_ZERO_SHOT = ["it-en", "it-es", "pt-es"]


def mtedx_release(dest: Path) -> Path:
    """dest with <lang>-<lang> (ASR) and <src>-<tgt> (ST) releases in mTEDx's layout, written by the reader
    fixture's own writer (espeak-ng readings, FLAC talks, yaml segment lists); the MTEDX root."""
    make = _fixture_module("mtedx_make_fixture", "mtedx/make_fixture.py")

    def talk(lang: str, split: str, number: int) -> tuple[str, str]:
        return (
            f"{lang}{split[:2]}{number:02d}Tk-0",
            f"{_MTEDX_VOICES.get(lang, lang)}+m{number % 4 + 1}",
        )

    make.TALKS = {
        lang: {
            split: [(*talk(lang, split, n), [_MTEDX_SENTENCES[lang]])]
            for n, split in enumerate(("train", "valid", "test"))
        }
        for lang in MTEDX_LANGS
    }
    make.ST_TALKS = {}
    for pair in MTEDX_ST_TRAINED + MTEDX_ST_ZERO_SHOT:
        src, tgt = pair.split("-")
        splits = ("train", "valid", "test") if pair in MTEDX_ST_TRAINED else ("valid", "test")
        make.ST_TALKS[src, tgt] = {
            split: [(*talk(src, split, n), [(_MTEDX_SENTENCES[src], _MTEDX_SENTENCES[tgt])])]
            for n, split in enumerate(splits)
        }
    for lang, splits in make.TALKS.items():
        for split in splits:
            make.write_split(dest, lang, split)
    for (src, tgt), splits in make.ST_TALKS.items():
        for split in splits:
            make.write_split(dest, src, split, tgt)
    return dest


# WMT (egs/wmt/mt1, layout of local/data.sh): the 14 languages of the multilingual setting and the three
# LegoNN pairs, with dev and test sets under the names WMT ships (the pair in the name from 2014 on).
WMT_LANGS = ["cs", "de", "es", "et", "fi", "fr", "gu", "kk", "lt", "lv", "ro", "ru", "tr", "zh"]
_WMT_LEGO = {  # dir -> (src, tgt, dev set files, test set files): (set, src name, ref name)
    "wmt14/de-en": ("en", "de", [("newstest2013", "newstest2013-src.en.sgm", "newstest2013-ref.de.sgm")], [
        ("newstest2011", "newstest2011-src.en.sgm", "newstest2011-ref.de.sgm"),
        ("newstest2012", "newstest2012-src.en.sgm", "newstest2012-ref.de.sgm"),
        ("newstest2014", "newstest2014-deen-src.en.sgm", "newstest2014-deen-ref.de.sgm"),
        ("newstest2015", "newstest2015-ende-src.en.sgm", "newstest2015-ende-ref.de.sgm"),
        ("newstest2016", "newstest2016-ende-src.en.sgm", "newstest2016-ende-ref.de.sgm")]),
    "wmt19/de-en": ("de", "en", [("newstest2018", "newstest2018-deen-src.de.sgm", "newstest2018-deen-ref.en.sgm")],
                    [("newstest2019", "newstest2019-deen-src.de.sgm", "newstest2019-deen-ref.en.sgm")]),
    "wmt16/ro-en": ("ro", "en", [("newsdev2016", "newsdev2016-roen-src.ro.sgm", "newsdev2016-roen-ref.en.sgm")],
                    [("newstest2016", "newstest2016-roen-src.ro.sgm", "newstest2016-roen-ref.en.sgm")]),
}  # fmt: skip


def _sentences(lang: str, count: int, start: int = 0) -> list[str]:
    return [f"{lang} words number {n} and {n + 1} ." for n in range(start, start + count)]


def _write_sgm(path: Path, setid: str, lang: str, sentences: list[str], ref: bool) -> None:
    tag = "refset" if ref else "srcset"
    segs = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(sentences, 1))
    doc = (
        '<doc sysid="ref" docid="1-news" genre="news">'
        if ref
        else '<doc docid="1-news" genre="news">'
    )
    trg = f' trglang="{lang}"' if ref else ""
    path.write_text(
        f'<{tag} setid="{setid}" srclang="any"{trg}>\n{doc}\n{segs}</doc>\n</{tag}>\n', "utf-8"
    )


def wmt_release(dest: Path) -> Path:
    """dest/multilingual/<x>-en/{train,dev,test} (plain text) and dest/wmt14|wmt19|wmt16/... (plain training
    corpora, sgm dev and test sets): the WMT root."""
    for x in WMT_LANGS:
        for split, count in (("train", 4), ("dev", 1), ("test", 1)):
            directory = dest / "multilingual" / f"{x}-en" / split
            directory.mkdir(parents=True)
            name = {"train": "corpus", "dev": "newsdev", "test": "newstest"}[split]
            for lang in (x, "en"):
                (directory / f"{name}.{lang}").write_text(
                    "\n".join(_sentences(lang, count)) + "\n", "utf-8"
                )
    for sub, (src, tgt, dev, test) in _WMT_LEGO.items():
        root = dest / sub
        (root / "train").mkdir(parents=True)
        for lang in (src, tgt):
            (root / "train" / f"corpus.{lang}").write_text(
                "\n".join(_sentences(lang, 6)) + "\n", "utf-8"
            )
        for split, sets in (("dev", dev), ("test", test)):
            (root / split).mkdir()
            for number, (setid, src_name, ref_name) in enumerate(sets):
                _write_sgm(
                    root / split / src_name, setid, src, _sentences(src, 1, 10 + number), ref=False
                )
                _write_sgm(
                    root / split / ref_name, setid, tgt, _sentences(tgt, 1, 10 + number), ref=True
                )
    return dest


LRS3_FIXTURE = FIXTURES / "lrs3"


def voxceleb2_mouth_crops(dest: Path) -> Path:
    """A prepared VoxCeleb2-en data dir (video.scp + utt2spk, the form egs/lrs3/vsr1 takes with
    --voxceleb2_dir) of mouth crops: the LRS3 fixture's cropped pretrain and trainval videos under VoxCeleb2
    ids."""
    dest.mkdir(parents=True)
    videos = sorted((LRS3_FIXTURE / "roi").glob("[pt]*/*/*.mp4"))
    ids = [f"id{n:05d}-vox-{n:05d}" for n in range(len(videos))]
    (dest / "video.scp").write_text("".join(f"{i} {v}\n" for i, v in zip(ids, videos)), "utf-8")
    (dest / "utt2spk").write_text("".join(f"{i} {i.split('-')[0]}\n" for i in ids), "utf-8")
    return dest
