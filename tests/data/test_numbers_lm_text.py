"""espnet_ext.data.numbers.lm_text: the extended LM text of the numbers-world recipes."""

from espnet_ext.data.numbers.lm_text import main, part_lines
from espnet_ext.data.numbers.words import number_to_words


def _numbers(lines):
    return [int(line.split()[0].rsplit("-", 1)[1]) for line in lines]


def test_a_part_is_at_most_its_size_and_speaks_its_range():
    lines = part_lines("narrow", (0, 99), 30, seed=1, lang="en", domain_digits="")
    numbers = _numbers(lines)
    assert len(numbers) == len(set(numbers)) == 30 and all(0 <= n <= 99 for n in numbers)
    assert all(line.startswith("narrow_spk") for line in lines)
    assert all(line.split(" ", 1)[1] == number_to_words(n, "en") for line, n in zip(lines, numbers))
    assert len(part_lines("narrow", (0, 99), 500, seed=1, lang="en", domain_digits="")) == 100


def test_a_domain_part_holds_only_and_at_most_the_domain():
    lines = part_lines("wide", (0, 9999), 5000, seed=1, lang="en", domain_digits=r"\d*(\d)\1\d")
    numbers = _numbers(lines)
    assert (
        len(numbers) == 990
    )  # every number of 0..9999 whose tens digit repeats the hundreds digit
    assert all(n >= 100 and (n // 10) % 10 == (n // 100) % 10 for n in numbers)


def test_held_out_sentences_are_left_out_and_the_file_is_written_whole(tmp_path, capsys):
    test = tmp_path / "test_text"
    test.write_text("spk1-0220 two hundred and twenty\nspk1-4005 four thousand and five\n")
    out = tmp_path / "lm" / "text"
    main(["--out", str(out), "--narrow", "0:9999=10000", "--wide", "10000:10999=50",
          "--domain_digits", "repeated_tens", "--exclude", str(test)])  # fmt: skip
    lines = out.read_text().splitlines()
    sentences = [line.split(" ", 1)[1] for line in lines]
    assert "two hundred and twenty" not in sentences and "four thousand and five" not in sentences
    assert (
        len(lines) == 988 + 50 and lines[0].startswith("narrow_") and lines[-1].startswith("wide_")
    )
    assert "(2 held-out ones left out)" in capsys.readouterr().out


def test_an_unreadable_held_out_file_is_refused_naming_file_and_line(tmp_path, capsys):
    bad = tmp_path / "text"
    bad.write_text("spk1-0001 one\nspk1-0002\n")
    out = tmp_path / "lm.txt"
    assert (
        main(["--out", str(out), "--narrow", "0:9=5", "--wide", "10:19=5", "--exclude", str(bad)])
        == 1
    )
    assert f"{bad}:2: key 'spk1-0002': empty sentence" in capsys.readouterr().err
    assert not out.exists()
