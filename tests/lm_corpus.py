"""A tiny word-level LM corpus and the ESPnet2 LM training options that read it, for tests that run a real
ESPnet training in a few seconds (relative paths: run from ``directory``)."""

import random
from pathlib import Path


def write_lm_corpus(directory: Path) -> list:
    """16 sentences of 5 words: equal lengths, so the mean loss of each rank's half batch averages to the
    full batch's and 2-rank DDP takes exactly the steps of one process."""
    rng = random.Random(0)
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    with open(directory / "text", "w") as text, open(directory / "shape", "w") as shape:
        for i in range(16):
            text.write(f"u{i:02d} {' '.join(rng.choice(words) for _ in range(5))}\n")
            shape.write(f"u{i:02d} 5\n")
    (directory / "tokens.txt").write_text(
        "\n".join(["<blank>", "<unk>", *words, "<sos/eos>"]) + "\n"
    )
    return [
        "--token_type",
        "word",
        "--token_list",
        "tokens.txt",
        "--use_preprocessor",
        "true",
        "--train_data_path_and_name_and_type",
        "text,text,text",
        "--train_shape_file",
        "shape",
        "--valid_data_path_and_name_and_type",
        "text,text,text",
        "--valid_shape_file",
        "shape",
        "--fold_length",
        "150",
        "--batch_size",
        "4",
        "--max_epoch",
        "1",
        "--num_workers",
        "0",
        "--seed",
        "0",
        "--lm",
        "seq_rnn",
        "--lm_conf",
        "unit=16",
        "--lm_conf",
        "nlayers=1",
        "--use_matplotlib",
        "false",
        "--use_tensorboard",
        "false",
    ]
