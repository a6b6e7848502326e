"""LRS3 reader on the committed fixture (release layout, landmark pickles, ROI videos) and on bad input."""

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from lrs3_fixtures import DOT, FIXTURE, MOUTH, UTTERANCES, draw_face, face_landmarks

from espnet_ext.data import lrs3
from espnet_ext.data.datadir import validate_data_dir
from espnet_ext.data.video import write_video


def read_table(path: Path) -> dict:
    return dict(line.split(" ", 1) for line in path.read_text(encoding="utf-8").splitlines())


def run(out, *extra, source=FIXTURE / "landmarks", root=FIXTURE / "lrs3"):
    """lrs3.main on all parts; ``source``: a landmark dir, or a ROI dir (named roi*)."""
    argv = ["--lrs3", str(root), "--out", str(out), "--parts", "pretrain,trainval,test"]
    if Path(source).name.startswith("roi"):
        argv += ["--roi", str(source)]
    else:
        argv += ["--landmarks", str(source), "--mean_face", str(FIXTURE / "mean_face.npy")]
    return lrs3.main(argv + list(extra))


@pytest.fixture(scope="module")
def from_landmarks(tmp_path_factory):
    out = tmp_path_factory.mktemp("lrs3") / "data"
    assert run(out, "--nj", "2") == 0
    return out


def test_data_dirs_list_88x88_rois_with_released_text_and_video_speakers(from_landmarks):
    for part, videos in UTTERANCES.items():
        directory = from_landmarks / part
        expected = {
            f"{vid}-{name}": clip for vid, clips in videos.items() for name, clip in clips.items()
        }
        assert validate_data_dir(directory, require=("video.scp", "text", "utt2spk")) == sorted(
            expected
        )
        texts, scp = read_table(directory / "text"), read_table(directory / "video.scp")
        frames = read_table(directory / "utt2num_frames")
        for utt, (num_frames, words) in expected.items():
            assert texts[utt] == " ".join(w for w, _, _ in words)  # upper case, as released
            assert read_table(directory / "utt2spk")[utt] == utt.rsplit("-", 1)[0]
            rois = np.load(scp[utt])
            assert Path(scp[utt]).is_absolute() and rois.dtype == np.uint8
            assert rois.shape == (num_frames, 88, 88) and frames[utt] == str(num_frames)
            # The bright dot drawn at the mouth centre is at the ROI centre.
            bright = np.argwhere(rois.max(axis=0) > (DOT + MOUTH) / 2)
            assert np.abs(bright.mean(axis=0) - 43.5).max() < 2.5


def test_precropped_roi_videos_give_the_same_crops(from_landmarks, tmp_path):
    assert run(tmp_path / "data", source=FIXTURE / "roi") == 0
    for part in UTTERANCES:
        ours = read_table(from_landmarks / part / "video.scp")
        theirs = read_table(tmp_path / "data" / part / "video.scp")
        assert sorted(ours) == sorted(theirs)
        for utt in ours:
            a, b = np.load(ours[utt]).astype(int), np.load(theirs[utt]).astype(int)
            # The ROI videos were cropped with every landmark detected (H.264-coded); the pickles
            # lack every third frame: interpolation gets within a few grey levels on average.
            assert a.shape == b.shape and np.abs(a - b).mean() < 4


def test_long_pretrain_clips_are_cut_at_pauses_like_avhubert(tmp_path):
    assert run(tmp_path / "data", "--pretrain_max_seconds", "1.0", "--lowercase") == 0
    directory = tmp_path / "data" / "pretrain"
    texts = read_table(directory / "text")
    assert texts == {"5eQ_tL8vR2c-00004_0": "hello there", "5eQ_tL8vR2c-00004_1": "good bye"}
    # Cut half-way through the 0.5 s pause: 0.65 s -> frame 16 of 30.
    assert read_table(directory / "utt2num_frames") == {
        "5eQ_tL8vR2c-00004_0": "16",
        "5eQ_tL8vR2c-00004_1": "14",
    }
    assert read_table(directory / "utt2spk")["5eQ_tL8vR2c-00004_1"] == "5eQ_tL8vR2c"


