"""Filterbank features: values against torchaudio's Kaldi fbank, sharding, pipes, segments, bad audio."""

import io
import os
import shutil
import subprocess
import sys

import kaldiio
import numpy as np
import pytest
import soundfile
import torch
from torchaudio.compliance import kaldi

from espnet_ext.errors import InputError
from espnet_ext.features.fbank import (
    FbankOptions,
    compute_fbank,
    compute_shard,
    load_recording,
    merge_shards,
    shard,
)

RATE = 16000


def tone(seconds: float, freq: float, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    noise = np.random.default_rng(seed).normal(0, 0.01, t.shape)
    return (0.3 * np.sin(2 * np.pi * freq * t) + noise).astype(np.float32)


def write_wav(path, samples, rate=RATE, subtype="PCM_16"):
    soundfile.write(str(path), samples, rate, subtype=subtype)
    return path


def make_data_dir(root, n=5, seconds=(0.5, 0.8, 1.0, 0.3, 0.6)):
    """A data dir of n utterances with distinct tones, wav.scp lines in unsorted order."""
    data = root / "data"
    data.mkdir(parents=True)
    ids = [f"spk{i % 2}-utt{i}" for i in range(n)]
    entries = []
    for i, utt in enumerate(ids):
        wav = write_wav(root / f"{utt}.wav", tone(seconds[i % len(seconds)], 200 + 100 * i, seed=i))
        entries.append(f"{utt} {wav}\n")
    (data / "wav.scp").write_text("".join(reversed(entries)))
    (data / "text").write_text("".join(f"{u} word{i}\n" for i, u in enumerate(ids)))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in ids))
    return data, ids


def run_all(data, out, nj, **opts):
    for job in range(1, nj + 1):
        compute_shard(data, out, nj, job, FbankOptions(**opts))
    merge_shards(data, out, nj)


def test_values_equal_torchaudio_kaldi_fbank():
    samples = tone(1.0, 440)
    expected = kaldi.fbank(
        torch.from_numpy(samples * 32768).unsqueeze(0),
        num_mel_bins=80,
        frame_length=25.0,
        frame_shift=10.0,
        sample_frequency=RATE,
        dither=0.0,
    ).numpy()
    feats = compute_fbank(samples)
    assert feats.dtype == np.float32
    # 25 ms windows every 10 ms, Kaldi's snip_edges: 1 + (16000 - 400) // 160 frames.
    assert feats.shape == (98, 80)
    np.testing.assert_array_equal(feats, expected)

    # The loudest bin is the one whose Mel centre (Kaldi: 80 bins between 20 Hz and 8 kHz) is nearest 440 Hz.
    def mel(hz):
        return 1127 * np.log(1 + hz / 700)

    centres = mel(20) + (np.arange(80) + 1) * (mel(8000) - mel(20)) / 81
    assert abs(int(feats.mean(axis=0).argmax()) - int(np.abs(centres - mel(440)).argmin())) <= 1


