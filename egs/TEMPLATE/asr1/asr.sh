#!/usr/bin/env bash
# Speech recognition pipeline on ESPnet2's ASR task, shared by every egs/<corpus>/asr1 recipe, and with
# --input video the lip-reading (VSR) pipeline of egs/<corpus>/vsr1 on our LipReadingTask.
# The recipe's run.sh sets options and calls this script; local/data.sh prepares its Kaldi data dirs
# (speech: wav.scp + text; video: video.scp + text).
# Stages (ESPnet order):
#    1 data preparation (local/data.sh) + data-dir validation
#    2 80-dim fbank features (kaldiio ark/scp, nj parallel jobs); video: every video decoded, frame counts (a
#      rerun counts only the parts of the split that were not counted, or whose videos changed)
#    3 filtering of the training/validation sets by length (removed ids listed, never silent)
#    4 token list (SentencePiece bpe/unigram, or characters)
#    5 LM text + statistics    6 LM training    7 LM perplexity       (../lm1/lm.sh; --use_lm true)
#    8 ASR statistics          9 ASR training   10 decoding   11 scoring (WER/CER)   12 RESULTS.md
# Self-training (--unlabeled_set SET):
#   13 pseudo-labels: SET decoded by the model of stage 9 (or --pseudo_label_exp's), confident 1-best kept
#      (espnet_ext.data.pseudo_labels) in <dumpdir>/<input>/<SET>_pseudo_<labelling exp>: the labels belong to
#      the labelling model, so runs that share it (a sweep's variants) share them, made once
#   14 a model trained on the training set + the pseudo-labels (stages 8-9 again, experiment <tag>_self_training)
#   15 its decoding + scoring (stages 10-11 again)   16 RESULTS.md
# Training stages (9, 14) take no decoding option into their fingerprint: decoding a trained model with
# other options (--inference_tag, --use_lm, --inference_args) never trains it again.
# Stages 10 and 15 decode the test sets side by side, every set's jobs submitted at once
# (--parallel_stages false: one after another; for_each_set of utils/pipeline.sh).
# --smoke true runs every stage with the real configs on a tiny corpus: one update per epoch, model widths / 8,
# soft vocabulary sizes (utils/pipeline.sh, espnet_ext/smoke.py; README "Smoke runs").
set -euo pipefail
command_line="$0$(printf " %q" "$@")"

. utils/pipeline_options.sh sequence speech attention_variants lm_fusion  # the options asr.sh shares
valid_set=dev
token_type=bpe          # bpe (SentencePiece) or char
nbpe=100
bpemode=unigram
bpe_opts=""             # extra options for espnet_ext.text.token_list
token_list_dir=""       # the token list (tokens.txt [+ bpe.model]; stage 4 makes it); default
                        # data/token_list/<train_set>/<bpe_<bpemode><nbpe>|char>: one per training set (as ESPnet's
                        # per-language lists), so setups of one recipe dir (LibriSpeech 100 h, 960 h) keep theirs
input=speech            # speech (fbank features, asr_train) or video (grey mouth crops, vsr_train/vsr_inference)
asr_config=""
asr_args=""             # extra arguments for asr_train / vsr_train
avhubert_checkpoint=""  # video: fairseq AV-HuBERT checkpoint initialising the front-end and encoder
unlabeled_set=""        # self-training (stages 13-16): the data/<set> to pseudo-label
pseudo_label_exp=""     # the experiment whose model pseudo-labels it (default: this one's, stage 9)
self_training_config="" # stage 14's training config (default: --asr_config), e.g. a self-training schedule
pseudo_min_confidence=""  # pseudo-labels kept when 1-best score / tokens >= this (empty: every non-empty 1-best)
pseudo_label_nj=""      # stage 13's decoding jobs (empty: --inference_nj): ~1M videos need many short jobs, each
                        # resumable (vsr_inference --resume_file), so a time limit costs one job's last video; a
                        # rerun with another number of jobs decodes only what no job decoded (--resume_from)
pseudo_label_max_jobs=""  # at most this many of them at once (the job backend's --max_jobs_run; empty: its own
                          # default: local = CPU count, Slurm = no limit)
