"""espnet_ext.data.domains: another domain's data dirs added to mTEDx's (ST for Table 5, ASR for Table 3)."""

from pathlib import Path

import pytest

from espnet_ext.data import domains, mtedx
from espnet_ext.data.datadir import read_kaldi_map, validate_data_dir
from espnet_ext.errors import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mtedx"


@pytest.fixture
def two_domains(tmp_path):
    """mTEDx's data dirs and, as a second domain, the same release read again (same ids: prefixing needed)."""
    data, other = tmp_path / "data", tmp_path / "other"
    for out in (data, other):
        mtedx.prepare_st(FIXTURE, ["es-en"], ["es-en", "it-en"], out)
    return data, other


def test_domains_combined_with_prefixed_ids_and_domain_tags(two_domains):
    data, other = two_domains
    domains.combine(data, {"europarl": other})
    domain = read_kaldi_map(data / "train" / "domain")
    assert sorted(domain.items()) == [
        ("es-en_yj7-Zq2Lr0k_00000300_00001570", "tedx"),
        ("es-en_yj7-Zq2Lr0k_00001970_00003520", "tedx"),
        ("europarl_es-en_yj7-Zq2Lr0k_00000300_00001570", "europarl"),
        ("europarl_es-en_yj7-Zq2Lr0k_00001970_00003520", "europarl"),
    ]
    text = read_kaldi_map(data / "train" / "text.tgt")
    assert text["europarl_es-en_yj7-Zq2Lr0k_00000300_00001570"] == "Thank you very much."
    segments = read_kaldi_map(data / "train" / "segments")
    assert segments["europarl_es-en_yj7-Zq2Lr0k_00000300_00001570"].startswith(
        "europarl_es-en_yj7-Zq2Lr0k "
    )
    assert "europarl_es-en_yj7-Zq2Lr0k" in read_kaldi_map(data / "train" / "wav.scp")
    validate_data_dir(data / "train", require=("text.src", "text.tgt", "domain", "direction"))
    zero_shot = data / "test_europarl_it-en"
    assert set(read_kaldi_map(zero_shot / "domain").values()) == {"europarl"}
    assert len(read_kaldi_map(zero_shot / "text.tgt")) == 2
    assert not list(data.glob("domains.*"))  # staging removed


def test_bad_domain_roots_change_nothing(two_domains, tmp_path):
    data, other = two_domains
    before = (data / "train" / "text.tgt").read_text()
    with pytest.raises(InputError, match="data dir does not exist"):
        domains.combine(data, {"covost": tmp_path / "missing"})
    (other / "valid" / "text.tgt").unlink()
    with pytest.raises(InputError, match="text.tgt"):
        domains.combine(data, {"covost": other})
    assert (data / "train" / "text.tgt").read_text() == before and not (
        data / "train" / "domain"
    ).exists()
    with pytest.raises(InputError, match="'tedx' is mTEDx's own domain"):
        domains.combine(data, {"tedx": other})
    assert domains.main(["combine", "--data", str(data), "co_vost=x"]) == 1


def test_asr_data_dirs_per_domain_and_language(tmp_path):
    """ASR (Table 3): data dirs with text and lang; a domain's test_<lang> becomes test_<domain>_<lang>."""
    data, other = tmp_path / "data", tmp_path / "other"
    for out in (data, other):
        mtedx.prepare(FIXTURE, ["es", "fr"], ["train", "valid", "test"], out)
    with pytest.raises(InputError, match="text.src"):  # ST's tables are not ASR's
        domains.combine(data, {"covost": other})
    written = domains.combine(data, {"covost": other}, require=("text", "lang"))
    assert {p.name for p in written} == {
        *("train", "valid", "test_covost_es", "test_covost_fr"),
        *(f"{split}_{d}" for split in ("train", "valid") for d in ("tedx", "covost")),
    }
    train = read_kaldi_map(data / "train" / "domain")
    assert sorted(set(train.values())) == ["covost", "tedx"] and len(train) % 2 == 0
    # each domain alone (the "separate" models): its utterances, ids as in the combined dir
    for domain in ("tedx", "covost"):
        alone = read_kaldi_map(data / f"train_{domain}" / "domain")
        assert alone == {u: d for u, d in train.items() if d == domain}
        validate_data_dir(data / f"train_{domain}", require=("text", "lang"))
    lang = read_kaldi_map(data / "test_covost_fr" / "lang")
    assert set(lang.values()) == {"fr"} and all(u.startswith("covost_") for u in lang)
    assert not (
        data / "test_covost"
    ).exists()  # a domain's all-language test dir is not one of its tests


def test_other_domains_test_sets_are_the_papers():
    """CoVoST 2 / Europarl-ST: Table 8's languages (ASR), footnotes 3 and 4's directions (ST)."""
    assert domains.test_sets("st", ["covost"]) == [
        f"test_covost_{src}-en" for src in ("es", "fr", "it", "pt", "ru")
    ]
    europarl = domains.test_sets("st", ["europarl"])
    assert len(europarl) == 11 and "test_europarl_it-es" in europarl
    assert domains.test_sets("asr", ["other", "europarl"])[:4] == [
        "test_other_es", "test_other_it", "test_other_pt", "test_europarl_de",
    ]  # fmt: skip
    assert domains.test_sets("asr", []) == []
    with pytest.raises(InputError, match="unknown domain 'tedx'"):
        domains.test_sets("st", ["tedx"])
