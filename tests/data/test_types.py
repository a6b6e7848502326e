"""The image and video data types: decoding against known pixels, located errors, ESPnet's type table."""

import re

import numpy as np
import pytest
from PIL import Image

from espnet_ext.data import types
from espnet_ext.errors import InputError


def write_scp(path, entries):
    """An scp of ``<key> <file>`` lines; entries are (key, file name beside the scp) pairs."""
    path.write_text(
        "".join(f"{key} {path.parent / name if name else ''}\n" for key, name in entries)
    )
    return path


@pytest.fixture()
def gradient():
    """A 6x10 RGB image with distinct values per pixel and channel."""
    rows, cols = np.mgrid[0:6, 0:10]
    return np.stack([rows * 40, cols * 25, (rows + cols) * 10], axis=-1).astype(np.uint8)


def test_png_rgb_and_grey_are_exact(tmp_path, gradient):
    Image.fromarray(gradient).save(tmp_path / "rgb.png")
    Image.fromarray(gradient[..., 1]).save(tmp_path / "grey.png")
    reader = types.ImageScpReader(
        write_scp(tmp_path / "image.scp", [("a", "rgb.png"), ("b", "grey.png")])
    )
    assert list(reader) == ["a", "b"] and len(reader) == 2
    rgb, grey = reader["a"], reader["b"]
    assert rgb.dtype == np.float32 and rgb.shape == (6, 10, 3)
    np.testing.assert_array_equal(rgb, gradient.astype(np.float32) / 255)
    assert grey.shape == (6, 10)
    np.testing.assert_array_equal(grey, gradient[..., 1].astype(np.float32) / 255)


def test_jpeg_16bit_png_and_palette(tmp_path, gradient):
    Image.fromarray(gradient).save(tmp_path / "x.jpg", quality=95)
    deep = (np.arange(60).reshape(6, 10) * 1000).astype(np.uint16)
    Image.fromarray(deep).save(tmp_path / "deep.png")
    Image.fromarray(gradient).convert("P").save(tmp_path / "palette.png")
    reader = types.ImageScpReader(
        write_scp(tmp_path / "image.scp", [("j", "x.jpg"), ("d", "deep.png"), ("p", "palette.png")])
    )
    jpeg = reader["j"]
    assert (
        jpeg.shape == (6, 10, 3) and np.abs(jpeg - gradient / 255).max() < 0.1
    )  # lossy, but close
    np.testing.assert_allclose(reader["d"], deep / 65535, rtol=0, atol=1e-6)
    palette = reader["p"]
    assert palette.shape == (6, 10, 3) and palette.min() >= 0.0 and palette.max() <= 1.0


def test_undecodable_image_names_scp_line_key_and_path(tmp_path, gradient):
    Image.fromarray(gradient).save(tmp_path / "ok.png")
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 4)
    scp = write_scp(
        tmp_path / "image.scp", [("ok", "ok.png"), ("bad", "broken.png"), ("gone", "missing.png")]
    )
    reader = types.ImageScpReader(scp)
    reader["ok"]  # the good one still decodes
    with pytest.raises(InputError) as e:
        reader["bad"]
    assert str(e.value).startswith(
        f"{scp}:2: key 'bad': cannot decode image '{tmp_path / 'broken.png'}'"
    )
    with pytest.raises(InputError, match=re.escape(f"{scp}:3: key 'gone': cannot decode image")):
        reader["gone"]


def test_malformed_scp_is_refused_with_its_line(tmp_path):
    with pytest.raises(
        InputError, match=re.escape(f"{tmp_path / 'a.scp'}:2: expected '<key> <path>'")
    ):
        types.ImageScpReader(write_scp(tmp_path / "a.scp", [("a", "x.png"), ("lonely", None)]))
    duplicate = re.escape(f"{tmp_path / 'b.scp'}:3: key 'a': duplicate key (first on line 1)")
    with pytest.raises(InputError, match=duplicate):
        types.VideoScpReader(
            write_scp(tmp_path / "b.scp", [("a", "x.npy"), ("b", "y.npy"), ("a", "z.npy")])
        )
    (tmp_path / "empty.scp").write_text("\n")
    with pytest.raises(InputError, match="no entries"):
        types.ImageScpReader(tmp_path / "empty.scp")


