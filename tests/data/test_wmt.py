"""WMT release readers (plain, tsv, sgm, xml) on fixtures in the release formats, and their errors."""

import shutil
from pathlib import Path

import pytest

from espnet_ext.data import wmt
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.errors import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "wmt"


@pytest.fixture
def release(tmp_path):
    """A writable copy of the fixtures (tests corrupt single files)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "wmt"))


def test_plain_pairs_keep_line_numbers_and_count_empty_sides():
    corpus = wmt.read_plain(FIXTURE / "europarl-v7.de-en.de", FIXTURE / "europarl-v7.de-en.en")
    assert corpus.dropped == 0  # nothing is read before the pairs are asked for
    pairs = list(corpus)
    assert [p.id for p in pairs] == [
        "europarl-v7-000000001",
        "europarl-v7-000000002",
        "europarl-v7-000000004",
    ]
    assert corpus.dropped == 1  # line 3: German side empty ("(Applause)" has no translation)
    assert pairs[2].src == "Bitte   erheben Sie sich." and pairs[2].tgt == "Please rise."
    assert list(corpus) == pairs and len(corpus) == 3  # read again from the files, the same


@pytest.mark.parametrize("short_side, line", [("en", 3), ("de", 2)])
def test_plain_files_of_unequal_length_stop_after_the_common_lines(release, short_side, line):
    """The error comes once the shorter file ends, naming the longer file's first unmatched line."""
    (release / f"europarl-v7.de-en.{short_side}").write_text(
        "".join(f"{i}\n" for i in range(line - 1)), encoding="utf-8"
    )
    corpus = wmt.read_plain(release / "europarl-v7.de-en.de", release / "europarl-v7.de-en.en")
    read = []
    longer = "en" if short_side == "de" else "de"
    with pytest.raises(
        InputError, match=rf"de-en\.{longer}:{line}: has 4 lines but .*has {line - 1}"
    ):
        for pair in corpus:
            read.append(pair.id)
    assert len(read) == line - 1


def test_tsv_column_order_comes_from_the_file_name():
    de_en = wmt.read_tsv(FIXTURE / "news-commentary-v14.de-en.tsv", "de", "en")
    en_de = wmt.read_tsv(FIXTURE / "news-commentary-v14.de-en.tsv", "en", "de")
    assert [(p.src, p.tgt) for p in de_en] == [
        ("Zwei Jahre später", "Two years later"),
        ("Das Gold steigt.", "Gold is rising."),
    ]
    assert [(p.src, p.tgt) for p in en_de] == [(p.tgt, p.src) for p in de_en]
    assert de_en.dropped == 1 and list(de_en)[1].id == "news-commentary-v14-000000002"


