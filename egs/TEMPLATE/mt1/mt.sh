#!/usr/bin/env bash
# Machine translation pipeline on ESPnet2's MT task, shared by every egs/<corpus>/mt1 recipe.
# The recipe's run.sh sets options and calls this script; local/data.sh prepares its data dirs:
#   data/<set>/text.<src_lang>  source sentences      data/<set>/text.<tgt_lang>  target sentences
#   data/<set>/text             the target again (optional; ESPnet's name), all with the same ids.
# Stages (ESPnet's mt.sh order):
#    1 data preparation (local/data.sh) + validation, copied to ${dumpdir}/raw (a job)
#    2 filtering of the training/validation sets by length (removed ids listed, never silent), side by side
#    3 token lists: SentencePiece for source and target, or one joint model (--token_joint true)
#    4 LM text + statistics    5 LM training    6 LM perplexity       (../lm1/lm.sh; --use_lm true)
#    7 MT statistics           8 MT training    9 decoding   10 scoring (BLEU, sacrebleu)   11 RESULTS.md
# ESPnet's training holds its training tables and shape files whole in every training (and loader) process;
# --num_splits_mt N > 1 (ESPnet's option) splits every one of them (source, target, --task_ids tables, any
# training table in --mt_args) round-robin into N parts (${mt_exp}/splitsN, a job: split_train_opts) that each
# epoch trains on in turn (--multiple_iterator true), so a process holds one part.
# A LegoNN model (the config's model: legonn / legonn_ctc) has its modules exported to <exp>/modules in stage 9,
# before decoding and also with --skip_eval (lego_export, a job: the inventory other recipes compose from).
# An encoder-only one (legonn_ctc) is decoded by its greedy CTC path (lego_ctc_decode --words).
# Stage 9 decodes the test sets side by side, every set's jobs submitted at once
# (--parallel_stages false: one after another; for_each_set of utils/pipeline.sh).
# --smoke true runs every stage with the real configs on a tiny corpus: one update per epoch, model widths / 8,
# soft vocabulary sizes (utils/pipeline.sh, espnet_ext/smoke.py; README "Smoke runs").
set -euo pipefail
command_line="$0$(printf " %q" "$@")"

. utils/pipeline_options.sh sequence translation attention_variants lm_fusion  # the options mt.sh shares
valid_set=valid
src_lang=de
tgt_lang=en
max_text_words=250      # filtering: pairs with a longer source or target are dropped from training
max_length_ratio=""     # filtering: drop pairs whose longer side has more than this times the words (empty: off)
token_list_dir=""       # an existing vocabulary (tokens.txt [+ bpe.model]) for both sides: stage 3 trains
                        # none (one joint dictionary shared by several language pairs, LegoNN §V-C1)
mt_config=""
mt_args=""              # extra arguments for mt_train
num_splits_mt=1         # parts of the training tables held in memory one at a time (stage 8, see above)
mt_tag=""
results_title="MT results"
print_exp=false         # true: print the MT experiment dir these options name, and exit

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh

require_options mt_config inference_config
[[ ${num_splits_mt} =~ ^[1-9][0-9]*$ ]] || die "--num_splits_mt must be a positive integer, not '${num_splits_mt}'"
skip_stages=""
skip_when "${skip_data_prep}" 1 2 3
skip_when "${skip_train}" 4 5 6 7 8
skip_when "${skip_eval}" 9 10 11
# shellcheck disable=SC2086  # an adapter model names the trained model it starts from
python -m espnet_ext.bin.check_init --config "${mt_config}" -- ${mt_args} || exit 1

raw_dir="${dumpdir}/raw"
train_dir="${raw_dir}/${train_set}_filtered"
valid_dir="${raw_dir}/${valid_set}_filtered"
src_text=text.${src_lang}
tgt_text=text.${tgt_lang}
. utils/translation_tokens.sh
attention_variant mt "${mt_config}"
mt_args="${variant_args} $(task_id_opts "${train_dir}" "${valid_dir}" "${task_ids}") ${mt_args}"
mt_tag=${mt_tag:-$(basename "${mt_config}" .yaml)${variant_tag}}
mt_exp="${expdir}/mt_${mt_tag}"
if [ "${print_exp}" = true ]; then echo "${mt_exp}"; exit 0; fi
mt_stats_dir="${expdir}/mt_stats_$(basename "${src_token_dir}")_$(basename "${tgt_token_dir}")"
lm_tag=${lm_tag:-$(basename "${lm_config:-lm}" .yaml)}
lm_exp=${lm_exp:-${expdir}/lm_${lm_tag}}
default_inference_tag

prepare_data() {
    prepare_data_dirs python -m espnet_ext.data.datadir validate "data/{}" --require "${src_text},${tgt_text}" \
        || return 1
    mkdir -p "${raw_dir}"
    # shellcheck disable=SC2046  # the set names
    as_job "${raw_dir}/log/copy_data.log" copy_sets "${raw_dir}" $(data_sets "${train_set} ${valid_set} ${test_sets}")
}

