"""IWSLT14 German-English (TED talks) from its release, as Kaldi-style MT data dirs.

The release is ``de-en.tgz`` of the IWSLT 2014 evaluation campaign (WIT3 archive 2014-01), the
archive fairseq's ``examples/translation/prepare-iwslt14.sh`` starts from. Extracted, it holds
``de-en/``::

    train.tags.de-en.de, train.tags.de-en.en      one sentence per line, line-parallel, with talk metadata
                                                  lines (<url>, <keywords>, <speaker>, <talkid>, <title>,
                                                  <description>, <reviewer ...>, <translator ...>, <doc ...>)
    IWSLT14.TED.dev2010.de-en.{de,en}.xml         <doc docid="N"> ... <seg id="M"> text </seg> ... </doc>
    IWSLT14.TEDX.dev2012.de-en.{de,en}.xml
    IWSLT14.TED.tst2010.de-en.{de,en}.xml, ...tst2011..., ...tst2012...

Split (the one of fairseq's script, used by most published IWSLT14 de-en results including the
relaxed-attention paper's Cutoff baseline):
- train.tags without metadata: lines holding ``<url>``, ``<talkid>`` or ``<keywords>`` are dropped,
  the ``<title>``/``<description>`` tags are removed and their text kept as a sentence pair (as
  fairseq does); the other metadata lines (``<speaker>``, ``<reviewer ...>``, ``<translator ...>``,
  ``<doc ...>``, ``</doc>``), which fairseq leaves in as text, are dropped too, and so are pairs
  with an empty side;
- valid = every 23rd of those pairs (fairseq: ``awk 'NR%23 == 0'``), train = the rest;
- test = dev2010 + dev2012 (TEDX) + tst2010 + tst2011 + tst2012.
fairseq applies its length cleaning (Moses ``clean-corpus-n.perl -ratio 1.5``, 1..175 tokens) *before*
taking every 23rd line, so its valid set is not line-for-line this one; here the length filter is the
recipe's filtering stage (``espnet_ext.data.filter --max_length_ratio``), applied to train and valid.
fairseq also Moses-tokenizes (escaping ``&`` as ``&amp;`` ...); we keep raw text for SentencePiece and
score detokenized BLEU with sacrebleu. In the xml files we decode the XML entities (``&amp;`` -> ``&``,
the files are XML) and, as fairseq does for dev/test, write ``’`` as ``'``. ``--lowercase`` lowercases
both sides as fairseq's script does.

Output ``<out>/{train,valid,test}/``: ``text.de``, ``text.en`` and ``text`` (= the target side,
ESPnet's name), sorted by id. Ids: ``train-<n>`` with n the 1-based pair number in the metadata-free
train.tags (valid ids are the multiples of 23), ``<set>-<docid>-<segid>`` for test (e.g.
``tst2010-00769-0012``).

    python -m espnet_ext.data.iwslt14 prepare --root DIR [--out data] [--lowercase]
    python -m espnet_ext.data.iwslt14 download --dest DIR [--url URL] [--sha256 HEX]
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from espnet_ext.data.datadir import atomic_dir, check_data_dir, write_sorted_tables
from espnet_ext.data.download import DownloadError, extract, file_digest
from espnet_ext.data.download import download as fetch
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import read_utf8_lines

logger = logging.getLogger(__name__)

PathLike = str | Path

URL = "https://wit3.fbk.eu/archive/2014-01/texts/de/en/de-en.tgz"
ARCHIVE = "de-en.tgz"
SRC, TGT = "de", "en"
PAIR = "de-en"
VALID_EVERY = 23
TEST_SETS = (  # (id prefix, file stem) in fairseq's concatenation order
    ("dev2010", "IWSLT14.TED.dev2010"),
    ("dev2012", "IWSLT14.TEDX.dev2012"),
    ("tst2010", "IWSLT14.TED.tst2010"),
    ("tst2011", "IWSLT14.TED.tst2011"),
    ("tst2012", "IWSLT14.TED.tst2012"),
)

_KEPT_TAGS = re.compile(r"</?(title|description)>")
_TAG = re.compile(r"<(/?[A-Za-z]+)")
_SEG = re.compile(r'<seg id="\s*(\d+)\s*">(.*?)</seg>')
_DOC = re.compile(r'<doc\b[^>]*\bdocid="([^"]+)"')
_ENTITIES = (
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&quot;", '"'),
    ("&apos;", "'"),
    ("&amp;", "&"),
)  # &amp; last


@dataclass
class Pair:
    id: str
    src: str
    tgt: str


def corpus_dir(root: PathLike) -> Path:
    """``<root>/de-en`` (or ``root`` itself when it is that dir), checked to hold the release's files."""
    root = Path(root)
    directory = root if (root / f"train.tags.{PAIR}.{SRC}").is_file() else root / PAIR
    expected = [f"train.tags.{PAIR}.{lang}" for lang in (SRC, TGT)] + [
        f"{stem}.{PAIR}.{lang}.xml" for _, stem in TEST_SETS for lang in (SRC, TGT)
    ]
    missing = [name for name in expected if not (directory / name).is_file()]
    if missing:
        found = sorted(p.name for p in directory.iterdir())[:10] if directory.is_dir() else []
        raise InputError(
            f"not the IWSLT14 de-en release (de-en.tgz extracted): missing {', '.join(missing[:3])}"
            + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            + f"; found {', '.join(found) or 'nothing'}",
            path=directory,
        )
    return directory