pseudo_label_gpu=""     # true/false: stage 13's decoding on one GPU per job (empty: as --gpu_inference)
asr_tag=""
asr_stats_dir=""        # statistics (stage 8; default ${expdir}/asr_stats_<train_set>_<token list name>, as ESPnet's
                        # asr_stats_<feats>_<lang>_<token>): one per config lets trainings of several configs on the
                        # same data run side by side
lm_inference_config=""  # inference config with --use_lm true (default: --inference_config); espresso adds
                        # LM-only decoding options (its EOS threshold) with LM fusion
wer_opts=""             # scoring options of utils/score_wer.py, e.g. "--tokenizer 13a --lowercase --remove_punct"
results_title="ASR results"
print_exp=false         # true: print the experiment dir these options name, and exit

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh
. utils/speech_stages.sh

require_options asr_config inference_config
if [ "${use_lm}" = true ] && [ -n "${lm_inference_config}" ]; then inference_config=${lm_inference_config}; fi
skip_stages=""
skip_when "${skip_data_prep}" 1 2 3 4
skip_when "${skip_train}" 5 6 7 8 9
skip_when "${skip_eval}" 10 11 12 15 16
# shellcheck disable=SC2086  # an adapter model names the trained model it starts from
python -m espnet_ext.bin.check_init --config "${asr_config}" -- ${asr_args} || exit 1

case ${input} in
    speech) feats_dir="${dumpdir}/fbank" input_scp=feats.scp input_name=speech input_type=kaldi_ark
            train_module=espnet_ext.bin.asr_train exp_kind=asr ;;
    video)  feats_dir="${dumpdir}/video" input_scp=video.scp input_name=video input_type=video
            train_module=espnet_ext.bin.vsr_train exp_kind=vsr ;;
    *) die "--input must be speech or video, not '${input}'" ;;
esac
[ -z "${avhubert_checkpoint}" ] || [ "${input}" = video ] || die "--avhubert_checkpoint needs --input video"
# refused now, not when stage 13 starts after the trainings
[[ ${pseudo_label_nj} =~ ^([1-9][0-9]*)?$ ]] ||
    die "--pseudo_label_nj must be empty or a positive integer, not '${pseudo_label_nj}'"
[[ ${pseudo_label_max_jobs} =~ ^([1-9][0-9]*)?$ ]] ||
    die "--pseudo_label_max_jobs must be empty or a positive integer, not '${pseudo_label_max_jobs}'"
case ${pseudo_label_gpu} in "" | true | false) ;; *) die "--pseudo_label_gpu must be true, false or empty" ;; esac
token_dir=${token_type}
[ "${token_type}" = bpe ] && token_dir="${token_type}_${bpemode}${nbpe}"
token_dir=${token_list_dir:-data/token_list/${train_set}/${token_dir}}
token_list="${token_dir}/tokens.txt"
bpemodel="${token_dir}/bpe.model"
attention_variant asr "${asr_config}"
asr_args="${variant_args} ${asr_args}"
asr_tag=${asr_tag:-$(basename "${asr_config}" .yaml)${variant_tag}}
asr_exp="${expdir}/${exp_kind}_${asr_tag}"
if [ "${print_exp}" = true ]; then echo "${asr_exp}"; exit 0; fi
# What depends on the token list is named by it: two setups of one recipe dir (LibriSpeech 100 h and 960 h)
# train their own lists, statistics and LMs side by side.
token_name=${train_set}_$(basename "${token_dir}")
asr_stats_dir=${asr_stats_dir:-${expdir}/${exp_kind}_stats_${token_name}}
lm_tag=${lm_tag:-$(basename "${lm_config:-lm}" .yaml)}
lm_exp=${lm_exp:-${expdir}/lm_${lm_tag}_${token_name}}
default_inference_tag
train_dir="${feats_dir}/${train_set}_filtered"
valid_dir="${feats_dir}/${valid_set}_filtered"
asr_args="$(task_id_opts "${train_dir}" "${valid_dir}" "${task_ids}") ${asr_args}"

tokenizer_opts=(--token_type "${token_type}" --token_list "${token_list}" --non_linguistic_symbols none
                --cleaner none)
