"""WMT release formats read into Kaldi-style MT data dirs (``text.<src>``, ``text.<tgt>``, ``text``).

Formats (as statmt.org and the WMT test-set releases ship them):

  plain   two line-parallel files, e.g. ``europarl-v7.de-en.de`` + ``europarl-v7.de-en.en``,
          ``commoncrawl.de-en.{de,en}``, ``news-commentary-v9.de-en.{de,en}``, ``corpus.{ro,en}``
  tsv     one pair per line, ``<first>\\t<second>``, the column order from the file name's pair
          (``news-commentary-v14.de-en.tsv``: German first, whatever the translation direction)
  sgm     newstest2011..2020 as two SGML files, ``newstest2013-src.de.sgm`` + ``newstest2013-ref.en.sgm``:
          ``<doc docid="..."> <seg id="N">text</seg> ... </doc>``, entities decoded
  xml     WMT21+ test sets, one file: ``<dataset><doc id=..><src lang=de><p><seg id=N>..</seg></p></src>
          <ref lang=en translator=A><p><seg id=N>..</seg></p></ref></doc></dataset>``

Training corpora keep their pairs in file order; a pair with an empty side (europarl has some) is dropped
and counted, and the counts are printed, never dropped silently. Test sets must be aligned: the same docs
with the same segment ids on both sides (an InputError names the file, line and doc/segment otherwise),
and no empty segment. Ids: ``<corpus>-<n>`` (n the 1-based line, 9 digits) and
``<set>-<docid>-<segid>`` for test sets, after ``--id_prefix`` (which keeps language pairs apart when
combined). Whitespace runs become one space; ``--lowercase`` lowercases both sides (the Ro-En setup of
the LegoNN paper). ``--task_tag`` also writes ``lang`` (``<utt> <tag>``), the task tag file of
multilingual models (``espnet_ext.data.task_tags``). Pairs stream from the release files to the tables,
which GNU sort orders on disk: memory does not grow with the corpus (WMT's have millions of pairs).

    python -m espnet_ext.data.wmt prepare --out data/train_de --src_lang de --tgt_lang en \\
        --plain europarl-v7.de-en.de europarl-v7.de-en.en --tsv news-commentary-v14.de-en.tsv
    python -m espnet_ext.data.wmt prepare --out data/newstest2013 --src_lang de --tgt_lang en \\
        --sgm newstest2013-src.de.sgm newstest2013-ref.en.sgm
    python -m espnet_ext.data.wmt prepare --out data/wmt22 --src_lang de --tgt_lang en \\
        --xml wmttest2022.de-en.xml
    python -m espnet_ext.data.wmt prepare --out data/test --each --src_lang en --tgt_lang de \\
        --dir WMT/de-en/test        # data/test_newstest2011, data/test_newstest2012, ...
    python -m espnet_ext.data.wmt prepare --out data/valid --src_lang en --tgt_lang de \\
        --dir WMT/de-en/dev --sets newstest2013     # that dev set only, not every one in dev/

Test sets WMT names with their pair (``newstest2014-deen-src.de.sgm``, ``newsdev2016-roen-ref.en.sgm``) are
named without it (``newstest2014``), so ``--each`` writes ``data/test_newstest2014`` from any release year.
``--each`` reads every corpus through before it writes any data dir (``check_corpora``): an error in one
of them (named with its file and line) leaves none written, not the dirs of the corpora before it.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from espnet_ext.data.iwslt14 import Pair, read_test_set, write_mt_dir
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path
_PAIR_IN_NAME = re.compile(r"(?:^|[.\-_])([a-z]{2,3})-([a-z]{2,3})(?:[.\-_]|$)")


_SGM_NAME = re.compile(r"(?P<base>.+)-(?P<side>src|ref)\.(?P<lang>[a-z]{2,3})\.sgm")
# WMT names its test sets from 2014 on with the pair: newstest2014-deen, newstest2015-ende, newsdev2016-roen
_PAIR_AFTER_YEAR = re.compile(r"(?<=\d{4})-[a-z]{4}$")


def corpus_name(path: PathLike) -> str:
    """The corpus (or test set) a release file belongs to, as recipes name it: ``europarl-v7.de-en.de`` ->
    ``europarl-v7``; ``newstest2013-src.de.sgm`` -> ``newstest2013``; the pair WMT puts into test set
    names from 2014 on is dropped, ``newstest2014-deen-src.de.sgm`` -> ``newstest2014``,
    ``newsdev2016-roen-ref.en.sgm`` -> ``newsdev2016``."""
    name = re.sub(r"-(src|ref)$", "", Path(path).name.split(".")[0])
    return _PAIR_AFTER_YEAR.sub("", name) or Path(path).name


def normalise(text: str, lowercase: bool = False) -> str:
    text = " ".join(text.split())
    return text.lower() if lowercase else text


class Corpus:
    """The pairs of one input, read from its files each time they are iterated, never held (a WMT
    training corpus has millions). ``kept`` and ``dropped`` (pairs with an empty side) count the
    last complete read; ``len`` reads the input through when it has not been yet. A reader's errors
    come while its pairs are iterated: before the data dir they go to replaces anything.
    """

    def __init__(self, source: str, read: Callable[[], Iterable[Pair | None]]):
        self.source = source
        self._read = read  # yields a Pair, or None for a pair dropped for an empty side
        self.kept = self.dropped = 0
        self._complete = False

    def __iter__(self) -> Iterator[Pair]:
        kept = dropped = 0
        for pair in self._read():
            if pair is None:
                dropped += 1
            else:
                kept += 1
                yield pair
        self.kept, self.dropped, self._complete = kept, dropped, True

    def __len__(self) -> int:
        if not self._complete:
            for _ in self:
                pass
        return self.kept


def _numbered(name: str, number: int, src: str, tgt: str) -> Pair | None:
    """The pair of line ``number`` of a training corpus, or None when a side is empty (dropped)."""
    return Pair(f"{name}-{number:09d}", src, tgt) if src.strip() and tgt.strip() else None


def read_plain(src_path: PathLike, tgt_path: PathLike) -> Corpus:
    """Two line-parallel files; unequal line counts name the first line one of them lacks (found when
    the shorter file ends, after the pairs before it have been read)."""

    def read() -> Iterator[Pair | None]:
        name = corpus_name(src_path)
        src, tgt = read_utf8_lines(src_path), read_utf8_lines(tgt_path)
        common = 0
        for s, t in itertools.zip_longest(src, tgt):
            if s is None or t is None:
                (longer, rest), shorter = (
                    ((src_path, src), tgt_path) if t is None else ((tgt_path, tgt), src_path)
                )
                lines = common + 1 + sum(1 for _ in rest)
                raise InputError(
                    f"has {lines} lines but {Path(shorter).name} has {common}: the files must be "
                    "line-parallel",
                    path=longer,
                    line=common + 1,
                )
            common = s[0]
            yield _numbered(name, common, s[1], t[1])

    return Corpus(f"{src_path} + {tgt_path}", read)


def tsv_columns(path: PathLike, src_lang: str, tgt_lang: str) -> tuple[int, int]:
    """(source column, target column) from the language pair in the file name."""
    match = _PAIR_IN_NAME.search(Path(path).name)
    if match is None or {match.group(1), match.group(2)} != {src_lang, tgt_lang}:
        raise InputError(
            f"cannot tell the column order: the file name must name the pair {src_lang}-{tgt_lang} "
            "(e.g. news-commentary-v14.de-en.tsv)",
            path=path,
        )
    return (0, 1) if match.group(1) == src_lang else (1, 0)


def read_tsv(path: PathLike, src_lang: str, tgt_lang: str) -> Corpus:
    """``<first>\\t<second>`` lines; the column order (refused at once if the name does not tell it)
    from the file name (``tsv_columns``)."""
    src_col, tgt_col = tsv_columns(path, src_lang, tgt_lang)

    def read() -> Iterator[Pair | None]:
        name = corpus_name(path)
        for number, line in read_utf8_lines(path):
            fields = line.split("\t")
            if len(fields) != 2:
                raise InputError(
                    f"expected 2 tab-separated fields, got {len(fields)}", path=path, line=number
                )
            yield _numbered(name, number, fields[src_col], fields[tgt_col])

    return Corpus(str(path), read)


def read_sgm(src_path: PathLike, ref_path: PathLike) -> Corpus:
    """newstest-style ``-src.<lang>.sgm`` + ``-ref.<lang>.sgm``: docs and segment ids aligned."""
    name = corpus_name(src_path)
    return Corpus(
        f"{src_path} + {ref_path}",
        lambda: read_test_set(name, src_path, ref_path, straight_apostrophes=False),
    )


@dataclass
class _XmlDoc:
    docid: str
    line: int
    src: dict[str, tuple[int, str]] = field(default_factory=dict)
    refs: dict[str, dict[str, tuple[int, str]]] = field(default_factory=dict)  # translator ->


class _XmlReader:
    """expat handlers collecting the segments of each doc's ``<src>`` and ``<ref>`` with line numbers."""

    def __init__(self, path: PathLike, src_lang: str, tgt_lang: str):
        self.path, self.src_lang, self.tgt_lang = path, src_lang, tgt_lang
        self.docs: list[_XmlDoc] = []
        self.side: dict | None = None  # the segment table being filled
        self.seg: tuple[str, int] | None = None
        self.text: list[str] = []
        self.parser = expat.ParserCreate("utf-8")
        self.parser.StartElementHandler = self.start
        self.parser.EndElementHandler = self.end
        self.parser.CharacterDataHandler = self.characters

    def error(self, message: str) -> InputError:
        return InputError(message, path=self.path, line=self.parser.CurrentLineNumber)

    def start(self, name: str, attrs: dict) -> None:
        line = self.parser.CurrentLineNumber
        if name == "doc":
            if "id" not in attrs:
                raise self.error("<doc> without an id")
            self.docs.append(_XmlDoc(attrs["id"], line))
        elif name in ("src", "ref"):
            if not self.docs:
                raise self.error(f"<{name}> outside a <doc>")
            want = self.src_lang if name == "src" else self.tgt_lang
            if attrs.get("lang") != want:
                raise self.error(f"<{name} lang={attrs.get('lang')!r}>, expected {want!r}")
            doc = self.docs[-1]
            self.side = (
                doc.src if name == "src" else doc.refs.setdefault(attrs.get("translator", ""), {})
            )
        elif name == "seg":
            if self.side is None or "id" not in attrs:
                raise self.error("<seg> needs an id and must be inside <src> or <ref>")
            if attrs["id"] in self.side:
                raise self.error(f"segment id {attrs['id']} repeats in doc {self.docs[-1].docid}")
            self.seg, self.text = (attrs["id"], line), []

    def end(self, name: str) -> None:
        if name == "seg" and self.seg is not None:
            self.side[self.seg[0]] = (self.seg[1], "".join(self.text))
            self.seg = None
        elif name in ("src", "ref"):
            self.side = None

    def characters(self, data: str) -> None:
        if self.seg is not None:
            self.text.append(data)

    def read(self) -> list[_XmlDoc]:
        with open(self.path, "rb") as f:
            try:
                self.parser.ParseFile(f)
            except expat.ExpatError as e:
                raise InputError(
                    f"not well-formed XML: {expat.errors.messages[e.code]}",
                    path=self.path,
                    line=e.lineno,
                ) from None
        return self.docs


