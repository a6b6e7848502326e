"""English phoneme targets for a phoneme CTC interface: g2p_en's ARPAbet phones as a fixed vocabulary.

Two recognisers trained on different corpora can only be swapped if their interface vocabularies are the
same list in the same order, so the phone list is not learnt from data: it is the ARPAbet set g2p_en
emits (its ``phonemes`` minus its 4 specials): 15 vowels with lexical stress 0/1/2, bare ``UW`` and 24
consonants, after ``<blank>`` (the CTC blank, id 0) and ``<unk>``::

    <blank> <unk> AA0 AA1 AA2 AE0 ... ZH     (72 tokens)

    python -m espnet_ext.data.arpabet token_list OUT              the list, one token a line
    python -m espnet_ext.data.arpabet g2p --text data/train/text --out data/train/phn
        (Kaldi text -> phones through g2p_en with offline NLTK data: $NLTK_DATA or --nltk_data)
    python -m espnet_ext.data.arpabet ids --phn data/train/phn --out data/train/phn_int
        (phones -> ids of the list, ESPnet's text_int format; an unknown phone names file and line)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from espnet_ext.data.datadir import command_parser, read_kaldi_entries, write_kaldi_map
from espnet_ext.errors import InputError, reports_input_errors
from espnet_ext.fileio import atomic_write

VOWELS = ("AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH", "UW")
CONSONANTS = ("B", "CH", "D", "DH", "F", "G", "HH", "JH", "K", "L", "M", "N", "NG", "P", "R", "S")
CONSONANTS += ("SH", "T", "TH", "V", "W", "Y", "Z", "ZH")
# g2p_en also lists "UW" without a stress digit (CMUdict has a few such entries)
PHONES = tuple(sorted([f"{v}{s}" for v in VOWELS for s in "012"] + list(CONSONANTS) + ["UW"]))
TOKENS = ("<blank>", "<unk>", *PHONES)


def phone_ids(phones: str, where: Path, line: int, key: str) -> list[int]:
    index = {p: i for i, p in enumerate(TOKENS)}
    ids = []
    for phone in phones.split():
        if phone not in index or index[phone] < 2:
            raise InputError(f"{phone!r} is not an ARPAbet phone", path=where, line=line, key=key)
        ids.append(index[phone])
    return ids


def write_ids(phn: Path, out: Path) -> int:
    table = {
        e.key: [str(i) for i in phone_ids(e.value, phn, e.line, e.key)]
        for e in read_kaldi_entries(phn, what="phone sequence")
    }
    write_kaldi_map(out, table)
    return len(table)


def write_g2p(text: Path, out: Path, nltk_data: str | None) -> int:
    from espnet_ext.data.numbers.text import phonemes

    table = {}
    for e in read_kaldi_entries(text, what="transcript"):
        table[e.key] = phonemes(e.value, nltk_data)
        if not table[e.key]:
            raise InputError(
                "g2p_en gives no phone for this text", path=text, line=e.line, key=e.key
            )
    write_kaldi_map(out, table)
    return len(table)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser, commands = command_parser("espnet_ext.data.arpabet", __doc__)
    listing = commands.add_parser("token_list", help="write the interface vocabulary")
    listing.add_argument("out", type=Path)
    g2p = commands.add_parser("g2p", help="Kaldi text -> phones (phn)")
    g2p.add_argument("--text", type=Path, required=True)
    g2p.add_argument("--out", type=Path, required=True)
    g2p.add_argument(
        "--nltk_data", default=None, help="offline NLTK data dir (default: $NLTK_DATA)"
    )
    ids = commands.add_parser("ids", help="phones -> ids of the vocabulary (phn_int)")
    ids.add_argument("--phn", type=Path, required=True)
    ids.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "token_list":
        with atomic_write(args.out) as f:
            f.write("".join(f"{t}\n" for t in TOKENS))
    elif args.command == "g2p":
        print(f"{args.out}: {write_g2p(args.text, args.out, args.nltk_data)} utterances")
    else:
        print(f"{args.out}: {write_ids(args.phn, args.out)} utterances")


if __name__ == "__main__":
    sys.exit(main())
