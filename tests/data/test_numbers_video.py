"""Lip-video modality of the numbers world: mouth videos aligned with the espeak-ng speech."""

import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from espnet_ext.data.numbers import CorpusSpec, generate_corpus, plan_corpus, video
from espnet_ext.data.numbers import __main__ as cli
from espnet_ext.data.numbers.modality import Speaker
from espnet_ext.data.numbers.speech import ESPEAK_VOICES, parse_wav
from espnet_ext.data.numbers.words import number_to_words
from espnet_ext.errors import InputError

pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None,
    reason="espeak-ng is not installed (Debian package espeak-ng, see tools/apt-packages.txt)",
)

SPLITS = "train=6,dev=2"
SILENCE = np.array(video.VISEME_TARGETS[video.SILENCE])


def read_table(path: Path) -> dict:
    return dict(line.split(" ", 1) for line in path.read_text(encoding="utf-8").splitlines())


def wav_seconds(path: str) -> float:
    with wave.open(path, "rb") as w:
        return w.getnframes() / w.getframerate()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("video") / "mini"
    argv = ["--out", str(out), "--langs", "en", "--modalities", "speech,text,video"]
    argv += ["--splits", SPLITS, "--num_speakers", "3", "--seed", "3", "--nj", "2"]
    assert cli.main(argv) == 0
    return out


def test_cli_writes_video_scp_of_uint8_88x88_frames_aligned_with_the_wavs(corpus):
    for split, size in (("train", 6), ("dev", 2)):
        videos = read_table(corpus / split / "video.scp")
        wavs = read_table(corpus / split / "wav.scp")
        assert sorted(videos) == sorted(wavs) == sorted(read_table(corpus / split / "text"))
        assert len(videos) == size
        for utt, path in videos.items():
            assert Path(path).is_absolute() and path.endswith(f"/{split}/{utt}.npy")
            frames = np.load(path)
            assert frames.dtype == np.uint8 and frames.shape[1:] == (88, 88)
            # 25 fps over the same utterance: at most half a frame (plus resampling) apart.
            assert abs(len(frames) / video.FPS - wav_seconds(wavs[utt])) <= 0.5 / video.FPS + 1e-3


def test_library_synthesis_in_a_fresh_child_matches_the_espeak_ng_program(corpus):
    text, voice, rate, pitch = "three thousand seven hundred forty two", "en-us+m3", 150, 50
    jobs = [(text, voice, rate, pitch), ("nine", "en-us+f2", 180, 40), (text, voice, rate, pitch)]
    results = video.run_forked(video.timed_phonemes, jobs, nj=2)
    for (text, voice, rate, pitch), timed in zip(jobs, results):
        cmd = ["espeak-ng", "-v", voice, "-s", str(rate), "-p", str(pitch), "--stdout"]
        program = subprocess.run(cmd, input=text.encode(), capture_output=True, check=True)
        sample_rate, samples = parse_wav(program.stdout)
        assert (timed.sample_rate, timed.num_samples) == (sample_rate, len(samples))
    assert results[0] == results[2]  # no state carried from one utterance to the next
    starts = [start for start, _ in results[0].phonemes]
    assert starts == sorted(starts) and results[0].phonemes[0][1] == "T"  # "three" starts with θ
    assert results[0].phonemes[-1][1].startswith("_")  # the end pause


def test_same_corpus_whatever_nj(corpus, tmp_path):
    out = tmp_path / "again"
    argv = ["--out", str(out), "--langs", "en", "--modalities", "text,video"]
    argv += ["--splits", SPLITS, "--num_speakers", "3", "--seed", "3", "--nj", "1"]
    assert cli.main(argv) == 0
    for split in ("train", "dev"):
        first = read_table(corpus / split / "video.scp")
        second = read_table(out / split / "video.scp")
        assert sorted(first) == sorted(second)
        for utt in first:
            assert Path(first[utt]).read_bytes() == Path(second[utt]).read_bytes()


def test_every_phoneme_of_the_number_words_has_a_viseme():
    numbers = [*range(21), *range(30, 100, 10), 100, 101, 123, 1000, 2019, 7777, 9999, 100000]
    for lang, voice in ESPEAK_VOICES.items():
        text = " ".join(number_to_words(n, lang) for n in numbers)
        cmd = ["espeak-ng", "-q", "-x", "--sep=|", "-v", voice]
        out = subprocess.run(cmd, input=text.encode(), capture_output=True, check=True).stdout
        for word in out.decode().split():
            for phoneme in word.replace("'", "").replace(",", "").split("|"):
                if phoneme:
                    viseme = video.viseme_of(phoneme)
                    assert (
                        viseme is None
                        or viseme in video.VISEME_TARGETS
                        or (viseme in video.DIPHTHONGS)
                    ), (lang, phoneme)


def test_viseme_lookup_follows_the_sapi_classes():
    assert [video.viseme_of(p) for p in ("p", "b", "m", "f", "v", "s", "z", "tS")] == [
        21, 21, 21, 18, 18, 15, 15, 16
    ]  # fmt: skip
    assert [video.viseme_of(p) for p in ("u:", "i:", "O@", "aI", "_:", ";")] == [
        7, 6, 3, 11, 0, None
    ]  # fmt: skip
    with pytest.raises(KeyError, match="'K'"):
        video.viseme_of("K")


def timed(*phonemes, seconds):
    return video.TimedPhonemes(tuple(phonemes), round(seconds * 22050), 22050)


