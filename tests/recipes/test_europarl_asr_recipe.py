"""egs/europarl/asr1 end to end on a tiny numbers world: the mini De-En LegoNN MT model trained through
egs/europarl/mt1, LegoNN ASR models on "Europarl" and "TED", their modules composed with the MT decoder,
decoded with no training, greedy CTC of encoder modules, fine-tuning of the composed models, Tables IV-VII."""

import json

import pytest
from recipe_fixture import TINY_TRAINING, make_recipe_copy, run

BLOCK = "output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, dropout_rate: 0.0"
INGEST = "num_blocks: 1, attention_heads: 2, linear_units: 64"
TINY_DECODER = f"""\
decoder: legonn
decoder_conf: {{attention_dim: 32, attention_heads: 2, linear_units: 64, num_blocks: 1,
               ingestor: {{type: wemb, {INGEST}}}}}
"""
TINY_MT = (
    f"""\
model: legonn
model_conf: {{lsm_weight: 0.1}}
frontend: embed
frontend_conf: {{embed_dim: 32}}
encoder: legonn
encoder_conf:
    modules:
    -   {{token_list: data/token_list/bpe_unigram100_en/tokens.txt, input_layer: none, {BLOCK},
          olc: {{ratio: 4.0, max_length: 120, num_blocks: 1}}}}
"""
    + TINY_DECODER
    + TINY_TRAINING.replace("max_epoch: 2", "max_epoch: 3")
)
SPEECH = "frontend: null\nspecaug: null\n"
TINY_ASR = (
    f"""\
model: legonn
model_conf: {{interface_text_keys: [phn, text], on_short_ctc: report}}
{SPEECH}encoder: legonn
encoder_conf:
    modules:
    -   {{token_list: data/token_list/phn/tokens.txt, input_layer: conv2d, {BLOCK},
          olc: {{ratio: 0.833333, max_length: 365, num_blocks: 1}}}}
    -   {{token_list: data/token_list/bpe_unigram100/tokens.txt, input_layer: wemb, {BLOCK},
          ingestor: {{receptive_field: 5, {INGEST}}}, olc: {{ratio: 0.342857, max_length: 130, num_blocks: 1}}}}
"""
    + TINY_DECODER
    + TINY_TRAINING
)
TINY_FINETUNE = TINY_TRAINING.replace("max_epoch: 2", "max_epoch: 1").replace("0.002", "0.0005")
TINY_DECODE = "beam_size: 2\nctc_weight: 0.0\n"

MT_CONF = """\
mt_config=conf/tiny_mt.yaml
local_data_opts="--mini_splits train=80,valid=10,test=10"
nj=1
inference_nj=1
"""
ASR_CONF = """\
local_data_opts="--mini_splits train=40,dev=8,test=8 --mini_ted_splits train=40,dev=8"
nj=1
inference_nj=1
train_num_threads=1
"""
RECIPE_CONF = """\
asr_config=conf/tiny_asr.yaml
baseline_config=""
finetune_config=conf/tiny_finetune.yaml
inference_config=conf/tiny_decode.yaml
asr_opts="--config conf/tiny_asr.conf"
mt_opts="--config conf/tiny_mt.conf"
"""


@pytest.fixture(scope="module")
def europarl_finished(tmp_path_factory):
    dest = tmp_path_factory.mktemp("europarl")
    asr = make_recipe_copy("europarl", "asr1", dest)
    mt = make_recipe_copy("europarl", "mt1", dest)
    (mt / "conf" / "tiny_mt.yaml").write_text(TINY_MT)
    (mt / "conf" / "tiny_mt.conf").write_text(MT_CONF)
    for name, text in (
        ("tiny_asr.yaml", TINY_ASR),
        ("tiny_finetune.yaml", TINY_FINETUNE),
        ("tiny_decode.yaml", TINY_DECODE),
        ("tiny_asr.conf", ASR_CONF),
        ("tiny.conf", RECIPE_CONF),
    ):
        (asr / "conf" / name).write_text(text)
    out = run(asr, ["--config", "conf/tiny.conf"], env={"EUROPARL_ST": ""})
    assert out.returncode == 0, out.stderr[-6000:]
    return asr, out


def wer(path):
    return json.loads(path.read_text(encoding="utf-8"))["wer"]
