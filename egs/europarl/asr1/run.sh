#!/usr/bin/env bash
# Europarl-ST English ASR built from LegoNN modules (LegoNN paper §IV-C, §V-C2, Tables IV-VII): a speech encoder
# module composed with the decoder of a De-En MT model (Table IV), a phoneme recogniser + a TED-LIUM
# pronunciation model + that decoder (Table V), both decoded with no training and fine-tuned (Table VI), and
# greedy CTC decoding of encoder modules alone (Table VII). Stages: local/legonn.sh.
# With EUROPARL_ST unset in db.sh this runs the numbers world (English speech of numbers -> phones -> words,
# and a German -> English number MT model from ../mt1 for the decoder) on a CPU; with it set, Europarl-ST
# v1.1 English, TED-LIUM 3 ($TEDLIUM) and the WMT19 De-En LegoNN decoder of egs/wmt/mt1 (--mt_decoder).
#   ./run.sh [--stage N] [--stop_stage M] [--mt_decoder ../../wmt/mt1/exp/<de-en>/modules/decoder.pt] [local/legonn.sh options]
set -euo pipefail
. ./db.sh

if [ -z "${EUROPARL_ST}" ]; then
    opts=(--asr_config conf/train_legonn_mini.yaml
          --baseline_config conf/train_baseline_mini.yaml --finetune_config conf/finetune_mini.yaml
          --inference_config conf/decode_mini.yaml --nbpe 100
          --asr_opts "--nj 2 --inference_nj 2 --train_num_threads 1 --max_frames 1500")
else
    # 2000 BPE trained on the Europarl train text (§V-C2): the De-En decoder's vocabulary, which the
    # recipe takes from it.
    opts=(--asr_config conf/train_legonn.yaml
          --baseline_config conf/train_baseline.yaml --finetune_config conf/finetune.yaml
          --inference_config conf/decode.yaml --nbpe 2000
          --asr_opts "--nj 32 --inference_nj 32 --max_frames 3000 --inference_model valid.acc.ave.pth")
fi
local/legonn.sh "${opts[@]}" "$@"
