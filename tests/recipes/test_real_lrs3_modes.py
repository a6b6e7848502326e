"""egs/lrs3/vsr1's other real modes (LRS3 set) end to end as smoke runs (--smoke true, README "Smoke runs") on
the release-layout fixture with its mouth crops (--roi): the 433 h setup alone (large model on pretrain +
trainval, no self-training) started from a released AV-HuBERT checkpoint (--avhubert_checkpoint; one the test
writes in fairseq's layout, with the fairseq objects it pickles), then the LM weight tuned on dev
(--use_lm true --lm_weights, conf/sweeps/lm_weight.yaml) with the extended LM text (LIBRISPEECH_LM)."""

import json

import pytest
import torch
import yaml
from real_fixtures import LRS3_FIXTURE, avhubert_checkpoint, librispeech_lm
from recipe_fixture import make_recipe_copy, read_table, run

from espnet_ext.smoke import train_args

# A tiny corpus forces: one job per stage, 1 dev video (of 3 trainval ones), clips of 8 frames kept.
SMOKE = ["--smoke", "true", "--nj", "1", "--inference_nj", "1", "--train_num_threads", "1"]
SMOKE += ["--min_frames", "1"]
DATA = f"--roi {LRS3_FIXTURE / 'roi'} --dev_size 1"
EXP = "vsr_train_vsr_large"
LM_WEIGHTS = ["0.05", "0.1", "0.15", "0.2"]  # the paper's grid (A.3.3)


@pytest.fixture(scope="module")
def lrs3_runs(tmp_path_factory):
    """(recipe, the checkpoint's tensors under our names, {"433h": run, "lm": run})."""
    dest = tmp_path_factory.mktemp("lrs3_modes")
    recipe = make_recipe_copy("lrs3", "vsr1", dest)
    env = {"LRS3": str(LRS3_FIXTURE / "lrs3"), "LIBRISPEECH_LM": str(librispeech_lm(dest / "lm"))}
    # AV-HuBERT LARGE at the widths of the smoke run's model (the real sizes: tests/configs)
    config = recipe / "conf" / "train_vsr_large.yaml"
    checkpoint = dest / "large_vox_iter5.pt"
    tensors = avhubert_checkpoint(checkpoint, config, train_args(["--config", str(config)]))
    setup = [*SMOKE, "--setup", "433h", "--local_data_opts", DATA]
    setup += ["--avhubert_checkpoint", str(checkpoint)]
    runs = {"433h": run(recipe, setup, env=env)}
    runs["lm"] = run(
        recipe, [*setup, "--use_lm", "true", "--lm_weights", " ".join(LM_WEIGHTS)], env=env
    )
    return recipe, tensors, runs


def _score(path):
    return json.loads(path.read_text())["wer"]


def test_433h_alone_from_the_avhubert_checkpoint(lrs3_runs):
    recipe, tensors, runs = lrs3_runs
    assert runs["433h"].returncode == 0, runs["433h"].stderr[-4000:]
    exp = recipe / "exp" / EXP
    config = yaml.safe_load((exp / "config.yaml").read_text())
    assert any(
        "/pretrain_trainval_filtered/" in str(e)
        for e in config["train_data_path_and_name_and_type"]
    )
    assert not (recipe / "exp" / f"{EXP}_self_training").exists()  # no self-training in 433h
    assert config["init_param"] == [f"exp/{EXP}/avhubert_init.pth"]
    log = (exp / "avhubert_init.log").read_text()
    assert "not used: feature_extractor_audio.proj.weight (audio stream)" in log
    # front-end and encoder stay as pre-trained for freeze_finetune_updates (18000 > the smoke run's 2)
    model = torch.load(exp / "valid.acc.ave.pth", map_location="cpu")
    compared = [k for k in tensors if k.startswith("encoder.") or "running_" not in k]
    compared = [k for k in compared if "num_batches_tracked" not in k]
    assert any(k.startswith("frontend.") for k in compared) and any(
        k.startswith("encoder.layers.23") for k in compared
    )
    for key in compared:
        torch.testing.assert_close(model[key], tensors[key], msg=key)
    decode = exp / "decode_decode_vsr"  # without the LM (the LM's decodings: the next test)
    for dset in ("dev", "test"):
        refs = read_table(recipe / "data" / dset / "text")
        hyps = (decode / dset / "text").read_text().splitlines()
        assert [line.split(" ", 1)[0] for line in hyps] == sorted(refs)
        assert _score(decode / dset / "score_wer" / "result.json") >= 0


def test_lm_weight_tuned_on_dev_then_used_for_test(lrs3_runs):
    recipe, _, runs = lrs3_runs
    assert runs["lm"].returncode == 0, runs["lm"].stderr[-4000:]
    # decoding with the LM never trains the model again
    assert "Stage 9: ASR training: already done" in runs["lm"].stderr + runs["lm"].stdout
    exp = recipe / "exp" / EXP
    grid = {
        w: _score(exp / f"decode_lm_extended_lmw{w}" / "dev" / "score_wer" / "result.json")
        for w in LM_WEIGHTS
    }
    best = min(LM_WEIGHTS, key=lambda w: (grid[w], LM_WEIGHTS.index(w)))
    tuned = [p.name for p in exp.glob("decode_lm_extended_tuned_lmw*")]
    assert tuned == [f"decode_lm_extended_tuned_lmw{best}"]
    assert _score(exp / tuned[0] / "test" / "score_wer" / "result.json") >= 0
    results = (recipe / "exp" / "RESULTS.md").read_text()
    assert "LM weight tuned on dev among" in results and f"best {best}, used for test" in results
    # the "additional data" LM: the LibriSpeech LM text next to the training transcripts
    lm_text = (recipe / "data" / "lm_extended" / "text").read_text()
    assert "HE HOPED THERE WOULD BE STEW FOR DINNER" in lm_text
    assert (
        yaml.safe_load(next((recipe / "exp").glob("lm_extended_*/config.yaml")).read_text())["lm"]
        == "transformer_tied"
    )