def test_video_npy_grey_and_rgb(tmp_path):
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 256, size=(5, 8, 8), dtype=np.uint8)
    rgb = rng.integers(0, 256, size=(4, 8, 8, 3), dtype=np.uint8)
    np.save(tmp_path / "grey.npy", grey)
    np.save(tmp_path / "rgb.npy", rgb)
    np.save(tmp_path / "float.npy", grey.astype(np.float32))
    reader = types.VideoScpReader(
        write_scp(tmp_path / "video.scp", [("g", "grey.npy"), ("c", "rgb.npy"), ("f", "float.npy")])
    )
    video = reader["g"]
    assert video.dtype == np.float32 and video.shape == (5, 8, 8)
    np.testing.assert_array_equal(video, grey / np.float32(255))
    luma = (0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]) / 255
    np.testing.assert_allclose(reader["c"], luma, atol=0.5 / 255 + 1e-6)  # rounded to grey levels
    not_uint8 = (
        re.escape(f"{tmp_path / 'video.scp'}:3: key 'f': cannot decode video") + ".*expected uint8"
    )
    with pytest.raises(InputError, match=not_uint8):
        reader["f"]


@pytest.mark.parametrize("suffix,codec", [(".avi", "MJPG"), (".mp4", "mp4v")])
def test_video_files_written_by_opencv_decode(tmp_path, suffix, codec):
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless is not installed")
    levels = [10, 60, 120, 200, 250, 30, 90]
    writer = cv2.VideoWriter(
        str(tmp_path / f"v{suffix}"), cv2.VideoWriter_fourcc(*codec), 25, (16, 12), isColor=True
    )
    assert writer.isOpened(), f"this OpenCV build cannot write {codec}"
    for level in levels:  # flat grey frames survive lossy codecs almost exactly
        writer.write(np.full((12, 16, 3), level, np.uint8))
    writer.release()
    video = types.VideoScpReader(write_scp(tmp_path / "video.scp", [("v", f"v{suffix}")]))["v"]
    assert video.shape == (len(levels), 12, 16) and video.dtype == np.float32
    np.testing.assert_allclose(video.mean(axis=(1, 2)), np.array(levels) / 255, atol=3 / 255)


def test_undecodable_video_names_scp_line_key_and_path(tmp_path):
    (tmp_path / "junk.mp4").write_bytes(b"definitely not a video" * 10)
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY garbage")
    scp = write_scp(
        tmp_path / "video.scp", [("m", "junk.mp4"), ("n", "junk.npy"), ("x", "nope.mp4")]
    )
    reader = types.VideoScpReader(scp)
    for line, key, name in [(1, "m", "junk.mp4"), (2, "n", "junk.npy"), (3, "x", "nope.mp4")]:
        with pytest.raises(InputError) as e:
            reader[key]
        assert str(e.value).startswith(
            f"{scp}:{line}: key '{key}': cannot decode video '{tmp_path / name}'"
        )


def test_our_tasks_dataset_reads_our_types_and_espnets(tmp_path, gradient):
    from espnet2.train.dataset import DATA_TYPES

    from espnet_ext.tasks.abs_ext_task import MediaDataset

    assert "image" not in DATA_TYPES and "video" not in DATA_TYPES  # ESPnet's table is left alone
    Image.fromarray(gradient).save(tmp_path / "a.png")
    write_scp(tmp_path / "image.scp", [("a", "a.png")])
    (tmp_path / "label").write_text("a 3\n")
    dataset = MediaDataset(
        [
            (str(tmp_path / "image.scp"), "image", "image"),
            (str(tmp_path / "label"), "label", "text_int"),
        ]
    )
    key, example = dataset["a"]
    assert isinstance(dataset.loader_dict["image"], types.ImageScpReader)
    np.testing.assert_array_equal(example["image"], gradient / np.float32(255))
    assert example["label"].tolist() == [3]


@pytest.mark.parametrize(
    "mode, options", [("train", {}), ("valid", {"valid_iterator_type": "chunk"})]
)
def test_our_tasks_refuse_espnets_other_iterators(mode, options):
    import argparse

    from espnet_ext.errors import ConfigError
    from espnet_ext.tasks.image_classification import ImageClassificationTask

    args = argparse.Namespace(
        **{"iterator_type": "category", "valid_iterator_type": None, **options}
    )
    if mode == "valid":
        args.iterator_type = "sequence"
    key = "valid_iterator_type" if mode == "valid" else "iterator_type"
    with pytest.raises(ConfigError, match=f"^key '{key}': ImageClassificationTask reads .* only"):
        ImageClassificationTask.build_iter_factory(args, None, mode)


def test_check_scp_decodes_every_image_and_names_the_bad_one(tmp_path):
    from PIL import Image

    from espnet_ext.data.types import check_scp

    good = tmp_path / "a.png"
    Image.fromarray(np.zeros((4, 6), np.uint8)).save(good)
    bad = tmp_path / "b.png"
    bad.write_bytes(b"not an image")
    scp = tmp_path / "image.scp"
    scp.write_text(f"a {good}\n")
    assert check_scp(scp, "image") == 1
    scp.write_text(f"a {good}\nb {bad}\n")
    with pytest.raises(InputError, match=r"image.scp:2: key 'b'"):
        check_scp(scp, "image")


