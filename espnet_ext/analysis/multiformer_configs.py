"""The thesis' architectures (Tabla 1) in one table, rendered to ESPnet2 training YAMLs.

ESPnet2 YAML cannot include another file, so the MuST-C ST configs and their ASR-pretraining counterparts
are written from this table; a test checks the committed files equal what it renders::

    python -m espnet_ext.analysis.multiformer_configs --write egs/mustc   # (re)write every config
    python -m espnet_ext.analysis.multiformer_configs --check egs/mustc   # exit 1 when a file is stale

Real configs: ``egs/mustc/{st1,asr1}/conf/tuning/train_{st,asr}_<arch>.yaml``; mini configs (d = 144,
CPU, spoken-numbers corpus): ``train_{st,asr}_<arch>_mini.yaml`` for the baseline and ``MINI``;
``conf/train_{st,asr}{,_mini}.yaml`` link to s2t_multiformer_s, the thesis' model (ESPnet's convention).
The sweep specs that train them all (``espnet_ext.analysis.sweep``) come from the same table:
``asr1/conf/sweeps/{tabla3,tabla5_nods,mini}.yaml`` and ``st1/conf/sweeps/{tabla2,tabla5_nods,mini}.yaml``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import yaml

BASELINE = "s2t_transformer_s"

# Tabla 1 (thesis §5.3): blocks "N_layers x (heads)", 4 heads per layer, 12 encoder layers.
ARCHITECTURES: dict[str, list[str]] = {
    "s2t_multiformer_s_full": ["12 x (4 x Full)"],
    "s2t_multiformer_s_fast": ["12 x (4 x Fast)"],
    "s2t_multiformer_s_local": ["12 x (4 x Local(64))"],
    "s2t_multiformer_s_conv_5_2": ["12 x (4 x Conv(5, 2))"],
    "s2t_multiformer_s_conv_7_3": ["12 x (4 x Conv(7, 3))"],
    "s2t_multiformer_s_h_lc": ["12 x (2 x Local(64), 2 x Conv(5, 2))"],
    "s2t_multiformer_s_l_lc": ["6 x (4 x Local(64))", "6 x (4 x Conv(5, 2))"],
    "s2t_multiformer_s_l_cl": ["6 x (4 x Conv(5, 2))", "6 x (4 x Local(64))"],
    "s2t_multiformer_s": [
        "2 x (4 x Conv(5, 2))",
        "6 x (2 x Local(64), 2 x Conv(5, 2))",
        "4 x (2 x Full, 2 x Conv(7, 3))",
    ],
    "s2t_multiformer_s_v2": [
        "6 x (1 x Local(64), 3 x Conv(5, 2))",
        "6 x (2 x Local(64), 2 x Conv(5, 2))",
    ],
    "s2t_multiformer_s_v3": [
        "6 x (1 x Local(64), 3 x Conv(5, 2))",
        "6 x (3 x Local(64), 1 x Conv(5, 2))",
    ],
    "s2t_multiformer_s_v4": [
        "6 x (1 x Local(64), 3 x Conv(5, 2))",
        "3 x (2 x Local(64), 2 x Conv(5, 2))",
        "3 x (3 x Local(64), 1 x Conv(5, 2))",
    ],
    "s2t_multiformer_s_v5": [
        "4 x (4 x Conv(5, 2))",
        "3 x (1 x Local(64), 3 x Conv(5, 2))",
        "5 x (2 x Local(64), 2 x Conv(5, 2))",
    ],
}
MINI = ("s2t_multiformer_s_full", "s2t_multiformer_s_local", "s2t_multiformer_s_conv_5_2",
        "s2t_multiformer_s_h_lc", "s2t_multiformer_s")  # fmt: skip
NO_DOWNSAMPLING = (BASELINE, "s2t_multiformer_s_h_lc", "s2t_multiformer_s")  # Anexo B, Tabla 4
# Tabla 2/3's "Configuración" column: attention diversity across layers (LC), heads (HC), both or none.
DIVERSITY = {
    **dict.fromkeys((BASELINE, *list(ARCHITECTURES)[:5]), "-"),
    "s2t_multiformer_s_h_lc": "HC",
    "s2t_multiformer_s_l_lc": "LC",
    "s2t_multiformer_s_l_cl": "LC",
    **dict.fromkeys(list(ARCHITECTURES)[8:], "HC + LC"),
}
SECOND_ITERATION = ("s2t_multiformer_s_v2", "s2t_multiformer_s_v3", "s2t_multiformer_s_v4",
                    "s2t_multiformer_s_v5")  # fmt: skip
MINI_WINDOW = 16  # Local(64) covers ≈3.5 s of audio (thesis §5.3); the mini utterances last 1-3 s

_BLOCK = re.compile(r"^(\d+) x \((.*)\)$")

# Head forms (espnet_ext.attention.head_kinds). Real configs: the thesis' code's Conv heads, one depthwise
# ConvAttention per group of heads (mt-upc/fairseq multiformer: fairseq/models/speech_to_text/
# s2t_multiformer.py registers every architecture with 'depthwise'; fairseq/modules/conv_attention.py),
# and our exact Local band (the thesis' §3.2.1 window; its code's lucidrains blocks are local_form: block).
# Mini configs: the dense per-head convolutions their RESULTS.md tables were measured with.
REAL_FORMS = dict(conv_form="depthwise", local_form="band")
MINI_FORMS = dict(conv_form="dense", local_form="band")

# fairseq s2t_transformer_s (Wang et al. 2020a; thesis §5.2): d 256, FFN 2048, 4 heads, 12 + 6 layers,
# dropout 0.1 on residuals, attention weights and FFN activations; Conv1dSubsampler 1024 ch, k 5, s 2.
REAL = dict(size=256, heads=4, ffn=2048, decoder_layers=6, dropout=0.1, conv_channels=1024)
MINI_SIZES = dict(size=144, heads=4, ffn=576, decoder_layers=2, dropout=0.1, conv_channels=256)


def shrink(blocks: list[str]) -> list[str]:
    """The mini copy of a layout: each block keeps its heads with ~1/4 of its layers (at least 1),
    Local windows scaled to MINI_WINDOW."""
    out = []
    for block in blocks:
        count, heads = _BLOCK.match(block).groups()
        heads = re.sub(r"Local\(\d+", f"Local({MINI_WINDOW}", heads)
        out.append(f"{max(1, round(int(count) / 4))} x ({heads})")
    return out


def encoder_section(name: str, sizes: dict, mini: bool) -> dict:
    common = dict(
        output_size=sizes["size"],
        attention_heads=sizes["heads"],
        linear_units=sizes["ffn"],
        dropout_rate=sizes["dropout"],
        positional_dropout_rate=sizes["dropout"],
        attention_dropout_rate=sizes["dropout"],
        input_layer="s2t_conv1d",
        conv_channels=sizes["conv_channels"],
        conv_kernel_sizes=[5, 5],
        conv_strides=[2, 2],
        normalize_before=True,
        use_flash_attn=False,
    )
    if name == BASELINE:
        return {
            "encoder": "s2t_transformer",
            "encoder_conf": {**common, "num_blocks": 3 if mini else 12},
        }
    blocks = shrink(ARCHITECTURES[name]) if mini else ARCHITECTURES[name]
    forms = MINI_FORMS if mini else REAL_FORMS
    return {"encoder": "multiformer", "encoder_conf": {**common, "layers": blocks, **forms}}


def decoder_section(sizes: dict) -> dict:
    return {
        "decoder": "transformer",
        "decoder_conf": dict(
            attention_heads=sizes["heads"],
            linear_units=sizes["ffn"],
            num_blocks=sizes["decoder_layers"],
            dropout_rate=sizes["dropout"],
            positional_dropout_rate=sizes["dropout"],
            self_attention_dropout_rate=sizes["dropout"],
            src_attention_dropout_rate=sizes["dropout"],
            normalize_before=True,
            use_flash_attn=False,
        ),
    }


# Thesis §5.2 "Parámetros de entrenamiento en ASR/S2T" unless noted.
REAL_TRAINING = dict(
    optim="adam",  # Adam (§5.2); betas as fairseq's default
    scheduler="warmuplr",  # inverse square root with linear warm-up (fairseq inverse_sqrt = ESPnet warmuplr)
    scheduler_conf={"warmup_steps": 10000},  # warm-up over the first 10,000 updates (§5.2)
    grad_clip=10,  # clip norm 10 (§5.2)
    batch_type="length",  # bins = frames (+ token counts, ~1 % more): fairseq's max_tokens counts frames
    batch_bins=20000,  # max tokens per batch 20,000 (§5.2)
    accum_grad=16,  # update every 16 batches: 320,000 frames per update (§5.2)
    num_iters_per_epoch=16000,  # 1,000 updates per ESPnet "epoch" ...
    max_epoch=50,  # ... x 50 = 50,000 updates (§5.2)
    keep_nbest_models=10,  # fairseq S2T averages the last 10 checkpoints
    num_workers=4,  # 4 data-loading workers (§5.2)
)
MINI_TRAINING = dict(
    optim="adam",
    scheduler="warmuplr",
    scheduler_conf={"warmup_steps": 250},
    grad_clip=10,
    batch_type="folded",
    batch_size=16,
    accum_grad=1,
    max_epoch=14,
    keep_nbest_models=3,
    num_workers=0,
)
LR = {"st": 0.002, "asr": 0.001}  # 2e-3 for S2T, 1e-3 for the ASR pre-training (§5.2)


# Anexo B.1: front end with stride 1, 5,000 frames per batch x update every 64 batches (the same
# 320,000 frames per update), 90 epochs over the corpus.
NO_DOWNSAMPLING_TRAINING = dict(
    batch_bins=5000, accum_grad=64, num_iters_per_epoch=None, max_epoch=90
)


def render(task: str, name: str, mini: bool, downsample: bool = True) -> dict:
    sizes = MINI_SIZES if mini else REAL
    training = dict(MINI_TRAINING if mini else REAL_TRAINING)
    config = {**encoder_section(name, sizes, mini), **decoder_section(sizes)}
    if not downsample:
        config["encoder_conf"]["conv_strides"] = [1, 1]
        training.update(NO_DOWNSAMPLING_TRAINING)
    if task == "st":
        config["model_conf"] = dict(
            asr_weight=0.0, mt_weight=0.0, lsm_weight=0.1, length_normalized_loss=False
        )
    else:
        config["model_conf"] = dict(ctc_weight=0.0, lsm_weight=0.1, length_normalized_loss=False)
    # fairseq's MuST-C recipe at both scales: utterance CMVN (means and variances), then SpecAugment ("lb"
    # policy: F 27, 1 freq mask, T 100, 1 time mask, p 1.0), both run by the normalisation
    # (espnet_ext.features.utterance_cmvn; data_utils.py: _train [utterance_cmvn, specaugment]). The mini
    # utterances last 1-3 s, so their time mask is at most 20 frames.
    specaug_conf = dict(
        apply_time_warp=False,
        apply_freq_mask=True,
        freq_mask_width_range=[0, 27],
        num_freq_mask=1,
        apply_time_mask=True,
        time_mask_width_range=[0, 100 if not mini else 20],
        num_time_mask=1,
        time_mask_p=1.0,
    )
    config["frontend"] = None
    config.update(
        normalize="utterance_cmvn_specaug",
        normalize_conf={"specaug_conf": specaug_conf},
        specaug=None,
    )
    config.update(
        optim=training.pop("optim"),
        optim_conf={"lr": LR[task], "betas": [0.9, 0.999]},
        **training,
        best_model_criterion=[["valid", "acc", "max"]],
        # Local/Conv/Fast heads have no L x T weight matrix for ESPnet's per-epoch attention plots
        num_att_plot=0 if name != BASELINE else 3,
        seed=1,
    )
    if not mini:
        # cuDNN as fairseq runs it: fairseq sets no cuDNN flag (git grep cudnn: nothing in fairseq/ or
        # fairseq_cli/), so the conv1d front end may take cuDNN's fastest, nondeterministic algorithms;
        # ESPnet's default is --cudnn_deterministic true.
        config["cudnn_deterministic"] = False
    if task == "asr" and not mini:
        # Mixed precision in the ASR pre-training only: mt-upc/fairseq examples/multiformer/README.md trains
        # ASR with --fp16 and ST without it (the thesis is silent). ESPnet runs bf16 where the GPU has it.
        config["use_amp"] = True
    return config


GENERATED = (
    "# Generated by: python -m espnet_ext.analysis.multiformer_configs --write egs/mustc"
    " (do not edit by hand)"
)
HEADER = {
    False: """# {title}
