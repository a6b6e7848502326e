#!/usr/bin/env bash
# LibriSpeech ASR. With LIBRISPEECH unset in db.sh this runs the embedded mini corpus (spoken English
# numbers) end to end on a CPU in minutes; with it set, the 100 h (train-clean-100) setup.
#   ./run.sh [--stage N] [--stop_stage M] [--cmd_backend slurm] [--ngpu K --num_nodes J] [asr.sh options]
# The relaxed-attention paper's experiments are asr.sh options on one training config:
#   --attention_variant baseline|smooth_focus|relaxed_cross|relaxed_self [--relax_gamma G]
#   --matched_inference true       relaxed attention also when decoding
#   --use_lm true                  shallow fusion with the extended LM (training transcripts + data/lm_extended)
#   --use_lm true --lm_tag transcripts --lm_train_text ""   the LM on the training transcripts only
# conf/sweeps/*.yaml run the paper's tables through espnet_ext.analysis.sweep (README "Relaxed attention").
set -euo pipefail
. ./db.sh

if [ -z "${LIBRISPEECH}" ]; then
    sets=(--train_set train --valid_set dev --test_sets "dev test")
    opts=(--asr_config conf/train_asr_mini.yaml --inference_config conf/decode_asr_mini.yaml
          --token_type bpe --nbpe 100 --bpe_opts "--hard_vocab_limit false" --lm_config conf/train_lm_mini.yaml
          --nj 2 --inference_nj 2 --train_num_threads "$(nproc)" --max_frames 1500)
    title="LibriSpeech recipe on the embedded mini corpus (spoken English numbers)"
else
    sets=(--train_set train_clean_100 --valid_set dev --test_sets "dev_clean dev_other test_clean test_other")
    opts=(--asr_config conf/train_asr_small.yaml --inference_config conf/decode_asr.yaml
          --token_type bpe --nbpe 5000 --lm_config conf/train_lm_rnn.yaml
          --nj 32 --inference_nj 32 --max_frames 3000
          --lm_inference_config conf/decode_asr_lm.yaml --inference_model valid.acc.best.pth)
    # espresso selects one epoch (the best on dev) and decodes with its EOS threshold only with an LM.
    title="LibriSpeech 100 h"
    # LibriSpeech 960 h: ./run.sh --config conf/train_960h.conf
fi

lm_opts=(--lm_tag extended --lm_train_text data/lm_extended/text)
if [ -n "${LIBRISPEECH}" ]; then
    # SLR11's 40M sentences in 10 parts, one in memory at a time (ESPnet holds its text and shapes whole)
    if [ -n "${LIBRISPEECH_LM}" ]; then lm_opts+=(--num_splits_lm 10); else lm_opts=(--lm_tag transcripts); fi
fi
./asr.sh "${sets[@]}" "${opts[@]}" "${lm_opts[@]}" --results_title "${title}" "$@"
