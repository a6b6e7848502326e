"""ImageClassificationTask: YAML -> model, real training with ESPnet2's trainer, resume, inference, bad input."""

import re

import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from training_checks import assert_trained_and_resumed, write_table

from espnet_ext.bin import cls_inference
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.baselines.convnet_classifier import ConvNetClassifier
from espnet_ext.tasks.image_classification import ImageClassificationTask

CONFIG = """\
model: convnet
model_conf:
    in_channels: 3
    channels: [8, 16]
    dropout_rate: 0.0
batch_type: unsorted
batch_size: 4
optim: adam
optim_conf:
    lr: 0.01
"""
CLASSES = ["dark", "light"]


def write_images(data, images, names, rng):
    """16x16 RGB images, dark or light with noise, as PNGs + image.scp + label (class names)."""
    rows = []
    for i, name in enumerate(names):
        label = CLASSES[i % 2]
        base = 50 if label == "dark" else 200
        pixels = np.clip(base + rng.normal(0, 30, size=(16, 16, 3)), 0, 255).astype(np.uint8)
        path = images / f"{name}.png"
        Image.fromarray(pixels).save(path)
        rows.append((name, path, label))
    data.mkdir(parents=True)
    write_table(data / "image.scp", [(key, path) for key, path, _ in rows])
    write_table(data / "label", [(key, label) for key, _, label in rows])


