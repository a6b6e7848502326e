#!/usr/bin/env bash
# Image classification on our ESPnet2 ImageClassificationTask, shared by every egs/<corpus>/cls1 recipe.
# The recipe's run.sh sets options and calls this script; local/data.sh writes data/<set>/{image.scp,text}
# (text: "<id> <class name>") and ${class_list} (class names, line n = class index n-1).
# Stages:
#    1 data preparation (local/data.sh) + validation (ids match, every image decodes)
#    2 initialisation from an ImageNet checkpoint (only with --pretrained_checkpoint: official or timm
#      Swin weights, strictly mapped; the classifier head is new)
#    3 statistics (image shapes for batching)   4 training (ESPnet2's trainer: checkpoints, resume, DDP)
#    5 evaluation: top-1 class and top-5 ranking per test image   6 scoring (top-1/top-5 accuracy)
#    7 RESULTS.md
# Stage 5 evaluates the test sets side by side, every set's jobs submitted at once
# (--parallel_stages false: one after another; for_each_set of utils/pipeline.sh).
# --smoke true runs every stage with the real configs on a tiny corpus: one update per epoch, model widths / 8,
# soft vocabulary sizes (utils/pipeline.sh, espnet_ext/smoke.py; README "Smoke runs").
set -euo pipefail
command_line="$0$(printf " %q" "$@")"

. utils/pipeline_options.sh image  # the options cls.sh shares
valid_set=valid         # picks the checkpoint (valid.acc.best.pth): never one of ${test_sets}
class_list=data/class_list
cls_config=""
cls_args=""             # extra arguments for cls_train, e.g. "--model_conf gamma=0.1"
cls_tag=""
pretrained_checkpoint=""  # ImageNet Swin checkpoint ({'model': state_dict} or timm's) to start from
results_title="Image classification results"

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh

require_options cls_config
case " ${test_sets} " in
    *" ${valid_set} "*) die "--valid_set ${valid_set} is also a test set: the checkpoint would be picked on \
the data it is tested on; hold out a validation split of the training data (see local/data.sh)" ;;
esac
cls_tag=${cls_tag:-$(basename "${cls_config}" .yaml)}
cls_exp="${expdir}/cls_${cls_tag}"
stats_dir="${expdir}/cls_stats_${train_set}"
init_file="${cls_exp}/init/backbone.pth"
num_classes() { wc -l < "${class_list}"; }

prepare_data() {  # every image decoded
    prepare_data_dirs bash -c "python -m espnet_ext.data.datadir validate data/{} --require text,image.scp && \
        python -m espnet_ext.data.types image data/{}/image.scp" &&
        require_files "${class_list}"
}

convert_checkpoint() {
    local smoke_args  # the backbone cls_train builds: a smoke run's widths included
    smoke_overrides smoke_args --config "${cls_config}" || return 1
    ${train_cmd} "${cls_exp}/init/convert.log" python -m espnet_ext.nets.swin.checkpoint \
        --checkpoint "${pretrained_checkpoint}" --config "${cls_config}" --num_classes "$(num_classes)" \
        --out "${init_file}" -- "${smoke_args[@]}"
}

data_opts() {  # the training/validation data options of cls_train
    echo --class_list "${class_list}" \
        --train_data_path_and_name_and_type "data/${train_set}/image.scp,image,image" \
        --train_data_path_and_name_and_type "data/${train_set}/text,label,text" \
        --valid_data_path_and_name_and_type "data/${valid_set}/image.scp,image,image" \
        --valid_data_path_and_name_and_type "data/${valid_set}/text,label,text"
}

cls_stats() {
    # shellcheck disable=SC2046
    collect_stats espnet_ext.bin.cls_train "${stats_dir}" "${nj}" "data/${train_set}/text" "data/${valid_set}/text" \
        --config "${cls_config}" $(data_opts)
}

cls_train() {
    local init=()
    if [ -n "${pretrained_checkpoint}" ]; then
        require_files "${init_file}"
        init=(--init_param "${init_file}")
    fi
    mkdir -p "${cls_exp}"
    # shellcheck disable=SC2046,SC2086
    train_model "${cls_exp}/train.log" -- python -m espnet_ext.bin.cls_train --use_preprocessor true \
        --config "${cls_config}" --output_dir "${cls_exp}" $(data_opts) "${init[@]}" \
        --train_shape_file "${stats_dir}/train/image_shape" --valid_shape_file "${stats_dir}/valid/image_shape" \
        ${cls_args}
}

evaluate() {  # the test sets side by side (for_each_set)
    require_files "${cls_exp}/${inference_model}"
    for_each_set "${test_sets}" evaluate_one
}

evaluate_one() {  # evaluate_one SET : its text and top-5 classes (merge_shards: decode_set's jobs of this set)
    local dset=$1 dir="${cls_exp}/${inference_tag}/$1"
    rm -f "${dir}/topk"
    # shellcheck disable=SC2086
    decode_set "${dir}" "data/${dset}/image.scp" espnet_ext.bin.cls_inference text.JOB -- \
        --device "${inference_device}" --batch_size "${inference_batch_size}" \
        --train_config "${cls_exp}/config.yaml" --model_file "${cls_exp}/${inference_model}" \
        --data_path_and_name_and_type "data/${dset}/image.scp,image,image" \
        --output_file "${dir}/logdir/text.JOB" --topk_file "${dir}/logdir/topk.JOB" --topk 5 \
        ${inference_args} || return 1
    merge_shards "${dir}" topk.JOB "${dir}/topk"
}

write_results() {
    write_results_md cls 7 "Config: \`${cls_config}\`."
}

# shellcheck disable=SC2046  # the data preparation's script names
run_stage 1 "data preparation" "data/.markers/${train_set}" "$(fingerprint $(local_data_scripts) "$(corpus_settings)" "${local_data_opts}" "${train_set}" "${valid_set}" "${test_sets}")" prepare_data
if [ -n "${pretrained_checkpoint}" ]; then
    run_stage 2 "ImageNet initialisation" "${cls_exp}/init" "$(fingerprint "${pretrained_checkpoint}" "${cls_config}" "${class_list}")" convert_checkpoint
fi
run_stage 3 "statistics" "${stats_dir}" "$(fingerprint "data/${train_set}/image.scp" "data/${valid_set}/image.scp" "${class_list}" "${cls_config}")" cls_stats
run_stage 4 "training" "${cls_exp}" "$(fingerprint "${stats_dir}/train/image_shape" "${class_list}" "${cls_config}" "${cls_args}" "${pretrained_checkpoint}")" cls_train
run_stage 5 "evaluation" "${cls_exp}/${inference_tag}" "$(fingerprint "${cls_exp}/${inference_model}" "${inference_args}" "${test_sets}")" evaluate
# shellcheck disable=SC2046
run_stage 6 "scoring" "${cls_exp}/${inference_tag}" "$(fingerprint $(test_set_files "${cls_exp}/${inference_tag}" topk))" \
    score_sets score_topk "data/{}/text" "${cls_exp}/${inference_tag}" 1 --topk "${cls_exp}/${inference_tag}/{}/topk"
run_stage 7 "RESULTS.md" "${expdir}" "$(date +%s)" write_results
log "Finished: ${cls_exp}"