# copy_sets RAW_DIR SET... (stage 1's job: the training tables are GBs for WMT): data/<set> -> RAW_DIR/<set>,
# copied aside and renamed. Copies, not hard links: local/data.sh may rewrite data/<set>'s files in place, which
# would change a linked copy under a finished stage; --reflink=auto shares blocks (copy on write), not inodes.
copy_sets() {
    local raw_dir=$1 dset
    shift
    for dset in "$@"; do
        rm -rf "${raw_dir:?}/${dset}.tmp"
        cp -r --reflink=auto "data/${dset}" "${raw_dir}/${dset}.tmp"
        rm -rf "${raw_dir:?}/${dset}"
        mv "${raw_dir}/${dset}.tmp" "${raw_dir}/${dset}"
    done
}

# the validation set's filter reads the validation set only (not the filtered training set): side by side
filter_data() {
    for_each_set "$(data_sets "${train_set} ${valid_set}")" filter_set
}
filter_set() {  # filter_set SET : filter_data's job for one set, ${raw_dir}/SET_filtered
    local dset=$1
    ${train_cmd} "${raw_dir}/log/filter_${dset}.log" \
        python -m espnet_ext.data.filter "${raw_dir}/${dset}" "${raw_dir}/${dset}_filtered" \
            --text_names "${src_text},${tgt_text}" --max_text_words "${max_text_words}" \
            ${max_length_ratio:+--max_length_ratio "${max_length_ratio}"} || return 1
    log "${dset}: $(grep "^filter:" "${raw_dir}/log/filter_${dset}.log")"
}

data_opts() {  # data_opts train|valid DIR
    echo "--$1_data_path_and_name_and_type $2/${src_text},src_text,text --$1_data_path_and_name_and_type $2/${tgt_text},text,text"
}

mt_stats() {
    require_files "${train_dir}/${tgt_text}" "${valid_dir}/${tgt_text}" "${src_token_list}" "${tgt_token_list}"
    # shellcheck disable=SC2046
    collect_stats espnet_ext.bin.mt_train "${mt_stats_dir}" "${nj}" "${train_dir}/${tgt_text}" "${valid_dir}/${tgt_text}" \
        "${tokenizer_opts[@]}" --config "${mt_config}" $(data_opts train "${train_dir}") $(data_opts valid "${valid_dir}") \
        || return 1
    add_token_dim "${mt_stats_dir}" "${tgt_token_list}" "${tgt_token_type}" text || return 1
    add_token_dim "${mt_stats_dir}" "${src_token_list}" "${src_token_type}" src_text
}

mt_train() {
    # shellcheck disable=SC2206,SC2207  # options as words
    local opts=($(data_opts train "${train_dir}") $(data_opts valid "${valid_dir}")
                --train_shape_file "${mt_stats_dir}/train/src_text_shape.${src_token_type}"
                --train_shape_file "${mt_stats_dir}/train/text_shape.${tgt_token_type}"
                --valid_shape_file "${mt_stats_dir}/valid/src_text_shape.${src_token_type}"
                --valid_shape_file "${mt_stats_dir}/valid/text_shape.${tgt_token_type}"
                --fold_length 150 --fold_length 150 ${mt_args})
    [ "${num_splits_mt}" = 1 ] || split_train_opts opts "${mt_exp}" "${num_splits_mt}" || return 1
    train_model "${mt_exp}/train.log" -- python -m espnet_ext.bin.mt_train --use_preprocessor true \
        "${tokenizer_opts[@]}" --config "${mt_config}" --output_dir "${mt_exp}" "${opts[@]}"
}

decode() {  # the test sets side by side (for_each_set)
    local lm_opts=()
    [ "${use_lm}" = true ] && lm_opts=(--lm_train_config "${lm_exp}/config.yaml" --lm_file "${lm_exp}/${inference_lm}")
    require_files "${mt_exp}/${inference_model}"
    # An encoder-only LegoNN model (model: legonn_ctc) generates nothing: its output is the last module's
    # greedy CTC path (LegoNN Tables I and III, "Encoder Only"), in words as the decoding of a decoder writes them.
    if grep -qx "model: legonn_ctc" "${mt_exp}/config.yaml"; then
        for_each_set "${test_sets}" ctc_decode_one
    else
        for_each_set "${test_sets}" decode_one "${lm_opts[@]}"
    fi
}

decode_one() {  # decode_one SET [LM OPTIONS...]
    local dset=$1
    shift
    espnet_decode mt "${mt_exp}" "${dset}" "${raw_dir}/${dset}/${src_text}" \
        "${raw_dir}/${dset}/${src_text},src_text,text" "$@"
}

