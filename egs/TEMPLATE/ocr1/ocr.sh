#!/usr/bin/env bash
# Image-to-sequence recognition (text in images) on our ESPnet2 ImageToSequenceTask, shared by every
# egs/<corpus>/ocr1 recipe. The recipe's run.sh sets options and calls this script; local/data.sh writes
# data/<set>/{image.scp,text}.
# Stages:
#    1 data preparation (local/data.sh) + validation (ids match, every image decodes: ${nj} jobs a set)
#    2 token list (characters of the training transcriptions)
#    3 statistics (image widths for batching)   4 training
#    5 decoding (+ attention entropy per image, per-step pictures)   6 scoring (sequence/character accuracy)
#    7 RESULTS.md
# Stage 5 decodes the test sets side by side, every set's jobs submitted at once
# (--parallel_stages false: one after another; for_each_set of utils/pipeline.sh).
# ESPnet's training holds its training tables whole in every training (and loader) process (12.7M scene-text
# images: GBs each); --num_splits_ocr N > 1 (ESPnet's option, as mt.sh's --num_splits_mt) splits every one of them
# (image.scp, text, the image shape file, any training table in --ocr_args) round-robin into N parts
# (${ocr_exp}/splitsN, a job: split_train_opts) that each epoch trains on in turn (--multiple_iterator true), so
# a process holds one part. A config's num_iters_per_epoch stays the epoch's: ESPnet gives each part 1/N of it.
# --smoke true runs every stage with the real configs on a tiny corpus: one update per epoch, model widths / 8,
# soft vocabulary sizes (utils/pipeline.sh, espnet_ext/smoke.py; README "Smoke runs").
set -euo pipefail
command_line="$0$(printf " %q" "$@")"

. utils/pipeline_options.sh image  # the options ocr.sh shares
valid_set=dev
ocr_config=""
ocr_args=""             # extra arguments for ocr_train, e.g. "--model sharp_attention --model_conf context=chain"
ocr_tag=""
num_splits_ocr=1        # parts of the training tables held in memory one at a time (stage 4, see above)
num_plots=8             # per-step attention pictures of the first test images of each decoding job
results_title="Text recognition results"

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh

require_options ocr_config
[[ ${num_splits_ocr} =~ ^[1-9][0-9]*$ ]] || die "--num_splits_ocr must be a positive integer, not '${num_splits_ocr}'"
token_dir=data/token_list/char_${train_set}
token_list="${token_dir}/tokens.txt"
ocr_tag=${ocr_tag:-$(basename "${ocr_config}" .yaml)}
ocr_exp="${expdir}/ocr_${ocr_tag}"
stats_dir="${expdir}/ocr_stats_${train_set}"
tokenizer_opts=(--token_type char --token_list "${token_list}")

# Tables checked, then every image decoded: each set's over ${nj} jobs (scene text has 12.7M training images), the
# sets side by side (for_each_set; in turn with --parallel_stages false).
prepare_data() {
    prepare_data_dirs python -m espnet_ext.data.datadir validate "data/{}" --require text,image.scp || return 1
    for_each_set "$(data_sets "${train_set} ${valid_set} ${test_sets}")" check_images
}

check_images() {  # check_images SET : every image of the set decoded by ${nj} jobs (logs data/log/images_<set>/)
    local dset=$1 split=data/log/images_$1 n
    clear_job_dir "${split}" || return 1
    # whole lines: each job checks its split as an image.scp (key and path)
    n=$(split_keys --lines "data/${dset}/image.scp" "${split}" "${nj}") || return 1
    ${train_cmd} JOB=1:"${n}" "${split}/decode.JOB.log" \
        python -m espnet_ext.data.types image "${split}/keys.JOB.scp" || return 1
    rm -f "${split}"/keys.*.scp  # copies of image.scp
}

make_tokens() {
    ${train_cmd} "${token_dir}/log/token_list.log" \
        python -m espnet_ext.text.token_list --token_type char --text "data/${train_set}/text" --out_dir "${token_dir}"
}

data_opts() {  # the training/validation data options of ocr_train
    echo --train_data_path_and_name_and_type "data/${train_set}/image.scp,image,image" \
        --train_data_path_and_name_and_type "data/${train_set}/text,text,text" \
        --valid_data_path_and_name_and_type "data/${valid_set}/image.scp,image,image" \
        --valid_data_path_and_name_and_type "data/${valid_set}/text,text,text"
}

ocr_stats() {
    # shellcheck disable=SC2046
    collect_stats espnet_ext.bin.ocr_train "${stats_dir}" "${nj}" "data/${train_set}/text" "data/${valid_set}/text" \
        "${tokenizer_opts[@]}" --config "${ocr_config}" $(data_opts)
}

