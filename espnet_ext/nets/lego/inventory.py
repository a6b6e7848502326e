"""The module inventory (§IV-C): LegoNN modules saved one by one and composed into a new model.

An artefact is one ``torch.save`` file holding one module -- an encoder module (the first one carries the
source embedding frontend) or the decoder -- with everything needed to plug it elsewhere:

    format, version     refused unless ``FORMAT`` and ``VERSION`` (the layout of this file)
    kind                "encoder" | "decoder"
    conf                the module's constructor arguments, token lists inlined (portable)
    input_vocab         what it reads: source tokens, or the previous interface vocabulary
    interface_vocab     encoder: the vocabulary of its output distribution (eq. 6)
    output_vocab        decoder: its output tokens
    length              encoder: OLC ratio and max_length (its output length range);
                        decoder: the same for the encoder it was trained behind (its expected input)
    state_dict          the module's weights

``compose`` chains artefacts from any experiments: each encoder's interface vocabulary must equal what the
next module ingests (checked token by token), the result is an ESPnet2 ``config.yaml`` + ``model.pth`` of
the first module's task (MT or ASR) that its ``build_model_from_file`` loads for decoding with no
training, or that ``--init_param``
fine-tunes end to end.
"""

from __future__ import annotations

import copy
import sys
from argparse import Namespace
from pathlib import Path

import torch
import yaml

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.fileio import atomic_write
from espnet_ext.nets.lego.ctc_only import LEGONN_MODELS
from espnet_ext.nets.lego.encoder import load_token_list

FORMAT = "espnet_ext.legonn.module"
VERSION = 1
# What the first encoder module carries besides its own weights: how its input is read, per task.
SOURCE_KEYS = {
    "mt": ("input_size", "frontend", "frontend_conf", "src_token_type", "src_bpemodel"),
    "asr": ("input_size", "frontend", "frontend_conf", "specaug", "specaug_conf", "normalize")
    + ("normalize_conf",),
}
SOURCE_STATE_PREFIXES = {"mt": ("frontend.",), "asr": ("frontend.", "normalize.")}
TARGET_KEYS = ("token_type", "bpemodel", "token_list")


def task_of(config: dict) -> str:
    """ESPnet2's MT configs have a source token list, ASR ones a feature normalisation."""
    return "mt" if "src_token_list" in config else "asr"


def task_class(task: str):
    if task == "mt":
        from espnet_ext.tasks.mt import MTTask

        return MTTask
    from espnet2.tasks.asr import ASRTask

    return ASRTask


def _sub_state(state: dict, prefix: str) -> dict:
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


def _token_list(value) -> list[str]:
    if isinstance(value, str):
        return Path(value).read_text(encoding="utf-8").split()
    return list(value)


def _length_of(module_conf: dict) -> dict:
    olc = module_conf.get("olc") or {}
    return {"olc_ratio": olc.get("ratio"), "max_length": olc.get("max_length")}


def export_modules(config_file: str | Path, model_file: str | Path, output_dir: str | Path) -> list:
    """Split a trained ``model: legonn`` experiment into one artefact per module (``legonn_ctc``: its
    encoder modules only); returns their paths."""
    config = yaml.safe_load(Path(config_file).read_text(encoding="utf-8"))
    if config.get("model") not in LEGONN_MODELS:
        raise ConfigError(
            f"{config_file} is not a LegoNN model (model: {' or '.join(LEGONN_MODELS)})",
            key="model",
        )
    state = torch.load(model_file, map_location="cpu", weights_only=True)
    modules = copy.deepcopy(config["encoder_conf"]["modules"])
    keys = (config.get("model_conf") or {}).get("interface_text_keys") or ["text"] * len(modules)
    task = task_of(config)
    source = {k: config.get(k) for k in SOURCE_KEYS[task]}
    source_state = {}
    for prefix in SOURCE_STATE_PREFIXES[task]:
        source_state.update({k: v for k, v in state.items() if k.startswith(prefix)})
    vocab_in = None  # speech: no input vocabulary
    if task == "mt":
        source["src_token_list"] = vocab_in = _token_list(config["src_token_list"])
    artefacts = []
    for i, conf in enumerate(modules):
        conf["token_list"] = load_token_list(conf["token_list"], f"encoder_conf.modules[{i}]")
        artefact = dict(
            kind="encoder",
            task=task,
            conf=conf,
            input_vocab=vocab_in,
            interface_vocab=conf["token_list"],
            interface_text_key=keys[i],
            length=_length_of(conf),
            state_dict=_sub_state(state, f"encoder.encoder_modules.{i}."),
        )
        if i == 0:
            artefact["source"] = source
            artefact["source_state_dict"] = source_state
        artefacts.append(artefact)
        vocab_in = conf["token_list"]
    if config["model"] == "legonn":  # an encoder-only model (legonn_ctc) has no decoder to export
        decoder_conf = copy.deepcopy(config["decoder_conf"])
        decoder_conf["interface_token_list"] = vocab_in
        target = {k: config.get(k) for k in TARGET_KEYS}
        target["token_list"] = _token_list(target["token_list"])
        artefacts.append(
            dict(
                kind="decoder",
                conf=decoder_conf,
                input_vocab=vocab_in,
                output_vocab=target["token_list"],
                target=target,
                length=_length_of(modules[-1]),
                state_dict=_sub_state(state, "decoder."),
            )
        )
    placed = sum(len(a["state_dict"]) + len(a.get("source_state_dict", {})) for a in artefacts)
    if placed != len(state):
        raise InputError(
            f"{len(state) - placed} of its {len(state)} weights belong to no LegoNN module "
            f"(is it the model of {config_file}?)",
            path=model_file,
        )
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, artefact in enumerate(artefacts):
        name = "decoder.pt" if artefact["kind"] == "decoder" else f"encoder{i}.pt"
        paths.append(_atomic_save({"format": FORMAT, "version": VERSION, **artefact}, out / name))
    return paths