def _tag(line: str) -> str | None:
    match = _TAG.match(line)
    return match.group(1).lower() if match else None


def clean_train_line(line: str) -> str | None:
    """The sentence of a train.tags line, or None for a metadata line (see the module doc)."""
    stripped = line.strip()
    tag = _tag(stripped)
    if tag is None:
        return stripped
    if tag in ("title", "description"):
        return _KEPT_TAGS.sub("", stripped).strip()
    return None


def read_train_tags(src_path: PathLike, tgt_path: PathLike) -> list[tuple[int, str, str]]:
    """``(line number, source, target)`` of the sentence pairs of two line-parallel train.tags files."""
    src_lines = list(read_utf8_lines(src_path))
    tgt_lines = list(read_utf8_lines(tgt_path))
    if len(src_lines) != len(tgt_lines):
        (short, n_short), (long_, n_long) = sorted(
            [(src_path, len(src_lines)), (tgt_path, len(tgt_lines))], key=lambda item: item[1]
        )
        raise InputError(
            f"has {n_long} lines but {Path(short).name} has {n_short}: the files must be line-parallel",
            path=long_,
            line=n_short + 1,
        )
    pairs = []
    for (number, src_line), (_, tgt_line) in zip(src_lines, tgt_lines):
        src, tgt = clean_train_line(src_line), clean_train_line(tgt_line)
        if (src is None) != (tgt is None):
            meta, other = (src_path, tgt_path) if src is None else (tgt_path, src_path)
            raise InputError(
                f"metadata line here but a sentence in {Path(other).name} at the same line: files not parallel",
                path=meta,
                line=number,
            )
        if src and tgt:
            pairs.append((number, src, tgt))
    return pairs


def _unescape(text: str) -> str:
    for entity, char in _ENTITIES:
        text = text.replace(entity, char)
    return text


def read_xml_segments(
    path: PathLike, straight_apostrophes: bool = True
) -> list[tuple[int, str, int, str]]:
    """``(line number, docid, seg id, text)`` of every ``<seg>`` of an IWSLT xml file (or a WMT sgm
    file, the same SGML), in file order; ``straight_apostrophes`` writes ``’`` as ``'`` (fairseq's)."""
    segments = []
    docid = None
    for number, line in read_utf8_lines(path):
        doc = _DOC.search(line)
        if doc:
            docid = doc.group(1)
        if "<seg" not in line:
            continue
        seg = _SEG.search(line)
        if seg is None:
            raise InputError(
                'a <seg> line without the form <seg id="N"> text </seg>', path=path, line=number
            )
        if docid is None:
            raise InputError("<seg> outside a <doc docid=...>", path=path, line=number)
        text = _unescape(seg.group(2)).strip()
        if straight_apostrophes:
            text = text.replace("\u2019", "'")
        segments.append((number, docid, int(seg.group(1)), text))
    return segments


