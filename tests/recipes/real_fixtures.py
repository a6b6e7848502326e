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
from tests.fairseq_pickles import fairseq_classes

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
# each language's dev set in its WMT edition (local/data.sh --multilingual_dev), beside an older one of dev/
WMT_DEV = {
    "cs": "newstest2018", "de": "newstest2018", "es": "newstest2012", "et": "newsdev2018", "fi": "newstest2016",
    "fr": "newstest2013", "gu": "newsdev2019", "kk": "newsdev2019", "lt": "newsdev2019", "lv": "newsdev2017",
    "ro": "newsdev2016", "ru": "newstest2018", "tr": "newstest2016", "zh": "newsdev2017",
}  # fmt: skip
# each language's test set (local/data.sh --multilingual_test), beside an older one of test/
WMT_TEST = {
    "cs": "newstest2019", "de": "newstest2019", "es": "newstest2013", "et": "newstest2018", "fi": "newstest2017",
    "fr": "newstest2014", "gu": "newstest2019", "kk": "newstest2019", "lt": "newstest2019", "lv": "newstest2017",
    "ro": "newstest2016", "ru": "newstest2019", "tr": "newstest2017", "zh": "newstest2017",
}  # fmt: skip
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
    """dest/multilingual/<x>-en/{train,dev,test} and dest/wmt14|wmt19|wmt16/... (plain training corpora, sgm
    dev and test sets): the WMT root."""
    for x in WMT_LANGS:
        train = dest / "multilingual" / f"{x}-en" / "train"
        train.mkdir(parents=True)
        for lang in (x, "en"):
            (train / f"corpus.{lang}").write_text("\n".join(_sentences(lang, 4)) + "\n", "utf-8")
        for split, sets in (("dev", WMT_DEV), ("test", WMT_TEST)):
            directory = dest / "multilingual" / f"{x}-en" / split
            directory.mkdir()
            for number, setid in enumerate(("newstest2011", sets[x])):
                # named as WMT names it (the pair in the name from 2014 on)
                base = setid if int(setid[-4:]) < 2014 else f"{setid}-{x}en"
                for side, lang in (("src", x), ("ref", "en")):
                    _write_sgm(directory / f"{base}-{side}.{lang}.sgm", setid, lang,
                               _sentences(lang, 1, 20 + number), ref=side == "ref")  # fmt: skip
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


# LibriSpeech's other two training parts, for the 960 h setup (run.sh --config conf/train_960h.conf): readers
# 14 and 17 are train-clean-360 readers in the fixture's SPEAKERS.TXT; 20 is added, in the same format, as a
# train-other-500 reader.
_LIBRISPEECH_960H_PARTS = {
    "train-clean-360": [
        ("14", "208", ["CHAPTER ONE MISSUS RACHEL LYNDE IS SURPRISED", "SHE LOOKED AT THE OLD CLOCK ON THE WALL"]),
        ("17", "362", ["THE BOAT DRIFTED SLOWLY DOWN THE RIVER", "NOBODY SPOKE FOR A LONG WHILE AFTER THAT"]),
    ],
    "train-other-500": [
        ("20", "205", ["IT WAS THE BEST OF TIMES IT WAS THE WORST OF TIMES", "THE WIND BLEW COLD ACROSS THE MOOR"]),
    ],
}  # fmt: skip
_LIBRISPEECH_960H_READERS = "20   | F | train-other-500  | 30.07 | Fixture Reader\n"


def librispeech_960h_parts(dest: Path) -> Path:
    """Add train-clean-360 and train-other-500 (release format, audio from the reader fixture's generator) to
    the librispeech_release at dest: with train-clean-100, the 960 h setup's three training parts."""
    make = _fixture_module("librispeech_make_fixture", "librispeech/make_fixture.py")
    corpus = dest / "LibriSpeech"
    with open(corpus / "SPEAKERS.TXT", "a", encoding="utf-8") as f:
        f.write(_LIBRISPEECH_960H_READERS)
    for part, chapters in _LIBRISPEECH_960H_PARTS.items():
        for reader, chapter, texts in chapters:
            directory = corpus / part / reader / chapter
            directory.mkdir(parents=True)
            ids = [f"{reader}-{chapter}-{number:04d}" for number in range(len(texts))]
            for utt_id in ids:
                soundfile.write(directory / f"{utt_id}.flac", make.speech_like(utt_id), make.RATE,
                                subtype="PCM_16", format="FLAC")  # fmt: skip
            (directory / f"{reader}-{chapter}.trans.txt").write_text(
                "".join(f"{i} {t}\n" for i, t in zip(ids, texts)), encoding="utf-8"
            )
    return dest


