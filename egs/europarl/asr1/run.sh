#!/usr/bin/env bash
# Europarl-ST English ASR built from LegoNN modules (LegoNN paper §IV-C, §V-C2, Tables IV-VII): a speech encoder
# module composed with the decoder of a De-En MT model (Table IV), a phoneme recogniser + a TED-LIUM
# pronunciation model + that decoder (Table V), both decoded with no training and fine-tuned (Table VI), and
# greedy CTC decoding of encoder modules alone (Table VII). Stages: local/legonn.sh.
# The De-En decoder is egs/wmt/mt1's LegoNN De-En model (--mode lego_deen; trained there if need be), or
# --mt_decoder. With EUROPARL_ST unset in db.sh this runs the numbers world (English speech of numbers -> phones
# -> words, and egs/wmt/mt1's mini German -> English number model) on a CPU; with it set, Europarl-ST v1.1
# English, TED-LIUM 3 ($TEDLIUM) and the WMT19 De-En model (WMT in db.sh, or --mt_decoder).
#   ./run.sh [--stage N] [--stop_stage M] [--mt_decoder ../../wmt/mt1/exp/lego_deen/<mt_tag>/modules/decoder.pt
#            --mt_decoder_base ../../wmt/mt1] [local/legonn.sh options]
set -euo pipefail
. ./db.sh

# egs/wmt/mt1 trains the decoder on the corpus db.sh names (WMT): the mini one must go with the mini corpus,
# WMT19 with Europarl-ST.
if [ "${EUROPARL_ST:+real}" != "${WMT:+real}" ] && [[ " $* " != *" --mt_decoder "* ]]; then
    echo "$0: EUROPARL_ST and WMT (db.sh) must be both set or both empty, unless --mt_decoder is given" >&2
    exit 1
fi

if [ -z "${EUROPARL_ST}" ]; then
    opts=(--asr_config conf/train_legonn_mini.yaml
          --baseline_config conf/train_baseline_mini.yaml --finetune_config conf/finetune_mini.yaml
          --inference_config conf/decode_mini.yaml --nbpe 100 --ted_train_args "--max_epoch 4" --inference_nj 1
          --asr_opts "--nj 1 --train_num_threads 1 --max_frames 1500")
else
    # --nbpe names the token dir only: the vocabulary is the decoder's. The paper's (§V-C2) emits 2000 BPE
    # units of the Europarl train text; egs/wmt/mt1's lego_deen emits the joint De-En + Ro-En dictionary of
    # §V-C1 (--mt_decoder takes another decoder).
    # The modules composed are the encoder-only model's (§V-C2: "the LegoNN phoneme+pronunciation encoder-only
    # model trained using CTC loss"); train_legonn.yaml's loss settings go into the fine-tunings.
    opts=(--asr_config conf/train_legonn.yaml --encoder_config conf/train_legonn_ctc.yaml
          --baseline_config conf/train_baseline.yaml --finetune_config conf/finetune.yaml
          --inference_config conf/decode.yaml --nbpe 2000 --inference_nj 32
          --asr_opts "--nj 32 --max_frames 3000 --inference_model valid.acc.ave.pth")
fi
local/legonn.sh "${opts[@]}" "$@"