ctc_decode_one() {  # ctc_decode_one SET : an encoder-only model's greedy CTC path
    local dir="${mt_exp}/${inference_tag}/$1"
    decode_set "${dir}" "${raw_dir}/$1/${src_text}" espnet_ext.bin.lego_ctc_decode output.JOB -- \
        --mt_train_config "${mt_exp}/config.yaml" --mt_model_file "${mt_exp}/${inference_model}" \
        --src_text "${raw_dir}/$1/${src_text}" --words --device "${inference_device}" --output "${dir}/logdir/output.JOB"
}

# export_stage N : a LegoNN model's modules, <exp>/modules/{encoder<i>,decoder}.pt, from ${inference_model}; a
# ${train_cmd} job (log <exp>/log/lego_export.log): it loads the whole model (GBs for WMT's)
export_stage() {
    grep -Eq '^model: *legonn(_ctc)? *$' "${mt_config}" || return 0
    local skip_stages=""  # read by run_stage: the export is the training's product, as the average
    # shellcheck disable=SC2086  # ${train_cmd} is a command line
    run_stage "$1" "LegoNN module export" "${mt_exp}/modules" "$(fingerprint "${mt_exp}/${inference_model}")" \
        ${train_cmd} "${mt_exp}/log/lego_export.log" \
            python -m espnet_ext.bin.lego_export --config "${mt_exp}/config.yaml" \
            --model_file "${mt_exp}/${inference_model}" --output_dir "${mt_exp}/modules"
}

write_results() {
    write_results_md mt 11 \
        "Configs: \`${mt_config}\`, \`${inference_config}\`$([ "${use_lm}" = true ] && echo ", LM \`${lm_config}\`")."
}

# stage 1 writes data/, shared by every --dumpdir: its marker lives there, so a run that prepared data/
# otherwise makes the next one prepare it again
run_stage 1 "data preparation" "data/.markers/${train_set}" "$(fingerprint $(local_data_scripts) "$(corpus_settings)" "${local_data_opts}" "${train_set}" "${valid_set}" "${test_sets}" "${src_lang}" "${tgt_lang}")" prepare_data
run_stage 2 "filtering" "${dumpdir}" "$(fingerprint "${raw_dir}/${train_set}/${src_text}" "${raw_dir}/${train_set}/${tgt_text}" "${raw_dir}/${valid_set}/${tgt_text}" "${max_text_words}" "${max_length_ratio}")" filter_data
# Each fingerprint is taken when its stage comes, i.e. of the files the stages before it wrote.
tokens_fp="$(fingerprint "${train_dir}/${src_text}" "${train_dir}/${tgt_text}" "${token_joint}" "${src_token_type}" \
    "${tgt_token_type}" "${src_nbpe}" "${tgt_nbpe}" "${bpemode}" "${src_bpe_opts}" "${tgt_bpe_opts}")"
run_stage 3 "token lists" "${tgt_token_dir}" "${tokens_fp}" make_translation_tokens
# --use_lm true: the LM of the target language, with the MT target vocabulary (stage 3)
lm_stages 4 "${train_dir}/${tgt_text}" "${valid_dir}/${tgt_text}" \
    "$(for t in ${test_sets}; do [ "${t}" = "${valid_set}" ] || printf '%s ' "${raw_dir}/${t}/${tgt_text}"; done)" \
    "${tgt_token_type}" "${tgt_token_list}" "${expdir}/lm_stats_${lm_tag}_$(basename "${tgt_token_dir}")"
run_stage 7 "MT statistics" "${mt_stats_dir}" "$(fingerprint "${train_dir}/${src_text}" "${train_dir}/${tgt_text}" "${valid_dir}/${tgt_text}" "${src_token_list}" "${tgt_token_list}" "${mt_config}")" mt_stats
# --num_splits_mt only when set: the markers of trainings run before it existed stay valid
mt_split_words=()
[ "${num_splits_mt}" = 1 ] || mt_split_words=("num_splits_mt=${num_splits_mt}")
run_stage 8 "MT training" "${mt_exp}" "$(fingerprint "${mt_stats_dir}/train/text_shape.${tgt_token_type}" "${src_token_list}" "${tgt_token_list}" "${mt_config}" "${mt_args}" "${mt_split_words[@]}")" mt_train
average_stage 9 "${mt_exp}"  # --inference_model last<N>.pth (utils/pipeline.sh)
export_stage 9
run_stage 9 "decoding" "${mt_exp}/${inference_tag}" "$(fingerprint "${mt_exp}/${inference_model}" "${inference_config}" "${inference_args}" "${test_sets}" "${use_lm}" "${lm_exp}/${inference_lm}")" decode
run_stage 10 "scoring" "${mt_exp}/${inference_tag}" "$(fingerprint "${bleu_opts}" $(test_set_files "${mt_exp}/${inference_tag}" text))" \
    score_sets score_bleu "${raw_dir}/{}/${tgt_text}" "${mt_exp}/${inference_tag}" 3,4 ${bleu_opts}
run_stage 11 "RESULTS.md" "${expdir}" "$(date +%s)" write_results
log "Finished: ${mt_exp}"
