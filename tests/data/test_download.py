"""The shared download helper against a local HTTP server and file:// URLs."""

import hashlib
import importlib.util
import tarfile
from pathlib import Path

import numpy as np
import pytest

from espnet_ext.data import cifar100, mustc
from espnet_ext.data.download import DownloadError, download, extract, file_digest, partial_path
from espnet_ext.errors import ConfigError, InputError

DATA = bytes(range(256)) * 40  # 10240 bytes


def _module(corpus: str):
    """tests/fixtures/<corpus>/make_fixture.py as a module."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / corpus / "make_fixture.py"
    spec = importlib.util.spec_from_file_location(f"make_{corpus}_fixture", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def served(http_server):
    (http_server.root / "corpus.tgz").write_bytes(DATA)
    return http_server


def test_file_digest_matches_hashlib(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(DATA)
    assert file_digest(path) == hashlib.sha256(DATA).hexdigest()
    assert file_digest(path, "md5") == hashlib.md5(DATA).hexdigest()
    with pytest.raises(ConfigError, match="key 'checksum': unknown checksum algorithm 'sha0'"):
        file_digest(path, "sha0")


def test_download_verifies_then_renames(served, tmp_path):
    target = tmp_path / "out" / "corpus.tgz"
    checksum = ("sha256", hashlib.sha256(DATA).hexdigest().upper())  # case does not matter
    assert download(f"{served.url}/corpus.tgz", target, checksum) == target
    assert target.read_bytes() == DATA
    assert not partial_path(target).exists()
    assert served.requests == [("/corpus.tgz", None)]
    download(f"{served.url}/corpus.tgz", target, checksum)  # present: nothing fetched again
    assert len(served.requests) == 1


def test_checksum_mismatch_names_the_file_and_deletes_it(served, tmp_path):
    target = tmp_path / "corpus.tgz"
    url = f"{served.url}/corpus.tgz"
    with pytest.raises(InputError) as error:
        download(url, target, ("md5", "0" * 32))
    assert str(error.value) == (
        f"{partial_path(target)}: md5 of the download from {url} is {hashlib.md5(DATA).hexdigest()}, "
        f"expected {'0' * 32}; deleted it, rerun to download again"
    )
    assert not target.exists() and not partial_path(target).exists()


def test_resumes_the_partial_file(served, tmp_path):
    target = tmp_path / "corpus.tgz"
    partial_path(target).write_bytes(DATA[:1000])
    download(f"{served.url}/corpus.tgz", target, ("sha256", hashlib.sha256(DATA).hexdigest()))
    assert served.requests == [("/corpus.tgz", "bytes=1000-")]
    assert target.read_bytes() == DATA


def test_server_ignoring_ranges_starts_over(served, tmp_path):
    served.ranges = False
    target = tmp_path / "corpus.tgz"
    partial_path(target).write_bytes(b"stale bytes from another file")
    download(f"{served.url}/corpus.tgz", target)
    assert target.read_bytes() == DATA


def test_whole_partial_file_is_not_fetched_again(served, tmp_path):
    target = tmp_path / "corpus.tgz"
    partial_path(target).write_bytes(DATA)  # interrupted between transfer and rename
    download(f"{served.url}/corpus.tgz", target, ("sha256", hashlib.sha256(DATA).hexdigest()))
    assert served.requests == [("/corpus.tgz", f"bytes={len(DATA)}-")]  # answered 416
    assert target.read_bytes() == DATA


def test_failures_raise_download_error_and_keep_nothing_finished(served, tmp_path):
    target = tmp_path / "missing.tgz"
    with pytest.raises(DownloadError, match=r"download of .*/missing.tgz failed: HTTP 404"):
        download(f"{served.url}/missing.tgz", target)
    assert not target.exists()
    with pytest.raises(DownloadError, match="rerun to resume from"):
        download("http://127.0.0.1:9/unreachable.tgz", target)  # discard port: refused
    assert not target.exists()


def test_unknown_algorithm_is_refused_before_downloading(served, tmp_path):
    with pytest.raises(ConfigError, match="unknown checksum algorithm"):
        download(f"{served.url}/corpus.tgz", tmp_path / "c", ("crc", "00"))
    assert served.requests == []


def test_file_url(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(DATA)
    target = tmp_path / "copy.bin"
    download(source.as_uri(), target, ("sha1", hashlib.sha1(DATA).hexdigest()))
    assert target.read_bytes() == DATA


def truncated_copy(archive: Path, out: Path) -> Path:
    """The first 60% of ``archive``: an interrupted copy or download."""
    data = archive.read_bytes()
    out.write_bytes(data[: len(data) * 6 // 10])
    return out


def left_over(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_extract_moves_the_tree_in_only_when_whole_and_merges_into_existing_dirs(tmp_path):
    src = tmp_path / "src" / "Corpus" / "part-b"
    src.mkdir(parents=True)
    (src / "a.txt").write_bytes(DATA)
    (src.parent / "README").write_text("readme b\n")
    archive = tmp_path / "part-b.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "Corpus", arcname="Corpus")
    dest = tmp_path / "dest"
    (dest / "Corpus" / "part-a").mkdir(parents=True)  # another part, extracted before
    (dest / "Corpus" / "README").write_text("readme a\n")
    assert extract(archive, dest) == dest
    assert left_over(dest) == ["Corpus"]  # no staging dir left
    assert left_over(dest / "Corpus") == ["README", "part-a", "part-b"]
    assert (dest / "Corpus" / "README").read_text() == "readme b\n"
    assert (dest / "Corpus" / "part-b" / "a.txt").read_bytes() == DATA


def test_truncated_archive_is_named_and_leaves_nothing(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(np.random.default_rng(0).bytes(200_000))  # incompressible
    archive = tmp_path / "corpus.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname="corpus")
    bad = truncated_copy(archive, tmp_path / "bad.tar.gz")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(InputError, match=r"bad\.tar\.gz: cannot extract \(.*\): the archive is "):
        extract(bad, dest, "fetch it again")
    assert left_over(dest) == []
    (dest / ".bad.tar.gz.extracting" / "corpus").mkdir(parents=True)  # a killed run's staging dir
    bad.write_bytes(archive.read_bytes())
    extract(bad, dest)
    assert left_over(dest) == ["corpus"] and (dest / "corpus" / "big.bin").stat().st_size == 200_000


def test_truncated_cifar_tarball_is_an_input_error_not_a_traceback(tmp_path, capsys):
    fixture = _module("cifar100")
    release = fixture.write_release(tmp_path / "release")
    source = tmp_path / "download"
    source.mkdir()
    with tarfile.open(tmp_path / "whole.tar.gz", "w:gz") as tar:
        tar.add(release, arcname="cifar-100-python")
    tarball = truncated_copy(tmp_path / "whole.tar.gz", source / "cifar-100-python.tar.gz")
    with pytest.raises(InputError, match="cifar-100-python.tar.gz: cannot extract") as error:
        cifar100.release_dir(source)
    assert "python -m espnet_ext.data.cifar100 download" in str(error.value)
    assert left_over(source) == ["cifar-100-python.tar.gz"]
    assert cifar100.main(["prepare", "--release", str(source), "--out", str(tmp_path / "d")]) == 1
    assert f"error: {tarball}: cannot extract" in capsys.readouterr().err


def test_truncated_mustc_archive_leaves_no_tree_the_next_run_trusts(tmp_path):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "mustc" / "en-de"
    with tarfile.open(tmp_path / "whole.tar.gz", "w:gz") as tar:
        tar.add(fixture, arcname="en-de")
    root = tmp_path / "root"
    root.mkdir()
    archive = truncated_copy(tmp_path / "whole.tar.gz", root / "MUSTC_v1.0_en-de.tar.gz")
    for _ in range(2):  # the second run finds no partial en-de/ either
        with pytest.raises(InputError, match="MUSTC_v1.0_en-de.tar.gz: cannot extract") as error:
            mustc.check_release(root, "de")
        assert mustc.LICENCE_URL in str(error.value)
        assert left_over(root) == ["MUSTC_v1.0_en-de.tar.gz"]
    archive.write_bytes((tmp_path / "whole.tar.gz").read_bytes())
    assert mustc.check_release(root, "de") == root / "en-de"