@pytest.fixture()
def corpus(tmp_path):
    """Eight training images and eight held-out ones (validation and test)."""
    rng = np.random.default_rng(0)
    (tmp_path / "images").mkdir()
    write_images(
        tmp_path / "data" / "train", tmp_path / "images", [f"img{i}" for i in range(8)], rng
    )
    write_images(
        tmp_path / "data" / "test", tmp_path / "images", [f"test{i}" for i in range(8)], rng
    )
    (tmp_path / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    return tmp_path


def task_args(corpus):
    return ["--config", str(corpus / "config.yaml"), "--class_list", str(corpus / "classes.txt")]


def data_args(corpus):
    args = []
    for phase, data in (("train", corpus / "data" / "train"), ("valid", corpus / "data" / "test")):
        args += [
            f"--{phase}_data_path_and_name_and_type",
            f"{data / 'image.scp'},image,image",
            f"--{phase}_data_path_and_name_and_type",
            f"{data / 'label'},label,text",
            f"--{phase}_shape_file",
            str(data / "image.scp"),
        ]
    return args


def test_model_is_built_from_yaml_through_the_task(corpus):
    args = ImageClassificationTask.get_parser().parse_args(task_args(corpus))
    model = ImageClassificationTask.build_model(args)
    assert isinstance(model, ConvNetClassifier) and model.num_classes == 2
    assert args.class_list == CLASSES  # kept in config.yaml, so inference needs no other file
    # Grey and colour layouts of the image type, and a gradient that reaches the first layer.
    loss, stats, weight = model(image=torch.rand(3, 12, 12, 3), label=torch.tensor([[0], [1], [1]]))
    loss.backward()
    assert set(stats) == {"loss", "acc"} and int(weight) == 3
    assert model.features[0].weight.grad.abs().sum() > 0


def test_labels_by_name_index_and_their_errors():
    from espnet_ext.tasks.image_classification import LabelPreprocessor

    by_name = LabelPreprocessor(train=True, num_classes=2, class_list=CLASSES)
    assert by_name("u1", {"label": "light"})["label"].tolist() == [1]
    with pytest.raises(
        InputError, match=re.escape("key 'u2': label 'grey' is not in the class list")
    ):
        by_name("u2", {"label": "grey"})
    by_index = LabelPreprocessor(train=True, num_classes=2)
    assert by_index("u3", {"label": np.array([1])})["label"].tolist() == [1]
    with pytest.raises(InputError, match=re.escape("key 'u4': class index 2 is outside 0..1")):
        by_index("u4", {"label": np.array([2])})


def test_train_resume_and_classify(corpus, tiny_run_options):
    exp = corpus / "exp"
    common = task_args(corpus) + data_args(corpus) + tiny_run_options + ["--output_dir", str(exp)]
    assert_trained_and_resumed(
        exp,
        lambda: ImageClassificationTask.main(cmd=common + ["--max_epoch", "1"]),
        lambda: ImageClassificationTask.main(cmd=common + ["--max_epoch", "8", "--resume", "true"]),
        final_epoch=8,
    )

    out = corpus / "decode" / "text"
    cls_inference.main(
        [
            "--data_path_and_name_and_type",
            f"{corpus / 'data' / 'test' / 'image.scp'},image,image",
            "--model_file",
            str(exp / "valid.loss.best.pth"),
            "--output_file",
            str(out),
            "--batch_size",
            "3",
        ]
    )
    references = dict(
        line.split() for line in (corpus / "data" / "test" / "label").read_text().splitlines()
    )
    predictions = dict(line.split() for line in out.read_text().splitlines())
    assert list(predictions) == list(
        references
    )  # every id, in scp order, named through the class list
    assert sum(predictions[k] == v for k, v in references.items()) >= 6, (
        predictions
    )  # unseen images classified


def test_undecodable_image_stops_training_with_its_scp_line(corpus, tiny_run_options):
    scp = corpus / "data" / "train" / "image.scp"
    (corpus / "images" / "img5.png").write_bytes(b"truncated")
    with pytest.raises(InputError, match=re.escape(f"{scp}:6: key 'img5': cannot decode image")):
        ImageClassificationTask.main(
            cmd=task_args(corpus)
            + data_args(corpus)
            + tiny_run_options
            + [
                "--output_dir",
                str(corpus / "exp"),
                "--max_epoch",
                "1",
                "--num_workers",
                "1",
            ]  # a loader process
        )
    assert not (corpus / "exp" / "checkpoint.pth").exists()


def test_inference_refuses_mismatched_model_file_and_leaves_no_output(corpus, tiny_run_options):
    exp = corpus / "exp"
    ImageClassificationTask.main(
        cmd=task_args(corpus)
        + data_args(corpus)
        + tiny_run_options
        + ["--output_dir", str(exp), "--max_epoch", "1"]
    )
    # A model file from a different architecture: ESPnet's strict=False would keep random layers
    # silently. One more block: the trained weights fit, but the new layers would stay random
    # (ESPnet loads strict=False).
    config = yaml.safe_load((exp / "config.yaml").read_text())
    config["model_conf"]["channels"] = [8, 16, 16]
    (exp / "deeper.yaml").write_text(yaml.safe_dump(config))
    config["model_conf"]["channels"] = [8, 32]  # wider: shapes differ
    (exp / "wider.yaml").write_text(yaml.safe_dump(config))
    out = corpus / "decode" / "text"
    does_not_fit = "the model file does not fit the model its config builds:"
    for config_name, model_name, reason in [
        ("deeper.yaml", "valid.acc.best.pth", f"{does_not_fit} missing keys ['features.8.weight'"),
        ("wider.yaml", "valid.acc.best.pth", f"{does_not_fit} Error(s) in loading"),
        ("config.yaml", "checkpoint.pth", "not a file of model weights only"),
    ]:
        with pytest.raises(InputError, match=re.escape(f"{exp / model_name}: {reason}")):
            cls_inference.main(
                [
                    "--data_path_and_name_and_type",
                    f"{corpus / 'data' / 'test' / 'image.scp'},image,image",
                    "--train_config",
                    str(exp / config_name),
                    "--model_file",
                    str(exp / model_name),
                    "--output_file",
                    str(out),
                ]
            )
    assert not out.exists()


def test_an_id_missing_from_one_data_file_is_named(corpus, tiny_run_options):
    labels = corpus / "data" / "train" / "label"
    labels.write_text(
        "".join(
            line + "\n" for line in labels.read_text().splitlines() if not line.startswith("img3 ")
        )
    )
    with pytest.raises(
        InputError,
        match=re.escape(f"{labels}: key 'img3': 1 of 8 ids are not in this 'label' file"),
    ):
        ImageClassificationTask.main(
            cmd=task_args(corpus)
            + data_args(corpus)
            + tiny_run_options
            + ["--output_dir", str(corpus / "exp")]
        )


SWIN_CONFIG = """\
model: swin
model_conf: {img_size: 16, patch_size: 2, embed_dim: 8, depths: [2, 1], num_heads: [1, 2],
             window_size: 4, gamma: 0.3, drloc_weight: 0.5, drloc_hidden: 8, drloc_pairs: 4}
batch_type: unsorted
batch_size: 4
optim: adamw
optim_conf: {lr: 0.01}
"""


def train_swin(corpus, tiny_run_options):
    """One epoch of the tiny relaxed Swin -> (experiment dir, the test images' scp)."""
    (corpus / "config.yaml").write_text(SWIN_CONFIG)
    exp = corpus / "exp"
    ImageClassificationTask.main(
        cmd=task_args(corpus)
        + data_args(corpus)
        + tiny_run_options
        + ["--output_dir", str(exp), "--max_epoch", "1"]
    )
    return exp, corpus / "data" / "test" / "image.scp"


def read_images(scp):
    """The images of ``scp`` as the model reads them: (N, H, W, C) in [0, 1]."""
    return torch.stack(
        [
            torch.from_numpy(np.asarray(Image.open(p), dtype=np.float32) / 255)
            for p in (line.split()[1] for line in scp.read_text().splitlines())
        ]
    )


def set_matched_inference(model, on: bool) -> None:
    for module in model.modules():
        if hasattr(module, "matched_inference"):
            module.matched_inference = on


def test_swin_trains_and_infers_top_k_with_and_without_matched_inference(corpus, tiny_run_options):
    exp, scp = train_swin(corpus, tiny_run_options)
    model, _ = ImageClassificationTask.build_model_from_file(
        exp / "config.yaml", exp / "valid.acc.best.pth"
    )
    images = read_images(scp)
    for matched in ("false", "true"):
        text, topk = corpus / f"text_{matched}", corpus / f"topk_{matched}"
        cls_inference.main(
            [
                "--data_path_and_name_and_type",
                f"{scp},image,image",
                "--model_file",
                str(exp / "valid.acc.best.pth"),
                "--output_file",
                str(text),
                "--topk_file",
                str(topk),
                "--topk",
                "2",
                "--matched_inference",
                matched,
                "--batch_size",
                "3",
            ]
        )
        set_matched_inference(model, matched == "true")
        with torch.no_grad():
            expected = model.eval().classify(images).topk(2, dim=-1).indices
        rows = [line.split() for line in topk.read_text().splitlines()]
        assert [r[1:] for r in rows] == [[CLASSES[i] for i in e] for e in expected.tolist()]
        assert [line.split()[1] for line in text.read_text().splitlines()] == [r[1] for r in rows]
    # relaxation at test time changes the scores (γ = 0.3): the two rankings come from different models
    logits = {}
    for matched in (False, True):
        set_matched_inference(model, matched)
        with torch.no_grad():
            logits[matched] = model.classify(images)
    assert not torch.allclose(logits[False], logits[True])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_swin_with_matched_inference_classifies_on_cuda_as_on_the_cpu(corpus, tiny_run_options):
    """``--gpu_inference true``'s path (``--device cuda``): relaxed window attention with matched inference
    on the GPU ranks as on the CPU (images whose two best classes are closer than 1e-3 aside)."""
    exp, scp = train_swin(corpus, tiny_run_options)
    predicted = {}
    for device in ("cpu", "cuda"):
        text = corpus / f"text_{device}"
        cls_inference.main(
            ["--data_path_and_name_and_type", f"{scp},image,image", "--model_file",
             str(exp / "valid.acc.best.pth"), "--output_file", str(text), "--matched_inference",
             "true", "--batch_size", "3", "--device", device]
        )  # fmt: skip
        predicted[device] = [line.split()[1] for line in text.read_text().splitlines()]
    model, _ = ImageClassificationTask.build_model_from_file(
        exp / "config.yaml", exp / "valid.acc.best.pth"
    )
    set_matched_inference(model, True)
    images = read_images(scp)
    with torch.no_grad():
        best = model.eval().classify(images).topk(2, dim=-1).values
    clear = (best[:, 0] - best[:, 1] > 1e-3).tolist()
    assert len(predicted["cuda"]) == len(predicted["cpu"]) == len(clear)
    assert [c for c, ok in zip(predicted["cuda"], clear) if ok] == [
        c for c, ok in zip(predicted["cpu"], clear) if ok
    ]


def test_timm_transform_in_the_preprocessor_matches_timm():
    from timm.data import create_transform

    from espnet_ext.tasks.image_classification import LabelPreprocessor, timm_image_transform

    conf = {
        "input_size": 48,
        "interpolation": "bicubic",
        "auto_augment": "rand-m9-mstd0.5-inc1",
        "re_prob": 0.25,
        "crop_pct": 0.875,
    }
    image = np.random.default_rng(0).uniform(0, 1, (32, 32, 3)).astype(np.float32)
    evaluation = LabelPreprocessor(False, 2, CLASSES, timm_image_transform(conf, train=False))
    out = evaluation("u1", {"image": image.copy(), "label": "dark"})
    reference = create_transform(48, is_training=False, interpolation="bicubic", crop_pct=0.875)
    pil = Image.fromarray(np.round(image * 255).astype(np.uint8))
    np.testing.assert_allclose(out["image"], reference(pil).permute(1, 2, 0).numpy(), atol=1e-6)
    assert out["label"].tolist() == [0]
    training = timm_image_transform(conf, train=True)
    first, second = training(image), training(image)
    assert first.shape == (48, 48, 3) and not np.allclose(first, second)  # random augmentation
    with pytest.raises(InputError, match="RGB"):
        evaluation("u2", {"image": image[..., 0]})
    with pytest.raises(ConfigError, match="image_transform_conf"):
        timm_image_transform({"input_size": 48, "auto_agument": "rand"}, train=True)
