"""IWSLT14 de-en release reader on a fixture in the release's layout (train.tags + xml dev/test sets)."""

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest

from espnet_ext.data import iwslt14
from espnet_ext.data.datadir import read_kaldi_map
from espnet_ext.errors import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "iwslt14"
RELEASE = FIXTURE / "de-en"


@pytest.fixture
def release(tmp_path):
    """A writable copy of the fixture release (tests corrupt single files)."""
    shutil.copytree(RELEASE, tmp_path / "de-en")
    return tmp_path / "de-en"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("iwslt14") / "data"
    counts = iwslt14.prepare(FIXTURE, out)
    return out, counts


def _sentence_lines(path):
    return [
        line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("<")
    ]


def test_metadata_lines_are_dropped_and_title_description_text_kept():
    assert iwslt14.clean_train_line("<url>http://www.ted.com/talks/x.html</url>") is None
    assert iwslt14.clean_train_line("<talkid>1</talkid>") is None
    assert (
        iwslt14.clean_train_line('<reviewer href="http://www.ted.com/profiles/1">A B</reviewer>')
        is None
    )
    assert iwslt14.clean_train_line('<doc docid="1" genre="lectures">') is None
    assert iwslt14.clean_train_line("</doc>") is None
    assert iwslt14.clean_train_line("<title>Al Gore: Averting</title>") == "Al Gore: Averting"
    assert iwslt14.clean_train_line("<description>TED Talk: x</description>") == "TED Talk: x"
    assert iwslt14.clean_train_line("  Thank you so much, Chris. ") == "Thank you so much, Chris."
    assert iwslt14.clean_train_line("(Applause)") == "(Applause)"


def test_split_follows_fairseq_every_23rd_pair(prepared):
    out, counts = prepared
    # 2 talks x (title + description) + 24 + 20 sentences = 48 pairs: valid = pairs 23 and 46.
    sentences = _sentence_lines(RELEASE / "train.tags.de-en.en")
    assert len(sentences) == 44
    assert counts == {"train": 46, "valid": 2, "test": 13}
    valid = read_kaldi_map(out / "valid" / "text.en")
    assert list(valid) == ["train-000023", "train-000046"]
    assert valid["train-000023"] == "It was dinnertime,"
    assert (
        read_kaldi_map(out / "valid" / "text.de")["train-000046"]
        == "Dann schreibe ich eine Kolumne."
    )
    train = read_kaldi_map(out / "train" / "text.en")
    assert "train-000023" not in train and len(train) == 46
    assert train["train-000001"] == "Al Gore on averting the climate crisis"  # the <title> text
    assert (
        train["train-000005"] == "I'm extremely grateful."
    )  # leading/trailing blanks of the release stripped
    assert not any(v.startswith("<") for v in train.values())


def test_data_dirs_hold_source_target_and_text_as_target(prepared):
    out, _ = prepared
    for split in ("train", "valid", "test"):
        src = read_kaldi_map(out / split / "text.de")
        tgt = read_kaldi_map(out / split / "text.en")
        assert list(src) == list(tgt) == sorted(src)
        assert read_kaldi_map(out / split / "text") == tgt


def test_test_set_is_the_five_sets_in_order_with_entities_decoded(prepared):
    out, _ = prepared
    test_en = read_kaldi_map(out / "test" / "text.en")
    test_de = read_kaldi_map(out / "test" / "text.de")
    assert [k.split("-")[0] for k in test_en] == ["dev2010"] * 3 + ["dev2012"] * 2 + [
        "tst2010"
    ] * 4 + ["tst2011"] * 2 + ["tst2012"] * 2
    assert test_en["dev2012-01127-0001"] == "I'd like to tell you about Tom & Jerry today."
    assert (
        test_en["tst2011-01169-0001"] == "I'm a lawyer, but today I'm talking about \"music\"."
    )  # ’ -> '
    assert test_de["tst2012-01553-0001"] == "Wir haben ein Problem <hier>."
    assert test_en["tst2010-00769-0001"] == "Thank you for being here."  # second doc of a set


def test_lowercase_option(tmp_path):
    iwslt14.prepare(FIXTURE, tmp_path, lowercase=True)
    assert (
        read_kaldi_map(tmp_path / "test" / "text.en")["dev2010-00535-0001"]
        == "do schools kill creativity?"
    )
    assert read_kaldi_map(tmp_path / "train" / "text.de")["train-000003"] == "vielen dank, chris."


def test_line_count_mismatch_names_file_and_line(release, tmp_path):
    path = release / "train.tags.de-en.en"
    path.write_text(path.read_text(encoding="utf-8") + "One more line.\n", encoding="utf-8")
    n_de = len((release / "train.tags.de-en.de").read_text(encoding="utf-8").splitlines())
    with pytest.raises(InputError) as error:
        iwslt14.prepare(release, tmp_path / "out")
    assert error.value.path == str(path) and error.value.line == n_de + 1
    assert "line-parallel" in str(error.value)
    assert not (tmp_path / "out").exists()


def test_metadata_on_one_side_only_is_refused(release, tmp_path):
    path = release / "train.tags.de-en.de"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[10] = "<speaker>Al Gore</speaker>"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="not parallel") as error:
        iwslt14.prepare(release, tmp_path / "out")
    assert (error.value.path, error.value.line) == (str(path), 11)


