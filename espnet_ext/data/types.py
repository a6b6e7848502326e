"""ESPnet2 data types for images and videos: ``--*_data_path_and_name_and_type <scp>,<name>,image|video``.

ESPnet2 reads every data file through ``espnet2.train.dataset.DATA_TYPES`` (type name -> loader of a
``key value`` file). It has no image or video type; ``MediaDataset``, the dataset of our tasks
(``espnet_ext.tasks.abs_ext_task``), reads ours and hands every other type to ESPnet. An scp line is
``<key> <path>``; a value is decoded when the key is read, and anything that cannot be decoded raises
``InputError`` naming the scp file, its line, the key and the media path.

- ``image``: PNG/JPEG/... via Pillow -> float32 ``(H, W)`` for grey, ``(H, W, C)`` otherwise,
  in [0, 1].
- ``video``: ``.npy`` of uint8 frames ``(T, H, W)`` / ``(T, H, W, 1|3)``, or any 25 fps file FFmpeg
  decodes through PyAV (``.mp4``, ``.avi``) -> float32 grey ``(T, H, W)`` in [0, 1]
  (``espnet_ext.data.video``).
"""

from __future__ import annotations

import argparse
import array
import collections.abc
import hashlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines


def decode_image(path: str) -> np.ndarray:
    """Decode one image file to float32 in [0, 1]; raises ``ValueError``/``OSError`` when it cannot."""
    from PIL import Image

    with Image.open(path) as img:
        img.load()
        if img.mode == "P":  # palette: expand to the colours it stands for
            img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        elif img.mode == "1":
            img = img.convert("L")
        elif img.mode not in ("L", "LA", "RGB", "RGBA") and not img.mode.startswith("I"):
            img = img.convert("RGB")  # CMYK, YCbCr, ... as RGB
        array = np.asarray(img)
    if array.dtype == np.uint8:
        scale = 255.0
    elif img.mode.startswith("I"):  # 16-bit PNG (mode I;16 or I)
        scale = 65535.0
    else:
        raise ValueError(f"unsupported pixel format {img.mode} ({array.dtype})")
    return array.astype(np.float32) / scale


def decode_video(path: str) -> np.ndarray:
    """Decode one video (``.npy`` of uint8 frames, or a file PyAV decodes) to float32 grey (T, H, W) in
    [0, 1] at 25 fps; another frame rate is refused (``espnet_ext.data.video``: data prepared by our
    readers is 25 fps)."""
    from espnet_ext.data.video import read_video

    return read_video(path).astype(np.float32) / 255.0


