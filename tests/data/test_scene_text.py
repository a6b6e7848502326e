"""LMDB scene-text reader (deep-text-recognition-benchmark layout) on an LMDB built here."""

from collections import Counter

import numpy as np
import pytest
from lmdb_fixtures import build_lmdb as build
from lmdb_fixtures import png

from espnet_ext.data.scene_text import main, normalise_label, read_lmdb
from espnet_ext.errors import InputError


def test_labels_normalised_and_unusable_samples_counted(tmp_path):
    db = build(
        tmp_path / "db", [(png(), "Hello!"), (png(), "naïve"), (png(), "a" * 17), (png(), "ok-2")]
    )
    counts = Counter()
    samples = list(read_lmdb(db, skipped=counts))
    assert [(key, label) for key, _, label in samples] == [
        ("000000001", "hello"),
        ("000000004", "ok2"),
    ]
    assert samples[0][1].shape == (8, 20) and samples[0][1].dtype == np.uint8  # colour -> grey
    assert counts == {"characters outside 0-9a-z": 1, "longer than max_length": 1}
    assert normalise_label("Don't Stop") == "dontstop"


def test_undecodable_image_names_db_and_key(tmp_path):
    db = build(tmp_path / "db", [(png(), "ab"), (b"garbage", "cd")])
    with pytest.raises(InputError, match=r"db: key 'image-000000002': cannot decode"):
        list(read_lmdb(db))
    with pytest.raises(InputError, match="not an LMDB"):
        list(read_lmdb(tmp_path))


def test_command_line_writes_a_data_dir(tmp_path):
    db = build(tmp_path / "IIIT5k", [(png(), "Text"), (png(30), "42")])
    assert main(["--lmdb", str(db), "--out", str(tmp_path / "data" / "test_iiit5k")]) == 0
    text = (tmp_path / "data" / "test_iiit5k" / "text").read_text().splitlines()
    assert text == ["IIIT5k-0 text", "IIIT5k-1 42"]


def test_unusable_test_images_stay_in_the_denominator_as_errors(tmp_path, capsys):
    from espnet_ext.scoring.accuracy import score_accuracy

    samples = [(png(), "ab"), (png(), "naïve"), (png(), "a" * 17), (png(), "!!")]
    db = build(tmp_path / "SVT", samples)
    out = tmp_path / "data" / "test_svt"
    assert main(["--lmdb", str(db), "--out", str(out), "--unusable", "error"]) == 0
    assert "3 unusable kept as errors" in capsys.readouterr().err
    refs = dict(line.split(" ", 1) for line in (out / "text").read_text().splitlines())
    assert len(refs) == 4  # the set's own size: nothing left out of the denominator
    # Whatever the recogniser outputs (at most 16 of 0-9a-z, possibly nothing), only "ab" can be right.
    for hypothesis in ("", "ab", "naive", "a" * 16):
        hyp = tmp_path / "hyp"
        hyp.write_text("".join(f"{key} {hypothesis}\n" for key in refs))
        result = score_accuracy(out / "text", hyp)
        assert result["num_images"] == 4
        assert result["seq_acc"] == (25.0 if hypothesis == "ab" else 0.0)
