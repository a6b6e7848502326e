"""The CIFAR-100 python-release reader on a fixture in the release's format, and the mini corpus."""

import colorsys
import importlib.util
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from espnet_ext.data import cifar100
from espnet_ext.data.types import decode_image
from espnet_ext.errors import InputError

_SPEC = importlib.util.spec_from_file_location(
    "make_cifar100_fixture",
    Path(__file__).resolve().parents[1] / "fixtures" / "cifar100" / "make_fixture.py",
)
fixture = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fixture)


@pytest.fixture
def release(tmp_path):
    return fixture.write_release(tmp_path / "release")


def read_map(path):
    return dict(line.split(maxsplit=1) for line in Path(path).read_text().splitlines())


def test_read_batch_reshapes_channel_planes(release):
    images, labels, names = cifar100.read_batch(release / "train")
    assert images.shape == (6, 32, 32, 3) and images.dtype == np.uint8
    assert labels.tolist() == [19, 29, 0, 11, 1, 86]
    assert names[2] == "apple_s_000002.png"
    # the fixture's pixel value is (image*40 + channel*80 + row*2 + column) % 256
    assert images[1, 3, 5, 2] == (1 * 40 + 2 * 80 + 3 * 2 + 5) % 256
    assert images[4, 31, 0, 0] == (4 * 40 + 0 + 62 + 0) % 256


def test_prepare_writes_data_dirs_the_image_type_reads(release, tmp_path):
    dirs = cifar100.prepare(release.parent, tmp_path / "data")
    assert [d.name for d in dirs] == ["train", "test"]
    class_list = (tmp_path / "data" / "class_list").read_text().split()
    assert class_list[:3] == ["apple", "aquarium_fish", "baby"] and len(class_list) == 100
    text = read_map(tmp_path / "data" / "test" / "text")
    scp = read_map(tmp_path / "data" / "test" / "image.scp")
    assert list(text.values()) == ["class_49", "class_33", "class_72", "apple"]
    assert list(text) == list(scp)
    images, _, _ = cifar100.read_batch(release / "test")
    decoded = decode_image(scp[list(scp)[2]])  # RGB float in [0, 1]
    np.testing.assert_allclose(decoded, images[2] / 255.0, atol=1e-6)


def test_prepare_extracts_the_tarball(release, tmp_path):
    source = tmp_path / "download"
    source.mkdir()
    with tarfile.open(source / "cifar-100-python.tar.gz", "w:gz") as tar:
        tar.add(release, arcname="cifar-100-python")
    cifar100.prepare(source, tmp_path / "data")
    assert len(read_map(tmp_path / "data" / "train" / "text")) == 6


def rewrite(path, change):
    with open(path, "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    change(batch)
    with open(path, "wb") as f:
        pickle.dump(batch, f, protocol=2)


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda b: b.pop(b"fine_labels"), "fine_labels"),
        (lambda b: b.__setitem__(b"data", b[b"data"][:, :3000]), "data"),
        (lambda b: b.__setitem__(b"filenames", b[b"filenames"][:2]), "filenames"),
        (lambda b: b[b"fine_labels"].__setitem__(0, 100), "fine_labels"),
    ],
)
def test_bad_batches_name_file_and_key(release, tmp_path, change, key):
    rewrite(release / "test", change)
    with pytest.raises(InputError) as error:
        cifar100.prepare(release, tmp_path / "data")
    assert error.value.path == str(release / "test") and key in str(error.value)
    assert not (tmp_path / "data" / "train").exists()  # nothing written before every file was read


def test_bad_meta_names_key(release, tmp_path):
    rewrite(release / "meta", lambda b: b.pop(b"fine_label_names"))
    with pytest.raises(InputError, match="fine_label_names") as error:
        cifar100.prepare(release, tmp_path / "data")
    assert error.value.path == str(release / "meta")


