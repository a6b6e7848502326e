"""The tiny egs/wmt/mt1 of the recipe tests: shared by tests/recipes/test_wmt_recipe.py,
test_wmt_lego_recipe.py and, through its De-En LegoNN model (the decoder egs/europarl/asr1 composes
with), test_europarl_asr_recipe.py."""

from pathlib import Path

from recipe_fixture import TINY_TRAINING, make_recipe_copy

TINY_TASK_MT = """\
frontend: embed
frontend_conf: {{embed_dim: 32}}
encoder: {encoder}
encoder_conf: {{output_size: 32, attention_heads: 2, linear_units: 64, num_blocks: 1, input_layer: null,
               use_flash_attn: false{selection}}}
decoder: transformer
decoder_conf: {{attention_heads: 2, linear_units: 64, num_blocks: 1, use_flash_attn: false}}
model: task_conditioned
model_conf: {{lsm_weight: 0.1, selection_kl_weight: 0.1, task_tags: [de, kk]}}
"""
# φ starts at 0, so the tests can tell trained logits from initial ones
SELECTION = (
    ", num_tasks: 2, head_candidates: 4, selection_strategy: group, selection_logit_init: zero"
)
TINY_LEGO = """\
frontend: embed
frontend_conf: {embed_dim: 32}
encoder: legonn
encoder_conf:
    modules:
    -   {token_list: data/token_list/lego_mini/tokens.txt, input_layer: none, output_size: 32,
         attention_heads: 2, linear_units: 64, num_blocks: 1, olc: {ratio: 3.0, max_length: 128}}
decoder: legonn
decoder_conf: {attention_dim: 32, attention_heads: 2, linear_units: 64, num_blocks: 1,
               ingestor: {type: wemb, num_blocks: 1, attention_heads: 2, linear_units: 64}}
model: legonn
model_conf: {lsm_weight: 0.1, on_short_ctc: report}
"""
TINY_DECODE = "beam_size: 2\nctc_weight: 0.0\nmaxlenratio: 3.0\n"
COMMON = ["--inference_model", "valid.acc.ave.pth", "--nj", "1", "--inference_nj", "1"]
# The LegoNN modes' options, as a --config file of the recipe (one file, so that egs/europarl/asr1 can hand
# it to run.sh --mode lego_deen through its --mt_opts and find the model these options trained).
TINY_LEGO_CONF = """\
mt_config=conf/tiny_lego.yaml
inference_model=valid.acc.ave.pth
nj=1
inference_nj=1
local_data_opts="--task lego --mini_lego_sizes de=80,ro=30 --mini_valid_size 4 --mini_test_size 6 --mini_nbpe 60"
"""
LEGO_ARGS = ["--config", "conf/tiny_lego.conf"]


def tiny_wmt_recipe(dest: Path) -> Path:
    """dest/egs/wmt/mt1 with the tiny configs of every mode and the mini decoding config at beam 2."""
    recipe = make_recipe_copy("wmt", "mt1", dest)
    conf = recipe / "conf"
    conf.joinpath("tiny_shared.yaml").write_text(
        TINY_TASK_MT.format(encoder="transformer", selection="") + TINY_TRAINING
    )
    conf.joinpath("tiny_group.yaml").write_text(
        TINY_TASK_MT.format(encoder="head_selection_transformer", selection=SELECTION)
        + TINY_TRAINING
    )
    conf.joinpath("tiny_lego.yaml").write_text(TINY_LEGO + TINY_TRAINING)
    conf.joinpath("tiny_lego.conf").write_text(TINY_LEGO_CONF)
    conf.joinpath("decode_mt_mini.yaml").write_text(TINY_DECODE)
    return recipe