def test_pretrain_pieces_by_hand():
    words = tuple(
        lrs3.Word(w, s, e)
        for w, s, e in ([("A", 0.0, 5.0), ("B", 5.1, 9.0), ("C", 10.0, 16.0), ("D", 16.2, 20.0)])
    )
    transcript = lrs3.Transcript("A B C D", words)
    assert lrs3.pretrain_pieces(transcript) == [
        lrs3.Piece("_0", "A B", 0.0, 9.5),
        lrs3.Piece("_1", "C D", 9.5, None),
    ]
    assert lrs3.pretrain_pieces(transcript, max_seconds=20.5) == [
        lrs3.Piece("", "A B C D", 0.0, None)
    ]


def copy_fixture(tmp_path) -> Path:
    root = tmp_path / "lrs3"
    shutil.copytree(FIXTURE / "lrs3", root)
    return root


def fails(tmp_path, root, match, *extra, source=FIXTURE / "landmarks"):
    with _Capture() as capture:
        code = run(tmp_path / "data", *extra, source=source, root=root)
    assert code == 1
    assert capture.matches(match), capture.text
    return capture


class _Capture:
    """stderr of lrs3.main."""

    def __enter__(self):
        import contextlib
        import io

        self.buffer = io.StringIO()
        self._redirect = contextlib.redirect_stderr(self.buffer)
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc):
        self._redirect.__exit__(*exc)
        self.text = self.buffer.getvalue()

    def matches(self, pattern):
        import re

        return re.search(pattern, self.text) is not None


def test_txt_without_text_line_names_file_and_line_and_writes_no_data_dir(tmp_path):
    root = copy_fixture(tmp_path)
    bad = root / "test" / "0Fi83BHQsMA" / "00003.txt"
    bad.write_text("Conf:  4\n\nWORD START END ASDSCORE\n")
    fails(tmp_path, root, f"{bad}:1: expected the first line to start with 'Text:'")
    assert (tmp_path / "data" / "trainval").is_dir() and not (tmp_path / "data" / "test").exists()
    table = root / "trainval" / "Zq0kLm4Pw1E" / "00001.txt"
    table.write_text("Text:  I KNOW\nConf:  4\n\nWORD START END ASDSCORE\nI 0.00\n")
    fails(tmp_path, root, f"{table}:5: expected 'WORD START END ASDSCORE'")


def test_corrupt_and_empty_videos_name_the_file(tmp_path):
    root = copy_fixture(tmp_path)
    mp4 = root / "trainval" / "Zq0kLm4Pw1E" / "00001.mp4"
    mp4.write_bytes(mp4.read_bytes()[:300])
    fails(tmp_path, root, f"{mp4}: cannot use the video")
    write_video(mp4, np.zeros((0, 96, 128), np.uint8))
    fails(tmp_path, root, f"{mp4}: cannot use the video: .*(no video stream|no frames)")


def test_other_frame_rates_are_refused_or_resampled(tmp_path):
    root = copy_fixture(tmp_path)
    mp4 = root / "test" / "0Fi83BHQsMA" / "00003.mp4"
    landmarks = face_landmarks(10)
    write_video(mp4, np.stack([draw_face(p) for p in landmarks]), fps=50)  # 0.2 s
    fails(tmp_path, root, f"{mp4}: cannot use the video: frame rate 50.000 fps, expected 25")
    roi = tmp_path / "roi"
    shutil.copytree(FIXTURE / "roi", roi)
    roi_mp4 = roi / "test" / "0Fi83BHQsMA" / "00003.mp4"
    write_video(roi_mp4, np.zeros((10, 96, 96), np.uint8), fps=50)
    fails(tmp_path, root, f"{roi_mp4}: cannot use the ROI video: frame rate 50.000", source=roi)
    # Resampled by frame selection: 10 frames at 50 fps -> 5 at 25 fps, from either source.
    landmark_dir = tmp_path / "landmarks"
    shutil.copytree(FIXTURE / "landmarks", landmark_dir)
    (landmark_dir / "test" / "0Fi83BHQsMA" / "00003.pkl").write_bytes(pickle.dumps(landmarks))
    for source in (landmark_dir, roi):
        assert run(tmp_path / "data", "--fps_policy", "resample", source=source, root=root) == 0
        frames = read_table(tmp_path / "data" / "test" / "utt2num_frames")
        assert frames == {"0Fi83BHQsMA-00003": "5"}


