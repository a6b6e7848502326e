"""egs/europarl/asr1 end to end on a tiny numbers world: the De-En LegoNN MT model of egs/wmt/mt1 (the
session's tiny run, reused, not trained again), LegoNN ASR models on "Europarl" and "TED", their modules
composed with its decoder, decoded with no training, greedy CTC of encoder modules, fine-tuning of the
composed models, Tables IV-VII."""

import json
import re

import pytest
from recipe_fixture import TINY_TRAINING, make_recipe_copy, run

# on one worker with the other modules of its session fixture (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("wmt_lego_deen")

BLOCK = "output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, dropout_rate: 0.0"
INGEST = "num_blocks: 1, attention_heads: 2, linear_units: 64"
TINY_DECODER = f"""\
decoder: legonn
decoder_conf: {{attention_dim: 32, attention_heads: 2, linear_units: 64, num_blocks: 1,
               ingestor: {{type: wemb, {INGEST}}}}}
"""
ONE_EPOCH = TINY_TRAINING.replace("max_epoch: 2", "max_epoch: 1")
SPEECH = "frontend: null\nspecaug: null\n"
TINY_ASR = (
    f"""\
model: legonn
model_conf: {{interface_text_keys: [phn, text], on_short_ctc: report}}
{SPEECH}encoder: legonn
encoder_conf:
    modules:
    -   {{token_list: data/token_list/phn/tokens.txt, input_layer: cnn, conv_channels: [4, 4],
          conv_strides: [2, 2], {BLOCK}, olc: {{ratio: 0.833333, max_length: 365, num_blocks: 1,
          query_scale: 0.1, alignment_prior: 0.5}}}}
    -   {{token_list: data/token_list/bpe_unigram100/tokens.txt, input_layer: wemb, {BLOCK},
          ingestor: {{receptive_field: 5, {INGEST}}}, olc: {{ratio: 0.342857, max_length: 130, num_blocks: 1,
          query_scale: 0.1, alignment_prior: 1.0}}}}
"""
    + TINY_DECODER
    + ONE_EPOCH
)
TINY_FINETUNE = "model_conf: {on_short_ctc: report}\n" + ONE_EPOCH.replace("0.002", "0.0005")
TINY_DECODE = "beam_size: 2\nctc_weight: 0.0\n"

ASR_CONF = """\
local_data_opts="--mini_splits train=24,dev=4,test=4 --mini_ted_splits train=24,dev=4"
nj=1
train_num_threads=1
"""
RECIPE_CONF = """\
asr_config=conf/tiny_asr.yaml
baseline_config=""
finetune_config=conf/tiny_finetune.yaml
inference_config=conf/tiny_decode.yaml
asr_opts="--config conf/tiny_asr.conf"
inference_nj=2
mt_opts="--config conf/tiny_lego.conf"
mt_recipe={wmt}
"""
DEEN = "exp/lego_deen/mt_tiny_lego"


@pytest.fixture(scope="module")
def europarl_finished(tmp_path_factory, wmt_lego_deen):
    asr = make_recipe_copy("europarl", "asr1", tmp_path_factory.mktemp("europarl"))
    for name, text in (
        ("tiny_asr.yaml", TINY_ASR),
        ("tiny_finetune.yaml", TINY_FINETUNE),
        ("tiny_decode.yaml", TINY_DECODE),
        ("tiny_asr.conf", ASR_CONF),
        ("tiny.conf", RECIPE_CONF.format(wmt=wmt_lego_deen)),
    ):
        (asr / "conf" / name).write_text(text)
    mt_model = wmt_lego_deen / DEEN / "valid.acc.ave.pth"
    trained = mt_model.stat().st_mtime_ns
    out = run(asr, ["--config", "conf/tiny.conf"], env={"EUROPARL_ST": "", "WMT": ""})
    assert out.returncode == 0, out.stderr[-6000:]
    assert mt_model.stat().st_mtime_ns == trained  # the wmt recipe's model, not trained again
    return asr, wmt_lego_deen


def test_the_asr_vocabulary_is_the_mt_decoders(europarl_finished):
    from espnet_ext.nets.lego.inventory import load_artefact

    asr, wmt = europarl_finished
    decoder = load_artefact(wmt / DEEN / "modules" / "decoder.pt")
    tokens = (asr / "data" / "token_list" / "bpe_unigram100" / "tokens.txt").read_text().split()
    assert tokens == decoder["output_vocab"] == decoder["input_vocab"]


def test_composed_models_hold_the_modules_of_three_experiments(europarl_finished):
    import torch

    from espnet_ext.nets.lego.inventory import load_artefact

    asr, wmt = europarl_finished
    exp = asr / "exp"
    decoder = load_artefact(wmt / DEEN / "modules" / "decoder.pt")["state_dict"]
    phones = load_artefact(exp / "asr_legonn" / "modules" / "encoder0.pt")["state_dict"]
    ted_pron = load_artefact(exp / "ted" / "asr_ted_legonn" / "modules" / "encoder1.pt")[
        "state_dict"
    ]
    composed = torch.load(exp / "asr_composed_v" / "model.pth", map_location="cpu")
    # the exports and compositions are jobs (each loads a model, the WMT decoder's ~1 GB at full scale)
    logs = [exp / "asr_legonn/log/lego_export.log", exp / "ted/asr_ted_legonn/log/lego_export.log"]
    logs += [exp / f"asr_composed_{name}/log/compose.log" for name in ("iv", "v", "v_ted")]
    for log in logs:
        text = log.read_text()
        assert "# Started at " in text and "# Ended (code 0)" in text, log
    for prefix, part in (
        ("decoder.", decoder),
        ("encoder.encoder_modules.0.", phones),
        ("encoder.encoder_modules.1.", ted_pron),
    ):
        assert part and all(torch.equal(composed[prefix + k], v) for k, v in part.items())


