"""Tiny LegoNN experiments: a copy task over ten words, models built as ``mt_train`` would build them
(helpers imported by the tests; the session fixtures are in conftest.py)."""

from __future__ import annotations

import copy
import random
from argparse import Namespace
from pathlib import Path

import torch
import yaml

WORDS = [f"w{i}" for i in range(10)]
TEXT_VOCAB = ["<blank>", "<unk>", *WORDS, "<sos/eos>"]
PHONE_VOCAB = ["<blank>", "<unk>", *[f"p{i}" for i in range(6)]]
DIM = 16
FEATS = 20


def module_conf(token_list, input_layer="none", olc_ratio=1.5, **extra):
    conf = dict(
        token_list=token_list,
        input_layer=input_layer,
        output_size=DIM,
        attention_heads=2,
        linear_units=32,
        num_blocks=1,
        dropout_rate=0.0,
        olc=dict(ratio=olc_ratio, max_length=64, num_blocks=1),
    )
    if input_layer in ("wemb", "beamconv"):
        conf["ingestor"] = dict(num_blocks=1, attention_heads=2, linear_units=32, dropout_rate=0.0)
    conf.update(extra)
    return conf


def decoder_conf(ingestor="wemb"):
    return dict(
        attention_dim=DIM,
        attention_heads=2,
        linear_units=32,
        num_blocks=1,
        dropout_rate=0.0,
        positional_dropout_rate=0.0,
        ingestor=dict(type=ingestor, num_blocks=1, attention_heads=2, linear_units=32),
    )


def experiment_config(modules, decoder=None, **model_conf):
    """A full MT-task config (ESPnet's defaults + ours), as ``config.yaml`` of a training run holds it."""
    from espnet2.tasks.mt import MTTask

    import espnet_ext.registry

    espnet_ext.registry.install()
    config = MTTask.get_default_config()
    config.update(
        model="legonn",
        encoder="legonn",
        decoder="legonn",
        token_list=list(TEXT_VOCAB),
        src_token_list=list(TEXT_VOCAB),
        token_type="word",
        src_token_type="word",
        frontend="embed",
        frontend_conf=dict(embed_dim=DIM, positional_dropout_rate=0.0),
        encoder_conf=dict(modules=modules),
        decoder_conf=decoder or decoder_conf(),
        model_conf=dict(report_bleu=False, **model_conf),
    )
    return config


def asr_experiment_config(modules, decoder=None, **model_conf):
    """The same for ESPnet2's ASR task, reading 20-dim features (no frontend), utterance MVN."""
    from espnet2.tasks.asr import ASRTask

    import espnet_ext.registry

    espnet_ext.registry.install()
    config = ASRTask.get_default_config()
    config.update(
        model="legonn",
        encoder="legonn",
        decoder="legonn",
        token_list=list(TEXT_VOCAB),
        token_type="word",
        input_size=FEATS,
        frontend=None,
        specaug=None,
        normalize="utterance_mvn",
        encoder_conf=dict(modules=modules),
        decoder_conf=decoder or decoder_conf(),
        model_conf=dict(report_cer=False, report_wer=False, **model_conf),
    )
    return config


def build(config, seed=0):
    from espnet_ext.nets.lego.inventory import task_class, task_of

    torch.manual_seed(seed)
    return task_class(task_of(config)).build_model(Namespace(**copy.deepcopy(config))).eval()


def save_experiment(directory: Path, config, seed=0):
    """config.yaml + model.pth of a model with seed-dependent random weights."""
    directory.mkdir(parents=True, exist_ok=True)
    model = build(config, seed)
    (directory / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    torch.save(model.state_dict(), directory / "model.pth")
    return directory / "config.yaml", directory / "model.pth", model


def random_batch(seed=0, batch=3):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([6, 4, 3][:batch])
    src = torch.randint(2, 12, (batch, 6), generator=g)
    return src, lengths


def write_copy_task(directory: Path, n_train=48, n_valid=8, seed=0):
    """Kaldi-style text files (utt-id + words) where the target copies the source."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_valid)):
        lines, shapes = [], []
        for i in range(n):
            words = [rng.choice(WORDS) for _ in range(rng.randint(2, 5))]
            lines.append(f"{split}{i:03d} {' '.join(words)}\n")
            shapes.append(f"{split}{i:03d} {len(words)}\n")
        (directory / f"{split}_text").write_text("".join(lines), encoding="utf-8")
        (directory / f"{split}_shape").write_text("".join(shapes), encoding="utf-8")
    (directory / "tokens.txt").write_text("\n".join(TEXT_VOCAB) + "\n", encoding="utf-8")
    return directory