[ "${input}" = speech ] && tokenizer_opts+=(--g2p none)  # LipReadingTask has no phoneme option
[ "${token_type}" = bpe ] && tokenizer_opts+=(--bpemodel "${bpemodel}")

make_tokens() {
    make_token_list "${token_type}" "${nbpe}" "${token_dir}" "${bpe_opts}" "${train_dir}/text"
}

# model_data_opts: the training/validation data options of ${train_module} (set in ${model_data})
model_data_opts() {
    model_data=()
    local split dir
    for split in train valid; do
        dir=${train_dir}
        [ "${split}" = valid ] && dir=${valid_dir}
        model_data+=("--${split}_data_path_and_name_and_type" "${dir}/${input_scp},${input_name},${input_type}"
                     "--${split}_data_path_and_name_and_type" "${dir}/text,text,text")
    done
    # Speech: fbank dimension (+ global mean/variance normalisation in training); video: the front-end's.
    [ "${input}" = speech ] && model_data+=(--input_size "$(cat "${train_dir}/feats_dim")")
    return 0
}

asr_stats() {
    require_files "${train_dir}/${input_scp}" "${valid_dir}/${input_scp}" "${token_list}"
    model_data_opts
    collect_stats "${train_module}" "${asr_stats_dir}" "${nj}" "${train_dir}/${input_scp}" "${valid_dir}/${input_scp}" \
        "${tokenizer_opts[@]}" --config "${asr_config}" "${model_data[@]}" || return 1
    add_token_dim "${asr_stats_dir}" "${token_list}" "${token_type}"
}

asr_train() {
    local init_opts=()
    mkdir -p "${asr_exp}"
    model_data_opts
    if [ "${input}" = speech ]; then  # the config's normalize, else global_mvn over the statistics
        local normalize normalize_opts
        normalize=$(python -m espnet_ext.bin.normalize_opts --config "${asr_config}" \
            --stats_file "${asr_stats_dir}/train/feats_stats.npz") || return 1
        read -ra normalize_opts <<< "${normalize}"
        model_data+=("${normalize_opts[@]}")
    fi
    if [ -n "${avhubert_checkpoint}" ]; then  # fairseq names -> ours, strictly checked, for --init_param
        local smoke_args=()  # the model train_model builds: a smoke run's widths included
        smoke_overrides smoke_args --config "${asr_config}" || return 1
        ${train_cmd} "${asr_exp}/avhubert_init.log" python -m espnet_ext.nets.avhubert.checkpoint \
            --checkpoint "${avhubert_checkpoint}" --config "${asr_config}" --token_list "${token_list}" \
            --out "${asr_exp}/avhubert_init.pth" -- "${smoke_args[@]}" || return 1
        init_opts=(--init_param "${asr_exp}/avhubert_init.pth")
    fi
    # shellcheck disable=SC2086
    train_model "${asr_exp}/train.log" -- python -m "${train_module}" --use_preprocessor true \
        "${tokenizer_opts[@]}" --config "${asr_config}" --output_dir "${asr_exp}" "${model_data[@]}" "${init_opts[@]}" \
        --train_shape_file "${asr_stats_dir}/train/${input_name}_shape" \
        --train_shape_file "${asr_stats_dir}/train/text_shape.${token_type}" \
        --valid_shape_file "${asr_stats_dir}/valid/${input_name}_shape" \
        --valid_shape_file "${asr_stats_dir}/valid/text_shape.${token_type}" \
        --fold_length 800 --fold_length 150 ${asr_args}
}

# decode SET... : each set's 1-best into ${asr_exp}/${inference_tag}/<set>/text (video: + score), the sets side
# by side (for_each_set). Video jobs keep a journal in DIR/logdir/output.JOB/, which decode_set leaves in place
# (it removes only DIR/text and the key lists): a rerun after a kill decodes only what no job decoded, with
# any split (${inference_nj}): each job also takes its videos' 1-bests from the other jobs' journals
# (--resume_from). The journal's signature (options, model files) makes a rerun with another model decode
# everything, and each entry's video size and time a video replaced at the same path.
decode() {
    local lm_opts=()
    [ "${use_lm}" = true ] && lm_opts=(--lm_train_config "${lm_exp}/config.yaml" --lm_file "${lm_exp}/${inference_lm}")
    require_files "${asr_exp}/${inference_model}"
    for_each_set "$*" decode_one "${lm_opts[@]}"
}

