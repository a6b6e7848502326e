"""LMDB scene-text reader (deep-text-recognition-benchmark layout) on an LMDB built here."""

import tracemalloc
from collections import Counter

import numpy as np
import pytest
from lmdb_fixtures import build_lmdb as build
from lmdb_fixtures import png

from espnet_ext.data import mnist, scene_text
from espnet_ext.data.scene_text import main, normalise_label, read_lmdb
from espnet_ext.data.types import decode_image
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


def test_data_dir_keeps_the_keys_labels_and_pixels_of_the_samples(tmp_path, capsys):
    # 12 samples, 3 unusable: the 9 kept get one-digit ids (the width counts kept samples, not num-samples).
    samples = [(png(10 + k, 20 * k), f"W{k}!") for k in range(9)] + [(png(), "a" * 17)] * 3
    db = build(tmp_path / "MJ", samples)
    out = tmp_path / "data" / "st_mj"
    assert main(["--lmdb", str(db), "--out", str(out), "--prefix", "mj"]) == 0
    assert "9 images; 3 unusable skipped: {'longer than max_length': 3}" in capsys.readouterr().err
    assert (out / "text").read_text().splitlines() == [f"mj-{k} w{k}" for k in range(9)]
    scp = [line.split(" ", 1) for line in (out / "image.scp").read_text().splitlines()]
    assert [key for key, _ in scp] == [f"mj-{k}" for k in range(9)]
    for (key, path), (_, grey, _) in zip(scp, read_lmdb(db), strict=True):
        assert path == str(out.resolve() / "images" / "0" / f"{key}.png")
        np.testing.assert_array_equal(decode_image(path) * 255, grey)
    assert sorted(p.name for p in tmp_path.joinpath("data").iterdir()) == ["st_mj"]  # no leftovers


def peak_conversion_memory(db, out) -> int:
    tracemalloc.start()
    try:
        assert main(["--lmdb", str(db), "--out", str(out)]) == 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_conversion_streams_and_shards_the_image_directory(tmp_path, monkeypatch):
    # Small limits, so that a few thousand images cross many directory shards and database reopenings.
    monkeypatch.setattr(scene_text, "LMDB_CHUNK", 700)
    monkeypatch.setattr(mnist, "IMAGES_PER_DIR", 500)
    image = png()
    # A first conversion imports what the converter needs, so that the peaks compared are the conversion's.
    peak_conversion_memory(build(tmp_path / "warm_up", [(image, "ab")]), tmp_path / "out")
    peaks = {}
    for count in (1000, 5000):
        db = build(tmp_path / f"db{count}", ((image, f"w{n % 97}") for n in range(count)))
        peaks[count] = peak_conversion_memory(db, tmp_path / f"out{count}")
    # Holding the decoded images (the converter did) adds ~400 bytes per image: ~1.5 MB for 4000 more.
    assert peaks[5000] < peaks[1000] + 200_000, peaks
    out = tmp_path / "out5000"
    shards = sorted((out / "images").iterdir(), key=lambda d: int(d.name))
    assert [d.name for d in shards] == [str(k) for k in range(10)]
    assert all(len(list(d.iterdir())) == 500 for d in shards)
    keys = [line.split()[0] for line in (out / "image.scp").read_text().splitlines()]
    assert keys == [f"db5000-{n:04d}" for n in range(5000)]  # every sample once, in order


def test_shards_partition_the_samples_and_combine_to_the_whole_conversion(
    tmp_path, monkeypatch, capsys
):
    from espnet_ext.data.datadir import combine_data_dirs

    # Small chunks, so that the shards' first samples are looked up in chunks after the first one.
    monkeypatch.setattr(scene_text, "LMDB_CHUNK", 4)
    # 30 samples, 9 unusable (the first, the last, every fourth): 21 usable, two-digit ids.
    samples = [
        (png(10 + k, 8 * k), "a" * 17 if k % 4 == 0 or k == 29 else f"w{k}") for k in range(30)
    ]
    db = build(tmp_path / "MJ", samples)
    assert main(["--lmdb", str(db), "--out", str(tmp_path / "whole"), "--prefix", "mj"]) == 0
    assert "21 images; 9 unusable skipped" in capsys.readouterr().err
    shards, skipped = [], 0
    for k in range(1, 5):
        shards.append(tmp_path / "shards" / str(k))
        argv = ["--lmdb", str(db), "--out", str(shards[-1]), "--prefix", "mj", "--shard", f"{k}/4"]
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert f"(shard {k}/4 of 21)" in err
        skipped += int(err.split("; ")[1].split()[0])
    assert skipped == 9  # every unusable sample counted by one shard

    def table(directory, name):
        return (directory / name).read_text().splitlines()

    # Contiguous ranges, sizes 5, 5, 5, 6, in order: the shards' ids are the whole set's, each once.
    keys = [[line.split()[0] for line in table(shard, "text")] for shard in shards]
    assert [len(part) for part in keys] == [5, 5, 5, 6]
    assert sum(keys, []) == [line.split()[0] for line in table(tmp_path / "whole", "text")]
    combined = tmp_path / "combined"
    assert combine_data_dirs(combined, shards) == 21
    assert table(combined, "text") == table(tmp_path / "whole", "text")

    def pngs(directory):
        return {
            key: open(path, "rb").read()
            for key, path in (line.split(" ", 1) for line in table(directory, "image.scp"))
        }

    assert pngs(combined) == pngs(tmp_path / "whole")


@pytest.mark.parametrize(
    "shard, message",
    [
        ("2", "--shard must be K/N"),
        ("a/b", "--shard must be K/N"),
        ("0/2", "--shard 0/2: K must be 1..N"),
        ("3/2", "--shard 3/2: K must be 1..N"),
    ],
)
def test_bad_shard_is_refused_before_anything_is_written(tmp_path, capsys, shard, message):
    db = build(tmp_path / "MJ", [(png(), "ab")] * 3)
    out = tmp_path / "out"
    assert main(["--lmdb", str(db), "--out", str(out), "--shard", shard]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists() and not out.with_name("out.tmp").exists()


def test_shards_beyond_the_usable_samples_write_nothing_and_the_rest_combine(tmp_path, capsys):
    """A small set (MJ_valid of a test corpus) over more jobs than samples: the empty shards succeed
    without a data dir, and the others hold every sample with the one-job ids."""
    db = build(tmp_path / "MJ", [(png(), "ab"), (png(), "a-b"), (png(), "cd")])
    outs = [tmp_path / f"out{k}" for k in range(1, 5)]
    for k, out in enumerate(outs, 1):
        assert main(["--lmdb", str(db), "--out", str(out), "--shard", f"{k}/4"]) == 0
    assert "shard 1/4 holds none of the 3 usable samples: no data dir" in capsys.readouterr().err
    written = [out for out in outs if out.exists()]
    assert [out.name for out in written] == ["out2", "out3", "out4"]
    keys = [line.split()[0] for out in written for line in (out / "text").read_text().splitlines()]
    assert keys == ["MJ-0", "MJ-1", "MJ-2"]