# Scene text (egs/mnist_seq/ocr1 --scene_text true): LMDBs in the deep-text-recognition-benchmark layout (the
# paths local/data.sh reads), labels as the releases have them (mixed case, punctuation).
SCENE_TEXT_TEST_SETS = {
    "IIIT5k_3000": "iiit5k",
    "SVT": "svt",
    "IC03_867": "ic03",
    "IC13_857": "ic13",
    "IC15_1811": "ic15",
    "SVTP": "svtp",
}
_SCENE_TEXT_WORDS = {
    "training/MJ/MJ_train": [
        "Station",
        "coffee",
        "OPEN",
        "Exit!",
        "hotel",
        "Street",
        "parking",
        "Bank",
    ],
    # 16 training images in all, one a part of run.sh's 16 (ESPnet refuses fewer lines than parts)
    "training/ST": ["sale", "PIZZA", "city's", "Route66", "Taxi", "bakery", "EXIT2", "museum"],
    "training/MJ/MJ_valid": ["market", "Stop"],
}


def scene_text_release(dest: Path) -> Path:
    """dest with training/{MJ/MJ_train,MJ/MJ_valid,ST} and evaluation/<six test sets> LMDBs (word crops drawn
    with Pillow's font; two words per test set): the SCENE_TEXT root."""
    from tests.lmdb_fixtures import build_lmdb, word_image

    for path, words in _SCENE_TEXT_WORDS.items():
        build_lmdb(dest / path, [(word_image(w), w) for w in words])
    for number, name in enumerate(SCENE_TEXT_TEST_SETS):
        words = [f"Word{number}", f"sign{number + 1}"]
        build_lmdb(dest / "evaluation" / name, [(word_image(w), w) for w in words])
    return dest


def swin_t_timm_checkpoint(path: Path, **changes) -> Path:
    """An ImageNet-1k Swin-T state dict in timm's layout (``timm.create_model('swin_tiny_patch4_window7_224')``,
    1000-class ``head.fc``; random weights) at ``path``; ``changes``: timm keyword arguments (e.g. the smoke
    run's ``embed_dim``)."""
    import timm
    import torch

    torch.manual_seed(0)
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, **changes)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return path


# mTEDx's other domains (egs/mtedx/{asr1,st1} --tasks domains): CoVoST 2 and Europarl-ST in the languages and
# directions of the paper's Tables 8 and footnotes 3-4 (espnet_ext/data/domains.py TEST_NAMES), as data roots
# of Kaldi dirs train, valid, test_<name> (local/data.sh --other_domains). Their readers' own fixtures hold one
# language or direction each; the pipelines read only the prepared dirs, so the tiny mTEDx talks stand in for
# both corpora here (the domain prefix keeps their ids apart), prepared by mTEDx's reader.
_OTHER_DOMAIN_TRAINED = {  # domain -> ST directions with training talks (the others: test data only)
    "covost": ["es-en", "fr-en", "pt-en", "ru-en"],
    "europarl": ["es-en", "es-fr", "es-it", "es-pt", "fr-en", "fr-es", "fr-pt", "pt-en"],
}


def mtedx_other_domains(dest: Path, release: Path, task: str) -> str:
    """Data roots dest/<task>/<domain> for the ASR (``asr``) or ST (``st``) recipe: the local/data.sh option
    value ``covost=<root>,europarl=<root>``."""
    from espnet_ext.data import mtedx
    from espnet_ext.data.domains import TEST_NAMES

    roots = []
    for domain in ("covost", "europarl"):
        out = dest / task / domain
        names = TEST_NAMES[task][domain].split()
        if task == "asr":
            mtedx.prepare(release, names, mtedx.SPLITS, out)
        else:
            mtedx.prepare_st(release, _OTHER_DOMAIN_TRAINED[domain], names, out)
        roots.append(f"{domain}={out}")
    return ",".join(roots)


def librispeech_lm(dest: Path) -> Path:
    """dest/librispeech-lm-norm.txt.gz, SLR11's normalised LM text (upper case, one sentence a line): the
    LIBRISPEECH_LM root."""
    dest.mkdir(parents=True, exist_ok=True)
    texts = [text for part in _LIBRISPEECH_PARTS.values() for *_, items in part for text in items]
    # Each sentence also run on into the next: enough lines for the real modes' --num_splits_lm (20) parts.
    lines = [text + "\n" for text in texts]
    lines += [f"{a} {b}\n" for a, b in zip(texts, texts[1:] + texts[:1])]
    lines += [f"{b} {a}\n" for a, b in zip(texts, texts[1:] + texts[:1])]
    with gzip.open(dest / "librispeech-lm-norm.txt.gz", "wt", encoding="utf-8") as f:
        f.writelines(lines)
    return dest