def read_test_set(
    name: str, src_path: PathLike, tgt_path: PathLike, straight_apostrophes: bool = True
) -> list[Pair]:
    """The aligned segments of a source and a reference file, ids ``<name>-<docid>-<segid>``."""
    src = read_xml_segments(src_path, straight_apostrophes)
    tgt = read_xml_segments(tgt_path, straight_apostrophes)
    for (line, doc, seg, _), (tgt_line, tgt_doc, tgt_seg, _) in zip(src, tgt):
        if (doc, seg) != (tgt_doc, tgt_seg):
            raise InputError(
                f"doc {tgt_doc} seg {tgt_seg} here, but {Path(src_path).name}:{line} has doc {doc} seg {seg} "
                "at the same position",
                path=tgt_path,
                line=tgt_line,
            )
    if len(src) != len(tgt):
        longer, shorter, extra = (
            (src_path, tgt_path, src) if len(src) > len(tgt) else (tgt_path, src_path, tgt)
        )
        first = extra[min(len(src), len(tgt))]
        raise InputError(
            f"doc {first[1]} seg {first[2]} has no counterpart in {Path(shorter).name} "
            f"({len(src)} vs {len(tgt)} segments)",
            path=longer,
            line=first[0],
        )
    pairs = []
    for (line, doc, seg, src_text), (tgt_line, _, _, tgt_text) in zip(src, tgt):
        for text, path, number in ((src_text, src_path, line), (tgt_text, tgt_path, tgt_line)):
            if not text:
                raise InputError("empty segment", path=path, line=number)
        doc_key = f"{int(doc):05d}" if doc.isdigit() else doc
        pairs.append(Pair(f"{name}-{doc_key}-{seg:04d}", src_text, tgt_text))
    return pairs


def split_train_valid(pairs: Sequence[tuple[int, str, str]]) -> tuple[list[Pair], list[Pair]]:
    """(train, valid): valid is every 23rd pair (1-based), as fairseq's script takes it."""
    train, valid = [], []
    for index, (_, src, tgt) in enumerate(pairs, start=1):
        (valid if index % VALID_EVERY == 0 else train).append(Pair(f"train-{index:06d}", src, tgt))
    return train, valid


def write_mt_dir(
    out_dir: PathLike,
    pairs: Iterable[Pair],
    src_lang: str = SRC,
    tgt_lang: str = TGT,
    tags: Mapping[str, str] | None = None,
) -> int:
    """A data dir with ``text.<src>``, ``text.<tgt>``, ``text`` (= target) and each table of ``tags``
    giving every pair the same value (``{"lang": "de"}``: the task tag), written whole or not at all;
    returns the number of pairs.

    ``pairs`` may be a generator: they go to the tables as they come and are sorted on disk
    (``datadir.write_sorted_tables``), so a WMT corpus of millions is never held. An id given to two
    pairs, and no pairs at all, are InputErrors naming ``out_dir``.
    """
    tags = dict(tags or {})
    names = [f"text.{src_lang}", f"text.{tgt_lang}", *tags]
    with atomic_dir(out_dir) as tmp:
        rows = ((p.id, (p.src, p.tgt, *tags.values())) for p in pairs)
        count = write_sorted_tables(tmp, names, rows, where=out_dir)
        if count == 0:
            raise InputError("no sentence pairs in the inputs", path=out_dir)
        shutil.copyfile(tmp / f"text.{tgt_lang}", tmp / "text")  # the same table, sorted once
        check_data_dir(tmp, require=("text", *names))
    return count


