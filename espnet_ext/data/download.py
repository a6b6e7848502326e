"""Corpus downloads that survive interruption and never leave a file that looks finished but is not.

``download(url, target, checksum)`` writes into ``<target>.part``, resuming it with an HTTP
``Range: bytes=N-`` request when it is already there, verifies the ``(algorithm, hexdigest)``
checksum, and only then renames it to ``target`` (atomic on one file system). So ``target``
exists only whole and verified, and rerunning after a network failure continues where it stopped.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

from espnet_ext.errors import ConfigError, InputError

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
    print(
        f"downloading {url} -> {partial}" + (f" (resuming at byte {offset})" if offset else ""),
        file=sys.stderr,
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
