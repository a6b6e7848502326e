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
from espnet_ext.data.filter import filter_data_dir
from espnet_ext.data.task_tags import write_task_id_table

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


def write_mt_dir(directory, pairs):
    """An MT data dir as the multilingual recipe's (text.de, text.en, text, the task tables lang and
    task_id), with speakers and segmented recordings so that every kind of table is filtered: pairs
    of 1 to 30 words a side, about two thirds of them dropped by the length ratio. The recordings are
    50 whatever the size: validation holds the ids of wav.scp to check segments against them."""
    rng = random.Random(pairs)

    def rows():
        for n in range(pairs):
            de, en = (" ".join(rng.choices(WORDS, k=rng.randint(1, 30))) for _ in "de")
            segment = f"rec{n % 50:07d} {n // 50}.0 {n // 50 + 1}.0"
            yield f"de-europarl-v7-{n:09d}", (de, en, en, "de", "1", f"spk{n // 20:07d}", segment)

    names = ["text.de", "text.en", "text", "lang", "task_id", "utt2spk", "segments"]
    directory.mkdir()
    write_sorted_tables(directory, names, rows(), where=directory)
    fix_spk2utt(directory)
    speakers = ((f"spk{n:07d}", ("f",)) for n in range(pairs // 20))
    write_sorted_tables(directory, ["spk2gender"], speakers, where=directory)
    recordings = ((f"rec{n:07d}", (f"/audio/{n}.flac",)) for n in range(50))
    write_sorted_tables(directory, ["wav.scp"], recordings, where=directory)


def filter_peak(root, pairs):
    """The filter stage as mt.sh runs it (both sides' word limit and the length ratio), then the task
    id table of what it kept, as task_tags' command writes it."""
    src, dst = root / "src", root / "dst"
    root.mkdir()
    write_mt_dir(src, pairs)

    def work():
        report = filter_data_dir(
            src, dst, max_text_words=25, text_names=("text.de", "text.en"), max_length_ratio=1.5
        )
        assert report.total == pairs and 0 < report.kept < pairs / 2
        assert write_task_id_table(dst / "lang", ["fr", "de"], dst / "task_id") == report.kept

    peak = peak_bytes(work)
    assert check_data_dir(dst, require=("text", "utt2spk", "spk2utt", "spk2gender", "wav.scp")) > 0
    return peak


def test_filter_and_task_ids_peak_memory_does_not_grow_with_the_utterances(tmp_path):
    small, large = 1_000, 10_000
    peaks = {n: filter_peak(tmp_path / str(n), n) for n in (small, large)}
    # Held whole (the filter before streaming: about 1.8 KB a pair, 1.77 GB of RSS at 1M pairs) the
    # large run would take 18 MB; streamed both peaks are buffers.
    assert peaks[large] < peaks[small] + 256 * 1024, peaks
    assert peaks[large] < 1024 * 1024, peaks
