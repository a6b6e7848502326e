#!/usr/bin/env bash
# Speech translation pipeline on ESPnet2's ST task, shared by every egs/<corpus>/st1 recipe.
# The recipe's run.sh sets options and calls this script; local/data.sh prepares Kaldi data dirs
# data/<set>/ with wav.scp (or wav.scp + segments), utt2spk and, all with the same ids,
#   text.<tgt_lang>  the translation (ST output)    text.<src_lang>  the transcript (ESPnet's src_text)
#   text             the transcript again (optional; ESPnet's st.sh keeps Kaldi's name for the source side).
# ESPnet's st.sh names them text.<case>.<lang>; we drop the case part (set it in --src_lang/--tgt_lang if needed).
# Stages (ESPnet's st.sh order, without speed perturbation and LM):
#    1 data preparation (local/data.sh) + data-dir validation (audio decoded)  (utils/speech_stages.sh)
#    2 80-dim fbank features (kaldiio ark/scp, nj parallel jobs)                (utils/speech_stages.sh)
#    3 filtering of the training/validation sets by frames and source/target length (removed ids listed)
#    4 token lists: SentencePiece (or characters) for target and source, or one joint model (--token_joint)
#    5 ST statistics           6 ST training (--asr_init: encoder from an ASR model)
#    7 decoding (st_inference) 8 scoring (BLEU, sacrebleu with its signature)   9 RESULTS.md
# Stage 7 decodes the test sets side by side, every set's jobs submitted at once
# (--parallel_stages false: one after another; for_each_set of utils/pipeline.sh).
# Options a recipe sets (run.sh, through utils/parse_options.sh): --src_lang --tgt_lang, --train_set
# --valid_set --test_sets, --st_config --inference_config (required), --asr_init, --token_joint
# --src_token_type --tgt_token_type --src_nbpe --tgt_nbpe --bpemode, --min_frames --max_frames --max_text_chars,
# --nj --inference_nj --parallel_stages --gpu_inference --ngpu --num_nodes --train_num_threads --cmd_backend, --st_args --task_ids --inference_args
# --st_tag --st_stats_dir --inference_tag --inference_model --bleu_opts, --results_title --results_md --results_notes;
# the declarations below and those of utils/pipeline_options.sh are complete (--help lists them).
# --asr_init FILE starts the ST encoder (and frontend/normalisation, when present) from the ASR model FILE
# (e.g. ../asr1/exp/asr_x/valid.acc.ave.pth, trained on the same features); utils/asr_init.py (a job of stage 6,
# log <st exp>/asr_init.log) refuses a model of another architecture, naming the file and the keys. The decoder
# starts from scratch.
# --smoke true runs every stage with the real configs on a tiny corpus: one update per epoch, model widths / 8,
# soft vocabulary sizes (utils/pipeline.sh, espnet_ext/smoke.py; README "Smoke runs").
set -euo pipefail
command_line="$0$(printf " %q" "$@")"

. utils/pipeline_options.sh sequence speech translation  # the options st.sh shares
valid_set=dev
src_lang=en
tgt_lang=de
st_config=""
st_args=""              # extra arguments for st_train
st_tag=""
st_stats_dir=""         # statistics (stage 5; default ${expdir}/st_stats_<token lists>): one per training set
asr_init=""             # ASR model file whose encoder (+ frontend/normalize) starts the ST model
results_title="ST results"

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh
. utils/speech_stages.sh

require_options st_config inference_config
skip_stages=""
skip_when "${skip_data_prep}" 1 2 3 4
skip_when "${skip_train}" 5 6
skip_when "${skip_eval}" 7 8 9
# shellcheck disable=SC2086  # an adapter model names the trained model it starts from
python -m espnet_ext.bin.check_init --config "${st_config}" -- ${st_args} ${asr_init:+--init_param "${asr_init}"} ||
    exit 1

