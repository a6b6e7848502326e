#!/usr/bin/env bash
# LRS3 lip reading (the relaxed-attention paper, §4.2, Tables 2 and 6) on asr.sh's video input mode. With LRS3
# unset in db.sh this runs the embedded mini corpus (mouth-shape videos of spoken English numbers) end to end
# on a CPU; with it set, the LRS3 release (espnet_ext.data.lrs3; mouth crops from landmarks or given ROIs).
#   ./run.sh [--setup 30h|433h|433h_self] [--lm_text transcripts|extended] [--lm_weights "0.05 0.1 ..."]
#            [asr.sh options, e.g. --attention_variant relaxed_cross, --matched_inference true]
# The options, the paper's variants and the sweeps (conf/sweeps/paper_*.yaml): README.md.
set -euo pipefail
. ./db.sh

setup=433h_self         # 30h, 433h or 433h_self
lm_text=extended        # transcripts or extended
lm_weights=""           # the LM-weight grid; empty: decode with the inference config's lm_weight
local_data_opts=""      # options of local/data.sh (asr.sh's --local_data_opts)
__options_pass_to=./asr.sh
. utils/parse_options.sh
. utils/lm_weight_tuning.sh

case "${setup}" in
    30h | 433h | 433h_self) ;;
    *) echo "$0: --setup must be 30h, 433h or 433h_self, not '${setup}'" >&2; exit 1 ;;
esac
unlabeled=()
if [ -z "${LRS3}" ]; then
    # Characters: the mini corpus' ~30 number words make 100 BPE pieces whole words, which the model
    # (its CTC branch most) learnt far slower from 400 videos.
    sets=(--train_set train --valid_set dev --test_sets "dev test")
    [ "${setup}" = 433h_self ] && unlabeled=(--unlabeled_set unlabeled)
    opts=(--asr_config conf/train_vsr_mini.yaml --inference_config conf/decode_vsr_mini.yaml
          --lm_config conf/train_lm_mini.yaml --token_type char
          --nj 2 --inference_nj 2 --train_num_threads "$(nproc)" --min_frames 5 --max_frames 500)
    title="LRS3 recipe on the embedded mini corpus (mouth videos of spoken English numbers)"
else
    # 30 h = trainval; 433 h = pretrain + trainval (local/data.sh); dev = 1,200 held-out trainval videos.
    case "${setup}" in
        30h) sets=(--train_set trainval_nodev) config=conf/train_vsr_base.yaml ;;
        *) sets=(--train_set pretrain_trainval) config=conf/train_vsr_large.yaml ;;
    esac
    sets+=(--valid_set dev --test_sets "dev test")
    if [ "${setup}" = 433h_self ]; then
        # Refused now, not after stage 1's hours of mouth crops: VoxCeleb2-en comes from --voxceleb2_dir.
        if [[ " ${local_data_opts} " != *" --voxceleb2_dir "* ]] && [ ! -s data/voxceleb2_en/video.scp ]; then
            echo "$0: --setup 433h_self self-trains on VoxCeleb2-en: give local/data.sh its mouth crops," \
                "--local_data_opts \"... --voxceleb2_dir DIR\" (a data dir with video.scp)" >&2
            exit 1
        fi
        # stage 14 on AV-HuBERT's self-training schedule (self_large_vox_433h.yaml: 100k updates); stage 13
        # decodes ~1M videos at beam 50 with LM fusion: on GPUs, 32 jobs at a time, in asr.sh's
        # --pseudo_label_nj resumable jobs (--pseudo_label_gpu false: on CPUs)
        unlabeled=(--unlabeled_set voxceleb2_en --self_training_config conf/train_vsr_large_self.yaml
                   --pseudo_label_nj 256 --pseudo_label_gpu true --pseudo_label_max_jobs 32)
    fi
    opts=(--asr_config "${config}" --inference_config conf/decode_vsr.yaml --lm_config conf/train_lm_transformer.yaml
          --token_type bpe --nbpe 1000 --nj 32 --inference_nj 32 --inference_mem 16G --min_frames 10 --max_frames 600)
    [ "${lm_text}" != extended ] || [ -z "${LIBRISPEECH_LM}" ] || opts+=(--num_splits_lm 20)  # SLR11's 40M lines
    local_data_opts="--nj 32 ${local_data_opts}"  # ~150k clips cropped in 32 jobs (the user's --nj wins)
    title="LRS3 (${setup})"
fi
run_with_lm ./asr.sh --input video "${sets[@]}" "${unlabeled[@]}" "${opts[@]}" --results_title "${title}" \
    --local_data_opts "${local_data_opts}" -- "$@"
