"""Our tasks build their models from YAML in any process: a fresh interpreter and a spawned worker (as DDP starts
them) get the image/video data types and every class in the tables, including classes registered into ESPnet's
own ASR and ST tables, which lip reading and our ST task (its --model choice) reuse."""

import json
import multiprocessing
import subprocess
import sys
import textwrap

import pytest

CLS_YAML = "model: convnet\nmodel_conf:\n    in_channels: 1\n    channels: [4]\n"
OCR_YAML = """\
model: crnn
model_conf:
    image_height: 8
    channels: [4]
    width_pooling: [true]
    lstm_units: 8
"""
# The encoder is the one espnet_ext registers into espnet2.tasks.asr.encoder_choices.
VSR_YAML = """\
frontend: conv3d_resnet18
frontend_conf:
    resnet_stages: 1
    output_size: 16
encoder: cnn_transformer
encoder_conf:
    output_size: 16
    attention_heads: 2
    linear_units: 32
    num_blocks: 1
    conv_channels: [2, 2, 4, 4]
    use_flash_attn: false
decoder: transformer
decoder_conf:
    attention_heads: 2
    linear_units: 32
    num_blocks: 1
    use_flash_attn: false
"""

# Our ST task's model choice, with an encoder espnet_ext registers into espnet2.tasks.st.encoder_choices.
ST_YAML = """\
model: task_conditioned
model_conf:
    task_tags: [es, fr]
encoder: head_selection_transformer
encoder_conf:
    output_size: 8
    attention_heads: 2
    linear_units: 16
    num_blocks: 1
    num_tasks: 2
    head_candidates: 4
    selection_strategy: group
decoder: transformer
decoder_conf:
    attention_heads: 2
    linear_units: 16
    num_blocks: 1
"""


@pytest.fixture()
def task_cmds(tmp_path):
    """(task class path, command-line args) per task, each with a YAML config."""
    (tmp_path / "tokens.txt").write_text("<blank>\n<unk>\na\nb\n<sos/eos>\n")
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    cmds = {}
    for name, yaml, extra in [
        (
            "image_classification:ImageClassificationTask",
            CLS_YAML,
            ["--class_list", str(tmp_path / "classes.txt")],
        ),
        (
            "image_to_sequence:ImageToSequenceTask",
            OCR_YAML,
            ["--token_list", str(tmp_path / "tokens.txt")],
        ),
        ("lip_reading:LipReadingTask", VSR_YAML, ["--token_list", str(tmp_path / "tokens.txt")]),
        (
            "st:STTask",
            ST_YAML,
            [f"--{side}token_list={tmp_path / 'tokens.txt'}" for side in ("", "src_")],
        ),
    ]:
        config = tmp_path / f"{name.split(':')[0]}.yaml"
        config.write_text(yaml)
        cmds[f"espnet_ext.tasks.{name}"] = ["--config", str(config)] + extra
    return cmds


EXPECTED = {
    "espnet_ext.tasks.image_classification:ImageClassificationTask": ["ConvNetClassifier"],
    "espnet_ext.tasks.image_to_sequence:ImageToSequenceTask": ["CRNN"],
    "espnet_ext.tasks.lip_reading:LipReadingTask": [
        "ESPnetVSRModel",
        "Conv3dResNetFrontend",
        "CNNTransformerEncoder",
    ],
    "espnet_ext.tasks.st:STTask": [
        "TaskConditionedSTModel",
        "DefaultFrontend",
        "HeadSelectionTransformerEncoder",
    ],
}


def build_all(task_cmds: dict) -> dict:
    """Build every task's model the way its training entry point does; report class names and data types."""
    import importlib

    import torch

    torch.set_num_threads(1)
    built = {}
    for target, cmd in task_cmds.items():
        module, _, name = target.partition(":")
        task = getattr(importlib.import_module(module), name)
        model = task.build_model(task.get_parser().parse_args(cmd))
        parts = [model] + [
            getattr(model, part) for part in ("frontend", "encoder") if hasattr(model, part)
        ]
        built[target] = [type(part).__name__ for part in parts]
    return built


def test_fresh_subprocess_builds_every_task(task_cmds):
    code = textwrap.dedent(
        f"""
        import json, sys
        from espnet_ext.registry import install
        install()  # the entry points' call; the task modules are imported by name below
        sys.path.insert(0, {str(__file__.rsplit("/", 1)[0])!r})
        from test_task_registration import build_all
        print(json.dumps(build_all({task_cmds!r})))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    built = json.loads(out.stdout.strip().splitlines()[-1])
    assert built == EXPECTED


def _build_all_in_worker(task_cmds: dict) -> dict:
    # A DDP worker re-imports the entry point's module (as __mp_main__), which makes the registration call
    import espnet_ext.bin.vsr_train  # noqa: F401

    return build_all(task_cmds)


def test_spawned_worker_builds_every_task(task_cmds):
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        built = pool.apply(_build_all_in_worker, (task_cmds,))
    assert built == EXPECTED


def test_another_model_is_one_more_entry_in_the_task_table(tmp_path):
    """A model outside the package is added by registering it into our task's table; a YAML then names it."""
    from espnet_ext import registry
    from espnet_ext.nets.baselines.convnet_classifier import ConvNetClassifier
    from espnet_ext.tasks import image_classification

    entry = (
        "model_choices",
        "convnet_alias",
        "espnet_ext.nets.baselines.convnet_classifier:ConvNetClassifier",
    )
    registry.register(image_classification.__name__, *entry)
    try:
        (tmp_path / "c.yaml").write_text(CLS_YAML.replace("model: convnet", "model: convnet_alias"))
        task = image_classification.ImageClassificationTask
        args = task.get_parser().parse_args(
            ["--config", str(tmp_path / "c.yaml"), "--num_classes", "3"]
        )
        model = task.build_model(args)
        assert (
            args.model == "convnet_alias"
            and isinstance(model, ConvNetClassifier)
            and model.num_classes == 3
        )
    finally:
        registry.REGISTRY[image_classification.__name__].remove(entry)
        image_classification.model_choices.classes.pop("convnet_alias")