def test_tsv_errors_name_file_and_line(release):
    path = release / "news-commentary-v14.de-en.tsv"
    with pytest.raises(InputError, match="must name the pair ro-en"):
        wmt.read_tsv(path, "ro", "en")
    path.write_text("a\tb\nno tab here\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"\.tsv:2: expected 2 tab-separated fields, got 1"):
        list(wmt.read_tsv(path, "de", "en"))


def test_sgm_test_set_aligned_by_doc_and_segment_entities_decoded():
    corpus = wmt.read_sgm(FIXTURE / "newstest2013-src.de.sgm", FIXTURE / "newstest2013-ref.en.sgm")
    pairs = {p.id: (p.src, p.tgt) for p in corpus}
    assert list(pairs) == [
        "newstest2013-1012-bbc-0001",
        "newstest2013-1012-bbc-0002",
        "newstest2013-1019-lemonde-0001",
    ]
    assert pairs["newstest2013-1012-bbc-0002"] == (
        "Die Führungskräfte der Republikaner rechtfertigen ihre Politik & ihre „Gründe“.",
        'Republican leaders justified their policy & their "reasons".',
    )
    assert pairs["newstest2013-1019-lemonde-0001"][1] == "That is Obama’s victory."  # kept as is


def test_sgm_misaligned_segment_names_doc_segment_and_line(release):
    ref = release / "newstest2013-ref.en.sgm"
    ref.write_text(ref.read_text().replace('<seg id="2">', '<seg id="3">'), encoding="utf-8")
    with pytest.raises(InputError, match=r"ref.en.sgm:7: doc 1012-bbc seg 3 here, but .*seg 2"):
        list(wmt.read_sgm(release / "newstest2013-src.de.sgm", ref))


def test_sgm_missing_segment_names_the_longer_file(release):
    src = release / "newstest2013-src.de.sgm"
    src.write_text(src.read_text().replace('<seg id="1">Das ist Obama’s Sieg.</seg>\n', ""))
    with pytest.raises(
        InputError, match=r"ref.en.sgm:12: doc 1019-lemonde seg 1 has no counterpart"
    ):
        list(wmt.read_sgm(src, release / "newstest2013-ref.en.sgm"))


def test_xml_first_reference_or_chosen_translator():
    first = list(wmt.read_xml(FIXTURE / "wmttest2022.de-en.xml", "de", "en"))
    chosen = list(wmt.read_xml(FIXTURE / "wmttest2022.de-en.xml", "de", "en", translator="B"))
    assert [p.id for p in first] == [
        "wmttest2022-test-de-speech#1-0001",
        "wmttest2022-test-de-speech#1-0002",
        "wmttest2022-test-de-speech#1-0003",
        "wmttest2022-ecommerce_12-0001",
    ]
    assert [p.tgt for p in first][:2] == ["Good day & welcome.", "How are you?"]
    assert [p.tgt for p in chosen][3] == "Shipping is free"
    assert first[1].src == "Wie   geht es Ihnen?"  # normalised later, by prepare


def test_xml_reference_missing_a_segment_names_doc_segment_and_line(release):
    path = release / "wmttest2022.de-en.xml"
    text = path.read_text().replace('<seg id="3">Thank you.</seg>', "", 1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(
        InputError, match=r"xml:11: doc test-de-speech#1 segment 3 has no reference"
    ):
        list(wmt.read_xml(path, "de", "en"))


def test_xml_errors_wrong_language_unknown_translator_broken_xml(release):
    path = release / "wmttest2022.de-en.xml"
    with pytest.raises(InputError, match=r"xml:5: <src lang='de'>, expected 'cs'"):
        list(wmt.read_xml(path, "cs", "en"))
    with pytest.raises(InputError, match=r"xml:4: doc test-de-speech#1 has no translator 'C'"):
        list(wmt.read_xml(path, "de", "en", translator="C"))
    path.write_text(path.read_text().replace("</src>", "", 1), encoding="utf-8")
    with pytest.raises(InputError, match=r"xml:\d+: not well-formed XML: mismatched tag"):
        list(wmt.read_xml(path, "de", "en"))


def test_cli_writes_one_data_dir_from_several_formats_with_tags(tmp_path, capsys):
    out = tmp_path / "train"
    args = ["prepare", "--out", str(out), "--src_lang", "de", "--tgt_lang", "en"]
    args += [
        "--plain",
        str(FIXTURE / "europarl-v7.de-en.de"),
        str(FIXTURE / "europarl-v7.de-en.en"),
    ]
    args += ["--tsv", str(FIXTURE / "news-commentary-v14.de-en.tsv"), "--lowercase"]
    args += ["--task_tag", "de"]
    assert wmt.main(args) == 0
    src, tgt = read_kaldi_map(out / "text.de"), read_kaldi_map(out / "text.en")
    assert len(src) == 5 and list(src) == list(tgt) == list(read_kaldi_map(out / "text"))
    assert src["europarl-v7-000000004"] == "bitte erheben sie sich."
    assert set(read_kaldi_map(out / "lang").values()) == {"de"}
    printed = capsys.readouterr().out
    assert (
        "3 pairs, 1 dropped (an empty side)" in printed
        and "-> " + str(out) + ": 5 pairs" in printed
    )


def test_cli_failure_leaves_no_data_dir(release, tmp_path, capsys):
    (release / "europarl-v7.de-en.en").write_text("x\n", encoding="utf-8")
    out = tmp_path / "train"
    args = ["prepare", "--out", str(out), "--src_lang", "de", "--tgt_lang", "en", "--plain"]
    assert (
        wmt.main(
            [*args, str(release / "europarl-v7.de-en.de"), str(release / "europarl-v7.de-en.en")]
        )
        == 1
    )
    assert "line-parallel" in capsys.readouterr().err and not out.exists()


def test_release_directory_finds_every_format_in_both_directions():
    corpora, others = wmt.release_corpora(FIXTURE, "de", "en")
    assert [c.source.split("/")[-1] for c in corpora] == [
        "europarl-v7.de-en.en",
        "news-commentary-v14.de-en.tsv",
        "newstest2013-ref.en.sgm",
        "wmttest2022.de-en.xml",
    ]
    assert others == []
    reverse, others = wmt.release_corpora(FIXTURE, "en", "de")
    assert [o.name for o in others] == ["wmttest2022.de-en.xml"]  # an xml file has one direction
    sgm = {p.id: (p.src, p.tgt) for p in reverse[2]}
    assert sgm["newstest2013-1019-lemonde-0001"] == (
        "That is Obama’s victory.",
        "Das ist Obama’s Sieg.",
    )
    assert [p.src for p in reverse[0]] == [p.tgt for p in corpora[0]]


def test_cli_each_corpus_of_a_directory_in_its_own_data_dir(tmp_path, capsys):
    out = tmp_path / "test"
    args = ["prepare", "--out", str(out), "--each", "--src_lang", "en", "--tgt_lang", "de"]
    assert wmt.main([*args, "--dir", str(FIXTURE)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "test_europarl-v7",
        "test_news-commentary-v14",
        "test_newstest2013",
    ]
    assert (
        read_kaldi_map(out.parent / "test_newstest2013" / "text.en")["newstest2013-1012-bbc-0001"]
        == "A Republican strategy to counter the re-election of Obama"
    )
    assert "wmttest2022.de-en.xml: not a en-de release file, not read" in capsys.readouterr().err


LEGO = FIXTURE / "lego"  # WMT14 En-De, WMT19 De-En, WMT16 Ro-En with the file names WMT ships


@pytest.mark.parametrize(
    "broken, where",
    [
        # a bad SGML line: the reader's error, file and line
        ({"ref.de": '<seg id="2">Satz 2'}, "newstest2014-deen-ref.de.sgm:5: a <seg> line"),
        # segment 1 twice on both sides: what writing the third data dir would find
        (
            {"src.en": '<seg id="1">sentence 2</seg>', "ref.de": '<seg id="1">Satz 2</seg>'},
            "newstest2014-deen-ref.de.sgm: key 'newstest2014-1-news-0001': two pairs",
        ),
    ],
)
def test_each_checks_every_corpus_before_writing_any(tmp_path, capsys, broken, where):
    """--each: an error in the third test set (newstest2014) leaves no data dir, not the first two's."""
    test = Path(shutil.copytree(LEGO / "wmt14/de-en/test", tmp_path / "release"))
    for side, line in broken.items():
        sgm = test / f"newstest2014-deen-{side}.sgm"
        lines = sgm.read_text(encoding="utf-8").splitlines(keepends=True)
        lines[4] = line + "\n"  # line 5: the second segment
        sgm.write_text("".join(lines), encoding="utf-8")
    out = tmp_path / "data" / "test"
    args = ["prepare", "--out", str(out), "--each", "--src_lang", "en", "--tgt_lang", "de"]
    assert wmt.main([*args, "--dir", str(test)]) == 1
    assert where in capsys.readouterr().err
    assert not (tmp_path / "data").exists()  # not test_newstest2011, not test_newstest2012


def test_pair_named_test_sets_are_named_by_year_and_this_direction_read(caplog):
    """newstest2014-deen-src.en.sgm (test-full) -> newstest2014; of newstest2015's -deen and -ende files,
    the En-De run reads the -ende ones; the De-En files of the same set are named as copies, not read."""
    corpora, others = wmt.release_corpora(LEGO / "wmt14/de-en/test", "en", "de")
    names = [wmt.corpus_name(c.source.split(" + ")[0]) for c in corpora]
    assert names == [f"newstest{year}" for year in (2011, 2012, 2014, 2015, 2016)]
    first = {name: next(iter(c)) for name, c in zip(names, corpora)}
    assert first["newstest2014"].id == "newstest2014-1-news-0001"
    assert (first["newstest2014"].src, first["newstest2014"].tgt) == (
        "newstest2014 ende sentence 1",
        "newstest2014 ende Satz 1",
    )
    assert first["newstest2015"].src == "newstest2015 ende sentence 1"
    assert others == []
    err = caplog.text
    assert "newstest2015-deen-src.de.sgm: another copy of newstest2015" in err
    assert "newstest2016-deen-ref.en.sgm: another copy of newstest2016" in err


def test_de_en_2019_reads_its_own_set_not_the_en_de_one():
    (corpus,), _ = wmt.release_corpora(LEGO / "wmt19/de-en/test", "de", "en")
    assert next(iter(corpus)).src == "newstest2019 deen Satz 1"
    (ro_en,), _ = wmt.release_corpora(LEGO / "wmt16/ro-en/test", "ro", "en")
    assert wmt.corpus_name(ro_en.source.split(" + ")[0]) == "newstest2016"


def test_sets_reads_only_the_dev_set_asked_for(tmp_path, capsys, caplog):
    dev = LEGO / "wmt14/de-en/dev"
    args = ["prepare", "--out", str(tmp_path / "valid"), "--src_lang", "en", "--tgt_lang", "de"]
    assert wmt.main([*args, "--dir", str(dev), "--sets", "newstest2013"]) == 0
    assert list(read_kaldi_map(tmp_path / "valid" / "text.en")) == [
        "newstest2013-1-news-0001",
        "newstest2013-1-news-0002",
    ]
    assert (
        "newstest2012 (newstest2012-src.en.sgm + newstest2012-ref.de.sgm) not read" in caplog.text
    )
    assert wmt.main([*args, "--dir", str(dev), "--sets", "newstest2010"]) == 1
    err = capsys.readouterr().err
    assert f"{dev}: no en-de corpus newstest2010 here (found: newstest2012, newstest2013)" in err


def test_prepare_writes_task_tables_with_the_pairs(tmp_path):
    corpora = [wmt.read_tsv(FIXTURE / "news-commentary-v14.de-en.tsv", "de", "en")]
    out = wmt.prepare(tmp_path / "train", corpora, "de", "en", task_tag="de", task_id=3)
    ids = list(read_kaldi_map(out / "text"))
    assert ids == ["news-commentary-v14-000000001", "news-commentary-v14-000000002"]
    assert read_kaldi_map(out / "lang") == dict.fromkeys(ids, "de")
    assert read_kaldi_map(out / "task_id") == dict.fromkeys(ids, "3")
    assert (corpora[0].kept, corpora[0].dropped) == (2, 1)  # counted while streaming


def test_prepare_refuses_a_corpus_read_twice_and_keeps_the_old_dir(tmp_path, capsys):
    out = tmp_path / "train"
    plain = [
        "--plain",
        str(FIXTURE / "europarl-v7.de-en.de"),
        str(FIXTURE / "europarl-v7.de-en.en"),
    ]
    args = ["prepare", "--out", str(out), "--src_lang", "de", "--tgt_lang", "en", *plain]
    assert wmt.main(args) == 0
    before = (out / "text").read_text()
    assert wmt.main([*args, *plain]) == 1
    err = capsys.readouterr().err
    assert f"{out}: key 'europarl-v7-000000001': two entries of the input have this id" in err
    assert (out / "text").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train"]


def test_prepare_without_pairs_writes_nothing(tmp_path):
    (tmp_path / "x.de").write_text("ein Satz\n\n", encoding="utf-8")
    (tmp_path / "x.en").write_text("\nno German\n", encoding="utf-8")
    corpus = wmt.read_plain(tmp_path / "x.de", tmp_path / "x.en")
    with pytest.raises(InputError, match=f"^{tmp_path / 'out'}: no sentence pairs in the inputs$"):
        wmt.prepare(tmp_path / "out", [corpus], "de", "en")
    assert corpus.dropped == 2 and not (tmp_path / "out").exists()
    assert not (tmp_path / "out.tmp").exists()