feats_dir="${dumpdir}/fbank"
train_dir="${feats_dir}/${train_set}_filtered"
valid_dir="${feats_dir}/${valid_set}_filtered"
task_opts=$(task_id_opts "${train_dir}" "${valid_dir}" "${task_ids}")
src_text=text.${src_lang}
tgt_text=text.${tgt_lang}
. utils/translation_tokens.sh
st_tag=${st_tag:-$(basename "${st_config}" .yaml)$([ -z "${asr_init}" ] || echo _asrinit)}
st_exp="${expdir}/st_${st_tag}"
st_stats_dir=${st_stats_dir:-${expdir}/st_stats_$(basename "${src_token_dir}")_$(basename "${tgt_token_dir}")}
inference_tag=${inference_tag:-decode_$(basename "${inference_config}" .yaml)}

data_opts() {  # data_opts train|valid DIR : speech, translation (text) and transcript (src_text)
    echo "--$1_data_path_and_name_and_type $2/feats.scp,speech,kaldi_ark" \
        "--$1_data_path_and_name_and_type $2/${tgt_text},text,text" \
        "--$1_data_path_and_name_and_type $2/${src_text},src_text,text"
}

st_stats() {
    require_files "${train_dir}/feats.scp" "${valid_dir}/feats.scp" "${src_token_list}" "${tgt_token_list}"
    # shellcheck disable=SC2046
    collect_stats espnet_ext.bin.st_train "${st_stats_dir}" "${nj}" "${train_dir}/feats.scp" "${valid_dir}/feats.scp" \
        "${tokenizer_opts[@]}" --config "${st_config}" --input_size "$(cat "${train_dir}/feats_dim")" \
        $(data_opts train "${train_dir}") $(data_opts valid "${valid_dir}") || return 1
    add_token_dim "${st_stats_dir}" "${tgt_token_list}" "${tgt_token_type}" text || return 1
    add_token_dim "${st_stats_dir}" "${src_token_list}" "${src_token_type}" src_text
}

st_train() {
    # checked here, where it is used: the data stages need no ASR model (it may not be trained yet)
    [ -z "${asr_init}" ] || [ -f "${asr_init}" ] || { log "--asr_init ${asr_init}: no such file"; return 1; }
    mkdir -p "${st_exp}"
    local options extra init="" smoke_args
    read -ra extra <<< "$(data_opts train "${train_dir}") $(data_opts valid "${valid_dir}") ${task_opts} ${st_args}"
    local normalize normalize_opts  # the config's normalize, else global_mvn over the statistics
    normalize=$(python -m espnet_ext.bin.normalize_opts --config "${st_config}" \
        --stats_file "${st_stats_dir}/train/feats_stats.npz") || return 1
    read -ra normalize_opts <<< "${normalize}"
    options=("${tokenizer_opts[@]}" --config "${st_config}" --input_size "$(cat "${train_dir}/feats_dim")"
             "${normalize_opts[@]}" "${extra[@]}")
    if [ -n "${asr_init}" ]; then  # the model train_model starts: a smoke run's widths included
        smoke_overrides smoke_args "${options[@]}" || return 1
        # A ${train_cmd} job: it loads the ASR checkpoint and builds the whole ST model (GBs). Its answer, the
        # --init_param options, goes to ${st_exp}/asr_init.opts (written aside and renamed); its messages to the log.
        # shellcheck disable=SC2016  # expanded by the job's shell
        ${train_cmd} "${st_exp}/asr_init.log" bash -c 'out=$1; shift
            python utils/asr_init.py "$@" > "${out}.tmp" && mv "${out}.tmp" "${out}"' asr_init \
            "${st_exp}/asr_init.opts" --asr_model "${asr_init}" -- "${options[@]}" "${smoke_args[@]}" \
            || { log "$(grep -v '^# ' "${st_exp}/asr_init.log" | tail -n 1)"; return 1; }
        init=$(cat "${st_exp}/asr_init.opts")
        log "initialising from the ASR model: ${init}"
    fi
    # shellcheck disable=SC2086
    train_model "${st_exp}/train.log" -- python -m espnet_ext.bin.st_train --use_preprocessor true \
        "${options[@]}" --output_dir "${st_exp}" ${init} \
        --train_shape_file "${st_stats_dir}/train/speech_shape" \
        --train_shape_file "${st_stats_dir}/train/text_shape.${tgt_token_type}" \
        --train_shape_file "${st_stats_dir}/train/src_text_shape.${src_token_type}" \
        --valid_shape_file "${st_stats_dir}/valid/speech_shape" \
        --valid_shape_file "${st_stats_dir}/valid/text_shape.${tgt_token_type}" \
        --valid_shape_file "${st_stats_dir}/valid/src_text_shape.${src_token_type}" \
        --fold_length 800 --fold_length 150 --fold_length 150
}