def test_landmark_problems_name_the_landmark_file(tmp_path):
    landmarks = tmp_path / "landmarks"
    shutil.copytree(FIXTURE / "landmarks", landmarks)
    pkl = landmarks / "test" / "0Fi83BHQsMA" / "00003.pkl"
    pkl.write_bytes(pickle.dumps([None] * 5))
    argv = ["--lrs3", str(FIXTURE / "lrs3"), "--out", str(tmp_path / "data"), "--parts", "test"]
    argv += ["--landmarks", str(landmarks), "--mean_face", str(FIXTURE / "mean_face.npy")]
    with _Capture() as capture:
        assert lrs3.main(argv) == 1
    assert (
        f"{pkl}: no mouth ROIs" in capture.text
        and "no landmarks in any of the 5 frames" in capture.text
    )
    shifted = face_landmarks(5)
    for points in shifted:  # the mouth far below the eyes and nose: the crop leaves the frame
        points[48:68, 1] += 25
    pkl.write_bytes(pickle.dumps(shifted))
    with _Capture() as capture:
        assert lrs3.main(argv) == 1
    assert "frame 0: the 96x96 mouth crop" in capture.text
    pkl.unlink()
    with _Capture() as capture:
        assert lrs3.main(argv) == 1
    assert f"{pkl}: no landmark file for clip 'test/0Fi83BHQsMA/00003'" in capture.text
    assert not (tmp_path / "data" / "test").exists()


def test_bad_options_and_layout(tmp_path):
    root = copy_fixture(tmp_path)
    (root / "test" / "0Fi83BHQsMA" / "00003.txt").unlink()
    fails(tmp_path, root, "missing '00003.txt' next to its pair")
    argv = [
        "--lrs3",
        str(root),
        "--out",
        str(tmp_path / "d"),
        "--landmarks",
        str(FIXTURE / "landmarks"),
    ]
    with _Capture() as capture:
        assert lrs3.main(argv) == 1
    assert "--landmarks needs --mean_face" in capture.text
    with _Capture() as capture:
        assert (
            lrs3.main(argv + ["--mean_face", str(FIXTURE / "mean_face.npy"), "--parts", "dev"]) == 1
        )
    assert "--parts: unknown dev" in capture.text


def test_pretrain_words_beyond_the_video_are_an_error(tmp_path):
    root = copy_fixture(tmp_path)
    txt = root / "pretrain" / "5eQ_tL8vR2c" / "00004.txt"
    txt.write_text(
        "Text:  HELLO THERE LATE\nConf:  4\n\nWORD START END ASDSCORE\n"
        "HELLO 0.00 0.20 5.5\nTHERE 0.22 0.40 6.5\nLATE 2.00 3.00 7.5\n"
    )
    fails(
        tmp_path,
        root,
        f"{txt}: 'LATE' from 1.20 s has no frames in the 30-frame video",
        "--pretrain_max_seconds",
        "1.0",
    )
    assert not (tmp_path / "data" / "pretrain").exists()


def avhubert_layout(tmp_path, kind: str) -> Path:
    """The fixture's landmark (kind "landmarks") or ROI (kind "roi", as .npy) dir in AV-HuBERT's layout:
    the pretrain clip's files per piece under short-pretrain/ (the pieces of --pretrain_max_seconds 1.0:
    frames 0-16 and 16-30), the other parts as released."""
    from espnet_ext.data.video import read_video

    source = tmp_path / f"{kind}_avhubert"
    for part in ("trainval", "test"):
        shutil.copytree(FIXTURE / kind / part, source / part)
    pieces = source / "short-pretrain" / "5eQ_tL8vR2c"
    pieces.mkdir(parents=True)
    if kind == "landmarks":
        with open(FIXTURE / "landmarks/pretrain/5eQ_tL8vR2c/00004.pkl", "rb") as f:
            whole = pickle.load(f)
        for k, span in enumerate((slice(0, 16), slice(16, 30))):
            with open(pieces / f"00004_{k}.pkl", "wb") as f:
                pickle.dump(whole[span], f)
    else:
        whole = read_video(FIXTURE / "roi/pretrain/5eQ_tL8vR2c/00004.mp4")
        for k, span in enumerate((slice(0, 16), slice(16, 30))):
            np.save(pieces / f"00004_{k}.npy", whole[span])
    return source