# Our lip-reading model's front-end and encoder names -> a pre-trained AVHubertModel's (fairseq names; the
# inverse of espnet_ext/nets/avhubert/checkpoint.py RULES, checked against it when a checkpoint is written).
_TO_FAIRSEQ = [
    (r"frontend\.res_encoder\.(.+)", r"feature_extractor_video.resnet.\1"),
    (r"encoder\.video_proj\.(weight|bias)", r"feature_extractor_video.proj.\1"),
    (r"encoder\.fuse_norm\.(weight|bias)", r"layer_norm.\1"),
    (r"encoder\.post_proj\.(weight|bias)", r"post_extract_proj.\1"),
    (r"encoder\.pos_conv\.(weight_g|weight_v|bias)", r"encoder.pos_conv.0.\1"),
    (r"encoder\.layers\.(\d+)\.self_attn\.linear_(q|k|v)\.(.+)", r"encoder.layers.\1.self_attn.\2_proj.\3"),
    (r"encoder\.layers\.(\d+)\.self_attn\.linear_out\.(.+)", r"encoder.layers.\1.self_attn.out_proj.\2"),
    (r"encoder\.(layers\.\d+\.(?:self_attn_layer_norm|fc1|fc2|final_layer_norm)\..+)", r"encoder.\1"),
    (r"encoder\.layer_norm\.(.+)", r"encoder.layer_norm.\1"),
]  # fmt: skip


def avhubert_checkpoint(path: Path, config: Path, overrides: list[str]) -> dict:
    """A pre-trained AV-HuBERT checkpoint as fairseq writes it (AVHubertModel's tensor names with the audio
    stream and pre-training heads, an omegaconf cfg of AV-HuBERT's dataclass, the task's fairseq
    Dictionary: classes that are not importable when it is read) for the lip-reading ``config`` with the
    training options ``overrides`` (a smoke run's widths), its tensors random: path. Returns the tensors
    under our names (what a model started from it must hold)."""
    import re
    import sys
    import tempfile

    import torch
    from omegaconf import OmegaConf

    from espnet_ext.nets.avhubert import checkpoint
    from espnet_ext.registry import build_model

    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens.txt"
        tokens.write_text("<blank>\n<unk>\na\n<sos/eos>\n", encoding="utf-8")
        torch.manual_seed(20)
        model = build_model(
            "espnet_ext.tasks.lip_reading:LipReadingTask",
            ["--config", str(config), "--token_list", str(tokens), *overrides],
        )
    ours = {k: v for k, v in model.state_dict().items() if k.startswith(checkpoint.LOADED_PREFIXES)}
    state = {}
    for name, tensor in ours.items():
        fairseq_name = next(
            (re.sub(p, t, name) for p, t in _TO_FAIRSEQ if re.fullmatch(p, name)), None
        )
        assert fairseq_name is not None, f"no fairseq name for {name}"
        if tensor.is_floating_point() and "running_var" not in name:
            tensor = tensor + 0.01 * torch.randn_like(tensor)  # not any fresh initialisation
        state[fairseq_name] = tensor
    assert checkpoint.map_names(state)[0].keys() == ours.keys()
    encoder = model.encoder
    dim = encoder.output_size()
    state.update({  # the parts a video-only recognizer leaves out
        "feature_extractor_audio.proj.weight": torch.randn(dim, 104),
        "feature_extractor_audio.proj.bias": torch.zeros(dim),
        "mask_emb": torch.rand(dim),
        "label_embs_concat": torch.rand(504, 256),
        "final_proj.weight": torch.randn(256, dim),
        "final_proj.bias": torch.zeros(256),
    })  # fmt: skip
    cfg = {
        "encoder_layers": len(encoder.layers),
        "encoder_embed_dim": dim,
        "encoder_attention_heads": encoder.layers[0].self_attn.h,
        "layer_norm_first": bool(encoder.layer_norm_first),
        "modality_fuse": str(encoder.modality_fuse),
    }
    modules = fairseq_classes(cfg)
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)  # fairseq "installed" while writing only
    try:
        model_cfg = OmegaConf.structured(modules["avhubert.hubert"].AVHubertConfig())
        dictionary = modules["fairseq.data.dictionary"].Dictionary(
            ["<s>", "<pad>", "</s>", "<unk>"]
        )
        torch.save(
            {
                "model": state,
                "cfg": OmegaConf.create({"model": model_cfg, "task": {"labels": ["km"]}}),
                "task_state": {"dictionaries": [dictionary]},
                "extra_state": {"epoch": 5},
            },
            path,
        )
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return checkpoint.map_names(state)[0]