def read_xml(path: PathLike, src_lang: str, tgt_lang: str, translator: str | None = None) -> Corpus:
    """A WMT21+ test set: each doc's source segments with its reference (``translator``, or the first
    ``<ref>`` of the doc); the reference must hold exactly the source's segment ids."""
    return Corpus(str(path), lambda: _xml_pairs(path, src_lang, tgt_lang, translator))


def _xml_pairs(
    path: PathLike, src_lang: str, tgt_lang: str, translator: str | None
) -> Iterator[Pair]:
    name = corpus_name(path)
    for doc in _XmlReader(path, src_lang, tgt_lang).read():
        if not doc.refs or (translator is not None and translator not in doc.refs):
            which = f"translator {translator!r}" if translator is not None else tgt_lang
            raise InputError(f"doc {doc.docid} has no {which} reference", path=path, line=doc.line)
        ref = doc.refs[translator if translator is not None else next(iter(doc.refs))]
        for seg_id in [*doc.src, *(s for s in ref if s not in doc.src)]:
            if seg_id not in doc.src or seg_id not in ref:
                line = (doc.src.get(seg_id) or ref[seg_id])[0]
                side = "reference" if seg_id not in ref else "source"
                raise InputError(
                    f"doc {doc.docid} segment {seg_id} has no {side} segment", path=path, line=line
                )
            (src_line, src), (ref_line, tgt) = doc.src[seg_id], ref[seg_id]
            for text, line in ((src, src_line), (tgt, ref_line)):
                if not text.strip():
                    raise InputError(f"doc {doc.docid} segment {seg_id} is empty", path, line)
            seg_key = f"{int(seg_id):04d}" if seg_id.isdigit() else seg_id
            yield Pair(f"{name}-{doc.docid.replace(' ', '_')}-{seg_key}", src, tgt)


