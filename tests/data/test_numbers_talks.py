"""Numbers-world talks: written in the MuST-C release layout, read back by the real MuST-C reader."""

import filecmp
import shutil

import numpy as np
import pytest
import soundfile

from espnet_ext.data import mustc
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.data.numbers import CorpusSpec, number_to_words, plan_corpus
from espnet_ext.data.numbers.talks import TalkSpec, _speech, generate_talks, main, plan_talks
from espnet_ext.errors import ConfigError

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")
SPEC = TalkSpec(
    CorpusSpec(splits=(("train", 14), ("dev", 5)), seed=3, num_speakers=2),
    segments_per_talk=(3, 5),
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("talks")
    release = generate_talks(root, SPEC, nj=2)
    mustc.prepare(root, "de", ["train", "dev"], root / "data")
    return root, release


def test_release_layout_and_yaml_lines(generated):
    root, release = generated
    assert release == root / "en-de"
    txt = release / "data" / "train" / "txt"
    yaml_lines = (txt / "train.yaml").read_text().splitlines()
    assert len(yaml_lines) == 14 == len((txt / "train.en").read_text().splitlines())
    assert yaml_lines[0].startswith("- {duration: ")
    assert yaml_lines[0].endswith(", uW: 0, speaker_id: spk.1, wav: ted_1.wav}")
    talks = plan_talks(SPEC)
    assert all(1 <= len(t.utterances) <= 5 for t in talks)
    assert sum(len(t.utterances) for t in talks) == 19
    for talk in talks:
        assert len({u.speaker for u in talk.utterances}) == 1
    wavs = sorted(p.name for p in (release / "data" / "train" / "wav").iterdir())
    assert wavs == sorted(f"ted_{t.number}.wav" for t in talks if t.split == "train")


def test_reader_gives_transcripts_and_translations_of_the_planned_numbers(generated):
    root, _ = generated
    numbers = {s: sorted(u.number for u in utts) for s, utts in plan_corpus(SPEC.corpus).items()}
    for split in ("train", "dev"):
        en = read_kaldi_map(root / "data" / split / "text.en")
        de = read_kaldi_map(root / "data" / split / "text.de")
        assert sorted(en.values()) == sorted(number_to_words(n, "en") for n in numbers[split])
        assert sorted(de.values()) == sorted(number_to_words(n, "de") for n in numbers[split])
        word_to_number = {number_to_words(n, "en"): n for n in numbers[split]}
        assert all(de[u] == number_to_words(word_to_number[en[u]], "de") for u in en)
        # The translations are several words (German compounds split), so ST BLEU can be above 0.
        assert sum(len(t.split()) >= 2 for t in de.values()) >= len(de) - 1


def test_segments_cut_each_number_exactly(generated):
    root, _ = generated
    talks = plan_talks(SPEC)
    utterances = {number_to_words(u.number, "en"): u for t in talks for u in t.utterances}
    wavs = read_kaldi_map(root / "data" / "dev" / "wav.scp")
    text = read_kaldi_map(root / "data" / "dev" / "text")
    for line in (root / "data" / "dev" / "segments").read_text().splitlines():
        utt, talk, start, end = line.split()
        audio = soundfile.read(wavs[talk], dtype="int16")[0]
        cut = audio[round(float(start) * 16000) : round(float(end) * 16000)]
        np.testing.assert_array_equal(cut, _speech(utterances[text[utt]]))


def test_deterministic_and_rerun_is_a_no_op(generated, tmp_path):
    _, release = generated
    marker = (release / ".complete").stat().st_mtime_ns
    assert generate_talks(release.parent, SPEC) == release
    assert (release / ".complete").stat().st_mtime_ns == marker
    again = generate_talks(tmp_path, SPEC, nj=1)
    compare = filecmp.dircmp(release / "data", again / "data")
    assert not compare.diff_files and not compare.left_only and not compare.right_only
    for split in ("train", "dev"):
        for sub in ("wav", "txt"):
            names = [p.name for p in (release / "data" / split / sub).iterdir()]
            match, mismatch, errors = filecmp.cmpfiles(
                release / "data" / split / sub, again / "data" / split / sub, names, shallow=False
            )
            assert not mismatch and not errors


def test_command_line_and_bad_settings(tmp_path):
    with pytest.raises(ConfigError, match="target language"):
        TalkSpec(tgt_lang="en")
    with pytest.raises(ConfigError, match="segments per talk"):
        TalkSpec(segments_per_talk=(5, 3))
    args = ["--out", str(tmp_path), "--splits", "train=3", "--segments_per_talk", "2:2"]
    assert main([*args, "--tgt_lang", "es"]) == 0
    assert (tmp_path / "en-es/data/train/txt/train.es").read_text().count("\n") == 3
    assert not (tmp_path / "en-es.tmp").exists()
