"""egs/mtedx/st1 end to end on a tiny multilingual mini corpus (es-en, es-it trained; it-en zero-shot):
group head selection with its encoder from the session's ../asr1 run (same tags es, it), BLEU per
direction; then the adapter baseline, started from a shared ST model, which translates the trained
directions and refuses the zero-shot one with the tag file and line; Table 4 from both."""

import json
import re
import subprocess
import sys

import pytest
import torch
from recipe_fixture import TINY_TRAINING, run

ENCODER = """\
encoder_conf: {output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, input_layer: s2t_conv1d,
               conv_channels: 16, use_flash_attn: false%s}
"""
DECODER = (
    "decoder_conf: {attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false%s}\n"
)
SELECTION = ", num_tasks: 2, head_candidates: 4, selection_strategy: group"
ADAPTERS = ", num_tasks: 2, adapter_dim: 8"
LANGUAGES = "encoder_task_tags: [es, it], decoder_task_tags: [en, it], target_languages: [en, it]"
MODEL = "model: task_conditioned\nmodel_conf: {lsm_weight: 0.1, asr_weight: 0.0, report_bleu: false, %s}\n"
TINY = {
    "group": "encoder: head_selection_s2t_transformer\n" + ENCODER % SELECTION
    + "decoder: head_selection_transformer\n" + DECODER % SELECTION
    + MODEL % f"selection_kl_weight: 0.1, {LANGUAGES}",
    "shared": "encoder: s2t_transformer\n" + ENCODER % "" + "decoder: transformer\n" + DECODER % ""
    + MODEL % LANGUAGES,
    "adapter": "encoder: adapter_s2t_transformer\n" + ENCODER % ADAPTERS
    + "decoder: adapter_transformer\n" + DECODER % ADAPTERS
    + MODEL % "task_tags: [es-en, es-it], train_adapters_only: true, target_languages: [en, it]",
}  # fmt: skip
COMMON = [
    "--inference_config", "conf/tiny_decode.yaml", "--src_nbpe", "30", "--tgt_nbpe", "40",
    "--inference_model", "valid.acc.best.pth", "--train_num_threads", "1", "--nj", "1",
    "--inference_nj", "1",
    "--local_data_opts",
    "--mini_src_langs es,it --tgt_langs en,it --mini_st_train_sizes es-en=30,es-it=20,it-en=0"
    " --mini_valid_size 4 --mini_test_size 4 --mini_num_speakers 2 --mini_segments_per_talk 4:8",
]  # fmt: skip
TRAINED = "test_es-en test_es-it"


def read_table(path):
    return dict(line.split(" ", 1) for line in path.read_text(encoding="utf-8").splitlines())


@pytest.fixture(scope="module")
def finished(mtedx_asr_finished):
    st = mtedx_asr_finished.parent / "st1"
    for name, config in TINY.items():
        (st / "conf" / f"tiny_{name}.yaml").write_text(config + "frontend: null\n" + TINY_TRAINING)
    (st / "conf" / "tiny_decode.yaml").write_text("beam_size: 2\nmaxlenratio: 0.0\n")
    runs = {
        "group": [
            "--st_config", "conf/tiny_group.yaml", "--asr_init",
            "../asr1/exp/asr_tiny_asr/valid.acc.ave.pth", "--test_sets", f"{TRAINED} test_it-en",
        ],
        "shared": [
            "--st_config", "conf/tiny_shared.yaml", "--asr_init", "", "--stop_stage", "6",
            "--skip_data_prep", "true",
        ],
        "adapter": [
            "--tasks", "directions", "--st_config", "conf/tiny_adapter.yaml",
            "--init_from", "exp/st_tiny_shared/valid.acc.best.pth", "--test_sets", TRAINED,
            "--skip_data_prep", "true",
        ],
        "adapter_zero_shot": [
            "--tasks", "directions", "--st_config", "conf/tiny_adapter.yaml",
            "--init_from", "exp/st_tiny_shared/valid.acc.best.pth", "--test_sets", "test_it-en",
            "--stage", "7", "--stop_stage", "7", "--skip_data_prep", "true",
        ],
    }  # fmt: skip
    outs = {name: run(st, args + COMMON, env={"MTEDX": ""}) for name, args in runs.items()}
    for name in ("group", "shared", "adapter"):
        assert outs[name].returncode == 0, (name, outs[name].stderr[-4000:])
    return st, outs


