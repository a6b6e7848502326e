"""egs/mtedx/st1 end to end on a tiny multilingual mini corpus (es-en, es-it trained; it-en zero-shot):
group head selection with its encoder from the session's ../asr1 run (same tags es, it), BLEU per
direction including the zero-shot one, Table 4; the adapter model's decoding refuses the recipe's
zero-shot test set with the tag file and line."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from recipe_fixture import make_recipe_copy, mtedx_st_tiny, read_table, run

from espnet_ext.bin.st_inference import main as st_decode
from espnet_ext.data.task_tags import task_ids

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("mtedx_asr_finished")

LANGUAGES = "encoder_task_tags: [es, it], decoder_task_tags: [en, it], target_languages: [en, it]"
TINY = {
    "group": mtedx_st_tiny("group", f"selection_kl_weight: 0.1, {LANGUAGES}"),
    "shared": mtedx_st_tiny("shared", LANGUAGES),
    "adapter": mtedx_st_tiny(
        "adapter",
        "task_tags: [es-en, es-it], train_adapters_only: true, target_languages: [en, it]",
    ),
}
COMMON = [
    "--inference_config", "conf/tiny_decode.yaml", "--src_nbpe", "30", "--tgt_nbpe", "40",
    "--inference_model", "valid.acc.best.pth", "--train_num_threads", "1", "--nj", "1",
    "--inference_nj", "1",
    "--local_data_opts",
    "--mini_src_langs es,it --tgt_langs en,it --mini_st_train_sizes es-en=30,es-it=20,it-en=0"
    " --mini_valid_size 4 --mini_test_size 4 --mini_num_speakers 2 --mini_segments_per_talk 4:8",
]  # fmt: skip
ADAPTER_TAGS = ["es-en", "es-it"]
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mtedx"


@pytest.fixture(scope="module")
def finished(mtedx_asr_finished):
    st = mtedx_asr_finished.parent / "st1"
    for name, config in TINY.items():
        (st / "conf" / f"tiny_{name}.yaml").write_text(config)
    (st / "conf" / "tiny_decode.yaml").write_text("beam_size: 2\nmaxlenratio: 0.0\n")
    args = [
        "--st_config", "conf/tiny_group.yaml", "--asr_init",
        "../asr1/exp/asr_tiny_asr/valid.acc.ave.pth", "--test_sets", "test_es-en test_it-en",
    ]  # fmt: skip
    out = run(st, args + COMMON, env={"MTEDX": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    return st


def test_directions_with_tags_and_ids_the_zero_shot_one_test_only(finished):
    st = finished
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
    st = finished
    exp = st / "exp" / "st_tiny_group_asrinit"
    assert "asr_tiny_asr/valid.acc.ave.pth:encoder:encoder" in (exp / "config.yaml").read_text()
    asr = torch.load(st.parent / "asr1/exp/asr_tiny_asr/valid.acc.ave.pth", map_location="cpu")
    model = torch.load(exp / "valid.acc.best.pth", map_location="cpu")
    logits = [k for k in model if k.endswith("selection_logits")]
    assert [model[k].shape[0] for k in logits] == [2, 2]  # encoder: es, it; decoder: en, it
    assert model["target_language_start.weight"].shape == (2, 32)
    assert any(k.startswith("encoder.") for k in logits) and all(
        k in asr for k in logits if k.startswith("encoder.")
    )
    for dset in ("test_es-en", "test_it-en"):
        decoded = exp / "decode_tiny_decode" / dset
        hyps = read_table(decoded / "text") if (decoded / "text").stat().st_size else {}
        refs = read_table(st / "dump" / "fbank" / dset / "text.tgt")
        assert set(hyps) <= set(refs) and len(refs) == 4
        score = json.loads((decoded / "score_bleu" / "result.json").read_text())
        assert score["bleu"] >= 0 and score["signature"].startswith("nrefs:1")


def test_table_4_from_the_run(finished):
    st = finished
    args = [
        sys.executable, "local/bleu_table.py", "--decode", "decode_tiny_decode", "--out", "T4.md",
        "--train_directions", "es-en", "--zero_shot_directions", "it-en",
        "--model", "Group strategy=tiny_group_asrinit", "--model", "Adapter=tiny_adapter",
    ]  # fmt: skip
    subprocess.run(args, cwd=st, check=True)
    text = (st / "T4.md").read_text()
    bleu = {
        d: json.loads(
            (
                st / f"exp/st_tiny_group_asrinit/decode_tiny_decode/test_{d}/score_bleu/result.json"
            ).read_text()
        )["bleu"]
        for d in ("es-en", "it-en")
    }
    row = "| Group strategy | {:.1f} | {:.1f} | {:.1f} |".format(
        (bleu["es-en"] + bleu["it-en"]) / 2, bleu["es-en"], bleu["it-en"]
    )
    assert row in text, text
    assert "| Adapter | - | - | - |" in text  # not run


def test_adapter_model_refuses_the_zero_shot_test_set(finished, monkeypatch):
    """What the recipe's stage 7 runs for an adapter model (run.sh --tasks directions) on test_it-en."""
    st = finished
    monkeypatch.chdir(st)
    argv = [
        "--st_train_config", "conf/tiny_adapter.yaml", "--st_model_file", "none.pth",
        "--data_path_and_name_and_type", "dump/fbank/test_it-en/feats.scp,speech,kaldi_ark",
        "--task_tag_file", "direction", "--target_language_tag_file", "tgt_lang",
        "--output_dir", "out",
    ]  # fmt: skip
    with pytest.raises(SystemExit) as refused:
        st_decode(argv)
    assert re.fullmatch(
        r"error: dump/fbank/test_it-en/direction:1: key 'it-en_\S+': task tag 'it-en' is unknown to "
        r"the model \(it knows es-en es-it\); an adapter model .* cannot serve a zero-shot direction",
        str(refused.value),
    )
    assert not (st / "out").exists()
    trained = task_ids(st / "dump/fbank/test_es-en/direction", ADAPTER_TAGS, adapters=True)
    assert set(trained.values()) == {0}


def test_real_release_layout_through_data_preparation(tmp_path):
    """Stage 1 on the fixture's es-en and zero-shot it-en releases (MTEDX set): the real-corpus path."""
    st = make_recipe_copy("mtedx", "st1", tmp_path)
    opts = "--train_directions es-en --zero_shot_directions it-en --src_langs es,it --tgt_langs en"
    args = ["--stop_stage", "1", "--asr_init", "", "--test_sets", "test_es-en test_it-en"]
    args += ["--local_data_opts", opts]
    out = run(st, args, env={"MTEDX": str(FIXTURE)})
    assert out.returncode == 0, out.stderr[-4000:]
    assert read_table(st / "data" / "test_it-en" / "text.tgt") == {
        "it-en_Zx1Cv3Bn5Mm_00000300_00001520": "Thanks a lot.",
        "it-en_Zx1Cv3Bn5Mm_00001920_00002570": "Bye.",
    }
    assert set(read_table(st / "data" / "train" / "src_lang_id").values()) == {"0"}
    assert set(read_table(st / "data" / "valid" / "direction_id").values()) == {"0"}