def _normalise(pairs: list[Pair], lowercase: bool) -> list[Pair]:
    # Internal whitespace runs (tabs included) become one space: Kaldi tables split on them anyway.
    def norm(text: str) -> str:
        text = " ".join(text.split())
        return text.lower() if lowercase else text

    return [Pair(p.id, norm(p.src), norm(p.tgt)) for p in pairs]


def prepare(root: PathLike, out: PathLike, lowercase: bool = False) -> dict[str, int]:
    """Write ``<out>/{train,valid,test}``; returns the number of pairs of each."""
    directory = corpus_dir(root)
    pairs = read_train_tags(
        directory / f"train.tags.{PAIR}.{SRC}", directory / f"train.tags.{PAIR}.{TGT}"
    )
    train, valid = split_train_valid(pairs)
    test: list[Pair] = []
    for name, stem in TEST_SETS:
        test += read_test_set(
            name, directory / f"{stem}.{PAIR}.{SRC}.xml", directory / f"{stem}.{PAIR}.{TGT}.xml"
        )
    counts = {}
    for split, split_pairs in (("train", train), ("valid", valid), ("test", test)):
        write_mt_dir(Path(out) / split, _normalise(split_pairs, lowercase))
        counts[split] = len(split_pairs)
    return counts


def download(dest: PathLike, url: str = URL, sha256: str | None = None) -> Path:
    """Fetch ``de-en.tgz`` into ``dest`` and extract it there (``dest/de-en``); returns that dir.

    With ``sha256`` the archive must match it. No reference digest of the 2014-01 archive is
    recorded here, so without one the digest is only printed and written to ``de-en.tgz.sha256`` for
    the record.
    """
    dest = Path(dest)
    target = dest / PAIR
    if (target / ".complete").is_file():
        logger.info(f"{target}: already complete")
        return target
    archive = fetch(url, dest / ARCHIVE, ("sha256", sha256) if sha256 else None)
    digest = file_digest(archive, "sha256")
    (dest / (ARCHIVE + ".sha256")).write_text(f"{digest}  {ARCHIVE}\n")
    logger.info(
        f"{archive}: sha256 {digest}"
        + ("" if sha256 else " (not verified: pass --sha256 to check)")
    )
    extract(archive, dest, "delete it and rerun to download again")
    corpus_dir(dest)
    (target / ".complete").write_text(f"{ARCHIVE} sha256 {digest}\n")
    return target


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m espnet_ext.data.iwslt14",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser(
        "prepare", help="write data dirs train, valid, test from the extracted release"
    )
    prep.add_argument(
        "--root",
        required=True,
        help="dir holding de-en/ (the extracted de-en.tgz), or de-en/ itself",
    )
    prep.add_argument("--out", default="data", help="parent of the data dirs")
    prep.add_argument(
        "--lowercase", action="store_true", help="lowercase both sides (fairseq's preparation)"
    )
    down = commands.add_parser("download", help="fetch and extract de-en.tgz")
    down.add_argument("--dest", required=True, help="where de-en.tgz and de-en/ go")
    down.add_argument("--url", default=URL)
    down.add_argument(
        "--sha256", default=None, help="expected sha256 of the archive (checked when given)"
    )
    return parser


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int | None:
    args = get_parser().parse_args(argv)
    try:
        if args.command == "prepare":
            counts = prepare(args.root, args.out, args.lowercase)
            print(
                ", ".join(f"{split}: {n} pairs" for split, n in counts.items()) + f" -> {args.out}"
            )
        else:
            print(f"IWSLT14 de-en in {download(args.dest, args.url, args.sha256)}")
    except DownloadError as e:  # a failed fetch, not bad input (InputError): rerunning resumes
        print(f"error: {e}", file=sys.stderr)
        return 1
    return None


if __name__ == "__main__":
    sys.exit(main())