def _key_hash(key: bytes) -> int:
    """A 64-bit hash of a key that every process computes alike (``hash()`` is salted per interpreter,
    and a reader may be pickled to a spawned DataLoader worker)."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little", signed=True)


class MediaScpReader(collections.abc.Mapping):
    """``key -> decoded array`` for an scp of ``<key> <path>`` lines; decodes lazily, on access.

    Refuses a malformed line and a duplicate key, naming the scp and line. ``keys_to_load`` (ESPnet's
    hook: the keys of a statistics or decoding job, of a DDP rank's batches) keeps only those entries
    (and checks only those for duplicates); iteration is in file order.

    The table lives in a handful of arrays, not one Python object per entry: the UTF-8 bytes of the keys
    and of the paths, their end offsets, line numbers, and the keys' 64-bit hashes, sorted and searched
    with ``np.searchsorted``. Millions of images then cost about the scp's size plus 40 B an entry, and
    forked DataLoader workers read them without copying pages (reading a dict's entries writes their
    reference counts, which copies every page they lie on into each worker).
    """

    kind = "media"

    def __init__(
        self,
        scp: str | Path,
        decode: Callable[[str], np.ndarray],
        keys_to_load: collections.abc.Set[str] | None = None,
    ):
        self.scp = str(scp)
        self.decode = decode
        keys, paths = bytearray(), bytearray()
        key_ends, path_ends, lines, hashes = (array.array("q") for _ in range(4))
        entries = 0
        for lineno, line in read_utf8_lines(self.scp):
            if not line.strip():
                continue
            entries += 1
            fields = line.split(maxsplit=1)
            if len(fields) != 2:
                raise InputError(
                    f"expected '<key> <path>', got {line!r}", path=self.scp, line=lineno
                )
            if keys_to_load is not None and fields[0] not in keys_to_load:
                continue
            key = fields[0].encode()
            keys += key
            paths += fields[1].strip().encode()
            key_ends.append(len(keys))
            path_ends.append(len(paths))
            lines.append(lineno)
            hashes.append(_key_hash(key))
        if not entries:
            raise InputError(f"no entries in this {self.kind} scp", path=self.scp)
        if not lines:
            raise InputError(
                f"none of the {len(keys_to_load)} keys asked for is in this {self.kind} scp",
                path=self.scp,
                key=min(keys_to_load) if keys_to_load else None,
            )
        self._keys, self._paths = bytes(keys), bytes(paths)
        self._key_ends, self._path_ends, self._lines = (
            np.array(a, dtype=np.int64) for a in (key_ends, path_ends, lines)
        )
        hashes = np.array(hashes, dtype=np.int64)
        self._by_hash = np.argsort(hashes, kind="stable")  # equal hashes keep file order
        self._hashes = hashes[self._by_hash]
        self._refuse_duplicates()

    def _key(self, i: int) -> bytes:
        return self._keys[self._key_ends[i - 1] if i else 0 : self._key_ends[i]]

    def _refuse_duplicates(self) -> None:
        """Raise for the first line (in file order) whose key an earlier line has."""
        repeats = []  # (line, line of the first occurrence, key)
        run: dict[bytes, int] = {}  # key -> first row, within a run of equal hashes
        previous = -2
        for at in np.flatnonzero(self._hashes[1:] == self._hashes[:-1]):
            if at != previous + 1:  # a new run starts at ``at``
                run = {self._key(self._by_hash[at]): self._by_hash[at]}
            i, previous = self._by_hash[at + 1], at
            key = self._key(i)
            if key in run:
                repeats.append((int(self._lines[i]), int(self._lines[run[key]]), key.decode()))
            else:
                run[key] = i
        if repeats:
            line, first, key = min(repeats)
            raise InputError(
                f"duplicate key (first on line {first})", path=self.scp, line=line, key=key
            )

    def _row(self, key: str) -> int:
        """Row of ``key`` in the arrays; ``KeyError`` if the scp has no such key."""
        if isinstance(key, str):
            try:
                encoded = key.encode()
            except UnicodeEncodeError:  # a lone surrogate: no UTF-8 scp line has it
                raise KeyError(key) from None
            h = np.int64(_key_hash(encoded))
            at = int(np.searchsorted(self._hashes, h))
            while at < len(self._hashes) and self._hashes[at] == h:
                if self._key(self._by_hash[at]) == encoded:
                    return int(self._by_hash[at])
                at += 1
        raise KeyError(key)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.checked(key, self.decode)

    def checked(self, key: str, read: Callable[[str], object]):
        """``read`` of ``key``'s file, its failure an ``InputError`` naming the scp, line, key and file."""
        row = self._row(key)
        media = self._path(row)
        try:
            return read(media)
        except (
            OSError,
            ValueError,
            SyntaxError,
            EOFError,
        ) as e:  # what Pillow, numpy, PyAV raise on bad files
            raise InputError(
                f"cannot decode {self.kind} '{media}': {e}",
                path=self.scp,
                line=int(self._lines[row]),
                key=key,
            ) from e

    def _path(self, row: int) -> str:
        return self._paths[self._path_ends[row - 1] if row else 0 : self._path_ends[row]].decode()

    def path(self, key: str) -> str:
        return self._path(self._row(key))

    def __contains__(self, key) -> bool:  # Mapping's default would decode the file to answer
        try:
            self._row(key)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return (self._key(i).decode() for i in range(len(self)))

    def __len__(self) -> int:
        return len(self._lines)


class ImageScpReader(MediaScpReader):
    kind = "image"

    def __init__(self, scp: str | Path, keys_to_load: collections.abc.Set[str] | None = None):
        super().__init__(scp, decode_image, keys_to_load)


class VideoScpReader(MediaScpReader):
    kind = "video"

    def __init__(self, scp: str | Path, keys_to_load: collections.abc.Set[str] | None = None):
        super().__init__(scp, decode_video, keys_to_load)

    def frames(self, key: str) -> int:
        """How many frames ``self[key]`` has, checked as decoding checks it (``video.frame_count``)."""
        from espnet_ext.data.video import frame_count

        return self.checked(key, frame_count)


DATA_TYPES = {
    "image": dict(
        func=ImageScpReader,
        kwargs=["keys_to_load"],
        help="Image files (PNG, JPEG, ...): float32 (H, W) grey or (H, W, C), values in [0, 1]."
        "\n\n   utterance_id_a a.png\n   utterance_id_b b.jpg\n   ...",
    ),
    "video": dict(
        func=VideoScpReader,
        kwargs=["keys_to_load"],
        help="Videos (25 fps .mp4/.avi read with PyAV, or .npy of uint8 frames): float32 grey "
        "(T, H, W) in [0, 1]."
        "\n\n   utterance_id_a a.mp4\n   utterance_id_b b.npy\n   ...",
    ),
}


def check_scp(scp, kind: str) -> int:
    """Decode every entry of an image/video scp (what a pipeline's data stage runs); returns the count.
    The first file that cannot be decoded raises ``InputError`` naming the scp, line, key and file."""
    reader = DATA_TYPES[kind]["func"](scp)
    for key in reader:
        reader[key]
    return len(reader)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="decode every entry of an image or video scp")
    parser.add_argument("kind", choices=sorted(DATA_TYPES))
    parser.add_argument("scp")
    args = parser.parse_args(argv)
    print(f"{args.scp}: {check_scp(args.scp, args.kind)} {args.kind}s decode")


if __name__ == "__main__":
    sys.exit(main())
