"""Session fixtures of the LegoNN tests: the vocabulary and one tiny trained experiment."""

from __future__ import annotations

import pytest
import yaml
from tiny_lego import TEXT_VOCAB, experiment_config, module_conf, write_copy_task


@pytest.fixture(scope="session")
def text_vocab():
    return list(TEXT_VOCAB)


@pytest.fixture(scope="session")
def trained_experiment(tmp_path_factory):
    """One real ``python -m espnet_ext.bin.mt_train`` run (3 tiny epochs) of a LegoNN model."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("legonn_train")
    data = write_copy_task(root / "data")
    config = experiment_config([module_conf(str(data / "tokens.txt"))])
    for key in ("token_list", "src_token_list"):  # given on the command line, as run.sh does
        config.pop(key)
    ours = ("model", "encoder", "decoder", "frontend", "token_type", "src_token_type")
    ours += ("frontend_conf", "encoder_conf", "decoder_conf", "model_conf")
    train_config = {k: config[k] for k in ours}
    (root / "train.yaml").write_text(yaml.safe_dump(train_config), encoding="utf-8")
    tokens = str(data / "tokens.txt")
    cmd = [
        sys.executable,
        "-m",
        "espnet_ext.bin.mt_train",
        "--config",
        str(root / "train.yaml"),
        "--token_list",
        tokens,
        "--src_token_list",
        tokens,
        "--output_dir",
        str(root / "exp"),
        "--ngpu",
        "0",
        "--num_workers",
        "0",
        "--seed",
        "0",
        "--num_att_plot",
        "0",
        "--batch_type",
        "unsorted",
        "--batch_size",
        "16",
        "--max_epoch",
        "3",
        "--optim",
        "adam",
        "--optim_conf",
        "lr=0.003",
        "--use_preprocessor",
        "true",
    ]
    for split in ("train", "valid"):
        text = str(data / f"{split}_text")
        cmd += [
            f"--{split}_data_path_and_name_and_type",
            f"{text},src_text,text",
            f"--{split}_data_path_and_name_and_type",
            f"{text},text,text",
            f"--{split}_shape_file",
            str(data / f"{split}_shape"),
        ]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    return root / "exp", data
