"""espnet_ext.data.text_noise: character noise on source sentences (MT's source-side uncertainty)."""

import numpy as np

from espnet_ext.data.text_noise import corrupt, main, utterance_rng


def test_corruption_rate_spaces_and_alphabet():
    sentence = "dreitausend dreihundertdreiunddreißig " * 50
    alphabet = sorted(set(sentence) - {" "})
    noisy = corrupt(sentence, 0.2, alphabet, np.random.default_rng(0))
    assert len(noisy) == len(sentence)
    assert all((a == " ") == (b == " ") for a, b in zip(sentence, noisy))  # spaces stay, none added
    assert set(noisy) - {" "} <= set(alphabet)
    letters = [(a, b) for a, b in zip(sentence, noisy) if a != " "]
    changed = sum(a != b for a, b in letters) / len(letters)
    # replaced with p = 0.2, and a replacement keeps the letter with probability 1/|alphabet|
    expected = 0.2 * (1 - 1 / len(alphabet))
    assert abs(changed - expected) < 0.04
    assert corrupt(sentence, 0.0, alphabet, np.random.default_rng(0)) == sentence


def test_noise_depends_on_the_utterance_only_and_the_file_is_rewritten_in_place(tmp_path, capsys):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.write_text("u1 dreihundertdreißig\nu2 vierhundertvierzig\n")
    b.write_text("u0 neun\nu2 vierhundertvierzig\n")
    assert main(["--prob", "0.5", "--seed", "3", str(a), str(a)]) == 0
    assert main(["--prob", "0.5", "--seed", "3", str(b), str(b)]) == 0
    noisy_a = dict(line.split(" ", 1) for line in a.read_text().splitlines())
    noisy_b = dict(line.split(" ", 1) for line in b.read_text().splitlines())
    clean = "vierhundertvierzig"
    # the positions hit depend on the seed and the id alone (the replacement letters on the file's alphabet)
    hits = utterance_rng(3, "u2").random(len(clean)) < 0.5
    for noisy in (noisy_a["u2"], noisy_b["u2"]):
        changed = np.array([x != y for x, y in zip(noisy, clean)])
        assert len(noisy) == len(clean) and changed.any() and not (changed & ~hits).any()


def test_bad_input_is_refused_and_nothing_written(tmp_path, capsys):
    src = tmp_path / "text"
    src.write_text("u1 drei\nu2\n")
    dst = tmp_path / "noisy"
    assert main(["--prob", "0.1", str(src), str(dst)]) == 1
    assert f"{src}:2: key 'u2': empty sentence" in capsys.readouterr().err and not dst.exists()
    src.write_text("u1 drei\n")
    assert main(["--prob", "1.5", str(src), str(dst)]) == 1
    assert "--prob must be in [0, 1]" in capsys.readouterr().err and not dst.exists()