@pytest.mark.parametrize("kind", ["landmarks", "roi"])
def test_pretrain_files_per_piece_as_avhubert_writes_them(tmp_path, kind):
    cut = ("--pretrain_max_seconds", "1.0")
    assert run(tmp_path / "whole", *cut, source=FIXTURE / kind) == 0
    source = avhubert_layout(tmp_path, kind)
    assert run(tmp_path / "pieces", *cut, source=source) == 0
    whole = read_table(tmp_path / "whole" / "pretrain" / "video.scp")
    pieces = read_table(tmp_path / "pieces" / "pretrain" / "video.scp")
    assert sorted(pieces) == sorted(whole) == ["5eQ_tL8vR2c-00004_0", "5eQ_tL8vR2c-00004_1"]
    for utt in whole:
        a, b = np.load(whole[utt]).astype(int), np.load(pieces[utt]).astype(int)
        assert a.shape == b.shape
        if kind == "roi":  # the same frames, cut before or after
            assert (a == b).all()
        else:  # landmark smoothing (12 frames) sees only the piece's own frames near its end
            assert np.abs(a - b).mean() < 4
    # a missing piece file is named before any video is decoded
    (
        source
        / "short-pretrain"
        / "5eQ_tL8vR2c"
        / ("00004_1.pkl" if kind == "landmarks" else "00004_1.npy")
    ).unlink()
    capture = fails(tmp_path, FIXTURE / "lrs3", "no file for piece _1 of clip", *cut, source=source)
    assert "short-pretrain/5eQ_tL8vR2c/00004_1" in capture.text
    assert not (tmp_path / "data").exists()  # no part written: checked up front


def test_avhubert_dev_id_list_selects_trainval_clips(tmp_path):
    """--valid_ids: AV-HuBERT's lrs3-valid.id lines (trainval/<video-id>/<nnnnn>) -> our utterance ids."""
    ids = tmp_path / "lrs3-valid.id"
    ids.write_text("trainval/Zq0kLm4Pw1E/00001\ntrainval/aB3-x_Yz09Q/00002\n")
    out = tmp_path / "data"
    assert run(out, "--valid_ids", str(ids)) == 0
    assert (out / "trainval_valid_ids").read_text().split() == [
        "Zq0kLm4Pw1E-00001",
        "aB3-x_Yz09Q-00002",
    ]
    assert "Zq0kLm4Pw1E-00001" in read_table(out / "trainval" / "text")


@pytest.mark.parametrize(
    "lines,message,line",
    [
        ("trainval/aB3-x_Yz09Q/00001\ntrainval/aB3-x_Yz09Q/00009\n", "no clip of the LRS3", 2),
        ("trainval/aB3-x_Yz09Q\n", "is not <part>/<video-id>/<nnnnn>", 1),
        ("test/0Fi83BHQsMA/00003\n", "dev ids are trainval clips", 1),
        ("trainval/Zq0kLm4Pw1E/00001\n\ntrainval/Zq0kLm4Pw1E/00001\n", "listed twice", 3),
        ("\n", "no ids", None),
        (
            "trainval/aB3-x_Yz09Q/00001\ntrainval/aB3-x_Yz09Q/00002\ntrainval/Zq0kLm4Pw1E/00001\n",
            "none is left for training",
            None,
        ),
    ],
)
def test_bad_dev_id_lists_name_file_and_line_before_any_video(
    tmp_path, capsys, lines, message, line
):
    ids = tmp_path / "lrs3-valid.id"
    ids.write_text(lines)
    out = tmp_path / "data"
    assert run(out, "--valid_ids", str(ids)) != 0
    err = capsys.readouterr().err
    assert message in err and (f"{ids}:{line}" in err if line else str(ids) in err)
    assert not (out / "trainval").exists()  # refused before decoding


def test_dev_id_list_needs_the_trainval_part(tmp_path, capsys):
    ids = tmp_path / "lrs3-valid.id"
    ids.write_text("trainval/Zq0kLm4Pw1E/00001\n")
    argv = ["--lrs3", str(FIXTURE / "lrs3"), "--out", str(tmp_path / "d"), "--parts", "test",
            "--roi", str(FIXTURE / "roi"), "--valid_ids", str(ids)]  # fmt: skip
    assert lrs3.main(argv) != 0
    assert "add trainval to --parts" in capsys.readouterr().err


