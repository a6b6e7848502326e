"""The multilingual data dirs of egs/wmt/mt1 from a release layout (the mini release's generator writes it:
train plain text, a newsdev sgm dev set, a wmttest xml test set per language)."""

import shutil

import pytest

from espnet_ext.data import wmt_multilingual
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.data.numbers.wmt import WmtSpec, generate
from espnet_ext.errors import ConfigError, InputError

LANGS = ["ro", "de"]  # task ids: ro 0, de 1 (the option's order, not the alphabet's)
DEV = {"de": "newsdev", "ro": "newsdev"}
TEST = {"de": "wmttest", "ro": "wmttest"}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    generate(root, WmtSpec(train_sizes=(("de", 6), ("ro", 3)), valid_size=2, test_size=2))
    # an older dev set beside each language's own: valid must not read it
    for x in LANGS:
        for side, lang in (("src", x), ("ref", "en")):
            shutil.copy(
                root / f"{x}-en/dev/newsdev-{side}.{lang}.sgm",
                root / f"{x}-en/dev/newstest2011-{side}.{lang}.sgm",
            )
    return root


@pytest.mark.parametrize("direction", ["m2o", "o2m"])
def test_each_language_then_combined_with_task_ids(release, tmp_path, direction):
    tagged = wmt_multilingual.prepare_multilingual(release, tmp_path, direction, LANGS, DEV, TEST)
    assert [p.name for p in tagged] == [f"{direction}_train", f"{direction}_valid"] + [
        f"{direction}_test_{x}" for x in LANGS
    ]
    german = read_kaldi_map(tmp_path / f"{direction}_train_de" / "text.mul")
    english = read_kaldi_map(tmp_path / f"{direction}_train_de" / "text.en")
    assert len(german) == 6 and all(i.startswith("de-train-") for i in german)
    release_lines = (release / "de-en/train/train.de-en.de").read_text("utf-8").split("\n")
    assert sorted(german.values()) == sorted(
        filter(None, release_lines)
    )  # the German side is text.mul
    if direction == "o2m":  # the English source starts with the target language's token
        assert all(s.startswith("<2de> ") for s in english.values())
        assert read_kaldi_map(tmp_path / "o2m_train_de" / "text") == german  # text: the target
    else:
        assert not any(s.startswith("<2") for s in english.values())
        assert read_kaldi_map(tmp_path / "m2o_train_de" / "text") == english
    train = read_kaldi_map(tmp_path / f"{direction}_train" / "task_id")
    assert len(train) == 9 and {train[i] for i in train if i.startswith("ro-")} == {"0"}
    assert {train[i] for i in train if i.startswith("de-")} == {"1"}
    for x, task in (("ro", "0"), ("de", "1")):
        valid = read_kaldi_map(tmp_path / f"{direction}_valid_{x}" / "text")
        assert len(valid) == 2 and all(
            i.startswith(f"{x}-newsdev-") for i in valid
        )  # not newstest2011
        test = read_kaldi_map(tmp_path / f"{direction}_test_{x}" / "task_id")
        assert len(test) == 2 and set(test.values()) == {task}


def test_a_missing_test_set_stops_before_any_training_corpus_is_read(release, tmp_path):
    with pytest.raises(
        InputError, match=r"ro-en/test: no ro-en corpus newstest2016 here \(found: wmttest\)"
    ):
        wmt_multilingual.prepare_multilingual(
            release, tmp_path, "m2o", LANGS, DEV, {**TEST, "ro": "newstest2016"}
        )
    assert not list(tmp_path.glob("*train*"))


def test_set_tables_name_every_language():
    table = "de=newstest2018,cs=x,ro=newsdev2016"
    assert wmt_multilingual.set_table(table, ["ro", "de"], "--multilingual_dev", "dev") == {
        "ro": "newsdev2016",
        "de": "newstest2018",
    }
    with pytest.raises(
        ConfigError, match="key '--multilingual_test': names no test set for language 'kk'"
    ):
        wmt_multilingual.set_table("de=a", ["de", "kk"], "--multilingual_test", "test")
    with pytest.raises(ConfigError, match="'de' is not <language>=<set name>"):
        wmt_multilingual.set_table("de", ["de"], "--multilingual_dev", "dev")
