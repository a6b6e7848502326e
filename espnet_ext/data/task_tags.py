"""Task tags of a data dir: ``<utt> <tag>`` per utterance (a language, a direction or a domain).

Head selection and adapters take an integer task id per utterance; the data dir names the task by its
tag (``data/<set>/lang``: ``utt1 de``) and the model config lists the tags it knows, in id order
(``model_conf: {task_tags: [ar, de, es]}``: ar is task 0). This module maps one to the other, refusing an
unknown tag with the tag file's path and line, and writes the id table that ESPnet2 reads as a
``text_int`` data file (``--train_data_path_and_name_and_type <dir>/task_id,task_id,text_int``).

    python -m espnet_ext.data.task_tags --task_tags "ar de es" data/train/lang data/train/task_id
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from espnet_ext.data.datadir import (
    Entry,
    entries_in_id_order,
    iter_kaldi_entries,
    read_kaldi_entries,
)
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

ZERO_SHOT_HINT = (
    "; an adapter model has one adapter per trained task and cannot serve a zero-shot direction"
)


def iter_task_ids(
    tag_file: str | Path,
    known_tags: Sequence[str],
    entries: Iterable[Entry] | None = None,
    adapters: bool = False,
) -> Iterator[tuple[Entry, int]]:
    """``(entry, task id)`` of each line of a tag file in file order, one at a time, ids being positions
    in ``known_tags``; ``entries``: the file's entries when the caller reads them (else read here).

    A missing file or an unknown tag (``adapters``: said to be a zero-shot task the adapter model
    cannot serve) is an InputError, the latter at its line.
    """
    tag_file = Path(tag_file)
    if not tag_file.is_file():
        raise InputError(
            "no tag file: the model is task-conditioned and needs a task tag per utterance",
            path=tag_file,
        )
    index = {tag: i for i, tag in enumerate(known_tags)}
    for entry in iter_kaldi_entries(tag_file, what="task tag") if entries is None else entries:
        tag = entry.value.strip()
        if tag not in index:
            raise InputError(
                f"task tag '{tag}' is unknown to the model (it knows {' '.join(known_tags)})"
                + (ZERO_SHOT_HINT if adapters else ""),
                path=tag_file,
                line=entry.line,
                key=entry.key,
            )
        yield entry, index[tag]


def task_ids(
    tag_file: str | Path,
    known_tags: Sequence[str],
    keys: Iterable[str] | None = None,
    adapters: bool = False,
) -> dict[str, int]:
    """``{utt: task id}`` of a tag file (see :func:`iter_task_ids`), held whole: for a set being
    decoded; a training split's table is written by :func:`write_task_id_table`, which streams.

    Also an InputError: a repeated id and, when ``keys`` is given, an utterance of ``keys`` the file
    has no tag for.
    """
    tag_file = Path(tag_file)
    entries = read_kaldi_entries(tag_file, what="task tag") if tag_file.is_file() else None
    ids = {e.key: i for e, i in iter_task_ids(tag_file, known_tags, entries, adapters)}
    missing = [key for key in keys or () if key not in ids]
    if missing:
        raise InputError(
            f"no task tag for {len(missing)} utterance(s), e.g. '{missing[0]}'", path=tag_file
        )
    return ids


def write_task_ids(path: str | Path, ids: dict[str, int]) -> None:
    """The ``<utt> <id>`` table ESPnet2 reads as ``text_int``, sorted, written atomically."""
    with atomic_write(path) as f:
        for key in sorted(ids):
            f.write(f"{key} {ids[key]}\n")


def write_task_id_table(
    tag_file: str | Path, known_tags: Sequence[str], path: str | Path, adapters: bool = False
) -> int:
    """The ``text_int`` table of :func:`write_task_ids` for the tag file, streaming: ids are written as
    the lines come (a tag file in C order, as a data dir's is) or sorted on disk (GNU sort) if they
    are out of order, so memory does not grow with the split. Refused as :func:`task_ids` refuses
    (without ``keys``); nothing is written then. Returns the number of utterances.
    """
    tag_file, path = Path(tag_file), Path(path)
    count = 0
    with (
        atomic_write(path) as out,  # makes path's dir, where sort's files go (room for the table)
        tempfile.TemporaryDirectory(prefix=f".{path.name}.", dir=path.parent) as work,
    ):
        ids = iter_task_ids(tag_file, known_tags, adapters=adapters)
        entries = (Entry(e.line, e.key, str(task)) for e, task in ids)
        for entry in entries_in_id_order(tag_file, entries, work):
            out.write(f"{entry.key} {entry.value}\n")
            count += 1
    return count


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task_tags", required=True, help="the model's tags in id order")
    parser.add_argument("tag_file", help="<utt> <tag> lines")
    parser.add_argument("out", help="<utt> <task id> lines (text_int)")
    args = parser.parse_args(argv)
    write_task_id_table(args.tag_file, args.task_tags.split(), args.out)


if __name__ == "__main__":
    sys.exit(main())
