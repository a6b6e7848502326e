#!/usr/bin/env bash
# LibriSpeech ASR. With LIBRISPEECH unset in db.sh this runs the embedded mini corpus (spoken English
# numbers) end to end on a CPU in minutes; with it set, the 100 h (train-clean-100) setup.
#   ./run.sh [--stage N] [--stop_stage M] [--cmd_backend slurm] [--ngpu K --num_nodes J] [asr.sh options]
set -euo pipefail
. ./db.sh

if [ -z "${LIBRISPEECH}" ]; then
    sets=(--train_set train --valid_set dev --test_sets test)
    opts=(--asr_config conf/train_asr_mini.yaml --inference_config conf/decode_asr_mini.yaml
          --token_type bpe --nbpe 100 --bpe_opts "--hard_vocab_limit false" --lm_config conf/train_lm_mini.yaml
          --nj 2 --inference_nj 2 --train_num_threads "$(nproc)" --max_frames 1500)
    title="LibriSpeech recipe on the embedded mini corpus (spoken English numbers)"
else
    sets=(--train_set train_clean_100 --valid_set dev --test_sets "dev_clean dev_other test_clean test_other")
    opts=(--asr_config conf/train_asr_small.yaml --inference_config conf/decode_asr.yaml
          --token_type bpe --nbpe 5000 --lm_config conf/train_lm_rnn.yaml
          --nj 32 --inference_nj 32 --max_frames 3000)
    title="LibriSpeech 100 h"
fi

./asr.sh "${sets[@]}" "${opts[@]}" --results_title "${title}" "$@"