def _sgm_sets(
    files: Sequence[Path], src_lang: str, tgt_lang: str
) -> dict[str, list[tuple[Path, Path]]]:
    """{test set name: [(source file, reference file)]} of the newstest-style sgm files of the pair: this
    direction's ``X-src.<src>.sgm`` + ``X-ref.<tgt>.sgm`` where a set has them, otherwise the other
    direction's ``X-ref.<src>.sgm`` + ``X-src.<tgt>.sgm`` read swapped (newstest sets up to 2018 are one
    set for both directions, e.g. newstest2015-deen and newstest2015-ende; from 2019 on each direction has
    its own, and its own files win)."""
    names = {p.name for p in files}
    straight: dict[str, list[tuple[Path, Path]]] = {}
    swapped: dict[str, list[tuple[Path, Path]]] = {}
    for path in files:
        match = _SGM_NAME.fullmatch(path.name)
        if match is None or match["lang"] != src_lang:
            continue
        base, other_side = match["base"], "ref" if match["side"] == "src" else "src"
        other = f"{base}-{other_side}.{tgt_lang}.sgm"
        if other in names:
            found = straight if match["side"] == "src" else swapped
            found.setdefault(corpus_name(path), []).append((path, path.with_name(other)))
    sets = {}
    for name in sorted({*straight, *swapped}):
        sets[name] = straight.get(name) or swapped[name]
    return sets


