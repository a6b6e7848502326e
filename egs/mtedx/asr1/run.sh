#!/usr/bin/env bash
# mTEDx multilingual ASR (head selection, Gong et al. §4, Tables 2 and 6): one model over all languages,
# the task being the language (tag file data/<set>/lang). With MTEDX unset in db.sh this runs the embedded
# mini corpus (numbers spoken in es, fr, it, pt; much less training speech for it and pt) on a CPU; with it
# set, mTEDx's 8 languages. WER per language: the test sets test_<lang>.
#   ./run.sh [--stage N] [--stop_stage M] [--asr_config conf/train_asr_<model>[_mini].yaml] [asr.sh options]
# Every config is a task-conditioned model (model_conf.task_tags: the languages in local/data.sh's order):
# shared = the S2T Transformer baseline (no selection); subset / group = head selection, H' = 8 of H = 4,
# in encoder and decoder self-attention (group_enc / group_dec: one side only, Table 6); adapter = the
# shared model frozen plus per-language adapters (train shared first). Training reads the task ids, decoding
# the tags (--inference_args "--task_tag_file lang"); --asr_args adds training options to the task ids',
# e.g. --asr_args "--encoder_conf head_candidates=16 --decoder_conf head_candidates=16" (Fig. 2).
# Sweeps (python -m espnet_ext.analysis.sweep run --spec conf/sweeps/<name>.yaml): table2 (shared, subset,
# group, adapter), head_candidates (Fig. 2), sides (Table 6); mini.yaml is the mini corpus' table2.
set -euo pipefail
. ./db.sh

asr_args=""     # training options besides the task ids
__options_pass_to=./asr.sh
. utils/parse_options.sh

task_ids="--allow_variable_data_keys true"
for part in train valid; do
    task_ids+=" --${part}_data_path_and_name_and_type dump/fbank/${part}_filtered/task_id,task_id,text_int"
done
if [ -z "${MTEDX}" ]; then
    sets=(--train_set train --valid_set valid --test_sets "test_es test_fr test_it test_pt")
    opts=(--asr_config conf/train_asr_group_mini.yaml --inference_config conf/decode_asr_mini.yaml
          --nbpe 150 --bpe_opts "--hard_vocab_limit false" --nj 2 --inference_nj 2
          --train_num_threads "$(nproc)" --max_frames 1500)
    title="mTEDx multilingual ASR recipe on the embedded mini corpus (spoken numbers in 4 languages; mini scale)"
else
    sets=(--train_set train --valid_set valid
          --test_sets "test_ar test_de test_el test_es test_fr test_it test_pt test_ru")
    opts=(--asr_config conf/train_asr_group.yaml --inference_config conf/decode_asr.yaml
          --nbpe 8000 --nj 32 --inference_nj 32 --max_frames 3000 --inference_model last10.pth)
    title="mTEDx multilingual ASR (8 languages)"
fi

./asr.sh "${sets[@]}" "${opts[@]}" --token_type bpe --bpemode unigram --fbank_conf "--n_mels 80" \
    --asr_args "${task_ids} ${asr_args}" --inference_args "--task_tag_file lang" --results_title "${title}" "$@"