def test_directions_with_tags_and_ids_the_zero_shot_one_test_only(finished):
    st, _ = finished
    direction = read_table(st / "data" / "train" / "direction")
    assert sorted(direction.values()) == ["es-en"] * 30 + ["es-it"] * 20
    assert not (st / "data" / "mini_release" / "it-en" / "data" / "train").exists()
    dump = st / "dump" / "fbank" / "train_filtered"
    src, tgt, dir_id = (
        read_table(dump / n) for n in ("src_lang_id", "tgt_lang_id", "direction_id")
    )
    assert set(src.values()) == {"0"}  # es: task 0 of ../asr1's [es, it]
    assert {u: {"es-en": "0", "es-it": "1"}[direction[u]] for u in dir_id} == dir_id
    assert {u: {"es-en": "0", "es-it": "1"}[direction[u]] for u in tgt} == tgt  # en 0, it 1
    assert set(read_table(st / "data" / "test_it-en" / "src_lang").values()) == {"it"}


def test_group_model_encoder_from_asr_and_bleu_per_direction_incl_zero_shot(finished):
    st, _ = finished
    exp = st / "exp" / "st_tiny_group_asrinit"
    asr = torch.load(st.parent / "asr1/exp/asr_tiny_asr/valid.acc.ave.pth", map_location="cpu")
    assert "--init_param" in (exp / "asr_init.log").read_text() or (exp / "train.log").exists()
    config = (exp / "config.yaml").read_text()
    assert "asr_tiny_asr/valid.acc.ave.pth:encoder:encoder" in config
    assert any(k.startswith("encoder.") and k.endswith("selection_logits") for k in asr)
    for dset in ("test_es-en", "test_es-it", "test_it-en"):
        decoded = exp / "decode_tiny_decode" / dset
        hyps = read_table(decoded / "text") if (decoded / "text").stat().st_size else {}
        refs = read_table(st / "dump" / "fbank" / dset / "text.tgt")
        assert set(hyps) <= set(refs) and len(refs) == 4
        score = json.loads((decoded / "score_bleu" / "result.json").read_text())
        assert score["bleu"] >= 0 and score["signature"].startswith("nrefs:1")


def test_adapter_model_trains_only_adapters_from_the_shared_model(finished):
    st, _ = finished
    shared = torch.load(st / "exp/st_tiny_shared/valid.acc.best.pth", map_location="cpu")
    adapter = torch.load(st / "exp/st_tiny_adapter/valid.acc.best.pth", map_location="cpu")
    assert set(adapter) - set(shared) and all(".adapters." in k for k in set(adapter) - set(shared))
    for key, value in shared.items():  # frozen: the shared model's parameters are unchanged
        assert torch.equal(adapter[key], value), key
    moved = [k for k in adapter if ".adapters." in k and k.endswith("up.weight")]
    assert moved and all(adapter[k].abs().sum() > 0 for k in moved)  # W_up left zero: trained


def test_adapter_model_refuses_the_zero_shot_direction(finished):
    st, outs = finished
    out = outs["adapter_zero_shot"]
    assert out.returncode != 0
    logs = "".join(p.read_text() for p in (st / "exp/st_tiny_adapter").rglob("*.log"))
    message = re.search(r"test_it-en/tgt_lang|test_it-en/direction:1: .*", logs + out.stderr)
    assert message and "cannot serve a zero-shot direction" in logs + out.stderr
    assert not (st / "exp/st_tiny_adapter/decode_tiny_decode/test_it-en/text").exists()


def test_table_4_from_the_runs(finished):
    st, _ = finished
    args = [
        sys.executable, "local/bleu_table.py", "--decode", "decode_tiny_decode", "--out", "T4.md",
        "--train_directions", "es-en es-it", "--zero_shot_directions", "it-en",
        "--model", "Group strategy=tiny_group_asrinit", "--model", "Adapter=tiny_adapter",
    ]  # fmt: skip
    subprocess.run(args, cwd=st, check=True)
    text = (st / "T4.md").read_text()
    group = re.search(r"\| Group strategy \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", text)
    assert group, text
    assert re.search(r"\| Adapter \| - \| [\d.]+ \| - \|", text), text
