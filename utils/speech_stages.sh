#!/usr/bin/env bash
# Speech data stages shared by the speech pipelines (asr.sh, st.sh); sourced after utils/pipeline.sh.
# They read the pipeline's options: ${train_set} ${valid_set} ${test_sets} ${feats_dir} ${nj} ${fbank_conf}
# ${local_data_opts} ${min_frames} ${max_frames} ${max_text_chars}.
#   prepare_speech_data [VALIDATE_OPTIONS...]  local/data.sh, then every set validated (audio decoded)
#   extract_features                           fbank of every set into ${feats_dir}/<set> (all tables copied)
#   filter_speech_data [FILTER_OPTIONS...]     ${feats_dir}/<train|valid>_filtered, by frames and text length
# Each works on the sets side by side (utils/pipeline.sh for_each_set: every set's jobs queued at once, mTEDx's 15+
# sets in one queue wait, not one each; in turn with --parallel_stages false), as no set's step reads another's
# output: each writes only its set's directory and logs. A set named twice (--test_sets "dev test") is done once.
# The pipeline that sources this file sets the options read here (see above).
# shellcheck disable=SC2154

prepare_speech_data() {
    prepare_data_dirs python -m espnet_ext.data.datadir validate "data/{}" --check_audio "$@"
}

extract_features() {
    for_each_set "$(data_sets "${train_set} ${valid_set} ${test_sets}")" _extract_set
}
_extract_set() {  # _extract_set SET : the fbank jobs of one set, then their merge (feats.scp written last)
    local dset=$1 out="${feats_dir}/$1"
    # shellcheck disable=SC2086
    ${train_cmd} JOB=1:"${nj}" "${out}/log/fbank.JOB.log" \
        python -m espnet_ext.features.fbank compute --data_dir "data/${dset}" --out_dir "${out}" \
            --nj "${nj}" --job JOB ${fbank_conf} || return 1
    ${train_cmd} "${out}/log/merge.log" \
        python -m espnet_ext.features.fbank merge --data_dir "data/${dset}" --out_dir "${out}" --nj "${nj}"
}

# the validation set's filter reads the validation set only (not the filtered training set): side by side
filter_speech_data() {
    for_each_set "$(data_sets "${train_set} ${valid_set}")" _filter_set "$@"
}
_filter_set() {  # _filter_set SET [FILTER_OPTIONS...] : ${feats_dir}/SET_filtered (built aside and renamed)
    local dset=$1
    shift
    rm -rf "${feats_dir}/${dset}_filtered"
    ${train_cmd} "${feats_dir}/log/filter_${dset}.log" \
        python -m espnet_ext.data.filter "${feats_dir}/${dset}" "${feats_dir}/${dset}_filtered" \
            --min_frames "${min_frames}" --max_frames "${max_frames}" --max_text_chars "${max_text_chars}" "$@"
}