ocr_train() {
    mkdir -p "${ocr_exp}"
    # shellcheck disable=SC2206,SC2207  # options as words
    local opts=($(data_opts) --train_shape_file "${stats_dir}/train/image_shape"
                --valid_shape_file "${stats_dir}/valid/image_shape" ${ocr_args})
    [ "${num_splits_ocr}" = 1 ] || split_train_opts opts "${ocr_exp}" "${num_splits_ocr}" || return 1
    train_model "${ocr_exp}/train.log" -- python -m espnet_ext.bin.ocr_train --use_preprocessor true \
        "${tokenizer_opts[@]}" --config "${ocr_config}" --output_dir "${ocr_exp}" "${opts[@]}"
}

attention_model() {  # the trained model attends (ESPnet's config: model), so it has attention to report
    python -c "import sys, yaml; sys.exit(0 if 'attention' in yaml.safe_load(open('${ocr_exp}/config.yaml'))['model'] else 1)"
}

decode() {  # the test sets side by side (for_each_set)
    require_files "${ocr_exp}/${inference_model}"
    for_each_set "${test_sets}" decode_one
}

decode_one() {  # decode_one SET : its text (+ an attention model's entropy and plots, from this set's jobs)
    local dset=$1 dir="${ocr_exp}/${inference_tag}/$1" extra="" i
    ! attention_model || extra="--entropy_file ${dir}/logdir/entropy.JOB --plot_dir ${dir}/plots.JOB --num_plots ${num_plots}"
    rm -f "${dir}/entropy"
    # shellcheck disable=SC2086
    decode_set "${dir}" "data/${dset}/image.scp" espnet_ext.bin.ocr_inference text.JOB -- \
        --device "${inference_device}" --batch_size "${inference_batch_size}" \
        --train_config "${ocr_exp}/config.yaml" --model_file "${ocr_exp}/${inference_model}" \
        --data_path_and_name_and_type "data/${dset}/image.scp,image,image" \
        --output_file "${dir}/logdir/text.JOB" ${extra} ${inference_args} || return 1
    if [ -n "${extra}" ]; then
        merge_shards "${dir}" entropy.JOB "${dir}/entropy" || return 1
        rm -rf "${dir}/plots" && mkdir "${dir}/plots"
        for i in $(seq "${decode_jobs}"); do
            [ -d "${dir}/plots.${i}" ] && mv "${dir}/plots.${i}"/*.png "${dir}/plots/" && rmdir "${dir}/plots.${i}"
        done
    fi
    return 0
}

score() {  # an attention model's decoding also wrote each image's attention entropy
    local entropy=()
    ! attention_model || entropy=(--entropy "${ocr_exp}/${inference_tag}/{}/entropy")
    score_sets score_acc "data/{}/text" "${ocr_exp}/${inference_tag}" 1 "${entropy[@]}"
}

write_results() {
    write_results_md ocr 7 "Config: \`${ocr_config}\`."
}

run_stage 1 "data preparation" "data/.markers/${train_set}" "$(fingerprint $(local_data_scripts) "$(corpus_settings)" "${local_data_opts}" "${train_set}" "${valid_set}" "${test_sets}")" prepare_data
run_stage 2 "token list" "${token_dir}" "$(fingerprint "data/${train_set}/text")" make_tokens
run_stage 3 "statistics" "${stats_dir}" "$(fingerprint "data/${train_set}/image.scp" "data/${valid_set}/image.scp" "${token_list}" "${ocr_config}")" ocr_stats
# --num_splits_ocr only when set: the markers of trainings run before it existed stay valid
ocr_split_words=()
[ "${num_splits_ocr}" = 1 ] || ocr_split_words=("num_splits_ocr=${num_splits_ocr}")
run_stage 4 "training" "${ocr_exp}" "$(fingerprint "${stats_dir}/train/image_shape" "${token_list}" "${ocr_config}" "${ocr_args}" "${ocr_split_words[@]}")" ocr_train
run_stage 5 "decoding" "${ocr_exp}/${inference_tag}" "$(fingerprint "${ocr_exp}/${inference_model}" "${inference_args}" "${test_sets}")" decode
run_stage 6 "scoring" "${ocr_exp}/${inference_tag}" "$(fingerprint $(test_set_files "${ocr_exp}/${inference_tag}" text))" score
run_stage 7 "RESULTS.md" "${expdir}" "$(date +%s)" write_results
log "Finished: ${ocr_exp}"
