"""The LibriSpeech reader on a fixture in the release layout, and the download stage against a local server."""

import gzip
import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import soundfile

from espnet_ext.data import librispeech
from espnet_ext.data.datadir import read_kaldi_map, validate_data_dir
from espnet_ext.errors import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "librispeech"
CORPUS = FIXTURE / "LibriSpeech"


def error_of(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


def release_lines(part):
    """``(uttid, text, flac)`` straight from the fixture's trans.txt files."""
    rows = []
    for trans in sorted((CORPUS / part).glob("*/*/*.trans.txt")):
        for line in trans.read_text(encoding="utf-8").splitlines():
            utt, text = line.split(" ", 1)
            rows.append((utt, text, trans.parent / f"{utt}.flac"))
    return sorted(rows)


@pytest.fixture()
def corpus_copy(tmp_path):
    """A writable copy of the fixture, to damage."""
    shutil.copytree(FIXTURE / "LibriSpeech", tmp_path / "db" / "LibriSpeech")
    return tmp_path / "db" / "LibriSpeech"


# ------------------------------------------------------------------------------------------------
# prepare


@pytest.mark.parametrize(
    "root", [FIXTURE, CORPUS], ids=["parent-of-LibriSpeech", "LibriSpeech-itself"]
)
def test_prepare_writes_kaldi_data_dirs_as_espnet(tmp_path, root):
    out = tmp_path / "data"
    assert librispeech.prepare(root, ["dev-clean", "test-clean"], out) == [
        out / "dev_clean",
        out / "test_clean",
    ]
    for part in ("dev-clean", "test-clean"):
        d = out / part.replace("-", "_")
        rows = release_lines(part)
        assert (d / "text").read_text(encoding="utf-8") == "".join(f"{u} {t}\n" for u, t, _ in rows)
        assert read_kaldi_map(d / "wav.scp") == {u: str(flac) for u, _, flac in rows}
        assert read_kaldi_map(d / "utt2spk") == {u: u.rsplit("-", 1)[0] for u, _, _ in rows}
        for path in read_kaldi_map(d / "wav.scp").values():
            assert Path(path).is_absolute() and soundfile.info(path).samplerate == 16000
        assert validate_data_dir(d, check_audio=True) == [u for u, _, _ in rows]
    assert (out / "dev_clean" / "spk2utt").read_text() == (
        "1272-128104 1272-128104-0000 1272-128104-0001 1272-128104-0002\n"
        "1272-135031 1272-135031-0000\n"
        "1462-170138 1462-170138-0000 1462-170138-0001\n"
    )
    assert read_kaldi_map(out / "dev_clean" / "spk2gender") == {
        "1272-128104": "m",
        "1272-135031": "m",
        "1462-170138": "f",
    }
    assert read_kaldi_map(out / "test_clean" / "spk2gender") == {
        "1089-134686": "m",
        "121-121726": "f",
    }


def test_speakers_txt_columns_and_the_name_with_pipes():
    genders = librispeech.read_speaker_genders(CORPUS / "SPEAKERS.TXT")
    assert genders["60"] == "m"  # "60 | M | train-clean-100 | 20.18 | |CBW|Simon"
    assert genders == {
        "14": "f",
        "17": "m",
        "19": "f",
        "60": "m",
        "121": "f",
        "1089": "m",
        "1272": "m",
        "1462": "f",
    }


def test_speakers_txt_bad_sex(corpus_copy):
    speakers = corpus_copy / "SPEAKERS.TXT"
    speakers.write_text(speakers.read_text().replace("1272 | M |", "1272 | X |"))
    assert error_of(librispeech.read_speaker_genders, speakers) == (
        f"{speakers}:19: key '1272': SEX is 'X', expected M or F"
    )


def test_root_that_is_not_librispeech(tmp_path):
    (tmp_path / "wsj0").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    message = error_of(librispeech.prepare, tmp_path, ["dev-clean"], tmp_path / "data")
    assert message.startswith(
        f"{tmp_path}: not a LibriSpeech release: no LibriSpeech/<part>/ under it"
    )
    assert "found notes.txt, wsj0/" in message


def test_root_that_does_not_exist(tmp_path):
    assert error_of(
        librispeech.prepare, tmp_path / "nope", ["dev-clean"], tmp_path / "data"
    ).startswith(f"{tmp_path / 'nope'}: corpus root does not exist")


def test_missing_part(tmp_path):
    message = error_of(
        librispeech.prepare, FIXTURE, ["dev-clean", "train-clean-100"], tmp_path / "data"
    )
    assert message.startswith(
        f"{CORPUS / 'train-clean-100'}: part 'train-clean-100' is missing: "
        f"no LibriSpeech/train-clean-100 under {FIXTURE}"
    )
    assert "dev-clean/, test-clean/" in message
    assert not (tmp_path / "data").exists()  # checked before writing anything


def test_transcript_line_whose_flac_is_missing(corpus_copy, tmp_path):
    (corpus_copy / "dev-clean/1272/128104/1272-128104-0001.flac").unlink()
    trans = corpus_copy / "dev-clean/1272/128104/1272-128104.trans.txt"
    message = error_of(
        librispeech.prepare, corpus_copy, ["test-clean", "dev-clean"], tmp_path / "data"
    )
    assert message.startswith(f"{trans}:2: key '1272-128104-0001': audio file ")
    assert message.endswith("1272-128104-0001.flac is missing")
    assert (tmp_path / "data" / "test_clean").is_dir() and not (
        tmp_path / "data" / "dev_clean"
    ).exists()


def test_flac_without_transcript_line(corpus_copy, tmp_path):
    chapter = corpus_copy / "test-clean/121/121726"
    shutil.copy(chapter / "121-121726-0001.flac", chapter / "121-121726-0002.flac")
    message = error_of(librispeech.prepare, corpus_copy, ["test-clean"], tmp_path / "data")
    assert message == (
        f"{chapter / '121-121726-0002.flac'}: has no transcript line in {chapter / '121-121726.trans.txt'}"
        " (1 such file(s) in the chapter)"
    )


def test_non_utf8_transcript(corpus_copy, tmp_path):
    trans = corpus_copy / "test-clean/1089/134686/1089-134686.trans.txt"
    trans.write_bytes(trans.read_bytes().replace(b"STUFF IT", b"STUFF \xc9T"))
    message = error_of(librispeech.prepare, corpus_copy, ["test-clean"], tmp_path / "data")
    assert message.startswith(f"{trans}:2: not valid UTF-8")


def test_empty_transcript(corpus_copy, tmp_path):
    trans = corpus_copy / "test-clean/1089/134686/1089-134686.trans.txt"
    lines = trans.read_text().splitlines()
    trans.write_text("\n".join([lines[0], "1089-134686-0001 ", lines[2]]) + "\n")
    assert error_of(librispeech.prepare, corpus_copy, ["test-clean"], tmp_path / "data") == (
        f"{trans}:2: key '1089-134686-0001': empty transcript"
    )


def test_missing_transcript_file_and_foreign_ids(corpus_copy, tmp_path):
    trans = corpus_copy / "test-clean/121/121726/121-121726.trans.txt"
    original = trans.read_text()
    trans.write_text(original.replace("121-121726-0001", "121-999999-0001"))
    assert error_of(librispeech.prepare, corpus_copy, ["test-clean"], tmp_path / "data").startswith(
        f"{trans}:2: key '121-999999-0001': utterance id is not of this chapter"
    )
    trans.unlink()
    assert error_of(librispeech.prepare, corpus_copy, ["test-clean"], tmp_path / "data").startswith(
        f"{trans}: transcript file is missing for the 2 .flac files"
    )


def test_reader_missing_from_speakers_txt(corpus_copy, tmp_path):
    speakers = corpus_copy / "SPEAKERS.TXT"
    speakers.write_text("".join(line for line in speakers.open() if not line.startswith("121 ")))
    assert error_of(librispeech.prepare, corpus_copy, ["test-clean"], tmp_path / "data") == (
        f"{speakers}: key '121': reader 121 of test-clean has no line in SPEAKERS.TXT"
    )


def test_unreadable_flac_with_check_audio(corpus_copy, tmp_path):
    (corpus_copy / "test-clean/121/121726/121-121726-0000.flac").write_bytes(b"fLaC but truncated")
    assert librispeech.prepare(
        corpus_copy, ["test-clean"], tmp_path / "data"
    )  # tables alone are fine
    message = error_of(
        librispeech.prepare, corpus_copy, ["test-clean"], tmp_path / "data2", check_audio=True
    )
    trans = corpus_copy / "test-clean/121/121726/121-121726.trans.txt"
    assert message.startswith(f"{trans}:1: key '121-121726-0000': cannot read audio")


def test_cli_prepare(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.data.librispeech",
            "prepare",
            "--root",
            str(FIXTURE),
            "--parts",
            "dev-clean",
            "test-clean",
            "--out",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert len(read_kaldi_map(tmp_path / "data" / "test_clean" / "text")) == 5
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.data.librispeech",
            "prepare",
            "--root",
            str(tmp_path),
            "--parts",
            "dev-clean",
            "--out",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and bad.stderr.startswith(
        f"error: {tmp_path}: not a LibriSpeech release"
    )


# ------------------------------------------------------------------------------------------------
# download


@pytest.fixture()
def server(http_server):
    """The local server with ``dev-clean.tar.gz`` built from the fixture as the release packs it."""
    with tarfile.open(http_server.root / "dev-clean.tar.gz", "w:gz") as tar:
        for name in ("README.TXT", "SPEAKERS.TXT", "CHAPTERS.TXT", "dev-clean"):
            tar.add(CORPUS / name, arcname=f"LibriSpeech/{name}")
    return http_server


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_verifies_extracts_and_marks_complete(server, tmp_path):
    dest = tmp_path / "corpus"
    checksums = {"dev-clean.tar.gz": ("sha256", sha256(server.root / "dev-clean.tar.gz"))}
    assert (
        librispeech.download(dest, ["dev-clean"], base_url=server.url, checksums=checksums) == dest
    )
    assert server.requests == [("/dev-clean.tar.gz", None)]
    assert (dest / "LibriSpeech" / "dev-clean" / ".complete").is_file()
    assert (dest / "dev-clean.tar.gz").read_bytes() == (
        server.root / "dev-clean.tar.gz"
    ).read_bytes()
    assert not (dest / "dev-clean.tar.gz.part").exists()
    librispeech.prepare(dest, ["dev-clean"], tmp_path / "data")
    prepared = read_kaldi_map(tmp_path / "data" / "dev_clean" / "text")
    assert list(prepared) == [u for u, _, _ in release_lines("dev-clean")]

    librispeech.download(
        dest, ["dev-clean"], base_url=server.url, checksums=checksums, remove_archive=True
    )
    assert len(server.requests) == 1  # complete part: nothing fetched again
    (dest / "LibriSpeech" / "dev-clean" / ".complete").unlink()  # e.g. extraction was interrupted
    librispeech.download(
        dest, ["dev-clean"], base_url=server.url, checksums=checksums, remove_archive=True
    )
    assert len(server.requests) == 1  # the verified archive is reused, then removed
    assert (dest / "LibriSpeech" / "dev-clean" / ".complete").is_file() and not (
        dest / "dev-clean.tar.gz"
    ).exists()


def test_download_checksum_mismatch_deletes_the_partial_file(server, tmp_path):
    dest = tmp_path / "corpus"
    with pytest.raises(InputError) as info:
        wrong = {"dev-clean.tar.gz": ("sha256", "0" * 64)}
        librispeech.download(dest, ["dev-clean"], base_url=server.url, checksums=wrong)
    message = str(info.value)
    url = f"{server.url}/dev-clean.tar.gz"
    assert message.startswith(
        f"{dest / 'dev-clean.tar.gz.part'}: sha256 of the download from {url} is "
    )
    assert "expected 0000" in message
    assert (
        sorted(p.name for p in dest.iterdir()) == []
    )  # no partial file, no archive, nothing extracted


def test_download_resumes_a_partial_file(server, tmp_path):
    dest = tmp_path / "corpus"
    dest.mkdir()
    archive = (server.root / "dev-clean.tar.gz").read_bytes()
    (dest / "dev-clean.tar.gz.part").write_bytes(archive[:1000])
    checksums = {"dev-clean.tar.gz": ("sha256", hashlib.sha256(archive).hexdigest())}
    librispeech.download(dest, ["dev-clean"], base_url=server.url, checksums=checksums)
    assert server.requests == [("/dev-clean.tar.gz", "bytes=1000-")]
    assert (dest / "dev-clean.tar.gz").read_bytes() == archive

    # A server that ignores ranges sends everything again: the partial file is overwritten, not
    # appended to.
    server.ranges = False
    (dest / "LibriSpeech" / "dev-clean" / ".complete").unlink()
    (dest / "dev-clean.tar.gz").rename(dest / "dev-clean.tar.gz.part")
    (dest / "dev-clean.tar.gz.part").write_bytes(archive[:500])
    librispeech.download(dest, ["dev-clean"], base_url=server.url, checksums=checksums)
    assert (dest / "dev-clean.tar.gz").read_bytes() == archive


def test_download_unknown_part_and_unreachable_server(tmp_path, server):
    assert "unknown LibriSpeech part 'dev-clear'" in error_of(
        librispeech.download, tmp_path, ["dev-clear"]
    )
    with pytest.raises(librispeech.DownloadError, match="HTTP 404"):
        librispeech.download(tmp_path, ["dev-other"], base_url=server.url)


def test_cli_download_uses_the_published_checksums(server, tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.data.librispeech",
            "download",
            "--dest",
            str(tmp_path / "corpus"),
            "--parts",
            "dev-clean",
            "--base_url",
            server.url,
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert (
        f"expected {librispeech.CHECKSUMS['dev-clean.tar.gz'][1]}" in run.stderr
    )  # our tarball is not the release


# ------------------------------------------------------------------------------------------------
# LM text


def test_lm_corpus_download_read_and_kaldi_text(server, tmp_path):
    lines = b"THE  FIRST LINE\n\n  second line here \nTHIRD\n"
    (server.root / librispeech.LM_CORPUS).write_bytes(gzip.compress(lines))
    md5 = hashlib.md5(gzip.compress(lines)).hexdigest()
    checksums = {librispeech.LM_CORPUS: ("md5", md5)}
    path = librispeech.download_lm_corpus(tmp_path / "lm", base_url=server.url, checksums=checksums)
    assert path == tmp_path / "lm" / librispeech.LM_CORPUS
    assert list(librispeech.read_lm_text(path)) == ["THE FIRST LINE", "SECOND LINE HERE", "THIRD"]
    assert librispeech.write_lm_text(path, tmp_path / "lm_text", max_lines=2) == 2
    assert (tmp_path / "lm_text").read_text() == (
        "librispeech_lm_000000001 THE FIRST LINE\nlibrispeech_lm_000000002 SECOND LINE HERE\n"
    )


def test_lm_text_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "lm.txt.gz"
    bad.write_bytes(gzip.compress(b"OK\nBAD \xff\n"))
    assert error_of(lambda: list(librispeech.read_lm_text(bad))).startswith(
        f"{bad}:2: not valid UTF-8"
    )
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress(b"LINE\n" * 1000)[:40])
    assert error_of(lambda: list(librispeech.read_lm_text(truncated))).startswith(f"{truncated}:")
