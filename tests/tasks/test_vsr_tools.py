"""The video pipeline's helpers: the video check stage (vsr_prepare), vsr_inference's decoding config and its
resumable jobs."""

import json
import os
import re

import numpy as np
import pytest
from test_lip_reading import corpus, decode, training_options  # noqa: F401 (corpus: a fixture)

from espnet_ext.bin import vsr_inference, vsr_prepare
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.tasks.lip_reading import LipReadingTask


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


def test_prepare_split_over_jobs_counts_what_one_job_counts(tmp_path):
    rng = np.random.default_rng(0)
    videos = {f"u{i}": np.zeros((int(rng.integers(2, 9)), 8, 8), np.uint8) for i in range(7)}
    data = write_set(tmp_path, videos)
    assert vsr_prepare.prepare(data, tmp_path / "one") == 7
    lines = (data / "video.scp").read_text().splitlines()
    parts = []
    for job in range(3):  # utils/pipeline.sh split_keys: round-robin
        keys = tmp_path / f"keys.{job + 1}.scp"
        keys.write_text("".join(line + "\n" for line in lines[job::3]))
        parts.append(tmp_path / f"frames.{job + 1}")
        vsr_prepare.main(
            ["--data_dir", str(data), "--key_file", str(keys), "--part_out", str(parts[-1])]
        )
    vsr_prepare.main(["--data_dir", str(data), "--out_dir", str(tmp_path / "split"), "--parts"]
                     + [str(p) for p in parts])  # fmt: skip
    one, split = (tmp_path / d / "utt2num_frames" for d in ("one", "split"))
    assert split.read_text() == one.read_text()
    assert (tmp_path / "split" / "text").read_text() == (data / "text").read_text()
    # a part lost (a job's output removed) refuses the merge, naming the first uncounted key's scp line
    with pytest.raises(InputError, match=r"video\.scp:2: key 'u1': counted by no part"):
        vsr_prepare.prepare(data, tmp_path / "lost", parts[:1] + parts[2:])
    assert not (tmp_path / "lost").exists()
    # (line 2: a part's first line is its signature)
    with pytest.raises(InputError, match=r"frames\.1:2: key 'u0': counted twice"):
        vsr_prepare.prepare(data, tmp_path / "twice", parts + parts[:1])


def test_a_job_names_the_video_scp_line_of_a_bad_video_and_writes_no_part(tmp_path, capsys):
    data = write_set(
        tmp_path, {"a": np.zeros((4, 8, 8), np.uint8), "b": np.zeros((3, 8, 8), np.uint8)}
    )
    (tmp_path / "b.npy").write_bytes(b"\x93NUMPY broken")
    keys = tmp_path / "keys.2.scp"
    keys.write_text(f"b {tmp_path / 'b.npy'}\n")  # line 1 of the job's keys, line 2 of video.scp
    part = tmp_path / "frames.2"
    with pytest.raises(InputError, match=r"video\.scp:2: key 'b': cannot decode video"):
        vsr_prepare.count_frames(data, keys)
    assert (
        vsr_prepare.main(
            ["--data_dir", str(data), "--key_file", str(keys), "--part_out", str(part)]
        )
        == 1
    )
    assert re.search(r"video\.scp:2: key 'b': cannot decode video", capsys.readouterr().err)
    assert not part.exists()


def test_an_interrupted_job_resumes_where_it_stopped(corpus, tiny_run_options, monkeypatch):  # noqa: F811
    exp = corpus / "exp"
    LipReadingTask.main(cmd=training_options(corpus, tiny_run_options, exp) + ["--max_epoch", "1"])
    test = corpus / "data" / "test"
    whole = corpus / "whole"
    decode(corpus, exp, test, whole / "text", score_file=whole / "score")

    searched = []
    build = vsr_inference.build_beam_search

    def killed_after(k):  # the beam search of the k+1-th video dies (a time limit, a node failure)
        def counted(model, args):
            search = build(model, args)

            def run(**kwargs):
                if len(searched) == k:
                    raise KeyboardInterrupt
                searched.append(1)
                return search(**kwargs)

            return run

        return counted

    out = corpus / "resumed"
    journal = out / "journal"
    options = dict(score_file=out / "score", resume_file=journal)
    monkeypatch.setattr(vsr_inference, "build_beam_search", killed_after(3))
    with pytest.raises(KeyboardInterrupt):
        decode(corpus, exp, test, out / "text", **options)
    assert not (out / "text").exists() and not (out / "score").exists()  # nothing looks finished
    assert (
        len(journal.read_text().splitlines()) == 1 + 3
    )  # the signature, then a line per video decoded
    with journal.open("a") as f:
        f.write('{"key": "t0')  # a line cut by the kill
    searched.clear()
    monkeypatch.setattr(vsr_inference, "build_beam_search", killed_after(100))
    decode(corpus, exp, test, out / "text", **options)
    assert len(searched) == 8 - 3  # only the videos the first run had not decoded
    assert (out / "text").read_text() == (whole / "text").read_text()
    assert (out / "score").read_text() == (whole / "score").read_text()
    # A finished job's rerun decodes nothing; other decoding options decode every video again.
    searched.clear()
    decode(corpus, exp, test, out / "text", **options)
    assert searched == [] and (out / "text").read_text() == (whole / "text").read_text()
    decode(corpus, exp, test, out / "text", ctc_weight=0.5, **options)
    assert len(searched) == 8


