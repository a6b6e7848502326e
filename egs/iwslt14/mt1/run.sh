#!/usr/bin/env bash
# IWSLT14 German -> English MT (the relaxed-attention paper, §4.3). With IWSLT14 unset in db.sh this runs the
# embedded mini corpus (German -> English number words) end to end on a CPU in minutes; with it set, the
# IWSLT 2014 de-en release split as fairseq's prepare-iwslt14.sh (valid = every 23rd training pair, test =
# dev2010 + dev2012 + tst2010 + tst2011 + tst2012; espnet_ext/data/iwslt14.py), joint SentencePiece 10k.
#   ./run.sh [--stage N] [--stop_stage M] [--cmd_backend slurm] [--ngpu K --num_nodes J] [mt.sh options]
# Options of this script (all others go to mt.sh):
#   --lm_text transcripts|extended   LM on the training targets only (default), or + data/lm_extended/text
#                                    (real: ${IWSLT14_LM}, the paper's MuST-C English text)
#   --lm_weights "0 0.05 0.1 0.15 0.2"   with --use_lm true: decode valid with each LM weight λ, pick the
#                                    best BLEU, decode test with it (the paper's λ grid, A.3.3; run by
#                                    espnet_ext.analysis.sweep tune on conf/sweeps/lm_weight.yaml)
# The paper's variants are mt.sh options on one training config:
#   --attention_variant baseline|smooth_focus|relaxed_cross|relaxed_self [--relax_gamma G]
#   --matched_inference true        relaxed attention also when decoding
#   --use_lm true [--inference_args "--lm_weight 0.1"]   shallow fusion with the LM
set -euo pipefail
. ./db.sh

lm_text=transcripts     # transcripts or extended
lm_weights=""           # the LM-weight grid; empty: decode with the inference config's lm_weight
__options_pass_to=./mt.sh
. utils/parse_options.sh
. utils/lm_weight_tuning.sh

sets=(--train_set train --valid_set valid --test_sets "valid test" --src_lang de --tgt_lang en)
if [ -z "${IWSLT14}" ]; then
    # One training thread: with other jobs on 2 cores, 2 threads are far slower.
    # Separate vocabularies; max_sentencepiece_length 7 splits German compounds into
    # number morphemes (drei hundert vierund ...) instead of whole chunks.
    opts=(--mt_config conf/train_mt_mini.yaml --inference_config conf/decode_mt_mini.yaml
          --lm_config conf/train_lm_mini.yaml --token_joint false --src_nbpe 100 --tgt_nbpe 100
          --src_bpe_opts "--hard_vocab_limit false --max_sentencepiece_length 7"
          --tgt_bpe_opts "--hard_vocab_limit false" --nj 2 --inference_nj 2 --train_num_threads 1)
    title="IWSLT14 de-en recipe on the embedded mini corpus (German -> English number words)"
else
    opts=(--mt_config conf/train_mt_base.yaml --inference_config conf/decode_mt.yaml
          --lm_config conf/train_lm_transformer.yaml --token_joint true --tgt_nbpe 10000
          --max_text_words 175 --max_length_ratio 1.5 --nj 32 --inference_nj 32
          --inference_model last5.pth --bleu_opts "--tokenized_bleu --moses_lang en")
    # Shen et al.'s recipe: the average of the last 5 epochs; the paper's BLEU (Moses-tokenized,
    # compound-split) is reported next to sacreBLEU.
    title="IWSLT14 de-en"
fi

run_with_lm ./mt.sh "${sets[@]}" "${opts[@]}" --results_title "${title}" -- "$@"