def release_corpora(
    directory: PathLike,
    src_lang: str,
    tgt_lang: str,
    translator: str | None = None,
    sets: Sequence[str] | None = None,
) -> tuple[list[Corpus], list[Path]]:
    """Every corpus of the pair in ``directory`` (release files as WMT names them; with ``sets``, only the
    corpora of those names, each of which must be there) and the files that belong to none, in name order:

      plain  ``NAME.<src>`` with ``NAME.<tgt>`` beside it (europarl-v7.de-en.de, corpus.ro ...)
      tsv    ``*.tsv`` naming the pair
      sgm    ``NAME-src.<src>.sgm`` + ``NAME-ref.<tgt>.sgm``, or the other direction's files read swapped
             (see ``_sgm_sets``); test sets named with their pair (newstest2014-deen-src.de.sgm) are
             named without it (newstest2014, ``corpus_name``)
      xml    ``*.<src>-<tgt>.xml``

    A file that is another copy of a set read from other files (the other direction's files of a newstest
    set) and a corpus not among ``sets`` are named on stderr, not read.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("no such release directory", path=directory)
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    names = {p.name for p in files}
    plans: list[tuple[str, list[Path], Callable[[], Corpus]]] = []  # (name, files, reader)
    copies: list[tuple[Path, str]] = []  # files of a set also found in other files
    for name, candidates in _sgm_sets(files, src_lang, tgt_lang).items():
        if len(candidates) > 1:
            raise InputError(
                f"test set {name} is there {len(candidates)} times ("
                + "; ".join(f"{s.name} + {r.name}" for s, r in candidates)
                + "): keep one",
                path=directory,
            )
        src, ref = candidates[0]
        plans.append((name, [src, ref], lambda src=src, ref=ref: read_sgm(src, ref)))
    sgm_used = {p.name for _, paths, _ in plans for p in paths}
    for path in files:
        match = _SGM_NAME.fullmatch(path.name)
        pair = _PAIR_AFTER_YEAR.search(match["base"]) if match else None
        if (
            match
            and path.name not in sgm_used
            and match["lang"] in (src_lang, tgt_lang)
            and (pair is None or {pair[0][1:3], pair[0][3:]} == {src_lang, tgt_lang})
            and corpus_name(path) in {n for n, _, _ in plans}
        ):
            copies.append((path, corpus_name(path)))
    for path in files:
        name = path.name
        stem = name[: -len(src_lang) - 1]
        if name.endswith(f".{src_lang}") and f"{stem}.{tgt_lang}" in names:
            tgt = directory / f"{stem}.{tgt_lang}"
            plans.append((corpus_name(path), [path, tgt], lambda s=path, t=tgt: read_plain(s, t)))
        elif name.endswith(".tsv") and (match := _PAIR_IN_NAME.search(name)):
            if {match.group(1), match.group(2)} == {src_lang, tgt_lang}:
                plans.append(
                    (corpus_name(path), [path], lambda p=path: read_tsv(p, src_lang, tgt_lang))
                )
        elif name.endswith(f".{src_lang}-{tgt_lang}.xml"):
            plans.append(
                (
                    corpus_name(path),
                    [path],
                    lambda p=path: read_xml(p, src_lang, tgt_lang, translator=translator),
                )
            )
    plans.sort(key=lambda plan: plan[1][0].name)
    used = {p.name for _, paths, _ in plans for p in paths} | {p.name for p, _ in copies}
    if sets is not None:
        missing = [name for name in sets if name not in {n for n, _, _ in plans}]
        if missing:
            raise InputError(
                f"no {src_lang}-{tgt_lang} corpus {', '.join(missing)} here (found: "
                f"{', '.join(n for n, _, _ in plans) or 'none'})",
                path=directory,
            )
        for name, paths, _ in plans:
            if name not in sets:
                logger.warning(
                    f"{directory}: {name} ({' + '.join(p.name for p in paths)}) not read: not among "
                    f"the sets asked for ({' '.join(sets)})"
                )
        plans = [plan for plan in plans if plan[0] in sets]
    for path, name in copies:
        logger.warning(f"{path}: another copy of {name} (read from other files), not read")
    return [read() for _, _, read in plans], [p for p in files if p.name not in used]


def read_release_dir(
    directory: PathLike,
    src_lang: str,
    tgt_lang: str,
    translator: str | None = None,
    sets: Sequence[str] | None = None,
) -> list[Corpus]:
    """``release_corpora``, naming the files that are not the pair's release files on stderr."""
    found, others = release_corpora(directory, src_lang, tgt_lang, translator, sets)
    for path in others:
        print(f"{path}: not a {src_lang}-{tgt_lang} release file, not read", file=sys.stderr)
    return found