def _atomic_save(obj, path: Path) -> Path:
    with atomic_write(path, "wb") as f:
        torch.save(obj, f)
    return path


def load_artefact(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise InputError("no such module artefact", path=path)
    artefact = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(artefact, dict) or artefact.get("format") != FORMAT:
        raise InputError(f"not a LegoNN module artefact ({FORMAT})", path=path)
    if artefact.get("version") != VERSION:
        raise InputError(
            f"artefact format version {artefact.get('version')} cannot be read by this code "
            f"(version {VERSION}); re-export it with a matching espnet_ext",
            path=path,
        )
    return artefact


def _first_difference(a: list, b: list) -> str:
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} tokens"
    i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    return f"token {i}: {a[i]!r} vs {b[i]!r}"


def check_chain(artefacts: list[dict], paths: list) -> None:
    """Encoders first (the first reads source tokens), one decoder last, vocabularies matching."""
    kinds = [a["kind"] for a in artefacts]
    if len(kinds) < 2 or kinds[-1] != "decoder" or "decoder" in kinds[:-1]:
        raise ConfigError(
            f"compose takes encoder modules followed by one decoder, got {kinds}", key="modules"
        )
    if "source" not in artefacts[0]:
        raise InputError(
            "the first module must read source tokens (an ingesting one cannot)", paths[0]
        )
    for i in range(1, len(artefacts)):
        if i < len(artefacts) - 1 and "source" in artefacts[i]:
            raise InputError("a source-reading module can only come first", path=paths[i])
        emitted, read = artefacts[i - 1]["interface_vocab"], artefacts[i]["input_vocab"]
        if emitted != read:
            raise ConfigError(
                f"{paths[i - 1]} emits an interface vocabulary that {paths[i]} does not read "
                f"({_first_difference(emitted, read)})",
                key="modules",
            )


def compose(paths: list, output_dir: str | Path) -> tuple[Path, Path]:
    """Artefacts -> ``output_dir/config.yaml`` + ``output_dir/model.pth``, an ESPnet2 model of the first
    module's task (an ASR encoder with an MT decoder is an ASR model)."""
    import espnet_ext.registry

    espnet_ext.registry.install()
    artefacts = [load_artefact(p) for p in paths]
    check_chain(artefacts, paths)
    encoders, decoder = artefacts[:-1], artefacts[-1]
    if decoder["length"] != encoders[-1]["length"]:
        print(
            f"note: {paths[-1]} was trained behind an encoder with output length "
            f"{decoder['length']}, composed behind one with {encoders[-1]['length']}",
            file=sys.stderr,
        )
    task = task_class(encoders[0]["task"])
    config = task.get_default_config()
    config.update(encoders[0]["source"])
    config.update(decoder["target"])
    config.update(
        model="legonn",
        encoder="legonn",
        decoder="legonn",
        encoder_conf={"modules": [e["conf"] for e in encoders]},
        decoder_conf=decoder["conf"],
        model_conf={"interface_text_keys": [e["interface_text_key"] for e in encoders]},
    )
    model = task.build_model(Namespace(**copy.deepcopy(config)))
    state = dict(encoders[0]["source_state_dict"])
    for i, e in enumerate(encoders):
        state.update({f"encoder.encoder_modules.{i}.{k}": v for k, v in e["state_dict"].items()})
    state.update({f"decoder.{k}": v for k, v in decoder["state_dict"].items()})
    model.load_state_dict(state, strict=True)  # every weight accounted for, none left over
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "config.yaml") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return out / "config.yaml", _atomic_save(model.state_dict(), out / "model.pth")