# {layout}
# Thesis "Multiformer" §5.2: s2t_transformer_s sizes (d 256, FFN 2048, 4 heads, 12 encoder / 6 decoder
# layers, dropout 0.1, fairseq Conv1dSubsampler 1024 channels k5 s2 with GLU); Adam, lr {lr} ({why}),
# inverse-sqrt schedule (warmuplr) with 10k warm-up updates, clip norm 10, label smoothing 0.1, max 20,000
# frames per batch x update every 16 batches = 320,000 frames per update, 50,000 updates
# (16,000 batches per ESPnet epoch x 50 epochs). Utterance CMVN, then SpecAugment "lb", in fairseq's MuST-C
# recipe's order (normalize: utterance_cmvn_specaug runs both). cuDNN as fairseq runs it: not deterministic.
{forms}{nods}{init}{generated}
""",
    True: """# {title} -- MINI scale for the spoken-numbers corpus on CPU (not the thesis' sizes)
# {layout}
# d 144, FFN 576, 4 heads, ~1/4 of the encoder layers of each block, 2 decoder layers, front end 256
# channels, Local windows {window} frames; lr {lr}, warm-up 250, 14 epochs of batches of 16.
{generated}
""",
}


class _Dumper(yaml.SafeDumper):
    """Block mappings; short numeric lists inline ([5, 5]), string lists one item a line."""


def _list(dumper, items):
    inline = all(isinstance(i, (int, float)) and not isinstance(i, bool) for i in items)
    inline = inline or all(isinstance(i, str) and len(i) < 12 for i in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=inline)


_Dumper.add_representer(list, _list)


class _SweepDumper(_Dumper):
    """Also small mappings of scalars inline ({label: ..., run: ...}), as the hand-written sweep specs."""


def _mapping(dumper, items):
    inline = len(items) <= 4 and all(not isinstance(v, (dict, list)) for v in items.values())
    return dumper.represent_mapping("tag:yaml.org,2002:map", items, flow_style=inline)


_SweepDumper.add_representer(dict, _mapping)


def text(task: str, name: str, mini: bool, downsample: bool = True) -> str:
    config = render(task, name, mini, downsample)
    if name == BASELINE:
        layout = "encoder: 12 x (4 x Full), ESPnet's own attention (fairseq s2t_transformer_s)"
    else:
        layout = " + ".join(config["encoder_conf"]["layers"])
        layout = f"encoder: {layout} ({'mini copy of ' if mini else ''}thesis Tabla 1)"
    header = HEADER[mini].format(
        title=f"{name}: {'speech translation' if task == 'st' else 'ASR pre-training'}",
        layout=layout,
        generated=GENERATED,
        lr=LR[task],
        why="S2T" if task == "st" else "ASR",
        window=MINI_WINDOW,
        forms=(
            ""
            if name == BASELINE
            else "# Conv heads as the thesis' code: one depthwise ConvAttention per group of heads "
            "(conv_form: dense = one\n# convolution per head); Local heads: the exact band |i - j| <= w/2 "
            "(local_form: block = the code's blocks).\n"
        ),
        nods=(
            ""
            if downsample
            else "# NO DOWNSAMPLING (Anexo B.1): conv_strides [1, 1]; batch_bins 5000 x accum_grad 64 "
            "(same 320,000 frames per update); 90 epochs over the corpus.\n"
        ),
        init=(
            "# The encoder starts from the ASR pre-training (asr1, same name): "
            "--init_param <asr model>:encoder:encoder\n"
            if task == "st"
            else ""
        ),
    )
    return header + yaml.dump(config, Dumper=_Dumper, sort_keys=False, width=100)


# Row order of Tabla 2/3 (the layer-level mixes before the head-level one).
TABLA_ORDER = (BASELINE, *list(ARCHITECTURES)[:5], "s2t_multiformer_s_l_lc", "s2t_multiformer_s_l_cl",
               "s2t_multiformer_s_h_lc", *list(ARCHITECTURES)[8:])  # fmt: skip
# Sweep specs: scale -> (spec name, architectures, config suffix, thesis table it fills).
SWEEPS = {
    "real": ({"asr": "tabla3", "st": "tabla2"}, (BASELINE, *ARCHITECTURES), ""),
    "nods": ({"asr": "tabla5_nods", "st": "tabla5_nods"}, NO_DOWNSAMPLING, "_nods"),
    "mini": ({"asr": "mini", "st": "mini"}, (BASELINE, *MINI), "_mini"),
}
# What each task's pipeline (asr.sh / st.sh) calls its stages, tag, config and score.
PIPELINE = {
    "asr": dict(tag="--asr_tag", config="--asr_config", prepare=8, train=9, score="score_wer",
                metric={"key": "wer", "label": "WER [%]", "higher_is_better": False}),
    "st": dict(tag="--st_tag", config="--st_config", prepare=5, train=6, score="score_bleu",
               metric={"key": "bleu", "label": "BLEU", "higher_is_better": True}),
}  # fmt: skip


def sweep_spec(task: str, scale: str) -> dict:
    """The sweep that trains and scores every architecture of ``scale`` for ``task``.

    ST runs start each encoder from the ASR run of the same architecture (the thesis' pre-training), so the
    asr1 sweep of the same scale runs first; its experiment tags are the ST runs' ``--asr_init`` paths.
    """
    names, archs, suffix = SWEEPS[scale]
    archs = sorted(archs, key=TABLA_ORDER.index)
    steps = PIPELINE[task]
    tag_format = "{run}" + suffix
    runs = {}
    for name in archs:
        options = f"{steps['config']} conf/tuning/train_{task}_{name}{suffix}.yaml"
        if task == "st":
            # the thesis: the best ASR checkpoint (§5.3, Anexo B.1); mini keeps the average it was measured with
            model = "valid.acc.ave.pth" if scale == "mini" else "valid.acc.best.pth"
            options += f" --asr_init ../asr1/exp/asr_{name}{suffix}/{model}"
        runs[name] = options
    sets = ["tst_COMMON"] if scale == "mini" else ["tst_COMMON", "tst_HE"]
    table = {"asr": "Tabla 3", "st": "Tabla 2"}[task] if scale != "nods" else "Tabla 5"
    rows = [
        dict(
            label=f"{name} ({DIVERSITY[name]}){' †' if name in SECOND_ITERATION else ''}", run=name
        )
        for name in archs
    ]
    notes = (
        "† second iteration (architectures proposed by the W_o head analysis)."
        if any(name in SECOND_ITERATION for name in archs)
        else ""
    )
    scale_note = " (mini scale)" if scale == "mini" else ""
    analyses = [
        dict(
            kind="paper_table",
            title=f"{table}: {steps['metric']['label']} per architecture{scale_note}",
            row_header="Architecture (Configuración)",
            groups={steps["metric"]["label"]: "beam"},
            rows=rows,
            notes=notes,
        )
    ]
    if task == "st":
        # chrF beside BLEU: characters tell near misses apart on short number targets.
        analyses.append(
            {
                **analyses[0],
                "title": f"{table} with chrF2 instead of BLEU{scale_note}",
                "key": "chrf",
                "label": "chrF2",
                "groups": {"chrF2": "beam"},
                "rows": [dict(row) for row in rows],  # copies: no YAML anchors in the written spec
            }
        )
    return dict(
        name=names[task],
        command="./run.sh",
        # st.sh checks --asr_init exists before any stage: the shared preparation has none.
        common="--cmd_backend local" + (" --asr_init ''" if task == "st" else ""),
        tag_option=steps["tag"],
        tag_format=tag_format,
        train_stages=[steps["train"], steps["train"]],
        decode_stages=[steps["train"] + 1, steps["train"] + 2],
        prepare=[f"--stop_stage {steps['prepare']}"],
        runs=runs,
        decodes={"beam": ""},
        result=f"exp/{task}_{{tag}}/{{decode}}/{{set}}/{steps['score']}/result.json",
        metric={**steps["metric"], "sets": sets},
        analyses=analyses,
    )


SWEEP_HEADER = {
    "real": "# {table} of the thesis: {what} of the baseline and all 13 Tabla 1 architectures on MuST-C en-de.\n",
    "nods": "# {table} (Anexo B): {what} without downsampling (Tabla 4's architectures) on MuST-C en-de.\n",
    "mini": "# {What} of the baseline and the mini architectures on the spoken-numbers corpus (MINI scale).\n",
}


def sweep_text(task: str, scale: str) -> str:
    what = {"asr": "ASR pre-training WER", "st": "speech translation BLEU"}[task]
    table = {"asr": "Tabla 3", "st": "Tabla 2"}[task] if scale != "nods" else "Tabla 5"
    header = SWEEP_HEADER[scale].format(table=table, what=what, What=what[0].upper() + what[1:])
    if task == "st":
        header += f"# Run ../asr1's {SWEEPS[scale][0]['asr']}.yaml first: each ST encoder starts from its ASR run.\n"
    header += (
        f"#   python -m espnet_ext.analysis.sweep run --spec conf/sweeps/{SWEEPS[scale][0][task]}.yaml "
        '[--cmd "utils/slurm.py --config conf/slurm.conf --gpu 1 --num_threads 8"]\n'
        f"{GENERATED}\n"
    )
    spec = yaml.dump(
        sweep_spec(task, scale), Dumper=_SweepDumper, sort_keys=False, width=120, allow_unicode=True
    )
    return header + spec


def all_files(root: Path) -> dict[Path, str]:
    files = {}
    for task in ("st", "asr"):
        directory = root / f"{task}1" / "conf" / "tuning"
        for name in (BASELINE, *ARCHITECTURES):
            files[directory / f"train_{task}_{name}.yaml"] = text(task, name, mini=False)
        for name in NO_DOWNSAMPLING:
            files[directory / f"train_{task}_{name}_nods.yaml"] = text(task, name, False, False)
        for name in (BASELINE, *MINI):
            files[directory / f"train_{task}_{name}_mini.yaml"] = text(task, name, mini=True)
        for scale, (names, _, _) in SWEEPS.items():
            files[directory.parent / "sweeps" / f"{names[task]}.yaml"] = sweep_text(task, scale)
    return files


def default_links(root: Path) -> dict[Path, str]:
    """ESPnet's convention: conf/train_<task>.yaml links to the chosen tuning config (the thesis' model)."""
    return {
        root / f"{task}1" / "conf" / f"train_{task}{suffix}.yaml": (
            f"tuning/train_{task}_s2t_multiformer_s{suffix}.yaml"
        )
        for task in ("st", "asr")
        for suffix in ("", "_mini")
    }


def problems(root: Path) -> list[str]:
    """What --check reports: files differing from the table, links elsewhere, configs not in it."""
    files = all_files(root)
    found = [
        f"stale or missing: {p}"
        for p, c in files.items()
        if not p.is_file() or p.read_text(encoding="utf-8") != c
    ]
    found += [
        f"link missing or elsewhere: {link} (want -> {target})"
        for link, target in default_links(root).items()
        if not link.is_symlink() or os.readlink(link) != target
    ]
    for directory in {p.parent for p in files}:
        found += [
            f"not in the table: {p}" for p in sorted(directory.glob("*.yaml")) if p not in files
        ]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="EGS_MUSTC", type=Path)
    action.add_argument("--check", metavar="EGS_MUSTC", type=Path)
    args = parser.parse_args(argv)
    if args.write:
        files = all_files(args.write)
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        for link, target in default_links(args.write).items():
            link.unlink(missing_ok=True)
            link.symlink_to(target)
        print(f"wrote {len(files)} configs and sweep specs, and the conf/train_*.yaml links")
        return 0
    found = problems(args.check)
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