def test_roi_size_96_keeps_avhubert_whole_crops_around_the_88_ones(from_landmarks, tmp_path):
    """--roi_size 96: align_mouth.py's whole 96x96 crop (for training-time random crops); its centre is the
    default 88x88 ROI."""
    assert run(tmp_path / "data", "--roi_size", "96") == 0
    for part in UTTERANCES:
        wide = read_table(tmp_path / "data" / part / "video.scp")
        narrow = read_table(from_landmarks / part / "video.scp")
        for utt, path in wide.items():
            rois = np.load(path)
            assert rois.shape[1:] == (96, 96)
            np.testing.assert_array_equal(rois[:, 4:92, 4:92], np.load(narrow[utt]))
    # ROI videos of 88x88 cannot give 96x96 crops
    assert run(tmp_path / "roi88", "--roi_size", "96", source=FIXTURE / "roi") != 0


# Resuming and sharding (the real-size preparation: hours of crops, jobs killed at their time limit)

TABLES = ("video.scp", "text", "utt2spk", "spk2utt", "utt2num_frames")
CLIPS = sorted(
    f"{vid}-{name}" for videos in UTTERANCES.values() for vid in videos for name in videos[vid]
)


@pytest.fixture()
def cropped(monkeypatch):
    """The clips (utterance ids) cropped in this process from now on, in order."""
    calls = []
    for name in ("clip_rois", "piece_rois"):
        crop = getattr(lrs3, name)

        def counting(clip, *args, crop=crop):
            calls.append(clip.utt_id)
            return crop(clip, *args)

        monkeypatch.setattr(lrs3, name, counting)
    return calls


def tables(out: Path) -> dict:
    """Every part's tables, video.scp paths relative to the crops' root (<out>/video)."""
    got = {}
    for part in UTTERANCES:
        for table in TABLES:
            rows = read_table(out / part / table)
            if table == "video.scp":
                rows = {
                    utt: str(Path(path).relative_to(out / "video")) for utt, path in rows.items()
                }
            got[part, table] = rows
    return got


def test_a_rerun_after_an_interruption_crops_only_the_unfinished_clips(tmp_path, cropped):
    out = tmp_path / "data"
    assert run(out) == 0
    before = tables(out)
    scp = {
        utt: Path(path)
        for part in UTTERANCES
        for utt, path in read_table(out / part / "video.scp").items()
    }
    frames = {utt: np.load(path) for utt, path in scp.items()}
    # Killed mid-way: two clips not done yet, one of them with its temp file (atomic_write's) left behind.
    unfinished = ["Zq0kLm4Pw1E-00001", "0Fi83BHQsMA-00003"]
    for utt in unfinished:
        scp[utt].unlink()
    leftover = scp[unfinished[0]].with_name(f".{scp[unfinished[0]].name}.x1y2z3.tmp")
    leftover.write_bytes(b"\x93NUMPY half")
    done = {utt: path.stat().st_mtime_ns for utt, path in scp.items() if utt not in unfinished}
    cropped.clear()
    assert run(out) == 0
    assert sorted(cropped) == sorted(unfinished)  # the others are not decoded again
    assert {utt: scp[utt].stat().st_mtime_ns for utt in done} == done
    assert tables(out) == before
    for utt, path in scp.items():
        np.testing.assert_array_equal(np.load(path), frames[utt])
    assert not leftover.exists()


def test_a_crop_file_cut_short_is_made_again(tmp_path, cropped):
    out = tmp_path / "data"
    assert run(out, source=FIXTURE / "roi") == 0
    path = Path(read_table(out / "test" / "video.scp")["0Fi83BHQsMA-00003"])
    path.write_bytes(
        path.read_bytes()[:200]
    )  # a crash after the rename, before the data hit the disk
    cropped.clear()
    assert run(out, source=FIXTURE / "roi") == 0
    assert cropped == ["0Fi83BHQsMA-00003"]
    assert np.load(path).shape == (5, 88, 88)