def check_corpora(corpora: Sequence[Corpus], outputs: Sequence[PathLike]) -> None:
    """Each corpus read through once, as ``prepare`` would read it into its output, raising before
    anything is written the errors that writing it would meet: a reader's (the file and line: a bad line,
    a missing file, malformed SGML or XML), an id given to two pairs, no pairs at all. Streamed: what is
    held is the ids of one corpus at a time (thousands for a test set), never its text."""
    for corpus, out in zip(corpora, outputs, strict=True):
        ids: set[str] = set()
        for pair in corpus:
            if pair.id in ids:
                raise InputError("two pairs have this id", path=corpus.source, key=pair.id)
            ids.add(pair.id)
        if not ids:
            raise InputError(f"no sentence pairs in {corpus.source}", path=out)


def report(corpora: Sequence[Corpus], outputs: Sequence[PathLike]) -> None:
    """What was read from each input (pairs kept and dropped) and where it went, on stdout."""
    for corpus in corpora:
        kept = len(corpus)  # before ``dropped``: reads an input not read yet
        dropped = f", {corpus.dropped} dropped (an empty side)" if corpus.dropped else ""
        print(f"{corpus.source}: {kept} pairs{dropped}")
    print(f"-> {' '.join(map(str, outputs))}: {sum(len(c) for c in corpora)} pairs")


