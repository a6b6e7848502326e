#!/usr/bin/env bash
# German -> English LegoNN MT on the numbers world: the stand-in, on the mini corpus, for the WMT19 De-En LegoNN
# model whose decoder egs/europarl/asr1 reuses (LegoNN §IV-C, Tables IV-VI). The real De-En model is
# egs/wmt/mt1's LegoNN mode; this recipe has no real-corpus setting. The encoder module's CTC interface is the
# English target vocabulary (the decoder ingests distributions over it), so the ASR recipe's output and
# pronunciation-model interface vocabularies are this model's English BPE (asr1 takes them from the decoder).
#   ./run.sh [--stage N] [--stop_stage M] [mt.sh options]
set -euo pipefail
. ./db.sh
if [ -n "${WMT}" ]; then
    echo "$0: the real WMT19 De-En LegoNN model is egs/wmt/mt1's; this recipe only runs the mini corpus" >&2
    exit 1
fi
# Separate vocabularies; max_sentencepiece_length 7 splits German compounds into number morphemes
# (egs/iwslt14/mt1 does the same).
./mt.sh --train_set train --valid_set valid --test_sets "test" --src_lang de --tgt_lang en \
    --mt_config conf/train_legonn_mini.yaml --inference_config conf/decode_mini.yaml \
    --token_joint false --src_nbpe 100 --tgt_nbpe 100 \
    --src_bpe_opts "--hard_vocab_limit false --max_sentencepiece_length 7" --tgt_bpe_opts "--hard_vocab_limit false" \
    --nj 2 --inference_nj 2 --train_num_threads 1 \
    --results_title "De-En LegoNN MT on the embedded mini corpus (German -> English number words)" "$@"