decode_one() {  # decode_one SET [LM OPTIONS...] : decode's work for one set
    local dset=$1 dir="${asr_exp}/${inference_tag}/$1"
    shift
    if [ "${input}" = speech ]; then
        espnet_decode asr "${asr_exp}" "${dset}" "${feats_dir}/${dset}/${input_scp}" \
            "${feats_dir}/${dset}/${input_scp},${input_name},${input_type}" "$@"
    else
        # shellcheck disable=SC2086
        decode_set "${dir}" "${feats_dir}/${dset}/${input_scp}" espnet_ext.bin.vsr_inference \
            output.JOB/text -- --device "${inference_device}" --config "${inference_config}" \
            --data_path_and_name_and_type "${feats_dir}/${dset}/${input_scp},${input_name},${input_type}" \
            --train_config "${asr_exp}/config.yaml" --model_file "${asr_exp}/${inference_model}" \
            "$@" --output_file "${dir}/logdir/output.JOB/text" \
            --score_file "${dir}/logdir/output.JOB/score" --resume_file "${dir}/logdir/output.JOB/journal" \
            --resume_from "${dir}/logdir/output.*/journal" ${inference_args} || return 1
        # decode_set's ${decode_jobs}: this set's, as for_each_set runs all of decode_one in one shell
        merge_shards "${dir}" output.JOB/score "${dir}/score"
    fi
}

score() {
    local wer_args
    read -ra wer_args <<< "${wer_opts}"
    score_sets score_wer "${feats_dir}/{}/text" "${asr_exp}/${inference_tag}" 3,4 "${wer_args[@]}"
}

