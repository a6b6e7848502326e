"""ImageToSequenceTask: YAML -> CRNN, collect_stats on width-first images, a training that learns, resume, decoding."""

import re

import numpy as np
import pytest
import torch
from PIL import Image
from training_checks import assert_trained_and_resumed, write_table

from espnet_ext.bin import ocr_inference
from espnet_ext.errors import InputError
from espnet_ext.nets.baselines.crnn import CRNN
from espnet_ext.tasks.image_to_sequence import ImageTextPreprocessor, ImageToSequenceTask

CONFIG = """\
model: crnn
model_conf:
    in_channels: 1
    image_height: 16
    channels: [16, 32]
    width_pooling: [true, false]
    lstm_units: 32
    lstm_layers: 1
    dropout_rate: 0.0
batch_type: sorted
batch_size: 4
optim: adam
optim_conf:
    lr: 0.01
"""
TOKENS = ["<blank>", "<unk>", "a", "b", "c"]


def glyph(char: str) -> np.ndarray:
    """An 8x16 glyph per character, white on black: a vertical bar, two horizontal bars, a box."""
    g = np.zeros((16, 8), np.uint8)
    if char == "a":
        g[2:14, 3:5] = 255
    elif char == "b":
        g[3:5, 1:7] = 255
        g[11:13, 1:7] = 255
    else:
        g[2:14, 1] = g[2:14, 6] = g[2, 1:7] = g[13, 1:7] = 255
    return g


def write_strips(data, images, names, rng):
    """Strips of 2-4 glyphs (widths 16-32, so batches need width padding) as grey PNGs + image.scp + text."""
    rows = []
    for name in names:
        text = "".join(rng.choice(list("abc"), size=rng.integers(2, 5)))
        path = images / f"{name}.png"
        Image.fromarray(np.concatenate([glyph(c) for c in text], axis=1)).save(path)
        rows.append((name, path, text))
    data.mkdir(parents=True)
    write_table(data / "image.scp", [(key, path) for key, path, _ in rows])
    write_table(data / "text", [(key, text) for key, _, text in rows])


@pytest.fixture()
def corpus(tmp_path):
    """Sixteen training strips and eight held-out ones (validation and test)."""
    rng = np.random.default_rng(0)
    (tmp_path / "images").mkdir()
    write_strips(
        tmp_path / "data" / "train", tmp_path / "images", [f"s{i:02d}" for i in range(16)], rng
    )
    write_strips(
        tmp_path / "data" / "test", tmp_path / "images", [f"t{i:02d}" for i in range(8)], rng
    )
    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    return tmp_path


def task_args(corpus):
    return [
        "--config",
        str(corpus / "config.yaml"),
        "--token_list",
        str(corpus / "tokens.txt"),
        "--token_type",
        "char",
    ]


def data_args(corpus):
    args = []
    for phase, data in (("train", corpus / "data" / "train"), ("valid", corpus / "data" / "test")):
        args += [
            f"--{phase}_data_path_and_name_and_type",
            f"{data / 'image.scp'},image,image",
            f"--{phase}_data_path_and_name_and_type",
            f"{data / 'text'},text,text",
        ]
    return args


def test_model_is_built_from_yaml_through_the_task(corpus):
    args = ImageToSequenceTask.get_parser().parse_args(task_args(corpus))
    model = ImageToSequenceTask.build_model(args)
    assert isinstance(model, CRNN) and model.vocab_size == len(TOKENS)
    assert args.token_list == TOKENS
    # Width-first batch of two widths: one BiLSTM step per two columns, CTC loss with a gradient.
    loss, stats, _ = model(
        image=torch.rand(2, 32, 16),
        image_lengths=torch.tensor([32, 20]),
        text=torch.tensor([[2, 3, 4], [4, 2, -1]]),
        text_lengths=torch.tensor([3, 2]),
    )
    loss.backward()
    assert torch.isfinite(loss) and model.cnn[0].weight.grad.abs().sum() > 0
    _, lengths = model.encode(torch.rand(2, 32, 16), torch.tensor([32, 20]))
    assert lengths.tolist() == [16, 10]


