"""egs/lrs3/vsr1 end to end on a tiny mini video corpus: video checks, token list, LM, lip-reading training,
decoding with LM fusion, scoring, self-training (pseudo-labels + a model on the union), RESULTS.md, and
the LM-weight tuning on dev."""

import json
import re

import pytest
from recipe_fixture import TINY_LM, TINY_TRAINING, make_recipe_copy, run

# The mini config's model family (3D conv + ResNet front-end, AV-HuBERT-style encoder, relaxed decoder),
# tiny: the first ResNet stage on 4x pooled 88x88 frames, 1 encoder block of width 32.
TINY_VSR = (
    """\
frontend: conv3d_resnet18
frontend_conf: {relu_type: relu, resnet_stages: 1, frame_pool: 4, output_size: 32}
normalize: null
encoder: relaxed_avhubert
encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1,
               layer_norm_first: true, conv_pos: 8, conv_pos_groups: 4, layerdrop: 0.1}
decoder: relaxed_transformer
decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false}
model_conf: {ctc_weight: 0.3, lsm_weight: 0.1}
"""
    + TINY_TRAINING
)
TINY_VSR_DECODE = "beam_size: 2\nctc_weight: 0.3\nlm_weight: 0.1\n"
ARGS = [
    "--asr_config", "conf/tiny_vsr.yaml", "--lm_config", "conf/tiny_lm.yaml",
    "--inference_config", "conf/tiny_decode.yaml", "--train_num_threads", "1",
    "--nj", "1", "--inference_nj", "1", "--pseudo_label_nj", "2", "--test_sets", "test", "--use_lm", "true",
    "--local_data_opts", "--mini_splits train=40,dev=6,test=6,unlabeled=10 --mini_lm_sentences 200",
]  # fmt: skip
MODEL = "vsr_tiny_vsr"
DECODE = "decode_tiny_decode_lm_extended"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """All stages (the default setup: 433h_self, i.e. with self-training) with LM fusion, then a λ grid."""
    recipe = make_recipe_copy("lrs3", "vsr1", tmp_path_factory.mktemp("lrs3"))
    (recipe / "conf" / "tiny_vsr.yaml").write_text(TINY_VSR)
    (recipe / "conf" / "tiny_lm.yaml").write_text(TINY_LM)
    (recipe / "conf" / "tiny_decode.yaml").write_text(TINY_VSR_DECODE)
    out = run(recipe, ARGS, env={"LRS3": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    tuned = run(recipe, ARGS + ["--lm_weights", "0.05 0.2"], env={"LRS3": ""})
    assert tuned.returncode == 0, tuned.stderr[-4000:]
    return recipe, out


def wer(recipe, model, decode, dset):
    path = recipe / "exp" / model / decode / dset / "score_wer" / "result.json"
    return json.loads(path.read_text())["wer"]


def lines(path):
    return path.read_text().splitlines()


def test_every_stage_ran_with_lm_fusion(finished):
    recipe, out = finished
    for n in range(1, 17):
        assert f"Stage {n}:" in out.stderr, n
    # Stage 2 decoded every video and counted its frames (25 fps mouth crops).
    frames = dict(line.split() for line in lines(recipe / "dump/video/test/utt2num_frames"))
    assert len(frames) == 6 and all(int(n) > 10 for n in frames.values())
    for model in (MODEL, MODEL + "_self_training"):
        assert len(lines(recipe / "exp" / model / DECODE / "test" / "text")) == 6
        assert wer(recipe, model, DECODE, "test") >= 0  # scored (tiny models learn little)
        log = (recipe / "exp" / model / DECODE / "test/logdir/vsr_inference.1.log").read_text()
        assert "'lm': 0.1" in log  # shallow fusion with the LM of stages 5-7
    (lm_exp,) = (recipe / "exp").glob("lm_extended_*")  # named by the token list it is trained on
    assert (lm_exp / "valid.loss.ave.pth").exists()


def test_self_training_uses_the_pseudo_labels_of_the_unlabeled_set(finished):
    recipe, _ = finished
    pseudo = recipe / "dump/video/unlabeled_pseudo_vsr_tiny_vsr"  # named after the labelling model
    kept = dict(line.split(" ", 1) for line in lines(pseudo / "text"))
    dropped = lines(pseudo / "dropped.txt") if (pseudo / "dropped.txt").stat().st_size else []
    assert len(kept) + len(dropped) == 10 and kept
    decoded = dict(
        line.split(" ", 1)
        for line in lines(recipe / "exp" / MODEL / DECODE / "unlabeled" / "text")
        if " " in line
    )
    assert all(decoded[key] == text for key, text in kept.items())  # the 1-best is the label
    # the unlabeled set in --pseudo_label_nj jobs (the test set in --inference_nj), each with its journal
    logdir = recipe / "exp" / MODEL / DECODE / "unlabeled" / "logdir"
    assert sorted(p.name for p in logdir.glob("vsr_inference.*.log")) == [
        "vsr_inference.1.log",
        "vsr_inference.2.log",
    ]
    journals = [lines(logdir / f"output.{job}" / "journal") for job in (1, 2)]
    assert sorted(len(j) - 1 for j in journals) == [5, 5]  # a signature line, then one per video
    assert len(list((recipe / "exp" / MODEL / DECODE / "test" / "logdir").glob("*.log"))) == 1
    union = recipe / "dump/video/train_filtered_self_tiny_vsr"
    train = lines(recipe / "dump/video/train_filtered/text")
    assert len(lines(union / "text")) == len(train) + len(kept)
    config = (recipe / "exp" / (MODEL + "_self_training") / "config.yaml").read_text()
    assert "train_filtered_self_tiny_vsr/video.scp" in config


def test_results_md_lists_both_models(finished):
    recipe, _ = finished
    results = (recipe / "exp/RESULTS.md").read_text()
    for model in (MODEL, MODEL + "_self_training"):
        row = re.search(rf"\| {model} / {DECODE} \| ([0-9.]+) \|", results)  # the test column
        assert row and float(row.group(1)) == pytest.approx(
            wer(recipe, model, DECODE, "test"), abs=0.01
        )


def test_lm_weight_tuned_on_dev(finished):
    recipe, _ = finished
    dev = {w: wer(recipe, MODEL, f"decode_lm_extended_lmw{w}", "dev") for w in ("0.05", "0.2")}
    best = min(dev, key=lambda w: (dev[w], w != "0.05"))  # the first listed wins a tie
    assert (
        recipe / "exp" / MODEL / f"decode_lm_extended_tuned_lmw{best}" / "test" / "text"
    ).exists()
    assert "LM weight tuned on dev among {0.05, 0.2}" in (recipe / "exp/RESULTS.md").read_text()