write_results() {
    local last=12
    [ -z "${unlabeled_set}" ] || last=16
    write_results_md asr "${last}" \
        "Configs: \`${asr_config}\`, \`${inference_config}\`$([ "${use_lm}" = true ] && echo ", LM \`${lm_config}\`")."
}

# Video: tables checked (an unlabeled set needs no text), then every video decoded and counted. As
# prepare_data_dirs, with the unlabeled set checked side by side with the others (for_each_set: one queue wait).
prepare_video_data() {
    # shellcheck disable=SC2086
    ${train_cmd} data/log/data_prep.log local/data.sh ${local_data_opts} || return 1
    for_each_set "$(data_sets "${train_set} ${valid_set} ${test_sets} ${unlabeled_set}")" check_video_set
}
check_video_set() {  # check_video_set SET : prepare_video_data's job for one set (log data/log/validate_SET.log)
    local require=text,video.scp
    case " ${train_set} ${valid_set} ${test_sets} " in *" $1 "*) ;; *) require=video.scp ;; esac  # unlabeled
    ${train_cmd} "data/log/validate_$1.log" \
        python -m espnet_ext.data.datadir validate "data/$1" --require "${require}"
}

# Each set's video.scp split over ${nj} jobs (VoxCeleb2-en's ~1M .mp4 clips take days in one), each counting
# its part's frames (logdir ${feats_dir}/log/videos_<set>/), merged into ${feats_dir}/<set> by one more job.
# A part counted before is kept: its job finds the signature of its keys (their videos' paths, sizes, times)
# in it and exits, so a rerun after a failed or killed job counts only the parts not counted, or whose
# videos changed. A part of another split (--nj) has other keys, so it is counted again; those past this
# split's last are removed (the merge takes only this split's parts anyway). The sets side by side
# (for_each_set; in turn with --parallel_stages false): each writes only its logdir and ${feats_dir}/<set>.
check_videos() {
    for_each_set "$(data_sets "${train_set} ${valid_set} ${test_sets} ${unlabeled_set}")" check_set_videos
}

check_set_videos() {  # check_set_videos SET : check_videos' split, jobs and merge of one set
    local dset=$1 logdir="${feats_dir}/log/videos_$1" n parts part k
    n=$(split_keys "data/${dset}/video.scp" "${logdir}" "${nj}") || return 1
    for part in "${logdir}"/frames.*; do
        k=${part##*/frames.}
        if ! [[ ${k} =~ ^[1-9][0-9]*$ ]] || [ "${k}" -gt "${n}" ]; then
            rm -f "${part}" "${logdir}/videos.${k}.log"
        fi
    done
    ${train_cmd} JOB=1:"${n}" "${logdir}/videos.JOB.log" \
        python -m espnet_ext.bin.vsr_prepare --data_dir "data/${dset}" --key_file "${logdir}/keys.JOB.scp" \
            --part_out "${logdir}/frames.JOB" || return 1
    mapfile -t parts < <(seq -f "${logdir}/frames.%g" "${n}")
    ${train_cmd} "${feats_dir}/log/videos_${dset}.log" python -m espnet_ext.bin.vsr_prepare \
        --data_dir "data/${dset}" --out_dir "${feats_dir}/${dset}" --parts "${parts[@]}"
}

# Self-training. The pseudo-labelled set joins the (filtered) training set; a second model is trained on it.
label_exp=${pseudo_label_exp:-${asr_exp}}  # e.g. the baseline's model for every variant
pseudo_dir="${feats_dir}/${unlabeled_set}_pseudo_$(basename "${label_exp}")"
self_train_dir="${feats_dir}/${train_set}_filtered_self_${asr_tag}"

# The unlabeled set is decoded in ${pseudo_label_nj} jobs, on GPUs with --pseudo_label_gpu true: decode and
# decode_set read these locals (bash locals are dynamic). Neither changes a label, so neither is in stage 13's
# fingerprint, nor in the journals' signature: a rerun after a kill, with another --pseudo_label_nj too, decodes
# only the videos that no job decoded (vsr_inference --resume_from).
pseudo_label() {
    local asr_exp=${label_exp} inference_nj=${pseudo_label_nj:-${inference_nj}} decode_cmd=${decode_cmd} cuda_cmd=${cuda_cmd}
    local inference_ngpu=${inference_ngpu} inference_device=${inference_device}
    case ${pseudo_label_gpu} in
        true) inference_ngpu=1 inference_device=cuda ;;
        false) inference_ngpu=0 inference_device=cpu ;;
    esac
    if [ -n "${pseudo_label_max_jobs}" ]; then
        decode_cmd+=" --max_jobs_run ${pseudo_label_max_jobs}" cuda_cmd+=" --max_jobs_run ${pseudo_label_max_jobs}"
    fi
    decode "${unlabeled_set}" || return 1
    ${train_cmd} "${pseudo_dir}.log" python -m espnet_ext.data.pseudo_labels \
        --data_dir "${feats_dir}/${unlabeled_set}" --decode_dir "${asr_exp}/${inference_tag}/${unlabeled_set}" \
        --out_dir "${pseudo_dir}" ${pseudo_min_confidence:+"--min_confidence=${pseudo_min_confidence}"}
}

self_train() {  # the stage functions see the second model's directories (bash locals are dynamic)
    rm -rf "${self_train_dir}"
    ${train_cmd} "${self_train_dir}.log" python -m espnet_ext.data.datadir combine "${self_train_dir}" \
        "${train_dir}" "${pseudo_dir}" || return 1
    local train_dir=${self_train_dir} asr_stats_dir="${asr_stats_dir}_self_${asr_tag}"
    local asr_exp="${asr_exp}_self_training" asr_config="${self_training_config:-${asr_config}}"
    asr_stats && asr_train
}

self_decode() {
    local asr_exp="${asr_exp}_self_training"
    # shellcheck disable=SC2086
    decode ${test_sets} && score
}

# decode_fp EXP : the fingerprint of decoding EXP's model with this invocation's decoding options
decode_fp() {
    fingerprint "$1/${inference_model}" "${inference_config}" "${inference_args}" "${test_sets}" "${use_lm}" \
        "${lm_exp}/${inference_lm}" "${token_list}"
}

data_fp="$(fingerprint $(local_data_scripts) "$(corpus_settings)" "${local_data_opts}" "${train_set}" "${valid_set}" "${test_sets}" "${unlabeled_set}")"
# Stage 1 writes data/, which every --dumpdir of the recipe shares: its marker lives there, so a run that
# prepared data/ otherwise (another --local_data_opts, another --dumpdir) makes the next one prepare it again.
data_markers="data/.markers/${train_set}"
if [ "${input}" = speech ]; then
    run_stage 1 "data preparation" "${data_markers}" "${data_fp}" prepare_speech_data
    run_stage 2 "fbank features" "${dumpdir}" "$(fingerprint "data/${train_set}/wav.scp" "data/${valid_set}/text" ${fbank_conf})" extract_features
else
    run_stage 1 "data preparation" "${data_markers}" "${data_fp}" prepare_video_data
    # after the data stage's marker (data_fp itself walks the corpus only when stage 1 runs)
    run_stage 2 "video checks" "${dumpdir}" "$(fingerprint "${data_markers}/.stages/stage1.done" "data/${train_set}/video.scp" "data/${valid_set}/text")" check_videos
fi
run_stage 3 "filtering" "${dumpdir}" "$(fingerprint "${feats_dir}/${train_set}/${input_scp}" "${min_frames}" "${max_frames}" "${max_text_chars}")" filter_speech_data
run_stage 4 "token list" "${token_dir}" "$(fingerprint "${train_dir}/text" "${nbpe}" "${bpemode}" ${bpe_opts})" make_tokens
lm_stages 5 "${train_dir}/text" "${valid_dir}/text" "$(for t in ${test_sets}; do printf '%s ' "${feats_dir}/${t}/text"; done)" \
    "${token_type}" "${token_list}" "${expdir}/lm_stats_${lm_tag}_${token_name}"  # --use_lm true
run_stage 8 "ASR statistics" "${asr_stats_dir}" "$(fingerprint "${train_dir}/${input_scp}" "${valid_dir}/${input_scp}" "${token_list}" "${asr_config}")" asr_stats
run_stage 9 "ASR training" "${asr_exp}" "$(fingerprint "${asr_stats_dir}/train/${input_name}_shape" "${asr_stats_dir}/train/feats_stats.npz" "${token_list}" "${asr_config}" "${asr_args}" "${avhubert_checkpoint}")" asr_train
average_stage 10 "${asr_exp}"  # --inference_model last<N>.pth (utils/pipeline.sh)
run_stage 10 "decoding" "${asr_exp}/${inference_tag}" "$(decode_fp "${asr_exp}")" decode ${test_sets}
run_stage 11 "scoring" "${asr_exp}/${inference_tag}" "$(fingerprint ${wer_opts:+"wer_opts=${wer_opts}"} $(test_set_files "${asr_exp}/${inference_tag}" text))" score
run_stage 12 "RESULTS.md" "${expdir}" "$(date +%s)" write_results
if [ -n "${unlabeled_set}" ]; then
    [ "${input}" = video ] || die "--unlabeled_set (self-training) needs --input video"
    # Stage 13's marker and fingerprint are the labelling model's, not this run's: another run with the same
    # labelling model and decoding options finds the labels made.
    run_stage 13 "pseudo-labels of ${unlabeled_set}" "${pseudo_dir}" "$(fingerprint "${label_exp}/${inference_model}" "${feats_dir}/${unlabeled_set}/video.scp" "${inference_config}" "${inference_args}" "${use_lm}" "${lm_exp}/${inference_lm}" "${pseudo_min_confidence}")" pseudo_label
    run_stage 14 "self-training" "${asr_exp}_self_training" "$(fingerprint "${train_dir}/text" "${pseudo_dir}/text" "${token_list}" "${self_training_config:-${asr_config}}" "${asr_args}" "${avhubert_checkpoint}")" self_train
    average_stage 15 "${asr_exp}_self_training"
    run_stage 15 "self-trained model: decoding + scoring" "${asr_exp}_self_training/${inference_tag}" "$(decode_fp "${asr_exp}_self_training")" self_decode
    run_stage 16 "RESULTS.md" "${expdir}" "$(date +%s)" write_results
fi
log "Finished: ${asr_exp}"
