"""Hard attention trains through ESPnet2's trainer (ImageToSequenceTask) on a tiny digit-strip data dir."""

import numpy as np
import torch
from PIL import Image

from espnet_ext.tasks.image_to_sequence import ImageToSequenceTask

CONFIG = """\
model: hard_attention
model_conf:
    channels: [4, 8, 8, 16]
    lstm_units: 8
    attention_dim: 8
    decoder_units: 8
    embed_dim: 4
    max_length: 3
batch_type: sorted
batch_size: 4
optim: adam
optim_conf:
    lr: 0.01
"""
TOKENS = ["<blank>", "<unk>", "0", "1", "<sos/eos>"]


def write_data(data, names, rng):
    """Strips of three 'digits' (0: dark block, 1: bright bar) as grey 96x32 PNGs + image.scp + text."""
    data.mkdir(parents=True)
    scp, text = [], []
    for name in names:
        digits = "".join(rng.choice(list("01"), size=3))
        strip = np.zeros((32, 96), np.uint8)
        for i, digit in enumerate(digits):
            if digit == "1":
                strip[4:28, 32 * i + 12 : 32 * i + 20] = 255
        path = data / f"{name}.png"
        Image.fromarray(strip).save(path)
        scp.append(f"{name} {path}\n")
        text.append(f"{name} {digits}\n")
    (data / "image.scp").write_text("".join(scp))
    (data / "text").write_text("".join(text))


def test_hard_attention_trains_through_the_espnet_trainer(tmp_path):
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    write_data(tmp_path / "train", [f"s{i}" for i in range(8)], rng)
    write_data(tmp_path / "valid", [f"v{i}" for i in range(4)], rng)
    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    args = [
        "--config",
        str(tmp_path / "config.yaml"),
        "--token_list",
        str(tmp_path / "tokens.txt"),
        "--token_type",
        "char",
        "--ngpu",
        "0",
        "--num_workers",
        "0",
        "--seed",
        "0",
        "--use_tensorboard",
        "true",  # ESPnet's default, which the paper-scale configs keep
        "--use_matplotlib",
        "false",
        "--num_att_plot",
        "0",
        "--keep_nbest_models",
        "1",
    ]
    for phase in ("train", "valid"):
        args += [
            f"--{phase}_data_path_and_name_and_type",
            f"{tmp_path / phase / 'image.scp'},image,image",
            f"--{phase}_data_path_and_name_and_type",
            f"{tmp_path / phase / 'text'},text,text",
        ]
    ImageToSequenceTask.main(
        cmd=args + ["--collect_stats", "true", "--output_dir", str(tmp_path / "stats")]
    )
    exp = tmp_path / "exp"
    ImageToSequenceTask.main(
        cmd=args
        + [
            "--train_shape_file",
            str(tmp_path / "stats" / "train" / "image_shape"),
            "--valid_shape_file",
            str(tmp_path / "stats" / "valid" / "image_shape"),
            "--output_dir",
            str(exp),
            "--max_epoch",
            "3",
        ]
    )
    state = torch.load(exp / "checkpoint.pth", map_location="cpu", weights_only=False)["reporter"]
    assert state["epoch"] == 3
    train = [float(state["stats"][epoch]["train"]["loss_ce"]) for epoch in (1, 2, 3)]
    assert train[-1] < train[0], train
    valid = state["stats"][3]["valid"]
    assert {"acc", "seq_acc", "entropy"} <= set(valid) and 0 <= float(valid["entropy"]) <= np.log(
        24
    )
    # TensorBoard got the image task's statistics.
    assert list((exp / "tensorboard" / "train").glob("events.out.tfevents.*"))
    # The moving-average baseline is kept with the model.
    assert "baseline.value" in torch.load(
        exp / "3epoch.pth", map_location="cpu", weights_only=False
    )
