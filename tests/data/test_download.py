"""The shared download helper against a local HTTP server and file:// URLs."""

import hashlib

import pytest

from espnet_ext.data.download import DownloadError, download, file_digest, partial_path
from espnet_ext.errors import ConfigError, InputError

DATA = bytes(range(256)) * 40  # 10240 bytes


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
