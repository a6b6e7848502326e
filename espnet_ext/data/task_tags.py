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
from collections.abc import Iterable, Sequence
from pathlib import Path

from espnet_ext.data.datadir import read_kaldi_entries
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

ZERO_SHOT_HINT = (
    "; an adapter model has one adapter per trained task and cannot serve a zero-shot direction"
)


def task_ids(
    tag_file: str | Path,
    known_tags: Sequence[str],
    keys: Iterable[str] | None = None,
    adapters: bool = False,
) -> dict[str, int]:
    """``{utt: task id}`` of a tag file, ids being positions in ``known_tags``.

    A missing file, an unknown tag (``adapters``: said to be a zero-shot task the adapter model cannot
    serve) or, when ``keys`` is given, an utterance of ``keys`` the file has no tag for is an InputError.
    """
    tag_file = Path(tag_file)
    if not tag_file.is_file():
        raise InputError(
            "no tag file: the model is task-conditioned and needs a task tag per utterance",
            path=tag_file,
        )
    index = {tag: i for i, tag in enumerate(known_tags)}
    ids = {}
    for entry in read_kaldi_entries(tag_file, what="task tag"):
        tag = entry.value.strip()
        if tag not in index:
            raise InputError(
                f"task tag '{tag}' is unknown to the model (it knows {' '.join(known_tags)})"
                + (ZERO_SHOT_HINT if adapters else ""),
                path=tag_file,
                line=entry.line,
                key=entry.key,
            )
        ids[entry.key] = index[tag]
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


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task_tags", required=True, help="the model's tags in id order")
    parser.add_argument("tag_file", help="<utt> <tag> lines")
    parser.add_argument("out", help="<utt> <task id> lines (text_int)")
    args = parser.parse_args(argv)
    write_task_ids(args.out, task_ids(args.tag_file, args.task_tags.split()))


if __name__ == "__main__":
    sys.exit(main())
