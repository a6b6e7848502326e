"""Modularity stress tests (§IV-B, Fig. 4): the swap matrix of encoders and decoders across experiments.

    python -m espnet_ext.analysis.lego_swap \
        --experiment seed1 exp/a/config.yaml exp/a/valid.acc.ave.pth \
        --experiment seed2 exp/b/config.yaml exp/b/valid.acc.ave.pth \
        --src_text dump/test/src_text --ref dump/test/text --output_dir exp/swap_legonn \
        [--inference_config conf/decode_mt.yaml]

Cell (i, j) is the BLEU of experiment i's encoder feeding experiment j's decoder, decoded with ESPnet's
beam search under the recipe's decoding options (``--inference_config``, the YAML mt_inference reads), so
the diagonal is each experiment as the recipe decodes it. With experiments from other seeds this is the
random-seed swap, with other sizes or ingestors the architecture swap, with an encoder trained alone (CTC
only) the modular plug. LegoNN experiments swap through the module inventory (interface vocabularies
checked); plain ESPnet encoder-decoders swap their encoder-side weights (``frontend.``, ``encoder.``...)
into the other model, which needs identical shapes. A pair that cannot be swapped is an empty cell with its
reason listed, never a silent gap. Writes ``swap_matrix.md``, ``swap_matrix.json`` and ``swap_matrix.png``.
All experiments must be of one family: compare LegoNN and plain models with one matrix each.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch
import yaml

from espnet_ext.decoding import options as rules
from espnet_ext.errors import ConfigError, InputError, reports_input_errors
from espnet_ext.fileio import atomic_write
from espnet_ext.nets.lego.ctc_only import LEGONN_MODELS
from espnet_ext.nets.lego.inventory import compose, export_modules
from espnet_ext.nets.lego.source import source_encoder
from espnet_ext.scoring.bleu import score_bleu
from espnet_ext.scoring.ref_hyp import Pair, read_text

ENCODER_SIDE = ("frontend.", "preencoder.", "encoder.", "postencoder.")


def family(config_path: str) -> str:
    config = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
    return "legonn" if config.get("model") in LEGONN_MODELS else "encdec"


def swapped_legonn(enc: tuple, dec: tuple, work: Path) -> tuple[Path, Path]:
    """Encoder modules of ``enc`` + decoder of ``dec`` through the inventory (vocabularies checked)."""
    enc_parts, dec_parts = exported(enc, work), exported(dec, work)
    if dec_parts[-1].name != "decoder.pt":
        raise ConfigError(f"{dec[0]} is an encoder-only model (CTC alone): it has no decoder")
    encoders = [p for p in enc_parts if p.name != "decoder.pt"]
    return compose([*encoders, dec_parts[-1]], work / f"{enc[0]}__{dec[0]}")


def exported(experiment: tuple, work: Path) -> list[Path]:
    """The experiment's module artefacts, exported once per matrix."""
    directory = work / f"modules_{experiment[0]}"
    done = directory / "exported"
    if done.is_file():
        return [Path(p) for p in done.read_text(encoding="utf-8").split()]
    paths = export_modules(experiment[1], experiment[2], directory)
    done.write_text(" ".join(map(str, paths)), encoding="utf-8")
    return paths


def swapped_encdec(enc: tuple, dec: tuple, work: Path) -> tuple[Path, Path]:
    """``dec``'s model with ``enc``'s encoder-side weights; every shape must agree. A table tied to the decoder
    (``share_encoder_decoder_input_embed``, the LegoNN baselines' shared embeddings) stays ``dec``'s: one
    parameter cannot hold both experiments' values, and the decoder reads and emits through it."""
    enc_state = torch.load(enc[2], map_location="cpu", weights_only=True)
    state = torch.load(dec[2], map_location="cpu", weights_only=True)
    enc_keys = {k for k in enc_state if k.startswith(ENCODER_SIDE)}
    dec_keys = {k for k in state if k.startswith(ENCODER_SIDE)}
    if enc_keys != dec_keys:
        raise ConfigError(f"encoders of {enc[0]} and {dec[0]} have different parameters")
    # torch.save keeps tied tensors one storage
    decoder_side = {v.untyped_storage().data_ptr() for k, v in state.items() if k not in dec_keys}
    for key in sorted(enc_keys):  # the first mismatch in a stable order
        if state[key].untyped_storage().data_ptr() in decoder_side:
            continue
        if enc_state[key].shape != state[key].shape:
            raise ConfigError(
                f"{key}: {tuple(enc_state[key].shape)} in {enc[0]}, {tuple(state[key].shape)} in {dec[0]}"
            )
        state[key] = enc_state[key]
    model_file = work / f"{enc[0]}__{dec[0]}.pth"
    with atomic_write(model_file, "wb") as f:
        torch.save(state, f)
    return Path(dec[1]), model_file


# Without --inference_config: beam 5 and no ESPnet CTC head (the LegoNN paper's MT decoding).
DEFAULT_DECODING = {"beam_size": 5, "ctc_weight": 0.0}
# mt_inference options that a decoding config may set here: the search, not the files or the device.
DECODING_OPTIONS = (
    "beam_size",
    "ctc_weight",
    "lm_weight",
    "maxlenratio",
    "minlenratio",
    "nbest",
    "normalize_length",
    "penalty",
)