def test_preprocessor_tokenizes_and_turns_images_width_first(corpus):
    pre = ImageTextPreprocessor(train=True, token_type="char", token_list=TOKENS)
    image = np.arange(16 * 24, dtype=np.float32).reshape(16, 24)
    out = pre("s1", {"image": image, "text": "cab"})
    assert out["text"].tolist() == [4, 2, 3]
    np.testing.assert_array_equal(out["image"], image.T)
    assert pre.ids_to_text([4, 2, 3]) == "cab"
    with pytest.raises(InputError, match=re.escape("key 's2': empty transcript in 'text'")):
        pre("s2", {"image": image, "text": ""})


def exact_match(predictions: dict, references: dict) -> float:
    return sum(predictions.get(k) == v for k, v in references.items()) / len(references)


def test_a_jobs_key_file_loads_only_its_share_of_the_tables(corpus):
    """collect_stats and decoding jobs read a key file each; a job of a 12.7M-image corpus must not hold
    the whole image.scp and text, and a key its tables lack is refused naming the table."""
    train = corpus / "data" / "train"
    tables = [(str(train / "image.scp"), "image", "image"), (str(train / "text"), "text", "text")]
    (corpus / "keys.2.scp").write_text("s05 x\ns01 x\n")
    loader = ImageToSequenceTask.build_streaming_iterator(
        tables, None, None, key_file=str(corpus / "keys.2.scp")
    )
    assert list(loader.sampler) == ["s05", "s01"]
    assert {name: sorted(table) for name, table in loader.dataset.loader_dict.items()} == {
        "image": ["s01", "s05"],
        "text": ["s01", "s05"],
    }
    (corpus / "keys.3.scp").write_text("s02 x\nt00 x\n")
    with pytest.raises(
        InputError, match=r"image.scp: key 't00': 1 of 2 ids are not in this 'image'"
    ):
        ImageToSequenceTask.build_streaming_iterator(
            tables, None, None, key_file=str(corpus / "keys.3.scp")
        )


def test_collect_stats_train_resume_and_recognize(corpus, tiny_run_options):
    stats = corpus / "stats"
    stats_options = ["--collect_stats", "true", "--output_dir", str(stats)]
    ImageToSequenceTask.main(
        cmd=task_args(corpus) + data_args(corpus) + tiny_run_options + stats_options
    )
    # Shapes are width-first after the preprocessor, so ESPnet's samplers sort and batch by width.
    references = dict(
        line.split() for line in (corpus / "data" / "train" / "text").read_text().splitlines()
    )
    shapes = dict(
        line.split() for line in (stats / "train" / "image_shape").read_text().splitlines()
    )
    assert shapes == {key: f"{8 * len(text)},16" for key, text in references.items()}

    exp = corpus / "exp"
    shape_args = [
        "--train_shape_file",
        str(stats / "train" / "image_shape"),
        "--valid_shape_file",
        str(stats / "valid" / "image_shape"),
    ]
    common = (
        task_args(corpus)
        + data_args(corpus)
        + shape_args
        + tiny_run_options
        + ["--output_dir", str(exp)]
    )
    assert_trained_and_resumed(
        exp,
        lambda: ImageToSequenceTask.main(cmd=common + ["--max_epoch", "1"]),
        lambda: ImageToSequenceTask.main(cmd=common + ["--max_epoch", "15", "--resume", "true"]),
        final_epoch=15,
    )

    out = corpus / "decode" / "text"
    ocr_inference.main(
        [
            "--data_path_and_name_and_type",
            f"{corpus / 'data' / 'test' / 'image.scp'},image,image",
            "--model_file",
            str(exp / "valid.acc.best.pth"),
            "--output_file",
            str(out),
            "--batch_size",
            "4",
        ]
    )
    references = dict(
        line.split() for line in (corpus / "data" / "test" / "text").read_text().splitlines()
    )
    lines = out.read_text().splitlines()
    assert [line.split()[0] for line in lines] == list(references)  # every id, in scp order
    predictions = {key: text for key, _, text in (line.partition(" ") for line in lines)}
    assert exact_match(predictions, references) >= 0.75, predictions  # unseen strips are read
