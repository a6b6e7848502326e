"""Corpus downloads and archive extraction that survive interruption and never leave a file that looks
finished but is not.

``download(url, target, checksum)`` writes into ``<target>.part``, resuming it with an HTTP
``Range: bytes=N-`` request when it is already there, verifies the ``(algorithm, hexdigest)``
checksum, and only then renames it to ``target`` (atomic on one file system). So ``target``
exists only whole and verified, and rerunning after a network failure continues where it stopped.

``extract(archive, dest)`` unpacks a tarball into a directory beside its destination and moves the
tree into ``dest`` only once every member was read: a truncated or corrupt archive is an InputError
naming it and leaves nothing in ``dest`` that a later run would take for the corpus.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tarfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path

from espnet_ext.errors import ConfigError, InputError

logger = logging.getLogger(__name__)

CHUNK = 1 << 20


class DownloadError(RuntimeError):
    """The transfer failed (network, HTTP status); rerunning resumes from the ``.part`` file."""


def partial_path(target: str | Path) -> Path:
    """Where ``download`` keeps the unfinished file: ``<target>.part``."""
    target = Path(target)
    return target.with_name(target.name + ".part")


def download(url: str, target: str | Path, checksum: tuple[str, str] | None = None) -> Path:
    """Fetch ``url`` to ``target`` and return ``target``; with ``checksum`` it must match.

    ``target`` already there is taken as done: it is renamed into place only after the transfer
    completed (and matched). A checksum mismatch deletes the ``.part`` file and raises InputError
    naming it, so the next run downloads afresh.
    """
    target = Path(target)
    if target.is_file():
        return target
    if checksum is not None:
        _check_algorithm(checksum[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(target)
    _fetch(url, partial)
    if checksum is not None:
        algorithm, expected = checksum
        actual = file_digest(partial, algorithm)
        if actual != expected.lower():
            partial.unlink()
            raise InputError(
                f"{algorithm} of the download from {url} is {actual}, expected {expected}; "
                "deleted it, rerun to download again",
                path=partial,
            )
    os.replace(partial, target)
    return target


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB blocks."""
    digest = hashlib.new(_check_algorithm(algorithm))
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_algorithm(algorithm: str) -> str:
    if algorithm not in hashlib.algorithms_available:
        raise ConfigError(
            f"unknown checksum algorithm {algorithm!r}; use one of sha256, md5, sha1",
            key="checksum",
        )
    return algorithm


def _fetch(url: str, partial: Path) -> None:
    """Append to ``partial`` from where it stops, or start over if the server ignores ranges."""
    offset = partial.stat().st_size if partial.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    logger.info(
        f"downloading {url} -> {partial}" + (f" (resuming at byte {offset})" if offset else "")
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            resumed = offset and getattr(response, "status", None) == 206
            with open(partial, "ab" if resumed else "wb") as f:
                shutil.copyfileobj(response, f, CHUNK)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:  # the range starts at the end: the file is already whole
            return
        raise DownloadError(f"download of {url} failed: HTTP {e.code} {e.reason}") from e
    except (urllib.error.URLError, OSError) as e:
        raise DownloadError(f"download of {url} failed: {e}; rerun to resume from {partial}") from e


def extract(archive: str | Path, dest: str | Path, advice: str = "download it again") -> Path:
    """Unpack the tarball ``archive`` into ``dest`` whole or not at all; returns ``dest``.

    Members go to ``dest/.<archive name>.extracting`` first (removed when a killed run left it), and
    only after the last member was read are they moved into ``dest``: a new file or dir is renamed
    into place, a dir that is already there (``LibriSpeech/`` of another part) is merged into, a file
    already there is replaced. A truncated or corrupt archive raises InputError naming the archive
    and ``advice`` and removes what it extracted.
    """
    archive, dest = Path(archive), Path(dest)
    staging = dest / f".{archive.name}.extracting"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    logger.info(f"extracting {archive}")
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        shutil.rmtree(staging, ignore_errors=True)
        reason = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise InputError(
            f"cannot extract ({reason}): the archive is truncated or corrupt; {advice}",
            path=archive,
        ) from e
    _move_into(staging, dest)
    staging.rmdir()
    return dest


def _move_into(source: Path, dest: Path) -> None:
    for entry in sorted(source.iterdir()):
        target = dest / entry.name
        if entry.is_dir() and not entry.is_symlink() and target.is_dir():
            _move_into(entry, target)
            entry.rmdir()
        else:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(entry, target)