def decoding_options(path: str | None) -> dict:
    """DEFAULT_DECODING updated by the decoding YAML at ``path``: ESPnet's search options and ours
    (espnet_ext.decoding.options: eos_threshold, lenpen, fairseq_stop). A key neither takes (or an LM,
    which this tool does not load) is refused, naming the file and key."""
    options = dict(DEFAULT_DECODING)
    if path is None:
        return options
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read the decoding config: {e}", path=path) from e
    if not isinstance(loaded, dict):
        raise ConfigError("a decoding config must be a mapping of options", path=path)
    ours = rules.take_ours(loaded, str(path))
    for key, value in loaded.items():
        if key not in DECODING_OPTIONS:
            raise ConfigError("not a decoding option of the swap matrix", path=path, key=key)
        if key == "lm_weight" and value:
            raise ConfigError(
                "the swap matrix decodes without an LM (lm_weight 0)", path=path, key=key
            )
    options.update(loaded)
    options.update(ours)
    return options


def bleu_of(config, model_file, sources, refs, options: dict, device: str) -> float:
    """BLEU of one cell, decoded as the recipe's mt_inference entry point decodes (our search rules
    applied to ESPnet's beam search the same way)."""
    from espnet_ext.bin.mt_inference import Text2Text  # registers our classes on import

    translate = Text2Text(
        mt_train_config=config, mt_model_file=model_file, device=device, **options
    )
    to_ids = source_encoder(translate.mt_train_args)
    pairs = []
    for utt, (_, text) in sources.items():
        hyp = translate(to_ids(text))[0][0]
        pairs.append(Pair(utt, refs[utt][1], " ".join(hyp.split())))
    return score_bleu(pairs)["bleu"]


def swap_matrix(experiments, sources, refs, options=None, device="cpu"):
    """-> (names, matrix of BLEU or None, {(i, j): why not swappable}); ``options``: mt_inference's
    search options (default DEFAULT_DECODING)."""
    options = dict(DEFAULT_DECODING if options is None else options)
    families = {family(e[1]) for e in experiments}
    if len(families) != 1:
        raise ConfigError(
            "mixes LegoNN and plain encoder-decoder experiments: one matrix per family",
            key="--experiment",
        )
    swap = swapped_legonn if families == {"legonn"} else swapped_encdec
    names = [e[0] for e in experiments]
    if len(set(names)) != len(names):
        raise ConfigError(f"experiment names must differ: {names}", key="--experiment")
    matrix = [[None] * len(experiments) for _ in experiments]
    reasons = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, enc in enumerate(experiments):
            for j, dec in enumerate(experiments):
                try:
                    config, model_file = swap(enc, dec, Path(tmp))
                except ConfigError as e:
                    reasons[(names[i], names[j])] = str(e)
                    continue
                matrix[i][j] = bleu_of(config, model_file, sources, refs, options, device)
    return names, matrix, reasons


def markdown(names, matrix, reasons, title: str) -> str:
    lines = [f"### {title}", "", "| encoder \\ decoder | " + " | ".join(names) + " |"]
    lines.append("|" + "---|" * (len(names) + 1))
    for name, row in zip(names, matrix):
        cells = ["—" if v is None else f"{v:.1f}" for v in row]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for (enc, dec), why in reasons.items():
        lines.append(f"\n— {enc} encoder with {dec} decoder: not swappable ({why})")
    return "\n".join(lines) + "\n"


def plot(names, matrix, title: str, path: Path) -> None:
    """A heat map on the full BLEU scale (0-100, so matrices of two families compare at a glance)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    values = np.array([[np.nan if v is None else v for v in row] for row in matrix])
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2.5, 1.2 * len(names) + 2))
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=100)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("decoder from")
    ax.set_ylabel("encoder from")
    for (i, j), v in np.ndenumerate(values):
        colour = "black" if v > 60 else "white"  # readable on viridis' bright end
        ax.text(j, i, "—" if np.isnan(v) else f"{v:.1f}", ha="center", va="center", color=colour)
    fig.colorbar(image, ax=ax, label="BLEU")
    ax.set_title("\n".join(textwrap.wrap(title, 32)), fontsize="medium")
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--experiment",
        nargs=3,
        action="append",
        required=True,
        metavar=("NAME", "CONFIG", "MODEL"),
        help="one experiment (repeat, at least two)",
    )
    parser.add_argument("--src_text", required=True, help="utt-id + source text per line")
    parser.add_argument("--ref", required=True, help="utt-id + reference translation per line")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument(
        "--inference_config",
        help="decoding options (YAML, as mt_inference's --config); default: beam 5, ctc_weight 0",
    )
    parser.add_argument("--beam_size", type=int, help="overrides the config's beam size")
    parser.add_argument("--title", default="Swap matrix (BLEU)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if len(args.experiment) < 2:
        raise ConfigError("a swap matrix needs at least two experiments", key="--experiment")
    sources = read_text(args.src_text, allow_empty=False, what="source")
    refs = read_text(args.ref, allow_empty=False, what="reference")
    if set(sources) != set(refs):
        raise InputError("source and reference hold different utterance ids", path=args.ref)
    options = decoding_options(args.inference_config)
    if args.beam_size is not None:
        options["beam_size"] = args.beam_size
    names, matrix, reasons = swap_matrix(
        [tuple(e) for e in args.experiment], sources, refs, options, args.device
    )
    out = Path(args.output_dir)
    with atomic_write(out / "swap_matrix.json") as f:
        json.dump(
            {
                "names": names,
                "bleu": matrix,
                "not_swappable": [[*k, v] for k, v in reasons.items()],
            },
            f,
            indent=1,
        )
    with atomic_write(out / "swap_matrix.md") as f:
        f.write(markdown(names, matrix, reasons, args.title))
    plot(names, matrix, args.title, out / "swap_matrix.png")
    print(out / "swap_matrix.md")


if __name__ == "__main__":
    sys.exit(main())