decode() {  # the test sets side by side (for_each_set)
    require_files "${st_exp}/${inference_model}"
    for_each_set "${test_sets}" decode_one
}

decode_one() {  # decode_one SET
    espnet_decode st "${st_exp}" "$1" "${feats_dir}/$1/feats.scp" "${feats_dir}/$1/feats.scp,speech,kaldi_ark"
}

write_results() {
    write_results_md st 9 \
        "Configs: \`${st_config}\`, \`${inference_config}\`$([ -z "${asr_init}" ] || echo ", encoder from \`${asr_init}\`")."
}

# shellcheck disable=SC2046  # the data preparation's script names
# stage 1 writes data/, shared by every --dumpdir: its marker lives there, so a run that prepared data/
# otherwise makes the next one prepare it again
run_stage 1 "data preparation" "data/.markers/${train_set}" "$(fingerprint $(local_data_scripts) "$(corpus_settings)" "${local_data_opts}" "${train_set}" "${valid_set}" "${test_sets}" "${src_lang}" "${tgt_lang}")" prepare_speech_data --require "${src_text},${tgt_text}"
run_stage 2 "fbank features" "${dumpdir}" "$(fingerprint "data/${train_set}/wav.scp" "data/${valid_set}/${tgt_text}" "${fbank_conf}")" extract_features
run_stage 3 "filtering" "${dumpdir}" "$(fingerprint "${feats_dir}/${train_set}/feats.scp" "${min_frames}" "${max_frames}" "${max_text_chars}")" filter_speech_data --text_names "${src_text},${tgt_text}"
tokens_fp="$(fingerprint "${train_dir}/${src_text}" "${train_dir}/${tgt_text}" "${token_joint}" "${src_token_type}" \
    "${tgt_token_type}" "${src_nbpe}" "${tgt_nbpe}" "${bpemode}" "${src_bpe_opts}" "${tgt_bpe_opts}")"
run_stage 4 "token lists" "${tgt_token_dir}" "${tokens_fp}" make_translation_tokens
run_stage 5 "ST statistics" "${st_stats_dir}" "$(fingerprint "${train_dir}/feats.scp" "${valid_dir}/feats.scp" "${src_token_list}" "${tgt_token_list}" "${st_config}")" st_stats
run_stage 6 "ST training" "${st_exp}" "$(fingerprint "${st_stats_dir}/train/feats_stats.npz" "${src_token_list}" "${tgt_token_list}" "${st_config}" "${task_ids}" "${st_args}" "${asr_init}")" st_train
average_stage 7 "${st_exp}"  # --inference_model last<N>.pth (utils/pipeline.sh)
run_stage 7 "decoding" "${st_exp}/${inference_tag}" "$(fingerprint "${st_exp}/${inference_model}" "${inference_config}" "${inference_args}" "${test_sets}")" decode
# shellcheck disable=SC2086  # the scorer's options
run_stage 8 "scoring" "${st_exp}/${inference_tag}" "$(fingerprint "${test_sets}" "${bleu_opts}" "${st_exp}/${inference_tag}/"*/text)" \
    score_sets score_bleu "${feats_dir}/{}/${tgt_text}" "${st_exp}/${inference_tag}" 3,4 ${bleu_opts}
run_stage 9 "RESULTS.md" "${expdir}" "$(date +%s)" write_results
log "Finished: ${st_exp}"