def test_a_journal_line_may_hold_unicode_line_separators(tmp_path):
    """json.dumps leaves U+2028, U+2029 and U+0085 in a 1-best as they are: the journal is split on
    newlines only, so such a line reads back (str.splitlines would cut it in two)."""
    journal = tmp_path / "journal"
    video = tmp_path / "k1.npy"
    video.write_bytes(b"frames")
    entry = {
        "key": "k1",
        "text": "a\u2028b\u2029c\x85d",
        "score": -1.0,
        "tokens": 3,
        "video": str(video),
        "size": 6,
        "mtime_ns": video.stat().st_mtime_ns,
    }
    journal.write_text(
        json.dumps({"signature": "s"}) + "\n" + json.dumps(entry, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    videos = vsr_inference.JobVideos({"k1": str(video), "k2": "k2.npy"})
    done = vsr_inference.read_journal(journal, "s", videos)
    assert list(done) == ["k1"] and done["k1"].text == "a\u2028b\u2029c\x85d"


def count_split(data, logdir, nj):
    """asr.sh stage 2's jobs: video.scp split round-robin (split_keys) over ``nj`` jobs, each counting
    its part with vsr_prepare; returns the jobs' log lines."""
    lines = (data / "video.scp").read_text().splitlines()
    logs = []
    for job in range(1, nj + 1):
        keys = logdir / f"keys.{job}.scp"
        keys.write_text("".join(line + "\n" for line in lines[job - 1 :: nj]))
        logs.append(vsr_prepare.count_part(data, keys, logdir / f"frames.{job}"))
    return logs


def test_a_part_counted_before_is_kept_unless_its_videos_changed(tmp_path, monkeypatch):
    from espnet_ext.data import video

    rng = np.random.default_rng(0)
    videos = {f"u{i}": np.zeros((int(rng.integers(2, 9)), 8, 8), np.uint8) for i in range(7)}
    data = write_set(tmp_path, videos)
    counted = []
    frame_count = video.frame_count
    monkeypatch.setattr(
        video, "frame_count", lambda path: counted.append(path) or frame_count(path)
    )
    logdir = tmp_path / "log"
    logdir.mkdir()
    count_split(data, logdir, 3)  # u0 u3 u6 | u1 u4 | u2 u5
    assert len(counted) == 7
    # a rerun (after another job failed) decodes nothing: every part holds its keys' signature
    counted.clear()
    logs = count_split(data, logdir, 3)
    assert counted == [] and all("counted before" in log and "kept" in log for log in logs)
    # a video replaced at the same path (other frames; or only touched) recounts its part alone
    np.save(tmp_path / "u4.npy", np.zeros((11, 8, 8), np.uint8))
    counted.clear()
    logs = count_split(data, logdir, 3)
    assert sorted(counted) == [str(tmp_path / f"{k}.npy") for k in ("u1", "u4")]
    assert "videos decode" in logs[1] and "kept" in logs[0] + logs[2]
    stat = (tmp_path / "u2.npy").stat()
    os.utime(tmp_path / "u2.npy", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    counted.clear()
    count_split(data, logdir, 3)
    assert sorted(counted) == [str(tmp_path / f"{k}.npy") for k in ("u2", "u5")]
    parts = [logdir / f"frames.{job}" for job in (1, 2, 3)]
    vsr_prepare.prepare(data, tmp_path / "resumed", parts)
    vsr_prepare.prepare(data, tmp_path / "fresh")
    fresh = (tmp_path / "fresh" / "utt2num_frames").read_text()
    assert (tmp_path / "resumed" / "utt2num_frames").read_text() == fresh
    assert "u4 11\n" in fresh
    # another split's parts hold other keys: every part is counted again
    counted.clear()
    count_split(data, logdir, 2)
    assert len(counted) == 7
    # a part of older code (no signature line) is counted again too
    (logdir / "frames.1").write_text("u0 9\n")
    assert vsr_prepare.part_header_signature(logdir / "frames.1") is None
    counted.clear()
    count_split(data, logdir, 2)
    assert len(counted) == 4


def test_a_failed_job_reruns_alone(tmp_path, monkeypatch):
    """A job that died (a bad video, a time limit) wrote no part; the rerun counts its part only."""
    from espnet_ext.data import video

    data = write_set(tmp_path, {f"u{i}": np.zeros((i + 2, 8, 8), np.uint8) for i in range(4)})
    good = (tmp_path / "u1.npy").read_bytes()
    (tmp_path / "u1.npy").write_bytes(b"\x93NUMPY broken")
    logdir = tmp_path / "log"
    logdir.mkdir()
    lines = (data / "video.scp").read_text().splitlines()
    for job in (1, 2):
        (logdir / f"keys.{job}.scp").write_text(
            "".join(f"{line}\n" for line in lines[job - 1 :: 2])
        )
    part = [logdir / f"frames.{job}" for job in (1, 2)]
    args = [["--data_dir", str(data), "--key_file", str(logdir / f"keys.{job}.scp"), "--part_out",
             str(part[job - 1])] for job in (1, 2)]  # fmt: skip
    assert vsr_prepare.main(args[0]) == 0 and vsr_prepare.main(args[1]) == 1
    assert part[0].exists() and not part[1].exists()
    (tmp_path / "u1.npy").write_bytes(good)
    counted = []
    frame_count = video.frame_count
    monkeypatch.setattr(
        video, "frame_count", lambda path: counted.append(path) or frame_count(path)
    )
    for job in (1, 2):
        vsr_prepare.main(args[job - 1])
    assert sorted(counted) == [str(tmp_path / f"{k}.npy") for k in ("u1", "u3")]
    vsr_prepare.main(["--data_dir", str(data), "--out_dir", str(tmp_path / "out"), "--parts"]
                     + [str(p) for p in part])  # fmt: skip
    assert (tmp_path / "out" / "utt2num_frames").read_text() == "u0 2\nu1 3\nu2 4\nu3 5\n"


def test_other_jobs_journals_are_read_only_and_may_be_cut(tmp_path, caplog):
    """Another job may be appending to its journal: a last line without its newline is left out, a bad
    line elsewhere is skipped (logged), a journal of other options is not used, nor an entry of a video
    changed since; the job's own journal still refuses a bad line, as before."""
    videos = {}
    for key in ("k1", "k2", "k3", "k4"):
        (tmp_path / f"{key}.npy").write_bytes(key.encode() * 4)
        videos[key] = str(tmp_path / f"{key}.npy")

    def line(key, **changes):
        stat = (tmp_path / f"{key}.npy").stat()
        entry = {"key": key, "text": f"text of {key}", "score": -1.0, "tokens": 3,
                 "video": videos[key], "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}  # fmt: skip
        return json.dumps({**entry, **changes}) + "\n"

    header = json.dumps({"signature": "s"}) + "\n"
    other = tmp_path / "output.2" / "journal"
    other.parent.mkdir()
    other.write_text(header + line("k1") + "not json\n" + line("k2", mtime_ns=1) + line("k3")
                     + line("k4")[:20])  # fmt: skip
    foreign = tmp_path / "output.3" / "journal"
    foreign.parent.mkdir()
    foreign.write_text(json.dumps({"signature": "t"}) + "\n" + line("k4"))
    job = vsr_inference.JobVideos(videos)
    found = vsr_inference.read_other_journals([other, foreign], "s", job, set(videos))
    assert sorted(found) == ["k1", "k3"] and found["k3"].text == "text of k3"
    assert "output.2/journal:3: not a journal line" in caplog.text
    own = tmp_path / "output.1" / "journal"
    own.parent.mkdir()
    own.write_text(header + "not json\n" + line("k1"))
    with pytest.raises(InputError, match=r"output\.1/journal:2: not a journal line"):
        vsr_inference.read_journal(own, "s", job)
    # the jobs of one decoding share the signature: neither the key file nor the job's files are in it
    (tmp_path / "m.pth").write_bytes(b"model")

    def signature(number, *more):
        out = tmp_path / f"output.{number}"
        return vsr_inference.resume_signature(vsr_inference.parse_args(
            ["--data_path_and_name_and_type", "x.scp,video,video", "--model_file", str(tmp_path / "m.pth"),
             "--key_file", f"keys.{number}.scp", "--output_file", str(out / "text"), "--score_file",
             str(out / "score"), "--resume_file", str(out / "journal"), "--resume_from", "output.*/journal",
             *more]))  # fmt: skip

    assert signature(1) == signature(2) != signature(1, "--beam_size", "3")


def test_a_job_takes_its_videos_from_the_video_scp_of_its_key_file_ids(tmp_path):
    """split_keys writes a job's ids only: the journal's videos (and their stats) come from the video scp."""
    scp = tmp_path / "video.scp"
    scp.write_text("a /v/a.mp4\nb /v/b.mp4\nc /v/c.mp4\n")
    keys = tmp_path / "keys.1.scp"
    keys.write_text("c\na\n")
    base = ["--data_path_and_name_and_type", f"{scp},video,video", "--model_file", "m.pth",
            "--output_file", str(tmp_path / "text")]  # fmt: skip
    args = vsr_inference.parse_args([*base, "--key_file", str(keys)])
    # in the key file's order
    assert vsr_inference.job_entries(args) == {"c": "/v/c.mp4", "a": "/v/a.mp4"}
    assert list(vsr_inference.job_entries(vsr_inference.parse_args(base))) == ["a", "b", "c"]
    keys.write_text("a\nz\n")
    with pytest.raises(InputError, match=r"keys\.1\.scp:2: key 'z': not in .*video\.scp"):
        vsr_inference.job_entries(args)


def test_a_rerun_over_another_split_decodes_only_what_no_job_decoded(
    corpus,  # noqa: F811
    tiny_run_options,
    monkeypatch,
):
    exp = corpus / "exp"
    LipReadingTask.main(cmd=training_options(corpus, tiny_run_options, exp) + ["--max_epoch", "1"])
    test = corpus / "data" / "test"
    whole = corpus / "whole"
    decode(corpus, exp, test, whole / "text", score_file=whole / "score")
    scp = (test / "video.scp").read_text().splitlines()
    keys = [line.split()[0] for line in scp]
    assert len(keys) == 8

    decoded, limit = [], []  # the keys decoded; the videos a job may decode before it is killed
    decode_videos = vsr_inference.decode_videos

    def killed_after(args, key_file):
        for number, hypothesis in enumerate(decode_videos(args, key_file)):
            if limit and number == limit[0]:
                raise KeyboardInterrupt  # a time limit while this video was decoded
            decoded.append(hypothesis.key)
            yield hypothesis

    monkeypatch.setattr(vsr_inference, "decode_videos", killed_after)
    logdir = corpus / "logdir"
    logdir.mkdir()

    # asr.sh's decode_set (split_keys: round-robin, ids only) and vsr_inference options
    def job(n, number):
        key_file = logdir / f"keys.{number}.scp"
        key_file.write_text("".join(f"{key}\n" for key in keys[number - 1 :: n]))
        out = logdir / f"output.{number}"
        decode(corpus, exp, test, out / "text", key_file=key_file, score_file=out / "score",
               resume_file=out / "journal", resume_from=logdir / "output.*" / "journal")  # fmt: skip

    for number, kill in ((1, 2), (2, 3)):  # 2 jobs: both killed, after 2 and 3 of their 4 videos
        limit[:] = [kill]
        with pytest.raises(KeyboardInterrupt):
            job(2, number)
    first = list(decoded)
    assert len(first) == 5
    with (logdir / "output.2" / "journal").open("a") as f:
        f.write(
            '{"key": "t0'
        )  # job 2's line cut by the kill: other jobs leave it out, it cuts it off
    decoded.clear()
    limit.clear()
    for number in (1, 2, 3):
        job(3, number)
    assert sorted(decoded) == sorted(set(keys) - set(first))  # exactly the missing videos

    def merged(name):
        return "".join(sorted((logdir / f"output.{n}" / name).read_text() for n in (1, 2, 3)))

    assert sorted(merged("text").splitlines()) == (whole / "text").read_text().splitlines()
    assert sorted(merged("score").splitlines()) == (whole / "score").read_text().splitlines()
    # each job's own journal now holds all its videos: it resumes without the others
    decoded.clear()
    for number in (1, 2, 3):
        key_file, out = logdir / f"keys.{number}.scp", logdir / f"output.{number}"
        decode(corpus, exp, test, out / "text", key_file=key_file, score_file=out / "score",
               resume_file=out / "journal")  # fmt: skip
    assert decoded == []
    # a video replaced at the same path (here only touched) is decoded again, by its job alone
    video = scp[4].split(maxsplit=1)[1]
    stat = os.stat(video)
    os.utime(video, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    for number in (1, 2, 3):
        job(3, number)
    assert decoded == [keys[4]]
    assert sorted(merged("text").splitlines()) == (whole / "text").read_text().splitlines()
