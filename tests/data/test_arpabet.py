"""The fixed phoneme interface vocabulary: g2p_en's own phone set, ids, and g2p of Kaldi text."""

import pytest

from espnet_ext.data import arpabet
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.errors import InputError


def test_the_phone_list_is_g2p_ens_phone_set_after_blank_and_unk():
    from espnet_ext.data.numbers.text import _g2p

    assert arpabet.TOKENS[:2] == ("<blank>", "<unk>")
    assert list(arpabet.PHONES) == _g2p(None).phonemes[4:]  # g2p_en: <pad> <unk> <s> </s> + phones
    assert len(arpabet.TOKENS) == 72


def test_g2p_then_ids(tmp_path):
    (tmp_path / "text").write_text("u1 thirty seven\nu2 it's\n", encoding="utf-8")
    assert (
        arpabet.main(["g2p", "--text", str(tmp_path / "text"), "--out", str(tmp_path / "phn")]) == 0
    )
    assert read_kaldi_map(tmp_path / "phn") == {
        "u1": "TH ER1 D IY2 S EH1 V AH0 N",  # CMUdict: THIRTY  TH ER1 D IY2
        "u2": "IH1 T S",
    }
    assert (
        arpabet.main(["ids", "--phn", str(tmp_path / "phn"), "--out", str(tmp_path / "ids")]) == 0
    )
    ids = read_kaldi_map(tmp_path / "ids")
    assert [arpabet.TOKENS[int(i)] for i in ids["u2"].split()] == ["IH1", "T", "S"]


def test_unknown_phone_names_file_and_line(tmp_path):
    (tmp_path / "phn").write_text("u1 T IY0\nu2 T XX1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"phn:2: key 'u2': 'XX1' is not an ARPAbet phone"):
        arpabet.write_ids(tmp_path / "phn", tmp_path / "ids")
    assert not (tmp_path / "ids").exists()
    (tmp_path / "phn").write_text("u1 <blank>\n", encoding="utf-8")
    with pytest.raises(InputError, match="'<blank>' is not an ARPAbet phone"):
        arpabet.write_ids(tmp_path / "phn", tmp_path / "ids")
