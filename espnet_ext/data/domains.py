"""Multi-domain data (the head-selection paper's Tables 3 and 5): other domains' data dirs added to mTEDx's.

    python -m espnet_ext.data.domains combine --data data --require text,lang covost=/data/covost2_asr ...
    python -m espnet_ext.data.domains test_sets --task st covost europarl   # the names run.sh decodes

Each ``<domain>=<root>`` names a root of Kaldi data dirs ``train``, ``valid`` and ``test_<name>`` with the
tables of mTEDx's data dirs (ASR: ``text``, ``lang``, as ``espnet_ext.data.mtedx prepare`` writes them; ST:
``text.src``, ``text.tgt``, ``src_lang``, ``tgt_lang``, ``direction``, as ``prepare_st``), ``--require``
naming the ones every dir must have; wav.scp with or without segments. Every id (utterance, recording,
speaker) of a domain is prefixed with ``<domain>_`` (two corpora may reuse talk or clip names), a ``domain``
table is added, and

  data/train, data/valid     become mTEDx's (domain ``tedx``) and every domain's, combined;
  data/{train,valid}_<domain>  each domain's alone (``tedx`` included), for the paper's "separate" models;
  data/test_<domain>_<name>  each test dir of a domain, for a score per domain and language or direction.

Everything is read and checked before data/train and data/valid are replaced.

``test_sets`` names those test dirs for the domains the recipes know: CoVoST 2 and Europarl-ST in the
paper's languages (Table 8, ASR) and directions (footnotes 3 and 4, ST: the mTEDx test directions they
share), and the numbers world's mini domain "other" in those its local/data.sh generates.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.data.datadir import (
    atomic_dir,
    combine_data_dirs,
    command_parser,
    fix_spk2utt,
    read_kaldi_map,
    table_files,
    validate_data_dir,
    write_kaldi_map,
)
from espnet_ext.errors import InputError, reports_input_errors

BASE_DOMAIN = "tedx"
# What each other domain's test dirs are named after: ASR languages, ST directions
TEST_NAMES = {
    "asr": {
        "covost": "ar de es fr it pt ru",
        "europarl": "de es fr it pt",
        "other": "es it pt",  # egs/mtedx/asr1/local/data.sh --mini_other_train_sizes
    },
    "st": {
        "covost": "es-en fr-en it-en pt-en ru-en",
        "europarl": "es-en es-fr es-it es-pt fr-en fr-es fr-pt it-en it-es pt-en pt-es",
        "other": "es-en it-en it-es pt-es",  # egs/mtedx/st1/local/data.sh --mini_other_st_train_sizes
    },
}


ST_TABLES = ("text.src", "text.tgt", "tgt_lang")


def with_domain(
    src: Path, dst: Path, domain: str, prefix: str = "", require: Sequence[str] = ST_TABLES
) -> None:
    """``src`` copied to ``dst`` with ids prefixed by ``prefix`` and a ``domain`` table."""
    validate_data_dir(src, require=tuple(require))
    utts = set(read_kaldi_map(src / "utt2spk"))
    recordings = (src / "segments").exists()
    with atomic_dir(dst) as tmp:
        for path in table_files(src):
            if path.name == "spk2utt":
                continue  # rebuilt
            table = read_kaldi_map(path)
            by_recording = (path.name == "wav.scp" and recordings) or path.name.startswith("reco2")
            if not by_recording and not set(table) <= utts:
                raise InputError("a table keyed by neither utterances nor recordings", path=path)
            if path.name == "segments":
                table = {u: prefix + v for u, v in table.items()}  # "<recording> <start> <end>"
            elif path.name == "utt2spk":
                table = {u: prefix + v for u, v in table.items()}
            write_kaldi_map(tmp / path.name, {prefix + k: v for k, v in table.items()})
        write_kaldi_map(tmp / "domain", {prefix + u: domain for u in utts})
        fix_spk2utt(tmp)
        validate_data_dir(tmp, require=())


def combine(data: Path, domains: dict[str, Path], require: Sequence[str] = ST_TABLES) -> list[Path]:
    """Add ``domains`` ({name: root}) to the data dirs under ``data`` (see the module doc); every dir
    must have the tables ``require``."""
    if BASE_DOMAIN in domains:
        raise InputError(f"'{BASE_DOMAIN}' is mTEDx's own domain; give the others another name")
    written = []
    with tempfile.TemporaryDirectory(prefix="domains.", dir=data) as staging:
        staging = Path(staging)
        for split in ("train", "valid"):
            with_domain(data / split, staging / f"{split}.{BASE_DOMAIN}", BASE_DOMAIN, "", require)
            for name, root in domains.items():
                with_domain(root / split, staging / f"{split}.{name}", name, f"{name}_", require)
        tests = {
            (name, test.name): test
            for name, root in domains.items()
            for test in sorted(root.glob("test_*"))
            if test.is_dir()
        }
        for (name, test_name), test in tests.items():
            with_domain(test, staging / f"{name}.{test_name}", name, f"{name}_", require)
        for split in ("train", "valid"):
            sources = [staging / f"{split}.{d}" for d in (BASE_DOMAIN, *domains)]
            combine_data_dirs(data / split, sources)
            written.append(data / split)
            for domain, source in zip((BASE_DOMAIN, *domains), sources):
                combine_data_dirs(data / f"{split}_{domain}", [source])
                written.append(data / f"{split}_{domain}")
        for (name, test_name), _ in tests.items():
            dst = data / f"test_{name}_{test_name.removeprefix('test_')}"
            combine_data_dirs(dst, [staging / f"{name}.{test_name}"])
            written.append(dst)
    return written


def test_sets(task: str, domains: Sequence[str]) -> list[str]:
    """``test_<domain>_<name>`` of every domain, in the order given (see the module doc)."""
    known = TEST_NAMES[task]
    unknown = [d for d in domains if d not in known]
    if unknown:
        raise InputError(
            f"unknown domain {unknown[0]!r} (known: {', '.join(known)})", key="--other_domains"
        )
    return [f"test_{d}_{name}" for d in domains for name in known[d].split()]


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.domains", __doc__)
    add = commands.add_parser("combine", help="add other domains' data dirs to --data's")
    add.add_argument("--data", type=Path, default=Path("data"), help="mTEDx's data dirs")
    add.add_argument(
        "--require",
        default=",".join(ST_TABLES),
        help="tables every data dir must have, comma-separated (ASR: text,lang)",
    )
    add.add_argument("domains", nargs="+", help="<domain>=<root of its data dirs>")
    names = commands.add_parser("test_sets", help="print the test set names of other domains")
    names.add_argument("--task", choices=sorted(TEST_NAMES), required=True)
    names.add_argument("domains", nargs="*", help="covost, europarl, other")
    args = parser.parse_args(argv)
    if args.command == "test_sets":
        print(" ".join(test_sets(args.task, args.domains)))
        return
    domains = {}
    for item in args.domains:
        name, eq, root = item.partition("=")
        if not eq or not name or not root or "_" in name or " " in name:
            raise InputError(f"'{item}' is not <domain>=<root> (a domain name without '_')")
        domains[name] = Path(root)
    for path in combine(args.data, domains, [t for t in args.require.split(",") if t]):
        print(path)


if __name__ == "__main__":
    sys.exit(main())