def test_check_command_reports_the_bad_entry_with_status_1(tmp_path, capsys):
    Image.fromarray(np.zeros((4, 6), np.uint8)).save(tmp_path / "a.png")
    scp = tmp_path / "image.scp"
    scp.write_text(f"a {tmp_path / 'a.png'}\n")
    assert types.main(["image", str(scp)]) == 0
    assert capsys.readouterr().out == f"{scp}: 1 images decode\n"
    scp.write_text(f"a {tmp_path / 'a.png'}\nb {tmp_path / 'none.png'}\n")
    assert types.main(["image", str(scp)]) == 1
    assert capsys.readouterr().err.startswith(f"error: {scp}:2: key 'b': ")


def test_video_type_refuses_other_frame_rates_naming_the_line(tmp_path):
    from espnet_ext.data.video import write_video

    write_video(tmp_path / "v30.mp4", np.full((6, 8, 8), 90, np.uint8), fps=30)
    write_video(tmp_path / "v25.mp4", np.full((6, 8, 8), 90, np.uint8), fps=25)
    reader = types.VideoScpReader(
        write_scp(tmp_path / "video.scp", [("a", "v25.mp4"), ("b", "v30.mp4")])
    )
    assert reader["a"].shape == (6, 8, 8)
    with pytest.raises(
        InputError, match=r"video.scp:2: key 'b': .*frame rate 30.000 fps, expected 25"
    ):
        reader["b"]


def test_large_scp_costs_about_its_file_size(tmp_path):
    """A table of millions of images must not hold Python objects per entry (~300 B each, and copied
    into every forked DataLoader worker that reads them): its arrays cost the file's bytes plus < 100 B."""
    import tracemalloc

    n = 100_000
    scp = tmp_path / "image.scp"
    scp.write_text("".join(f"img{i:07d}_word /corpus/{i % 97}/{i}_word.jpg\n" for i in range(n)))
    tracemalloc.start()
    try:
        reader = types.ImageScpReader(scp)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (held - scp.stat().st_size) / n < 100
    assert len(reader) == n and reader.path("img0054321_word") == "/corpus/1/54321_word.jpg"


def test_reader_is_the_mapping_its_scp_lines_give(tmp_path, gradient, monkeypatch):
    """Keys in file order, paths with spaces, non-ASCII keys; with every key hashing alike (the worst
    case of the hash index) lookups and the duplicate check still compare the keys themselves."""
    Image.fromarray(gradient).save(tmp_path / "a b.png")
    Image.fromarray(gradient[..., 0]).save(tmp_path / "c.png")
    lines = f"zé {tmp_path / 'a b.png'}  \n\nb {tmp_path / 'c.png'}\na\t{tmp_path / 'c.png'}\n"
    (tmp_path / "image.scp").write_text(lines)
    for hashing in ("real", "constant"):
        if hashing == "constant":
            monkeypatch.setattr(types, "_key_hash", lambda key: 7)
        reader = types.ImageScpReader(tmp_path / "image.scp")
        assert list(reader) == ["zé", "b", "a"] and len(reader) == 3
        assert reader.path("zé") == str(tmp_path / "a b.png")
        np.testing.assert_array_equal(reader["zé"], gradient / np.float32(255))
        np.testing.assert_array_equal(reader["a"], gradient[..., 0] / np.float32(255))
        assert "b" in reader and "c" not in reader and 3 not in reader
        with pytest.raises(KeyError):
            reader["c"]
        (tmp_path / "dup.scp").write_text("a x\nb y\nc z\nb y\na x\n")
        with pytest.raises(
            InputError, match=r"dup.scp:4: key 'b': duplicate key \(first on line 2\)"
        ):
            types.ImageScpReader(tmp_path / "dup.scp")


def test_keys_to_load_keeps_only_those_entries(tmp_path):
    scp = write_scp(tmp_path / "image.scp", [("a", "a.png"), ("b", "b.png"), ("c", "c.png")])
    reader = types.ImageScpReader(scp, keys_to_load={"c", "a", "elsewhere"})
    assert list(reader) == ["a", "c"] and "b" not in reader
    assert reader.path("c") == str(tmp_path / "c.png")
    with pytest.raises(InputError, match=r"image.scp: key 'x': none of the 2 keys asked for"):
        types.ImageScpReader(scp, keys_to_load={"y", "x"})
    # a job's empty key file, and a key no UTF-8 line can hold
    with pytest.raises(InputError, match=r"image.scp: none of the 0 keys asked for"):
        types.ImageScpReader(scp, keys_to_load=set())
    assert "\ud800" not in reader
