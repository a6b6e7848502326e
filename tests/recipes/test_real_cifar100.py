"""egs/cifar100/cls1's real mode (CIFAR100 set) end to end as a smoke run (--smoke true, README "Smoke runs")
on a release-format corpus: Swin-T at 224 x 224 with the validation split held out of train. The first run
makes the data and statistics; the others train from stage 2 or 3 on them. Together they take each path of
run.sh once but its stochastic-depth switch:

- the baseline at batch 128 (no model option; the config's batch and schedule);
- relaxed attention with DRLoc at batch 1024 with matched inference (gamma, drloc_weight, the 1024 batch's
  optimiser and schedule options, --matched_inference, the decode_matched tag);
- fuzzy relaxation from an ImageNet-1k Swin-T checkpoint in timm's layout (fuzzy_std, the _g/_s/_pt tag parts,
  stage 2's conversion and ESPnet's --init_param);
- smooth focus with --train_args (Table 7's seeds).

The variants left out repeat an option of these, drloc (drloc_weight) and relaxed (gamma), or only set
drop_path_rate 0.0 (no_stochastic_depth, relaxed_no_stochastic_depth: the config's own option, which turns
the model's stochastic depth off); each run costs about a CPU-minute."""

import json
import re

import pytest
import torch
import yaml
from real_fixtures import cifar100_release, swin_t_timm_checkpoint
from recipe_fixture import make_recipe_copy, run

from espnet_ext.smoke import width_overrides

# One image per class held out for validation (the real recipe: 50 of 500); one job per stage.
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1",
         "--local_data_opts", "--valid_per_class 1"]  # fmt: skip
# Where conf/sweeps/table4.yaml expects the official weights (in the recipe dir).
CHECKPOINT = "downloads/swin_tiny_patch4_window7_224.pth"
# SwinClassifier's defaults of the options train_swin_t.yaml leaves out (ESPnet's config.yaml lists only
# the options given)
CLASSIFIER_DEFAULTS = {"gamma": 0.0, "fuzzy_std": 0.0, "smooth_focus": False}
RUNS = {  # tag: (decoding, run.sh options after SMOKE, model_conf the options set)
    "baseline_b128": ("decode", [], {"gamma": 0.0, "drop_path_rate": 0.2, "drloc_weight": 0.0}),
    "relaxed_drloc_g0.1_b1024": (
        "decode_matched",
        ["--stage", "3", "--variant", "relaxed_drloc", "--batch", "1024", "--matched_inference", "true"],
        {"gamma": 0.1, "drloc_weight": 0.5, "drloc_batches_per_epoch": 43},
    ),
    "fuzzy_g0.1_s0.03_pt_b128": (
        "decode",
        ["--stage", "2", "--variant", "fuzzy", "--imagenet_checkpoint", CHECKPOINT],
        {"gamma": 0.1, "fuzzy_std": 0.03},
    ),
    "smooth_focus_b128": (
        "decode",
        ["--stage", "3", "--variant", "smooth_focus", "--train_args", "--seed 3"],
        {"smooth_focus": True, "gamma": 0.0},
    ),
}  # fmt: skip


def smoke_embed_dim(recipe):
    """Swin-T's embedding width in a smoke run of the real config (espnet_ext.smoke: widths / 8)."""
    config = yaml.safe_load((recipe / "conf" / "train_swin_t.yaml").read_text())
    return dict(width_overrides(config["model_conf"]))["embed_dim"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    dest = tmp_path_factory.mktemp("cifar100_real")
    env = {"CIFAR100": str(cifar100_release(dest / "cifar"))}
    recipe = make_recipe_copy("cifar100", "cls1", dest)
    # ImageNet weights of the Swin-T the smoke run trains (the real file is the same model at full width)
    swin_t_timm_checkpoint(recipe / CHECKPOINT, embed_dim=smoke_embed_dim(recipe))
    for _, args, _ in RUNS.values():
        out = run(recipe, [*SMOKE, *args], env=env)
        assert out.returncode == 0, out.stderr[-4000:]
    return recipe


@pytest.mark.parametrize("tag", list(RUNS))
def test_each_variant_trains_on_train_picks_on_valid_and_scores_test(real_run, tag):
    exp = real_run / "exp" / f"cls_{tag}"
    decode, _, model_conf = RUNS[tag]
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["model_conf"]["img_size"] == 224 and config["model_conf"]["depths"] == [
        2,
        2,
        6,
        2,
    ]
    assert config["model_conf"]["embed_dim"] == smoke_embed_dim(real_run)
    given = {key: config["model_conf"].get(key, CLASSIFIER_DEFAULTS.get(key)) for key in model_conf}
    assert given == model_conf
    assert config["seed"] == (3 if tag == "smooth_focus_b128" else 0)
    assert config["max_epoch"] == 2 and config["num_iters_per_epoch"] == 1
    assert config["batch_size"] == 8  # the smoke cap; the batch setting's learning rate stays
    assert config["optim_conf"]["lr"] == (1e-3 if "b1024" in tag else 1.25e-4)
    assert any("data/valid/" in str(entry) for entry in config["valid_data_path_and_name_and_type"])
    result = json.loads((exp / decode / "test" / "score_topk" / "result.json").read_text())
    assert result["num_images"] == 2 and result["k"] == 5
    results = (real_run / "exp" / "RESULTS.md").read_text()
    assert re.search(rf"\| cls_{re.escape(tag)} / {decode} \| [0-9.]+ \|", results), results


def test_imagenet_checkpoint_initialises_the_backbone(real_run):
    exp = real_run / "exp" / "cls_fuzzy_g0.1_s0.03_pt_b128"
    imagenet = torch.load(real_run / CHECKPOINT, weights_only=True)
    init = torch.load(exp / "init" / "backbone.pth", weights_only=True)
    # timm's names without its 1000-class head, every backbone tensor taken over
    assert sorted(init) == sorted(
        f"backbone.{k}"
        for k in imagenet
        if not k.startswith("head.") and not k.endswith(("relative_position_index", "attn_mask"))
    )
    for key in ("patch_embed.proj.weight", "layers.3.downsample.reduction.weight", "norm.bias"):
        torch.testing.assert_close(init[f"backbone.{key}"], imagenet[key])
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert config["init_param"] == [str(exp.relative_to(real_run) / "init" / "backbone.pth")]
    assert not (real_run / "exp" / "cls_baseline_b128" / "init").exists()