def prepare(
    out: PathLike,
    corpora: Sequence[Corpus],
    src_lang: str,
    tgt_lang: str,
    lowercase: bool = False,
    task_tag: str | None = None,
    id_prefix: str = "",
    src_prefix: str = "",
    task_id: int | None = None,
) -> Path:
    """One data dir of the pairs of ``corpora``, written whole or not at all; ``id_prefix`` keeps the
    ids of several language pairs apart (``europarl-v7-...`` of de-en and fr-en) when combined;
    ``src_prefix`` goes before every source sentence (a target-language token, ``<2de> ``). The
    languages name the files (``text.<src_lang>``, ``text.<tgt_lang>``); ``task_tag`` also writes
    ``lang``, ``task_id`` the ``task_id`` table (the tag's index among the model's, ESPnet's
    ``text_int``). The pairs stream from the readers to tables sorted on disk (``write_mt_dir``):
    memory does not grow with the corpus."""
    pairs = (
        Pair(
            id_prefix + p.id, src_prefix + normalise(p.src, lowercase), normalise(p.tgt, lowercase)
        )
        for corpus in corpora
        for p in corpus
    )
    tags = {"lang": task_tag} if task_tag is not None else {}
    if task_id is not None:
        tags["task_id"] = str(task_id)
    write_mt_dir(out, pairs, src_lang, tgt_lang, tags)
    return Path(out)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.wmt",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="write one data dir from WMT release files")
    prep.add_argument("--out", required=True, help="the data dir to write")
    prep.add_argument("--src_lang", required=True)
    prep.add_argument("--tgt_lang", required=True)
    prep.add_argument("--plain", nargs=2, action="append", default=[], metavar=("SRC", "TGT"))
    prep.add_argument("--tsv", action="append", default=[], metavar="FILE")
    prep.add_argument("--sgm", nargs=2, action="append", default=[], metavar=("SRC", "REF"))
    prep.add_argument("--xml", action="append", default=[], metavar="FILE")
    prep.add_argument(
        "--dir",
        action="append",
        default=[],
        help="a directory of release files: every corpus of the pair in it (release_corpora)",
    )
    prep.add_argument(
        "--sets",
        nargs="+",
        default=None,
        metavar="NAME",
        help="with --dir: read only the corpora of these names (e.g. the dev set newstest2013), each "
        "of which must be there; the others are named on stderr",
    )
    prep.add_argument(
        "--each",
        action="store_true",
        help="one data dir per corpus, <out>_<corpus> (test sets by year), instead of one for all",
    )
    prep.add_argument("--translator", default=None, help="xml: the reference to take")
    prep.add_argument("--lowercase", action="store_true")
    prep.add_argument("--task_tag", default=None, help="also write 'lang' with this tag")
    prep.add_argument("--id_prefix", default="", help="put before every utterance id")
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    src, tgt = args.src_lang, args.tgt_lang
    corpora = [read_plain(s, t) for s, t in args.plain]
    corpora += [read_tsv(f, src, tgt) for f in args.tsv]
    corpora += [read_sgm(s, r) for s, r in args.sgm]
    corpora += [read_xml(f, src, tgt, args.translator) for f in args.xml]
    for directory in args.dir:
        corpora += read_release_dir(directory, src, tgt, args.translator, args.sets)
    if not corpora:
        raise InputError("no --plain, --tsv, --sgm, --xml or --dir corpus found", path=args.out)
    names = [corpus_name(c.source.split(" + ")[0]) for c in corpora]
    if args.each and len(set(names)) != len(names):
        raise InputError(f"--each needs distinct corpus names, got {names}", path=args.out)
    outputs = [f"{args.out}_{name}" for name in names] if args.each else [args.out]
    groups = [[c] for c in corpora] if args.each else [corpora]
    if args.each:
        # Each data dir is written whole or not at all, but an error in the third corpus would come after the
        # first two were written: every corpus is checked first, so a failed run writes none (test sets, small:
        # read twice). One data dir (training corpora of GBs) stays a single pass, written whole or not at all.
        check_corpora(corpora, outputs)
    for out, group in zip(outputs, groups):
        prepare(out, group, src, tgt, args.lowercase, args.task_tag, args.id_prefix)
    report(corpora, outputs)


if __name__ == "__main__":
    sys.exit(main())