def test_mouth_track_follows_the_phoneme_times_and_rests_closed_in_silence():
    track = video.mouth_track(timed((0, "_"), (400, "A:"), (800, "_:"), seconds=1.6))
    assert track.shape == (40, len(video.PARAMS))
    # Frames k cover [40k, 40k + 40) ms; smoothing reaches 3 sigma = 60 ms.
    assert np.array_equal(track[:8], np.tile(SILENCE, (8, 1)))  # ends by 320 ms: closed
    assert np.array_equal(track[22:], np.tile(SILENCE, (18, 1)))  # from 880 ms: closed again
    # 480-720 ms: more than 60 ms inside the vowel, fully open; in between, a smooth transition.
    assert track[12:18, 0] == pytest.approx(np.full(6, video.VISEME_TARGETS[2][0]))
    assert np.all(np.diff(track[7:13, 0]) > 0) and np.all(np.diff(track[17:23, 0]) < 0)
    diphthong = video.mouth_track(timed((0, "aI"), (800, "_"), seconds=1.0))
    # a-I glide: wide open first, spread lips (i) at the end.
    assert diphthong[4, 0] == pytest.approx(video.VISEME_TARGETS[2][0], abs=1e-3)
    assert diphthong[15, 1] == pytest.approx(video.VISEME_TARGETS[6][1], abs=1e-3)


def test_unknown_phoneme_is_an_error_naming_it():
    with pytest.raises(KeyError, match="K9"):
        video.mouth_track(timed((0, "K9"), seconds=0.5))


LOOK = video.Look.of_speaker(Speaker("spk01", "m3", 150, 50))


def dark_pixels(frame, look=LOOK):
    return int((frame < look.cavity + 15).sum())


def test_silence_renders_a_closed_mouth_and_vowels_an_open_one():
    closed = video.render_frame(SILENCE, LOOK)
    wide = video.render_frame(np.array(video.VISEME_TARGETS[2]), LOOK)
    assert dark_pixels(closed) == 0
    assert dark_pixels(wide) > 50  # the mouth cavity
    assert closed.shape == (88, 88) and closed.dtype == np.float32


def test_distinct_visemes_render_distinct_images():
    frames = {v: video.render_frame(np.array(p), LOOK) for v, p in video.VISEME_TARGETS.items()}
    for a in frames:
        for b in frames:
            if a < b:
                assert np.abs(frames[a] - frames[b]).max() > 20, (a, b)


def test_speakers_look_different_and_utterances_vary_but_repeat_exactly():
    other = video.Look.of_speaker(Speaker("spk02", "f1", 170, 40))
    assert other != LOOK
    assert video.Look.of_speaker(Speaker("spk01", "m3", 150, 50)) == LOOK
    params = np.array(video.VISEME_TARGETS[1])
    assert np.abs(video.render_frame(params, LOOK) - video.render_frame(params, other)).mean() > 5
    track = np.tile(params, (10, 1))
    first = video.render_video(track, LOOK, seed=1)
    assert np.array_equal(first, video.render_video(track, LOOK, seed=1))
    assert not np.array_equal(first, video.render_video(track, LOOK, seed=2))
    # Camera noise and jitter: consecutive frames of a still mouth differ, but only a little.
    assert 0 < np.abs(first[1].astype(int) - first[0]).mean() < 15


def test_real_utterance_ends_closed_in_the_end_pause(corpus):
    utt = plan_corpus(CorpusSpec(splits=(("train", 1),), seed=4, num_speakers=1))["train"][0]
    phonemes = video.run_forked(
        video.timed_phonemes, [(number_to_words(utt.number, "en"), "en-us+m1", 160, 50)], nj=1
    )[0]
    track = video.mouth_track(phonemes)
    assert np.array_equal(track[-3:], np.tile(SILENCE, (3, 1)))
    assert track[:, 0].max() > 0.3


def test_signature_records_what_changes_the_output(tmp_path):
    modality = video.VideoModality(lang="en", video_dir=tmp_path / "v")
    signature = modality.signature()
    assert {"lang", "voice", "espeak-ng", "fps", "size", "render_version", "visemes"} <= set(
        signature
    )
    assert signature["fps"] == 25 and signature["size"] == 88
    assert signature["video_dir"] == str((tmp_path / "v").absolute())


def test_bad_settings_and_failed_children_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="no espeak-ng voice"):
        video.VideoModality(lang="xx", video_dir=tmp_path)
    with pytest.raises(InputError, match="nj must be"):
        video.VideoModality(lang="en", video_dir=tmp_path, nj=0)
    results = video.run_forked(lambda x: 1 // x, [(1,), (0,)], nj=2)
    assert results[0] == 1 and isinstance(results[1], ZeroDivisionError)

    # A child's failure names the utterance, and no split dir looks finished.
    def fail_second(jobs, nj):
        return [3, KeyError("espeak-ng phoneme 'K' has no viseme"), 3]

    monkeypatch.setattr(video, "render_in_helper", fail_second)
    spec = CorpusSpec(splits=(("train", 3),), seed=1, num_speakers=1)
    second = plan_corpus(spec)["train"][1].utt_id
    with pytest.raises(InputError, match=f"key '{second}': espeak-ng phoneme 'K' has no viseme"):
        generate_corpus(tmp_path / "c", spec, [video.VideoModality("en", tmp_path / "v")])
    assert not (tmp_path / "c" / "train").exists()