def test_non_utf8_names_file_and_line(release, tmp_path):
    path = release / "IWSLT14.TED.tst2010.de-en.de.xml"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[11] = '<seg id="1"> Gr\u00fc\u00dfe </seg>\n'.encode("latin-1")
    path.write_bytes(b"".join(lines))
    with pytest.raises(InputError, match="UTF-8") as error:
        iwslt14.prepare(release, tmp_path / "out")
    assert (error.value.path, error.value.line) == (str(path), 12)


def test_seg_ids_that_differ_between_languages_are_refused(release, tmp_path):
    path = release / "IWSLT14.TEDX.dev2012.de-en.en.xml"
    text = path.read_text(encoding="utf-8").replace('<seg id="2">', '<seg id="3">')
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="seg 3") as error:
        iwslt14.prepare(release, tmp_path / "out")
    assert error.value.path == str(path)
    assert error.value.line == text.splitlines().index('<seg id="3"> That&apos;s it. </seg>') + 1


def test_missing_segment_is_refused(release, tmp_path):
    path = release / "IWSLT14.TED.tst2012.de-en.de.xml"
    path.write_text(
        path.read_text(encoding="utf-8").replace('<seg id="2"> Danke. </seg>\n', ""),
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="no counterpart") as error:
        iwslt14.prepare(release, tmp_path / "out")
    assert error.value.path == str(release / "IWSLT14.TED.tst2012.de-en.en.xml")


def test_a_dir_that_is_not_the_release_is_refused(tmp_path):
    (tmp_path / "de-en").mkdir()
    (tmp_path / "de-en" / "README").write_text("x")
    with pytest.raises(InputError, match="not the IWSLT14 de-en release.*found README"):
        iwslt14.corpus_dir(tmp_path)


def test_command_line_prepare_and_download_arguments(tmp_path, capsys):
    assert iwslt14.main(["prepare", "--root", str(RELEASE), "--out", str(tmp_path)]) == 0
    assert "train: 46 pairs, valid: 2 pairs, test: 13 pairs" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        iwslt14.main(["download"])  # --dest is required
    args = iwslt14.get_parser().parse_args(["download", "--dest", "d", "--sha256", "AB"])
    assert (args.url, args.sha256) == (iwslt14.URL, "AB")


def test_download_of_a_complete_dir_does_nothing(tmp_path):
    shutil.copytree(RELEASE, tmp_path / "de-en")
    (tmp_path / "de-en" / ".complete").write_text("de-en.tgz sha256 x\n")
    assert iwslt14.download(tmp_path, url="http://127.0.0.1:9/unreachable") == tmp_path / "de-en"


def test_download_from_a_local_server_extracts_and_records_the_digest(http_server, tmp_path):
    with tarfile.open(http_server.root / "de-en.tgz", "w:gz") as tar:
        tar.add(RELEASE, arcname="de-en")
    digest = hashlib.sha256((http_server.root / "de-en.tgz").read_bytes()).hexdigest()
    dest = tmp_path / "dl"
    url = f"{http_server.url}/de-en.tgz"
    assert iwslt14.download(dest, url=url, sha256=digest) == dest / "de-en"
    assert (dest / "de-en" / ".complete").read_text() == f"de-en.tgz sha256 {digest}\n"
    assert (dest / "de-en.tgz.sha256").read_text() == f"{digest}  de-en.tgz\n"
    assert iwslt14.prepare(dest, tmp_path / "data")["test"] == 13
    with pytest.raises(InputError, match="de-en.tgz.part: sha256 of the download"):
        iwslt14.download(tmp_path / "other", url=url, sha256="0" * 64)
    assert iwslt14.main(["download", "--dest", str(tmp_path / "x"), "--url", url + "x"]) == 1


def test_write_mt_dir_streams_pairs_into_sorted_tables(tmp_path):
    """Pairs may come from a generator (a WMT corpus is never held); tables come out sorted by id,
    ``text`` is the target side and each tag table gives every pair its value."""
    ids = [f"train-{n:06d}" for n in (3, 1, 2)]
    pairs = (iwslt14.Pair(i, f"quelle {i}", f"target {i}") for i in ids)
    out = tmp_path / "train"
    assert iwslt14.write_mt_dir(out, pairs, "de", "en", tags={"lang": "de"}) == 3
    assert list(read_kaldi_map(out / "text.de")) == sorted(ids)
    assert read_kaldi_map(out / "text") == read_kaldi_map(out / "text.en")
    assert read_kaldi_map(out / "lang") == dict.fromkeys(sorted(ids), "de")
    assert sorted(p.name for p in out.iterdir()) == ["lang", "text", "text.de", "text.en"]


def test_write_mt_dir_refuses_a_repeated_id_and_no_pairs_keeping_the_old_dir(tmp_path):
    out = tmp_path / "train"
    iwslt14.write_mt_dir(out, [iwslt14.Pair("a", "x", "y")])
    repeated = [
        iwslt14.Pair("b", "x", "y"),
        iwslt14.Pair("a", "x", "y"),
        iwslt14.Pair("b", "z", "w"),
    ]
    with pytest.raises(
        InputError, match=f"^{out}: key 'b': two entries of the input have this id$"
    ):
        iwslt14.write_mt_dir(out, repeated)
    with pytest.raises(InputError, match=f"^{out}: no sentence pairs in the inputs$"):
        iwslt14.write_mt_dir(out, iter([]))
    assert read_kaldi_map(out / "text") == {"a": "y"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train"]
