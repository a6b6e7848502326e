"""The multilingual data dirs of egs/wmt/mt1 (the head-selection paper's WMT setup), in one process.

For a direction (``m2o``: every language -> English, ``o2m``: English -> every language) and the languages
in task-id order, from the release layout ``<root>/<x>-en/{train,dev,test}`` (``espnet_ext.data.wmt``):

  data/<d>_{train,valid,test}_<x>   each language's pairs, the non-English side as ``text.mul``;
                                    valid and test are the language's one dev / test set of
                                    ``--multilingual_dev`` / ``--multilingual_test`` (``x=name,...``, the
                                    options of local/data.sh), none of the others in dev/ or test/
  data/<d>_{train,valid}            every language's train / valid combined
  lang, task_id                     the language of each pair (the task tag) and its index in ``--langs``,
                                    in every data dir (written with the pairs, combined with them)

o2m sources start with the target-language token ``<2x>``, which tells every model (the shared one too)
what to write. Every valid and test set is read before any training corpus, so a missing one stops the run
before the long part; ids start with ``<x>-`` so that the languages' ids stay apart when combined.

    python -m espnet_ext.data.wmt_multilingual --direction m2o --root WMT/multilingual --out data \\
        --langs de,ro --multilingual_dev de=newstest2018,ro=newsdev2016 \\
        --multilingual_test de=newstest2019,ro=newstest2016
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from espnet_ext.data.datadir import combine_data_dirs
from espnet_ext.data.wmt import prepare, read_release_dir, report
from espnet_ext.errors import ConfigError, reports_input_errors

DIRECTIONS = ("m2o", "o2m")
SPLITS = {"valid": "dev", "test": "test", "train": "train"}  # split -> release directory


def set_table(value: str, langs: Sequence[str], option: str, kind: str) -> dict[str, str]:
    """``x=name,...`` (the ``option`` naming each language's ``kind`` set) as ``{x: name}`` for every
    language of ``langs`` (others may be listed)."""
    table = {}
    for item in filter(None, value.split(",")):
        lang, sep, name = item.partition("=")
        if not sep or not lang or not name:
            raise ConfigError(f"'{item}' is not <language>=<set name>", key=option)
        table[lang] = name
    missing = [x for x in langs if x not in table]
    if missing:
        named = ", ".join(f"language '{x}'" for x in missing)
        raise ConfigError(f"names no {kind} set for {named}", key=option)
    return {x: table[x] for x in langs}


def prepare_multilingual(
    root: str | Path,
    out: str | Path,
    direction: str,
    langs: Sequence[str],
    dev_sets: Mapping[str, str],
    test_sets: Mapping[str, str],
) -> list[Path]:
    """Every data dir above under ``out``; returns the dirs that carry task ids."""
    if direction not in DIRECTIONS:
        raise ConfigError(
            f"must be one of {', '.join(DIRECTIONS)}, not '{direction}'", key="direction"
        )
    root, out = Path(root), Path(out)
    only = {"valid": dev_sets, "test": test_sets}
    for split, release in SPLITS.items():  # valid and test first: they fail fast
        for task_id, x in enumerate(langs):
            src, tgt = (x, "en") if direction == "m2o" else ("en", x)
            sets = [only[split][x]] if split in only else None
            corpora = read_release_dir(root / f"{x}-en" / release, src, tgt, sets=sets)
            dest = out / f"{direction}_{split}_{x}"
            files = ("mul", "en") if direction == "m2o" else ("en", "mul")
            prefix = "" if direction == "m2o" else f"<2{x}> "
            prepare(
                dest,
                corpora,
                *files,
                task_tag=x,
                id_prefix=f"{x}-",
                src_prefix=prefix,
                task_id=task_id,  # written with the pairs: no table of a whole split in memory
            )
            report(corpora, [dest])
    for split in ("train", "valid"):
        combine_data_dirs(
            out / f"{direction}_{split}", [out / f"{direction}_{split}_{x}" for x in langs]
        )
    tagged = [out / f"{direction}_{split}" for split in ("train", "valid")]
    return tagged + [out / f"{direction}_test_{x}" for x in langs]


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.wmt_multilingual",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--direction", required=True, choices=DIRECTIONS)
    parser.add_argument("--root", required=True, help="holds <x>-en/{train,dev,test} per language")
    parser.add_argument("--out", required=True, help="where the data dirs go (data)")
    parser.add_argument(
        "--langs", required=True, help="the non-English languages in task-id order: cs,de,..."
    )
    parser.add_argument(
        "--multilingual_dev", required=True, help="each language's dev set: x=name,..."
    )
    parser.add_argument(
        "--multilingual_test", required=True, help="each language's test set: x=name,..."
    )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    langs = [x for x in args.langs.split(",") if x]
    prepare_multilingual(
        args.root,
        args.out,
        args.direction,
        langs,
        set_table(args.multilingual_dev, langs, "--multilingual_dev", "dev"),
        set_table(args.multilingual_test, langs, "--multilingual_test", "test"),
    )


if __name__ == "__main__":
    sys.exit(main())