def test_mini_release_is_deterministic_and_learnable_in_format(tmp_path):
    a = cifar100.mini_release(tmp_path / "a", train_per_class=2, test_per_class=1, seed=3)
    b = cifar100.mini_release(tmp_path / "b", train_per_class=2, test_per_class=1, seed=3)
    for name in ("train", "test", "meta"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    images, labels, names = cifar100.read_batch(a / "train")
    assert images.shape == (200, 32, 32, 3)
    assert sorted(labels.tolist()) == sorted(list(range(100)) * 2)
    classes = cifar100.read_class_names(a / "meta")
    assert classes[0] == "red_0" and classes[42] == "green_2" and classes[99] == "rose_9"
    assert all(name.startswith(classes[label] + "_s_") for name, label in zip(names, labels))
    # every image's brightest (ink) pixel has its class' hue, within the jitter
    for image, label in zip(images, labels):
        ink = image.reshape(-1, 3)[image.sum(-1).argmax()] / 255
        hue = colorsys.rgb_to_hsv(*ink)[0]
        assert abs((hue - (label // 10) / 10 + 0.5) % 1.0 - 0.5) <= 0.021, (label, hue)
    assert len({images[i].tobytes() for i in range(20)}) == 20
    dirs = cifar100.prepare(a, tmp_path / "data")
    assert len(read_map(dirs[1] / "text")) == 100


def test_compose_inks_the_digit_in_its_hue_near_the_centre():
    digit = np.zeros((28, 28), np.uint8)
    digit[4:24, 12:16] = 255  # a "1"
    images = [cifar100.compose(digit, 4, np.random.default_rng(seed)) for seed in range(20)]
    for image in images:
        background = image[0, 0].astype(int)
        assert background[0] == background[1] == background[2] <= 0.35 * 255 + 1
        ink_rows, ink_cols = np.nonzero(np.abs(image.astype(int) - background).max(-1) > 60)
        # the stroke, resized to 20 x 24 and shifted by at most 2 pixels around the centre
        assert ink_rows.min() >= 4 - 2 and ink_rows.max() <= 27 + 2
        assert ink_cols.min() >= 13 - 2 and ink_cols.max() <= 18 + 2
        hue = colorsys.rgb_to_hsv(*image[ink_rows[0], ink_cols[0]] / 255)[0]
        assert abs(hue - 0.4) <= 0.021  # green
    assert len({image.tobytes() for image in images}) == 20


def test_prepare_holds_out_a_validation_split_of_train(tmp_path):
    """The checkpoint is picked on images held out of train, never on the test set (issue 34 §3)."""
    release = cifar100.mini_release(tmp_path / "r", train_per_class=3, test_per_class=1, seed=0)
    dirs = cifar100.prepare(release, tmp_path / "data", valid_per_class=1, seed=5)
    assert [d.name for d in dirs] == ["train", "valid", "test"]
    texts = {d.name: read_map(d / "text") for d in dirs}
    classes = cifar100.read_class_names(release / "meta")
    assert sorted(texts["valid"].values()) == sorted(classes)
    assert sorted(texts["train"].values()) == sorted(classes * 2)
    # disjoint images: every training image lands in exactly one of train / valid
    images, _, _ = cifar100.read_batch(release / "train")
    pngs = {
        name: {
            decode_image(p).tobytes()
            for p in read_map(tmp_path / "data" / name / "image.scp").values()
        }
        for name in ("train", "valid")
    }
    assert not pngs["train"] & pngs["valid"]
    assert pngs["train"] | pngs["valid"] == {
        (i / 255.0).astype(np.float32).tobytes() for i in images
    }
    again = cifar100.prepare(release, tmp_path / "again", valid_per_class=1, seed=5)
    assert read_map(again[1] / "text") == texts["valid"]  # the seed fixes the draw


def test_holding_out_every_image_of_a_class_is_refused(release, tmp_path):
    with pytest.raises(InputError, match="cannot hold out 1") as error:
        cifar100.prepare(release, tmp_path / "data", valid_per_class=1)
    assert error.value.key == "fine_labels" and error.value.path == str(release / "train")
    assert not (tmp_path / "data").exists()
