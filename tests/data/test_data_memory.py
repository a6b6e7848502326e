"""Memory of data preparation at corpus size: WMT preparation, validation and combination stream
their tables (GNU sort orders them on disk), so the peak of Python's memory must not grow with the
number of pairs. Before streaming, every pair was held several times over (about 2.8 KB per pair:
over 10 GB for WMT14 En-De's 4.5M pairs)."""

import random
import tracemalloc

from espnet_ext.data import wmt
from espnet_ext.data.datadir import (
    check_data_dir,
    combine_data_dirs,
    fix_spk2utt,
    write_sorted_tables,
)

WORDS = [f"w{i}ort" for i in range(2000)]


def write_release(directory, pairs):
    """A WMT training corpus of ``pairs`` line-parallel sentences (plain text, as europarl ships)."""
    directory.mkdir(parents=True)
    rng = random.Random(pairs)
    with (
        open(directory / "europarl-v7.de-en.de", "w", encoding="utf-8") as de,
        open(directory / "europarl-v7.de-en.en", "w", encoding="utf-8") as en,
    ):
        for _ in range(pairs):
            de.write(" ".join(rng.choices(WORDS, k=12)) + "\n")
            en.write(" ".join(rng.choices(WORDS, k=12)) + "\n")


def peak_bytes(work) -> int:
    """The most memory Python's allocations held at once while ``work()`` ran."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def prepare_and_combine(root, pairs):
    """What the multilingual recipe does, on two 'languages' of ``pairs`` pairs each: prepare each
    (read, normalise, sort, validate), combine them (merge, validate), and give the combined dir
    speakers (utt2spk, fix_spk2utt, the spk2utt check of validation)."""
    release = root / "release"
    write_release(release, pairs)

    def work():
        for lang in ("de", "fr"):
            corpora = wmt.read_release_dir(release, "de", "en")
            wmt.prepare(root / lang, corpora, "de", "en", task_tag=lang, id_prefix=f"{lang}-")
            assert len(corpora[0]) == pairs
        assert combine_data_dirs(root / "train", [root / "de", root / "fr"]) == 2 * pairs
        ids = (f"{lang}-europarl-v7-{n:09d}" for lang in ("de", "fr") for n in range(1, pairs + 1))
        rows = ((utt, (f"spk{i % 500}",)) for i, utt in enumerate(ids))
        write_sorted_tables(root / "train", ["utt2spk"], rows, where=root / "train")
        fix_spk2utt(root / "train")
        assert check_data_dir(root / "train", require=("text", "utt2spk", "spk2utt")) == 2 * pairs

    return peak_bytes(work)


def test_peak_memory_does_not_grow_with_the_number_of_pairs(tmp_path):
    small, large = 1_000, 10_000
    peaks = {n: prepare_and_combine(tmp_path / str(n), n) for n in (small, large)}
    # Ten times the pairs, the same peak give or take buffers (measured: about 90 KB for both). Held
    # at 2.8 KB a pair, 2 x 10k pairs would take 56 MB; even at 50 bytes a pair the bounds fail.
    assert peaks[large] < peaks[small] + 256 * 1024, peaks
    assert peaks[large] < 1024 * 1024, peaks