def test_composed_models_decode_without_training_and_fine_tune(europarl_finished):
    import torch

    asr, _ = europarl_finished
    exp = asr / "exp"
    test_ids = [
        line.split()[0] for line in (asr / "data" / "test" / "text").read_text().splitlines()
    ]
    for name in ("iv", "v"):
        composed = exp / f"asr_composed_{name}"
        # decoded as composed: no training stage ran in that dir
        assert not (composed / "train.log").exists()
        hyp = (composed / "decode_tiny_decode" / "test" / "text").read_text().splitlines()
        assert [line.split()[0] for line in hyp] == test_ids
        scored = json.loads(
            (composed / "decode_tiny_decode" / "test" / "score_wer" / "result.json").read_text()
        )
        assert scored["num_utts"] == len(test_ids)
        tuned = exp / f"asr_finetuned_{name}"
        config = (tuned / "config.yaml").read_text()
        assert f"asr_composed_{name}/model.pth" in config  # --init_param of the composed model
        before = torch.load(composed / "model.pth", map_location="cpu")
        after = torch.load(tuned / "valid.acc.ave.pth", map_location="cpu")
        assert before.keys() == after.keys()
        assert any(not torch.equal(before[k], after[k]) for k in before)  # trained end to end
        assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("decoder."))
        assert (tuned / "decode_tiny_decode" / "test" / "score_wer" / "result.json").is_file()


def test_greedy_ctc_of_encoder_modules_and_the_tables(europarl_finished):
    from espnet_ext.data.arpabet import TOKENS

    asr, _ = europarl_finished
    exp = asr / "exp"
    phones = (exp / "asr_legonn" / "ctc_greedy_module0" / "test" / "text").read_text().splitlines()
    assert len(phones) == 4 and {p for line in phones for p in line.split()[1:]} <= set(TOKENS[2:])
    words = (exp / "asr_legonn" / "ctc_greedy_module1" / "test" / "text").read_text()
    assert "\u2581" not in words  # pieces written as words
    for scored in ("asr_legonn/ctc_greedy_module1", "asr_composed_v/ctc_greedy_module1"):
        assert (exp / scored / "test" / "score_wer" / "result.json").is_file()
    # each decoding sharded over --inference_nj 2 jobs (decode_set), on the CPU
    for decoded in ("asr_legonn/ctc_greedy_module0", "asr_composed_v_ted/ctc_greedy_module1"):
        logdir = exp / decoded / "test" / "logdir"
        keys = [(logdir / f"keys.{i}.scp").read_text().split() for i in (1, 2)]
        assert all(keys) and not (logdir / "keys.3.scp").exists()
        for i in (1, 2):
            log = (logdir / f"lego_ctc_decode.{i}.log").read_text()
            assert f"--key_file {logdir.relative_to(asr)}/keys.{i}.scp" in log
            assert "--device cpu" in log
    tables = (exp / "RESULTS_legonn.md").read_text()
    for title in ("Table IV", "Table V", "Table VI", "Table VII"):
        assert f"### {title}:" in tables
    # every cell measured but the baseline, which the tiny run leaves out (listed as not measured)
    cells = re.findall(r"\| ([-\d.]+) \|", tables)
    assert cells.count("-") == 2 and "baseline: not trained in this run" in tables


def test_a_rerun_does_not_decode_the_encoder_modules_again(europarl_finished):
    asr, _ = europarl_finished
    out = run(
        asr,
        ["--config", "conf/tiny.conf", "--stage", "9", "--stop_stage", "9"],
        env={"EUROPARL_ST": "", "WMT": ""},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Stage 9: greedy CTC decoding of encoder modules: already done" in out.stderr


def test_a_decoder_artefact_is_required(europarl_finished):
    import subprocess
    import sys

    asr, _ = europarl_finished
    out = subprocess.run(
        [
            sys.executable,
            "local/decoder_vocab.py",
            "--artefact",
            "exp/asr_legonn/modules/encoder0.pt",
            "--out_dir",
            str(asr / "x"),
        ],
        cwd=asr,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "encoder0.pt: is a encoder module, not a decoder" in out.stderr


def test_the_decoder_comes_from_the_corpus_db_sh_names(tmp_path):
    asr = make_recipe_copy("europarl", "asr1", tmp_path)
    out = run(asr, [], env={"EUROPARL_ST": "", "WMT": str(tmp_path)})
    assert out.returncode == 1
    assert "EUROPARL_ST and WMT (db.sh) must be both set or both empty" in out.stderr
    assert not (asr / "data").exists()