def test_other_crop_options_crop_afresh_beside_the_earlier_crops(tmp_path, cropped, capsys):
    out = tmp_path / "data"
    assert run(out) == 0
    first = {part: read_table(out / part / "video.scp") for part in UTTERANCES}
    cropped.clear()
    assert run(out, "--lowercase") == 0  # the text only, not the crops
    assert cropped == []
    assert read_table(out / "test" / "text") == {"0Fi83BHQsMA-00003": "thank you"}
    assert run(out, "--pretrain_max_seconds", "1.0") == 0  # pretrain's cut only
    assert cropped == ["5eQ_tL8vR2c-00004"]
    assert read_table(out / "trainval" / "video.scp") == first["trainval"]
    capsys.readouterr()
    cropped.clear()
    assert run(out, "--roi_size", "96") == 0
    assert sorted(cropped) == CLIPS
    for part in UTTERANCES:
        for utt, path in read_table(out / part / "video.scp").items():
            assert np.load(path).shape[1:] == (96, 96)
            assert np.load(first[part][utt]).shape[1:] == (
                88,
                88,
            )  # kept, for what was made from them
    earlier = Path(first["test"]["0Fi83BHQsMA-00003"]).parent
    assert f"note: {earlier} holds test crops made with other options" in capsys.readouterr().err
    assert json.loads((earlier / "options.json").read_text())["roi_size"] == 88
    # another mean face, and the ROI videos instead of the landmarks
    face = tmp_path / "face.npy"
    np.save(face, np.load(FIXTURE / "mean_face.npy") + 0.5)
    cropped.clear()
    argv = ["--lrs3", str(FIXTURE / "lrs3"), "--out", str(out), "--parts", "test"]
    assert (
        lrs3.main(argv + ["--landmarks", str(FIXTURE / "landmarks"), "--mean_face", str(face)]) == 0
    )
    assert lrs3.main(argv + ["--roi", str(FIXTURE / "roi")]) == 0
    assert cropped == ["0Fi83BHQsMA-00003"] * 2
    assert len(list((out / "video" / "test").glob("*/options.json"))) == 4


def test_shards_partition_the_clips_and_the_last_run_writes_the_single_run_data_dirs(
    tmp_path, cropped
):
    out = tmp_path / "data"
    shards = []
    for k in (1, 2, 3):
        cropped.clear()
        assert run(out, "--shard", f"{k}/3") == 0
        shards.append(set(cropped))
    assert set().union(*shards) == set(CLIPS) and sum(map(len, shards)) == len(CLIPS)
    assert not any((out / part).exists() for part in UTTERANCES)  # crops only
    cropped.clear()
    assert run(out) == 0
    assert cropped == []  # all done by the shards
    assert run(tmp_path / "single") == 0
    assert tables(out) == tables(tmp_path / "single")


def test_shard_clips_is_an_exact_round_robin_partition():
    found = {part: lrs3.find_clips(FIXTURE / "lrs3", part, None, FIXTURE / "roi") for part in
             ("test", "pretrain", "trainval")}  # fmt: skip
    ordered = [clip.utt_id for part in lrs3.PARTS for clip in found[part]]
    for n in (1, 2, 3, 7):
        shards = [lrs3.shard_clips(found, (k, n)) for k in range(1, n + 1)]
        ids = [[clip.utt_id for clips in shard.values() for clip in clips] for shard in shards]
        assert sorted(sum(ids, [])) == sorted(ordered)  # union = all, disjoint
        assert [len(x) for x in ids] == [len(ordered[k::n]) for k in range(n)]


@pytest.mark.parametrize("shard", ["0/2", "3/2", "1", "a/b"])
def test_bad_shards_are_refused(tmp_path, capsys, shard):
    assert run(tmp_path / "data", "--shard", shard) == 1
    assert "--shard" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_check_only_checks_everything_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "data"
    assert run(out, "--check_only") == 0
    assert not out.exists()
    ids = tmp_path / "lrs3-valid.id"
    ids.write_text("trainval/aB3-x_Yz09Q/00009\n")
    assert run(out, "--check_only", "--valid_ids", str(ids)) == 1
    assert f"{ids}:1: 'trainval/aB3-x_Yz09Q/00009' is no clip" in capsys.readouterr().err