def test_options_change_shape():
    feats = compute_fbank(
        tone(1.0, 440, seed=1)[:8000],
        FbankOptions(n_mels=40, frame_shift_ms=20.0, sample_rate=8000),
    )
    # 8 kHz: 200-sample windows, 160-sample shift over 8000 samples.
    assert feats.shape == (1 + (8000 - 200) // 160, 40)


def test_shard_is_contiguous_and_complete():
    items = list("abcdefg")
    parts = [shard(items, 3, j) for j in (1, 2, 3)]
    assert sum(parts, []) == items
    assert [len(p) for p in parts] == [2, 2, 3]
    assert shard(items[:2], 3, 1) == []
    with pytest.raises(InputError, match="not in 1..3"):
        shard(items, 3, 4)


def test_compute_and_merge_single_job(tmp_path):
    data, ids = make_data_dir(tmp_path)
    out = tmp_path / "fbank"
    run_all(data, out, nj=1)

    scp_keys = [line.split()[0] for line in (out / "feats.scp").read_text().splitlines()]
    assert scp_keys == sorted(ids)
    assert (out / "feats_dim").read_text() == "80\n"
    # The other files of the data dir come along unchanged.
    for name in ("text", "utt2spk", "wav.scp"):
        assert (out / name).read_bytes() == (data / name).read_bytes()

    frames = dict(line.split() for line in (out / "utt2num_frames").read_text().splitlines())
    wav_scp = dict(line.split() for line in (data / "wav.scp").read_text().splitlines())
    loaded = dict(kaldiio.load_scp_sequential(str(out / "feats.scp")))
    for utt in ids:
        samples, _ = soundfile.read(wav_scp[utt], dtype="float32")
        np.testing.assert_array_equal(loaded[utt], compute_fbank(samples))
        assert int(frames[utt]) == loaded[utt].shape[0] == 1 + (len(samples) - 400) // 160
    assert not list((out / "data").glob(".*")), "temporary files left behind"


def test_three_jobs_equal_one_job(tmp_path):
    data, ids = make_data_dir(tmp_path)
    run_all(data, tmp_path / "one", nj=1)
    run_all(data, tmp_path / "three", nj=3)
    one = dict(kaldiio.load_scp_sequential(str(tmp_path / "one" / "feats.scp")))
    three = dict(kaldiio.load_scp_sequential(str(tmp_path / "three" / "feats.scp")))
    assert sorted(one) == sorted(three) == sorted(ids)
    for utt in ids:
        np.testing.assert_array_equal(one[utt], three[utt])
    assert len(list((tmp_path / "three" / "data").glob("feats.*.ark"))) == 3
    assert (tmp_path / "one" / "utt2num_frames").read_text() == (
        tmp_path / "three" / "utt2num_frames"
    ).read_text()


def test_more_jobs_than_utterances(tmp_path):
    data, ids = make_data_dir(tmp_path, n=2)
    run_all(data, tmp_path / "out", nj=4)
    assert len((tmp_path / "out" / "feats.scp").read_text().splitlines()) == 2


@pytest.mark.skipif(
    shutil.which("sox") is None, reason="sox is not installed (apt-get install sox)"
)
def test_pipe_entries(tmp_path):
    data, ids = make_data_dir(tmp_path, n=2)
    flac = tmp_path / "piped.flac"
    soundfile.write(str(flac), tone(0.7, 900, seed=7), RATE, format="FLAC")
    with open(data / "wav.scp", "a") as f:
        f.write(f"spk1-piped sox {flac} -t wav - |\n")
    run_all(data, tmp_path / "out", nj=2)
    loaded = dict(kaldiio.load_scp_sequential(str(tmp_path / "out" / "feats.scp")))
    samples, _ = soundfile.read(str(flac), dtype="float32")
    np.testing.assert_array_equal(loaded["spk1-piped"], compute_fbank(samples))


def test_segments(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    wav = write_wav(tmp_path / "talk.wav", tone(2.0, 300, seed=3))
    recording, _ = soundfile.read(str(wav), dtype="float32")  # as quantised to 16 bits
    (data / "wav.scp").write_text(f"talk {wav}\n")
    (data / "segments").write_text(
        "talk_b talk 1.00 1.75\ntalk_a talk 0.10 0.60\ntalk_c talk 1.50 -1\n"
    )
    run_all(data, tmp_path / "out", nj=2)
    loaded = dict(kaldiio.load_scp_sequential(str(tmp_path / "out" / "feats.scp")))
    assert sorted(loaded) == ["talk_a", "talk_b", "talk_c"]
    # A segment's features are those of the samples it cuts out of its recording.
    np.testing.assert_array_equal(loaded["talk_a"], compute_fbank(recording[1600:9600]))
    np.testing.assert_array_equal(loaded["talk_b"], compute_fbank(recording[16000:28000]))
    np.testing.assert_array_equal(loaded["talk_c"], compute_fbank(recording[24000:]))


def test_cli_compute_and_merge(tmp_path):
    data, ids = make_data_dir(tmp_path, n=3)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    command = [sys.executable, "-m", "espnet_ext.features.fbank"]
    run = subprocess.run(
        [
            *command,
            "compute",
            "--data_dir",
            str(data),
            "--out_dir",
            str(out),
            "--nj",
            "2",
            "--job",
            "1",
            "--n_mels",
            "40",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("fbank: shard 1/2: 1 utterances")
    run = subprocess.run(
        [*command, "merge", "--data_dir", str(data), "--out_dir", str(out), "--nj", "2"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 1 and "shard 2 of 2 is missing or unfinished" in run.stderr
    compute_shard(data, out, 2, 2, FbankOptions(n_mels=40))
    run = subprocess.run(
        [*command, "merge", "--data_dir", str(data), "--out_dir", str(out), "--nj", "2"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert (out / "feats_dim").read_text() == "40\n"


# ---------------------------------------------------------------- bad input


def expect_error(data, out, match, nj=1, job=1):
    with pytest.raises(InputError, match=match) as info:
        compute_shard(data, out, nj, job)
    assert not (out / "data" / f"feats.{job}.scp").exists()
    assert not list((out / "data").glob(".*")), "temporary files left behind"
    return str(info.value)


def test_missing_audio_names_wav_scp_line(tmp_path):
    data, ids = make_data_dir(tmp_path, n=3)
    lines = (data / "wav.scp").read_text().splitlines()
    number, (utt, wav) = next(
        (n, line.split()) for n, line in enumerate(lines, 1) if line.startswith(ids[2])
    )
    os.unlink(wav)
    message = expect_error(data, tmp_path / "out", "does not exist")
    assert f"{data / 'wav.scp'}:{number}: key '{utt}'" in message and wav in message


def test_unreadable_audio(tmp_path):
    data, ids = make_data_dir(tmp_path, n=1)
    wav = (data / "wav.scp").read_text().split()[1]
    with open(wav, "wb") as f:
        f.write(b"this is not audio at all")
    assert f"{data / 'wav.scp'}:1" in expect_error(data, tmp_path / "out", "cannot read audio file")


def test_wrong_sample_rate(tmp_path):
    data, ids = make_data_dir(tmp_path, n=1)
    wav = (data / "wav.scp").read_text().split()[1]
    write_wav(wav, tone(0.5, 300)[:4000], rate=8000)
    expect_error(data, tmp_path / "out", "sample rate 8000 Hz; expected 16000 Hz")


def test_empty_and_too_short_audio(tmp_path):
    data, ids = make_data_dir(tmp_path, n=1)
    wav = (data / "wav.scp").read_text().split()[1]
    write_wav(wav, np.zeros(0, dtype=np.float32))
    expect_error(data, tmp_path / "out", "is empty")
    write_wav(wav, tone(0.02, 300))
    expect_error(data, tmp_path / "out", "fewer than one 25.0 ms frame")


def test_failing_pipe(tmp_path):
    data, ids = make_data_dir(tmp_path, n=1)
    (data / "wav.scp").write_text(f"{ids[0]} sh -c 'echo broken >&2; exit 3' |\n")
    expect_error(data, tmp_path / "out", "exit code 3: broken")


def test_segment_errors(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    wav = write_wav(tmp_path / "talk.wav", tone(1.0, 300))
    (data / "wav.scp").write_text(f"talk {wav}\n")
    (data / "segments").write_text("a talk 0.0 0.5\nb other 0.0 0.5\n")
    with pytest.raises(InputError, match=r"segments:2: key 'b': recording 'other' is not in"):
        compute_shard(data, tmp_path / "out", 1, 1)
    (data / "segments").write_text("a talk 0.0 0.5\nb talk 0.2 3.0\n")
    expect_error(data, tmp_path / "out", r"segments:2: key 'b': segment ends at 3.0 s")


def test_rerun_after_failure_replaces_stale_shard(tmp_path):
    data, ids = make_data_dir(tmp_path, n=2)
    out = tmp_path / "out"
    compute_shard(data, out, 1, 1)
    assert (out / "data" / "feats.1.scp").exists()
    os.unlink((data / "wav.scp").read_text().split()[1])
    with pytest.raises(InputError):
        compute_shard(data, out, 1, 1)
    # The old shard no longer looks finished, so merge refuses instead of using stale features.
    assert not (out / "data" / "feats.1.scp").exists()
    with pytest.raises(InputError, match="shard 1 of 1 is missing or unfinished"):
        merge_shards(data, out, 1)
    assert not (out / "feats.scp").exists()


def test_merge_refuses_missing_shard_and_mismatched_utts(tmp_path):
    data, ids = make_data_dir(tmp_path, n=4)
    out = tmp_path / "out"
    compute_shard(data, out, 2, 1)
    with pytest.raises(InputError, match="shard 2 of 2 is missing or unfinished"):
        merge_shards(data, out, 2)
    compute_shard(data, out, 2, 2)
    merge_shards(data, out, 2)
    os.unlink(out / "data" / "feats.2.ark")
    with pytest.raises(InputError, match=r"feats.2.scp: shard 2 of 2: its archive .* is gone"):
        merge_shards(data, out, 2)
    assert not (out / "feats.scp").exists(), "a failed merge must not leave the earlier feats.scp"
    compute_shard(data, out, 2, 2)
    # An utterance added to the data dir after features were computed has none.
    extra = write_wav(tmp_path / "late.wav", tone(0.5, 700))
    with open(data / "wav.scp", "a") as f:
        f.write(f"zz-late {extra}\n")
    with pytest.raises(InputError, match=r"1 without features \(zz-late\)"):
        merge_shards(data, out, 2)
    assert not (out / "feats.scp").exists()


def test_bad_wav_scp_lines(tmp_path):
    data, ids = make_data_dir(tmp_path, n=2)
    (data / "wav.scp").write_text(f"a {tmp_path}/x.wav\na {tmp_path}/y.wav\n")
    with pytest.raises(InputError, match=r"wav.scp:2: key 'a': duplicate id \(first at line 1\)"):
        compute_shard(data, tmp_path / "out", 1, 1)
    (data / "wav.scp").write_text("lonely\n")
    with pytest.raises(InputError, match=r"wav.scp:1: key 'lonely': empty value"):
        compute_shard(data, tmp_path / "out", 1, 1)


def test_killed_job_leaves_no_finished_shard(tmp_path):
    data, ids = make_data_dir(tmp_path, n=2)
    good = (data / "wav.scp").read_text()
    # The second utterance's pipe kills the job (its parent) after the first one was written.
    (data / "wav.scp").write_text(good.splitlines()[1] + "\nzz-killer kill -9 $PPID |\n")
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.features.fbank",
            "compute",
            "--data_dir",
            str(data),
            "--out_dir",
            str(out),
            "--nj",
            "1",
            "--job",
            "1",
        ],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert run.returncode == -9
    assert list((out / "data").glob(".feats.1.ark.tmp")), "the job should have died while writing"
    assert not list((out / "data").glob("feats.1.*"))
    with pytest.raises(InputError, match="missing or unfinished"):
        merge_shards(data, out, 1)
    # A rerun on repaired input finishes and cleans up.
    (data / "wav.scp").write_text(good)
    run_all(data, out, nj=1)
    assert sorted(dict(kaldiio.load_scp_sequential(str(out / "feats.scp")))) == sorted(ids)
    assert not list((out / "data").glob(".*"))


def test_our_decoders_pipe_is_decoded_in_process_to_the_pipes_samples(tmp_path, monkeypatch):
    # CoVoST 2, Europarl-ST, mTEDx: a Python process per clip would cost ~0.2 s of start-up each
    from espnet_ext.data import compressed_audio

    clip = tmp_path / "clip.flac"
    soundfile.write(str(clip), tone(0.5, 440, seed=2), 8000, format="FLAC")  # resampled to 16 kHz
    value = compressed_audio.pipe_command(clip)
    assert compressed_audio.piped_file(value) == clip.absolute()
    assert compressed_audio.piped_file(f"sox {clip} -t wav - |") is None
    through_the_pipe = subprocess.run(
        value[:-1], shell=True, capture_output=True, check=True, cwd=tmp_path
    ).stdout
    expected, _ = soundfile.read(io.BytesIO(through_the_pipe), dtype="float32")
    monkeypatch.setattr(subprocess, "run", None)  # no process may be started
    waveform = load_recording(value, 16000, tmp_path / "wav.scp", 3, "clip")
    np.testing.assert_array_equal(waveform, expected)
    with pytest.raises(InputError, match=r"wav.scp:3.*expected 8000 Hz"):
        load_recording(value, 8000, tmp_path / "wav.scp", 3, "clip")
    bad = compressed_audio.pipe_command(tmp_path / "missing.mp3")
    with pytest.raises(InputError, match=r"wav.scp:3.*cannot decode .*missing.mp3"):
        load_recording(bad, 16000, tmp_path / "wav.scp", 3, "clip")
