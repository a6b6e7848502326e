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
#                                    best BLEU, decode test with it (the paper's λ grid, A.3.3)
# The paper's variants are mt.sh options on one training config:
#   --attention_variant baseline|smooth_focus|relaxed_cross|relaxed_self [--relax_gamma G]
#   --matched_inference true        relaxed attention also when decoding
#   --use_lm true [--inference_args "--lm_weight 0.1"]   shallow fusion with the LM
set -euo pipefail
. ./db.sh

lm_text=transcripts
lm_weights=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --lm_text) lm_text=$2; shift 2 ;;
        --lm_weights) lm_weights=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done

sets=(--train_set train --valid_set valid --test_sets "valid test" --src_lang de --tgt_lang en)
if [ -z "${IWSLT14}" ]; then
    # One training thread: with other jobs on 2 cores, 2 threads are far slower (mini-mt-calibration notes).
    # Separate vocabularies as the notes measured; max_sentencepiece_length 7 splits German compounds into
    # number morphemes (drei hundert vierund ...) instead of whole chunks.
    opts=(--mt_config conf/train_mt_mini.yaml --inference_config conf/decode_mt_mini.yaml
          --lm_config conf/train_lm_mini.yaml --token_joint false --src_nbpe 100 --tgt_nbpe 100
          --src_bpe_opts "--hard_vocab_limit false --max_sentencepiece_length 7"
          --tgt_bpe_opts "--hard_vocab_limit false" --nj 2 --inference_nj 2 --train_num_threads 1)
    title="IWSLT14 de-en recipe on the embedded mini corpus (German -> English number words)"
else
    opts=(--mt_config conf/train_mt_base.yaml --inference_config conf/decode_mt.yaml
          --lm_config conf/train_lm_transformer.yaml --token_joint true --tgt_nbpe 10000
          --max_text_words 175 --max_length_ratio 1.5 --nj 32 --inference_nj 32)
    title="IWSLT14 de-en"
fi

case "${lm_text}" in
    transcripts) lm_opts=(--lm_tag transcripts) ;;
    extended) lm_opts=(--lm_tag extended --lm_train_text data/lm_extended/text) ;;
    *) echo "$0: --lm_text must be transcripts or extended, not '${lm_text}'" >&2; exit 1 ;;
esac

if [ -z "${lm_weights}" ]; then
    ./mt.sh "${sets[@]}" "${opts[@]}" "${lm_opts[@]}" --results_title "${title}" "${args[@]}"
    exit 0
fi

# λ grid: train (all stages up to 8), decode + score valid per λ, then test with the best one.
. ./path.sh
./mt.sh "${sets[@]}" "${opts[@]}" "${lm_opts[@]}" --use_lm true --stop_stage 8 "${args[@]}"
tag_of() { echo "decode_lm_${lm_text}_lmw$1"; }
for w in ${lm_weights}; do
    ./mt.sh "${sets[@]}" "${opts[@]}" "${lm_opts[@]}" --use_lm true "${args[@]}" --stage 9 --stop_stage 10 \
        --test_sets valid --inference_tag "$(tag_of "${w}")" --inference_args "--lm_weight ${w}"
done
exp=$(./mt.sh "${sets[@]}" "${opts[@]}" "${lm_opts[@]}" "${args[@]}" --print_exp true)
best=$(python -m espnet_ext.scoring.select_best --metric bleu --max \
    $(for w in ${lm_weights}; do echo "${w}=${exp}/$(tag_of "${w}")/valid/score_bleu/result.json"; done))
echo "$0: LM weight ${best} gives the best valid BLEU; decoding test with it" >&2
# Its own tag: each tag's stage marker remembers one set list, so valid and test stay done on a rerun.
./mt.sh "${sets[@]}" "${opts[@]}" "${lm_opts[@]}" --use_lm true "${args[@]}" --stage 9 --stop_stage 10 \
    --test_sets test --inference_tag "decode_lm_${lm_text}_tuned_lmw${best}" --inference_args "--lm_weight ${best}"
./mt.sh "${sets[@]}" "${opts[@]}" "${lm_opts[@]}" --use_lm true "${args[@]}" --stage 11 --results_title "${title}" \
    --results_notes "LM weight λ tuned on valid among {${lm_weights// /, }} (rows decode_lm_${lm_text}_lmw<λ>): best ${best},\
 used for test (row decode_lm_${lm_text}_tuned_lmw${best}). This LM-weight grid invocation (with any stages it had to run) took $((SECONDS / 60)) min $((SECONDS % 60)) s."
