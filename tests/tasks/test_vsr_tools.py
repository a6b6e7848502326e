"""The video pipeline's helpers: the video check stage (vsr_prepare) and vsr_inference's decoding config."""

import numpy as np
import pytest

from espnet_ext.bin import vsr_inference, vsr_prepare
from espnet_ext.errors import ConfigError, InputError


def write_set(tmp_path, videos):
    data = tmp_path / "data"
    data.mkdir()
    rows = []
    for key, frames in videos.items():
        path = tmp_path / f"{key}.npy"
        np.save(path, frames)
        rows.append(f"{key} {path}")
    (data / "video.scp").write_text("\n".join(rows) + "\n")
    (data / "text").write_text("".join(f"{key} one\n" for key in videos))
    return data


def test_prepare_counts_frames_and_copies_tables(tmp_path):
    data = write_set(
        tmp_path, {"a": np.zeros((7, 8, 8), np.uint8), "b": np.zeros((3, 8, 8), np.uint8)}
    )
    assert vsr_prepare.prepare(data, tmp_path / "dump") == 2
    assert (tmp_path / "dump" / "utt2num_frames").read_text() == "a 7\nb 3\n"
    assert (tmp_path / "dump" / "text").read_text() == (data / "text").read_text()


@pytest.mark.parametrize(
    "content,suffix", [(b"\x93NUMPY broken", ".npy"), (b"GIF89a not a video", ".gif")]
)
def test_prepare_refuses_a_video_it_cannot_decode_and_writes_nothing(tmp_path, content, suffix):
    data = write_set(tmp_path, {"a": np.zeros((4, 8, 8), np.uint8)})
    bad = tmp_path / f"b{suffix}"
    bad.write_bytes(content)
    with (data / "video.scp").open("a") as scp:
        scp.write(f"b {bad}\n")
    with pytest.raises(InputError, match=r"video\.scp:2: key 'b': cannot decode video"):
        vsr_prepare.prepare(data, tmp_path / "dump")
    assert not (tmp_path / "dump").exists() and not (tmp_path / "dump.tmp").exists()


def test_decoding_config_under_the_command_line(tmp_path):
    config = tmp_path / "decode.yaml"
    config.write_text("beam_size: 7\nlm_weight: 0.15\nctc_weight: 0.5\n")
    base = ["--data_path_and_name_and_type", "x.scp,video,video", "--model_file", "m.pth",
            "--output_file", "out"]  # fmt: skip
    args = vsr_inference.parse_args(base + ["--config", str(config), "--beam_size", "3"])
    assert (args.beam_size, args.lm_weight, args.ctc_weight) == (3, 0.15, 0.5)
    config.write_text("beam_size: 7\nnbest: 2\n")
    with pytest.raises(ConfigError, match=r"decode\.yaml: unknown option\(s\) nbest"):
        vsr_inference.parse_args(base + ["--config", str(config)])


def test_npy_frames_are_counted_from_their_header_and_a_cut_file_is_refused(tmp_path, monkeypatch):
    # LRS3's mouth crops: ~300 GB, never read whole to be counted; a file cut short still fails here
    from espnet_ext.data import types

    data = write_set(
        tmp_path, {"a": np.zeros((7, 8, 8), np.uint8), "b": np.zeros((5, 8, 8, 3), np.uint8)}
    )
    monkeypatch.setattr(types, "decode_video", None)  # nothing decodes a .npy whole
    monkeypatch.setattr(np, "load", _mapped_only(np.load))
    assert vsr_prepare.prepare(data, tmp_path / "dump") == 2
    assert (tmp_path / "dump" / "utt2num_frames").read_text() == "a 7\nb 5\n"
    whole = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "a.npy").write_bytes(whole[: len(whole) - 10])
    with pytest.raises(InputError, match=r"video\.scp:1: key 'a': cannot decode video"):
        vsr_prepare.prepare(data, tmp_path / "dump2")
    np.save(tmp_path / "a.npy", np.zeros((7, 8, 8), np.float32))
    with pytest.raises(InputError, match="expected uint8 frames"):
        vsr_prepare.prepare(data, tmp_path / "dump3")


def _mapped_only(load):
    def mapped(*args, **kwargs):
        assert kwargs.get("mmap_mode") == "r", "a .npy read whole"
        return load(*args, **kwargs)

    return mapped
