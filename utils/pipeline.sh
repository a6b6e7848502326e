#!/usr/bin/env bash
# Shared stage machinery for egs/TEMPLATE pipelines (sourced, after parse_options.sh).
#
# A stage runs when stage <= N <= stop_stage. It is skipped when its completion marker holds the same
# fingerprint (options + input files), so reruns are cheap and a changed config or input redoes the work.
# The marker is written only after the stage function returned 0; a failure removes it and exits.
# Fingerprints are computed on every invocation: files of 64 MiB or more are hashed once per version
# (file_digest, cached in exp/.file_digests by path, size, time and inode), then only stat-ed.
#
# Dry run (PIPELINE_DRY_RUN=DIR in the environment; python -m espnet_ext.analysis.sweep run --dry_run sets
# it): no stage function runs, and the recipe's markers are read, never written. A stage that would run (by
# the fingerprint decision above) is appended to DIR/stages.tsv ("N<TAB>title<TAB>marker dir") and recorded
# as done in DIR/markers/<absolute marker path>, which later invocations of the same dry run read before the
# recipe's marker: a sequence of invocations is planned as if each had run.
#
# Smoke run (--smoke true, an option of every pipeline; README "Smoke runs"): the real configs and options on a
# tiny corpus, changing only what it forces (espnet_ext/smoke.py: one update per epoch, few epochs, model widths
# / 8, soft vocabulary sizes). ESPNET_EXT_SMOKE=true is exported, so the pipelines, jobs and helpers a run starts
# are smoke runs too; every stage fingerprint says "smoke", so a real run never takes a smoke run's outputs.
#
# Stages side by side (${parallel_stages}: true runs them in the background, false in turn; default true):
#   spawn GROUP CMD...                          CMD (e.g. run_stage ...) in the background, pid in array GROUP
#   wait_all GROUP                              every command of GROUP has ended; 1 if one of them failed
#   for_each_set "SETS" FUNC [ARGS...]          FUNC SET ARGS... for every set of SETS, spawned; fails naming them
# A pipeline that exits (a stage died) stops the commands it still runs in the background, with their children.
# Shared stage steps:
#   require_options NAME...                     every --NAME is given (not empty), else exit naming the first
#   skip_when FLAG STAGE...                     a --skip_* flag: STAGE... join ${skip_stages} if FLAG is true
#   prepare_data_dirs CHECK...                  stage 1: local/data.sh, then every set checked by CHECK, side by side
#   data_sets "SETS"                            the names of SETS, each once: a data stage's for_each_set list
#   split_keys [--lines] SCP DIR NJ             SCP's ids (--lines: lines) round-robin into DIR/keys.{1..n}.scp
#   clear_job_dir DIR                           rm -rf DIR, refused while an earlier run's Slurm job runs there
#   as_job LOG FUNCTION ARGS...                 a shell function of the pipeline run as one ${train_cmd} job
#   local_data_scripts                          local/data.sh and the utils/*.sh it sources (stage 1's fingerprint)
#   average_stage N EXP                         --inference_model last<N>.pth from EXP's last N epochs
#   lm_stages N TRAIN DEV "TESTS" TYPE LIST STATS  --use_lm true: stages N..N+2 train ${lm_exp} with ../lm1/lm.sh
#   attention_variant TASK CONFIG               --attention_variant: ${variant_tag}, ${variant_args} for training
#   default_inference_tag                       ${inference_tag} decode_<config>[_lm_<tag>][_matched] unless given
#   task_id_opts TRAIN VALID "NAME=TABLE ..."   --task_ids: the training's data options of the task id tables
#   split_training_data LOG DIR N FILE NAME...  ESPnet's --num_splits_*: training tables in N parts (a job)
#   split_train_opts ARRAY EXP N                a training's options (ARRAY) on EXP/splitsN + --multiple_iterator
# Evaluation (every pipeline's decoding and scoring stages):
#   decode_set DIR KEYS MODULE HYP -- ARGS...   sharded decoding of one test set into DIR/text
#   espnet_decode TASK EXP SET KEYS DATA [ARGS...]  decode_set by ESPnet's TASK_inference (asr, mt, st)
#   merge_shards DIR PATTERN OUT                 per-job outputs of the last decode_set -> OUT, atomically
#   score_set SCORER REF DIR LINES [ARGS...]    utils/SCORER.py on DIR/text -> DIR/SCORER/result.txt
#   score_sets SCORER REF DIR LINES [ARGS...]   score_set of every test set's DIR/<set> ("{}": the set's name)
#   test_set_files DIR NAME                     DIR/<set>/NAME of every test set (a scoring stage's inputs)
#   write_results_md SCAN LAST NOTES            ${results_md}: the scored decodings of ${expdir}, NOTES, wall time
# They need ${decode_cmd}, ${train_cmd} (cmd.sh), ${inference_nj} and ${test_sets}; write_results_md needs
# ${command_line} and the options ${results_title} ${results_md} ${results_notes} (utils/pipeline_options.sh). --gpu_inference true (ESPnet's option):
# each decoding job is a ${cuda_cmd} job given one GPU (--gpu 1, which Slurm requests), and the pipelines pass
# ${inference_ngpu} (ESPnet's --ngpu) or ${inference_device} (our image/video decoders' --device) to it.
# The pipeline that sources this file sets the options read here (see above).
# shellcheck disable=SC2154

log() {
    local fname=${BASH_SOURCE[1]##*/}
    echo -e "$(date '+%Y-%m-%dT%H:%M:%S') (${fname}:${BASH_LINENO[0]}:${FUNCNAME[1]}) $*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

if [ "${smoke:-false}" = true ] || [ "${ESPNET_EXT_SMOKE:-false}" = true ]; then
    smoke=true
    export ESPNET_EXT_SMOKE=true
else
    smoke=false
fi

# shellcheck disable=SC2034  # inference_device: read by the pipelines' image and video decoding commands
case ${gpu_inference:-false} in
    true) inference_ngpu=1 inference_device=cuda ;;
    false) inference_ngpu=0 inference_device=cpu ;;
    *) die "--gpu_inference must be true or false, not '${gpu_inference}'" ;;
esac

# fingerprint WORD... : hash of the words, and of the contents of those that are existing files (file_digest)
fingerprint() {
    local w
    for w in "$@"; do
        printf '%s\n' "${w}"
        if [ -f "${w}" ]; then file_digest "${w}"; fi
    done | sha256sum | cut -c1-16
}

# file_digest FILE : what "sha256sum < FILE" prints. Every stage's fingerprint is computed on every invocation,
# in range or not, so a file of DIGEST_CACHE_BYTES or more (WMT's texts, the LM corpus: GBs) is hashed once
# per (path, size, modification time to the nanosecond, inode, device) and its digest kept in
# ${FILE_DIGEST_CACHE} (appended lines; the last one of a key wins): later invocations stat it instead.
DIGEST_CACHE_BYTES=${DIGEST_CACHE_BYTES:-67108864}
FILE_DIGEST_CACHE=${FILE_DIGEST_CACHE:-exp/.file_digests}
file_digest() {
    local file=$1 key digest=""
    if [ "$(stat -L -c %s "${file}")" -lt "${DIGEST_CACHE_BYTES}" ]; then
        sha256sum < "${file}"
        return
    fi
    key="$(realpath "${file}")"$'\t'"$(stat -L -c '%s %y %i %d' "${file}")"
    if [ -f "${FILE_DIGEST_CACHE}" ]; then
        digest=$(awk -F '\t' -v key="${key}" '$1 "\t" $2 == key { d = $3 } END { print d }' "${FILE_DIGEST_CACHE}")
    fi
    if [ -z "${digest}" ]; then
        digest=$(sha256sum < "${file}")
        mkdir -p "$(dirname "${FILE_DIGEST_CACHE}")"
        printf '%s\t%s\n' "${key}" "${digest}" >> "${FILE_DIGEST_CACHE}"
    fi
    printf '%s\n' "${digest}"
}

# run_stage N TITLE MARKER_DIR FINGERPRINT FUNCTION [ARGS...]
# Stages listed in ${skip_stages} (set from --skip_* flags) do not run either.
run_stage() {
    local n=$1 title=$2 marker_dir=$3 fp=$4
    shift 4
    [ "${n}" -ge "${stage}" ] && [ "${n}" -le "${stop_stage}" ] || return 0
    [ "${smoke}" = false ] || fp+=" smoke"
    case " ${skip_stages:-} " in *" ${n} "*) log "Stage ${n}: ${title}: skipped"; return 0 ;; esac
    local marker="${marker_dir}/.stages/stage${n}.done" found planned=""
    found=${marker}
    if [ -n "${PIPELINE_DRY_RUN:-}" ]; then
        planned="${PIPELINE_DRY_RUN}/markers$(realpath -m "${marker}")"
        [ -f "${planned}" ] && found=${planned}
    fi
    if [ -f "${found}" ] && [ "$(cat "${found}")" = "${fp}" ]; then
        log "Stage ${n}: ${title}: already done (remove ${marker} to redo)"
        return 0
    fi
    if [ -n "${planned}" ]; then
        log "Stage ${n}: ${title}: would run (dry run)"
        printf '%s\t%s\t%s\n' "${n}" "${title}" "$(realpath -m "${marker_dir}")" >> "${PIPELINE_DRY_RUN}/stages.tsv"
        mkdir -p "$(dirname "${planned}")" && echo "${fp}" > "${planned}"
        return 0
    fi
    rm -f "${marker}"
    log "Stage ${n}: ${title}"
    local start=${SECONDS}
    stage_fingerprint=${fp}  # for train_model's resume check
    if ! "$@"; then
        die "Stage ${n} (${title}) failed; the log named above says why"
    fi
    mkdir -p "$(dirname "${marker}")"
    echo "${fp}" > "${marker}.tmp" && mv "${marker}.tmp" "${marker}"
    log "Stage ${n}: ${title}: done in $((SECONDS - start)) s"
}

spawn() {
    # shellcheck disable=SC2178  # a nameref to the caller's array
    local -n group=$1
    shift
    if [ "${parallel_stages:-true}" = true ]; then "$@" & group+=($!); else "$@"; fi
}

wait_all() {
    # shellcheck disable=SC2178  # a nameref to the caller's array
    local -n group=$1
    local pid failed=0
    for pid in "${group[@]}"; do wait "${pid}" || failed=1; done
    group=()
    return "${failed}"
}

# for_each_set "SETS" FUNC [ARGS...] : FUNC SET ARGS... for every set of SETS (names, e.g. "${test_sets}"), each
# spawned (above): side by side, so that a cluster gets every set's job array at once instead of one set's queue
# wait after another, and waited for; in turn with --parallel_stages false. Each FUNC runs whole in one (background)
# shell, so what it sets (decode_set's ${decode_jobs}) is its own set's; it sees its callers' locals (bash locals
# are dynamic). Fails when a set failed, after every other set ended (no set is stopped: its output is valid),
# logging which sets failed; in turn it stops at the first, as a loop would: a rerun redoes the whole stage.
# Side by side with the local backend (utils/run.py), the sets share the machine's CPUs: each set's runner runs
# at most its share of jobs at once (local_cpu_share), as many in all as one set alone would.
for_each_set() {
    # _-prefixed: FUNC, run in this function (in turn), would see a caller's variable of the same name hidden
    local _sets=$1 _func=$2 _set _i _pids=() _spawned=() _failed=() _share
    shift 2
    _share=$(local_cpu_share "${_sets}")
    for _set in ${_sets}; do
        if ! spawn _pids _with_cpu_share "${_share}" "${_func}" "${_set}" "$@"; then  # in turn: FUNC's status
            _failed+=("${_set}")
            break
        fi
        [ "${#_pids[@]}" = "${#_spawned[@]}" ] || _spawned+=("${_set}")  # side by side: its pid was added
    done
    for _i in "${!_pids[@]}"; do
        wait "${_pids[_i]}" || _failed+=("${_spawned[_i]}")
    done
    [ "${#_failed[@]}" = 0 ] || { log "ERROR: ${_func} failed for the set(s): ${_failed[*]}"; return 1; }
}

# local_cpu_share "SETS" : with the local backend and sets side by side, each set's share of the CPUs this
# pipeline may use (espnet_ext/jobs/local.py: a runner runs at most ESPNET_EXT_LOCAL_CPUS jobs at once), so that
# 13 test sets of 32 decoding jobs each do not start 13 x nproc decoders; empty otherwise (a cluster queues them).
local_cpu_share() {
    [ "${parallel_stages:-true}" = true ] && [ "${cmd_backend:-local}" = local ] || return 0
    local n cpus
    n=$(wc -w <<< "$1")
    cpus=${ESPNET_EXT_LOCAL_CPUS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}
    [ "${n}" -gt 1 ] || { echo "${cpus}"; return 0; }
    echo $(( cpus / n > 0 ? cpus / n : 1 ))
}
_with_cpu_share() {  # _with_cpu_share SHARE CMD... : CMD with the local runners' CPU share SHARE (empty: as is)
    local _cpu_share=$1  # _-prefixed: CMD sees this function's locals
    shift
    if [ -n "${_cpu_share}" ]; then ESPNET_EXT_LOCAL_CPUS=${_cpu_share} "$@"; else "$@"; fi
}

kill_tree() {  # kill_tree PID: PID and every process below it
    local child
    for child in $(pgrep -P "$1"); do kill_tree "${child}"; done
    kill "$1" 2>/dev/null || true
}
# a rerun would otherwise find a training of the dead run still writing in its directory
trap 'for pid in $(jobs -pr); do kill_tree "${pid}"; done' EXIT

# require_options NAME... : each of the options NAME... set (not empty); else exit, naming the first that is not
require_options() {
    local name
    for name in "$@"; do [ -n "${!name}" ] || die "--${name} is required"; done
}

# skip_when FLAG STAGE... : STAGE... join ${skip_stages} when FLAG (the value of a --skip_* option) is true;
# it is compared with "true", so no value is ever run as a command
skip_when() {
    local flag=$1
    shift
    if [ "${flag}" = true ]; then skip_stages="${skip_stages:-} $*"; fi
}

# prepare_data_dirs CHECK... : a pipeline's data preparation. local/data.sh ${local_data_opts} (a ${train_cmd}
# job, log data/log/data_prep.log), then each of ${train_set} ${valid_set} ${test_sets} (data_sets: a set named
# twice is checked once) checked by the ${train_cmd} job CHECK..., every "{}" in its words replaced by the set's
# name (log data/log/validate_<set>.log). The checks only read their set, so they run side by side (for_each_set:
# one queue wait for all of them on a cluster), failing after every set ended, naming the sets that failed; in
# turn with --parallel_stages false, stopping at the first that fails.
prepare_data_dirs() {
    # shellcheck disable=SC2086
    ${train_cmd} data/log/data_prep.log local/data.sh ${local_data_opts} || return 1
    for_each_set "$(data_sets "${train_set} ${valid_set} ${test_sets}")" _check_set "$@"
}
_check_set() {  # _check_set SET CHECK... : prepare_data_dirs' check of one set
    local dset=$1
    shift
    ${train_cmd} "data/log/validate_${dset}.log" "${@//\{\}/${dset}}"
}

# data_sets "SETS" : the set names of SETS (e.g. "${train_set} ${valid_set} ${test_sets}"), each once, in their
# order, on one line: the list for a data stage's for_each_set. A set named twice (LibriSpeech's --valid_set dev
# --test_sets "dev test") must not be prepared twice side by side, two job arrays writing one directory.
data_sets() {
    # shellcheck disable=SC2086  # the names, one word each
    printf '%s\n' $1 | awk 'NF && !seen[$0]++' | paste -sd ' ' -
}

# task_id_opts TRAIN_DIR VALID_DIR "NAME=TABLE ..." : the training's data options for per-utterance task ids (the
# pipelines' --task_ids): each integer table TABLE of both data dirs read as the model input NAME (text_int);
# nothing when there is none. Prepended to the training options, so they join the training's fingerprint.
task_id_opts() {
    [ -n "$3" ] || return 0
    local part dir pair opts="--allow_variable_data_keys true"
    for part in train valid; do
        dir=$1
        [ "${part}" = train ] || dir=$2
        for pair in $3; do
            [[ ${pair} == ?*=?* ]] || { log "ERROR: --task_ids: '${pair}' is not NAME=TABLE"; return 1; }
            opts+=" --${part}_data_path_and_name_and_type ${dir}/${pair#*=},${pair%%=*},text_int"
        done
    done
    echo "${opts}"
}

# require_files FILE... : fail naming the first missing input (typically a skipped earlier stage)
require_files() {
    local f
    for f in "$@"; do
        [ -e "${f}" ] || die "missing ${f}: run the stage that makes it first"
    done
}

# split_keys [--lines] SCP OUT_DIR NJ : round-robin split of the ids of a Kaldi table (its first column) into
# OUT_DIR/keys.{1..n}.scp; prints n (n = min(NJ, number of lines), so no job gets an empty list). Ids only: every
# job given a key file reads only its first column (ESPnet's --key_file, and its --*_shape_file in
# --collect_stats mode: read_2columns_text / IterableESPnetDataset take a line with an id alone; our inference
# entry points, lego_ctc_decode; vsr_inference, which takes its videos from the data's video.scp; vsr_prepare), so
# a text table (mt.sh's statistics take the target text: GBs for WMT) is not copied into every split.
# --lines: whole lines, for a job that reads its split as the table itself (ocr.sh's image checks: the paths).
split_keys() {
    local whole=0
    if [ "$1" = --lines ]; then whole=1; shift; fi
    local scp=$1 out_dir=$2 nj=$3 lines
    lines=$(wc -l < "${scp}")
    [ "${lines}" -gt 0 ] || die "${scp} is empty"
    [ "${nj}" -le "${lines}" ] || nj=${lines}
    # Written aside, then each part moved in only when it changed: a job of an earlier run that a rerun waits for
    # (utils/slurm.py) may start reading its part meanwhile, and must never find it missing or half written.
    local split="${out_dir}/.keys.tmp" i
    rm -rf "${split}" && mkdir -p "${split}"
    awk -v n="${nj}" -v d="${split}" -v whole="${whole}" \
        '{ print (whole ? $0 : $1) > (d "/keys." ((NR - 1) % n + 1) ".scp") }' "${scp}" || return 1
    for i in $(seq "${nj}"); do
        cmp -s "${split}/keys.${i}.scp" "${out_dir}/keys.${i}.scp" ||
            mv "${split}/keys.${i}.scp" "${out_dir}/keys.${i}.scp"
    done
    rm -rf "${split}"
    for i in "${out_dir}"/keys.*.scp; do  # parts of a split into more jobs
        i=${i##*/keys.}
        if ! [[ ${i%.scp} =~ ^[0-9]+$ ]] || [ "${i%.scp}" -gt "${nj}" ]; then rm -f "${out_dir}/keys.${i}"; fi
    done
    echo "${nj}"
}

# as_job LOG FUNCTION ARGS... : the shell function FUNCTION (self-contained: it calls no other function of the
# pipeline) run with ARGS as one ${train_cmd} job, log LOG: a step that reads GBs (an LM text, a corpus' tables,
# its shape files) belongs on a compute node, not on the node running the pipeline.
as_job() {
    ${train_cmd} "$1" bash -c "set -euo pipefail; export LC_ALL=C; $(declare -f "$2"); $2 \"\$@\"" "$2" "${@:3}"
}

# clear_job_dir DIR : remove DIR, a stage's directory of job logs, unless a Slurm job an earlier run submitted
# there (its record DIR/**/q/<name>.job) is still pending or running: removing its logs and record would make
# this run submit the same work beside it (espnet_ext.jobs.running names it and how to end it).
clear_job_dir() {
    if [ -n "$(find "$1" -path '*/q/*.job' -print -quit 2>/dev/null)" ]; then
        python -m espnet_ext.jobs.running "$1" || return 1
    fi
    rm -rf "$1"
}

# collect_stats MODULE STATS_DIR NJ TRAIN_KEYS VALID_KEYS ARGS... : ESPnet2's --collect_stats, split over NJ
# jobs of ${train_cmd} and aggregated (shape files and feature statistics for batching and normalisation).
collect_stats() {
    local module=$1 stats_dir=$2 nj=$3 train_keys=$4 valid_keys=$5
    shift 5
    local logdir="${stats_dir}/logdir" n_train smoke_args=()
    # A smoke run's statistics come from the model it trains (ESPnet builds it to collect them): building the
    # real-size one costs a tiny corpus' stage most of its time.
    smoke_overrides smoke_args "$@" || return 1
    clear_job_dir "${logdir}" || return 1
    # Both key lists in the same number of parts: at most as many as the shorter has lines (read once each)
    local keys lines
    n_train=${nj}
    for keys in "${train_keys}" "${valid_keys}"; do
        require_files "${keys}" || return 1
        lines=$(wc -l < "${keys}")
        [ "${lines}" -ge "${n_train}" ] || n_train=$(( lines > 0 ? lines : 1 ))  # split_keys names an empty one
    done
    n_train=$(split_keys "${train_keys}" "${logdir}/train" "${n_train}") || return 1
    split_keys "${valid_keys}" "${logdir}/valid" "${n_train}" > /dev/null || return 1
    # shellcheck disable=SC2086
    ${train_cmd} JOB=1:"${n_train}" "${logdir}/stats.JOB.log" \
        python -m "${module}" --collect_stats true --use_preprocessor true \
            --train_shape_file "${logdir}/train/keys.JOB.scp" \
            --valid_shape_file "${logdir}/valid/keys.JOB.scp" \
            --output_dir "${logdir}/stats.JOB" "$@" "${smoke_args[@]}" || return 1
    local inputs=()
    for i in $(seq "${n_train}"); do inputs+=(--input_dir "${logdir}/stats.${i}"); done
    # a job: it reads every part's shape files (tens of millions of lines for WMT or the LM text)
    ${train_cmd} "${logdir}/aggregate.log" \
        python -m espnet_ext.bin.aggregate_stats_dirs "${inputs[@]}" --output_dir "${stats_dir}"
}

# make_token_list TYPE NBPE OUT_DIR "EXTRA OPTIONS" TEXT... : one SentencePiece model (${bpemode}, NBPE units)
# or character list of the TEXT files, OUT_DIR/tokens.txt (+ bpe.model); a job asking for the memory it needs
make_token_list() {
    local type=$1 nbpe=$2 out=$3 opts=$4 mem
    shift 4
    local args=(--token_type "${type}" --model_type "${bpemode}" --vocab_size "${nbpe}" --text "$@" --out_dir "${out}")
    # SentencePiece holds its sample of up to 10M sentences (~30 GB for WMT), more than a cluster's default job
    # memory: the job asks for what the texts need (sizes and first lines only, read here)
    # shellcheck disable=SC2086
    mem=$(python -m espnet_ext.text.token_list "${args[@]}" ${opts} --print_job_memory) || return 1
    # shellcheck disable=SC2086
    ${train_cmd} --mem "${mem}" "${out}/log/token_list.log" python -m espnet_ext.text.token_list "${args[@]}" ${opts}
}

# add_token_dim STATS_DIR TOKEN_LIST TOKEN_TYPE [NAME] : ESPnet's <name>_shape -> <name>_shape.<token_type>
# (the shape files get the vocabulary size as second dimension, which the batch sampler expects). A ${train_cmd}
# job (log STATS_DIR/logdir/token_dim_<name>.log): the shape files have a line per utterance (4 x 40M for the
# LM text), too much for the node running the pipeline. Each is written aside and renamed.
add_token_dim() {
    local stats_dir=$1 token_list=$2 token_type=$3 name=${4:-text}
    as_job "${stats_dir}/logdir/token_dim_${name}.log" _token_dim \
        "${stats_dir}" "${token_list}" "${token_type}" "${name}"
}
_token_dim() {  # the job of add_token_dim: STATS_DIR TOKEN_LIST TOKEN_TYPE NAME
    local vocab split out
    vocab=$(wc -l < "$2")
    for split in train valid; do
        out="$1/${split}/$4_shape.$3"
        awk -v N="${vocab}" '{ print $0 "," N }' "$1/${split}/$4_shape" > "${out}.tmp"
        mv "${out}.tmp" "${out}"
    done
}

# smoke_overrides ARRAY OPTION... : ARRAY (a variable name) set to a smoke run's overrides of the training with
# OPTION... (its --config among them; espnet_ext.smoke train_args), empty outside smoke runs. train_model and
# collect_stats add them; a stage that builds the model from the options itself (st.sh's --asr_init check) adds
# them too.
# shellcheck disable=SC2178,SC2034  # a nameref to the caller's array (set here, read by the caller)
smoke_overrides() {
    local -n overrides=$1
    shift
    overrides=()
    [ "${smoke}" = true ] || return 0
    local out
    out=$(python -m espnet_ext.smoke train_args --inference_model "${inference_model:-}" -- "$@") || return 1
    mapfile -t overrides <<< "${out}"
}

# split_training_data LOG SPLITS N FILE NAME [FILE NAME...] : ESPnet's --num_splits_lm / --num_splits_mt, as a
# ${train_cmd} job logging to LOG. The training's tables (texts, shape files, task ids: one utterance a line) are
# split round-robin by line into N parts, SPLITS/NAME/split.{0..N-1} + num_splits, by espnet2.bin.split_scps, for
# a training given SPLITS/NAME in place of FILE and --multiple_iterator true (each part is held in memory in
# turn, not the whole tables). split_scps wants line i of every FILE to be the same utterance: each is sorted by
# id (LC_ALL=C) in SPLITS unless it is already, and a table with other ids fails the job. SPLITS is reused while
# it holds ${stage_fingerprint} (a training stage rerun after a failure does not split again).
split_training_data() {
    local log=$1 splits=$2 n=$3
    shift 3
    [ "$(cat "${splits}/.done" 2> /dev/null)" != "${stage_fingerprint}" ] || return 0
    rm -rf "${splits}"
    as_job "${log}" _split_sorted_tables "${splits}" "${n}" "$@" || return 1
    echo "${stage_fingerprint}" > "${splits}/.done"
}

_split_sorted_tables() {  # the job of split_training_data: SPLITS N FILE NAME...
    local splits=$1 n=$2 i=0 scps=() names=()
    shift 2
    mkdir -p "${splits}"
    while [ $# -gt 0 ]; do
        case " ${names[*]} " in *" $2 "*) echo "ERROR: split name $2 given twice" >&2; return 1 ;; esac
        if sort -c -k1,1 "$1" 2> /dev/null; then
            scps+=("$1")
        else  # sort's temporary files in SPLITS, not the job's /tmp (the tables are GBs)
            sort -k1,1 -T "${splits}" "$1" > "${splits}/.sorted.${i}"
            scps+=("${splits}/.sorted.${i}")
        fi
        names+=("$2")
        i=$((i + 1))
        shift 2
    done
    python -m espnet2.bin.split_scps --scps "${scps[@]}" --names "${names[@]}" --num_splits "${n}" \
        --output_dir "${splits}"
    rm -f "${splits}"/.sorted.*
}

# split_train_opts ARRAY EXP N : a training stage's options in ARRAY (a variable name) given the parts of their
# training tables instead (ESPnet's --num_splits_mt / --num_splits_ocr N > 1): EXP/splitsN/<input name> for each
# --train_data_path_and_name_and_type PATH,NAME,TYPE and EXP/splitsN/<file name> for each --train_shape_file,
# made by split_training_data (log: EXP/log/split_train.log), + --multiple_iterator true. ESPnet's
# --num_iters_per_epoch stays the epoch's: build_multiple_iter_factory gives part i (num_iters_per_epoch + i) / N
# of it (tests/recipes/test_ocr_splits.py counts the updates).
split_train_opts() {
    # shellcheck disable=SC2178  # a nameref to the caller's array
    local -n train_opts=$1
    local exp=$2 n=$3 splits="$2/splits$3" i path name tables=()
    for ((i = 0; i + 1 < ${#train_opts[@]}; i++)); do
        case ${train_opts[i]} in
            --train_data_path_and_name_and_type)
                path=${train_opts[i + 1]%,*,*}
                name=${train_opts[i + 1]#"${path}",}  # NAME,TYPE
                tables+=("${path}" "${name%%,*}")
                train_opts[i + 1]="${splits}/${name%%,*},${name}" ;;
            --train_shape_file)
                path=${train_opts[i + 1]}
                tables+=("${path}" "$(basename "${path}")")
                train_opts[i + 1]="${splits}/$(basename "${path}")" ;;
        esac
    done
    split_training_data "${exp}/log/split_train.log" "${splits}" "${n}" "${tables[@]}" || return 1
    train_opts+=(--multiple_iterator true)
}

# train_model LOG -- COMMAND... : launch an ESPnet2 training through the cluster backend
# (${cuda_cmd} when ngpu > 0), on ${num_nodes} nodes x ${ngpu} GPUs with ${train_num_threads} CPU threads,
# requeueable, resuming from its checkpoint. A checkpoint written with other options or inputs (another
# stage fingerprint) is never continued.
train_model() {
    local logfile=$1
    shift
    [ "$1" = "--" ] && shift
    local exp started keep_out keep_args=()
    # Decoding an average of N epochs (last<N>.pth, window<N>.<phase>.<key>.<max|min>.pth): ESPnet must keep
    # the epoch files whatever keep_nbest_models says, and a training of fewer than N epochs is refused
    # before it starts (espnet_ext.decoding.checkpoint_average).
    if [[ ${inference_model:-} =~ ${epoch_average_models} ]]; then
        keep_out=$(python -m espnet_ext.bin.average_checkpoints training_args --model "${inference_model}" -- "$@") ||
            return 1
        [ -z "${keep_out}" ] || mapfile -t keep_args <<< "${keep_out}"
    fi
    exp=$(dirname "${logfile}")
    started="${exp}/.stages/train_options"
    # checkpoint.prev.pth: a run stopped while saving (espnet_ext.tasks.trainer) resumes from it
    if { [ -f "${exp}/checkpoint.pth" ] || [ -f "${exp}/checkpoint.prev.pth" ]; } &&
        [ "$(cat "${started}" 2>/dev/null)" != "${stage_fingerprint:-}" ]; then
        log "${exp}/checkpoint.pth was written with other options, config or data; remove ${exp} or train under another tag"
        return 1
    fi
    mkdir -p "${exp}/.stages"
    echo "${stage_fingerprint:-}" > "${started}"
    local cmd="${cuda_cmd}" threads=${train_num_threads:-1} smoke_args=()
    smoke_overrides smoke_args "$@" || return 1  # after the command's own options: ESPnet takes the last value
    [ "${ngpu}" -gt 0 ] || cmd="${train_cmd}"
    if [ "${ngpu}" = 0 ] && [ "${cmd_backend:-local}" = slurm ] && [ "${smoke}" = false ]; then
        log "WARNING: training ${exp} on CPUs (--ngpu 0) through Slurm: give --ngpu N to train on N GPUs a node"
    fi
    # One training job: on CPU it should use every core it was given (path.sh sets 1 thread for job arrays);
    # the job asks for ${threads} and the config's loader processes per training process (launch.py).
    # Requeued near the time limit only when the run saved a checkpoint (else it would redo the same epoch).
    python -m espnet_ext.jobs.launch --cmd "${cmd} --requeue --requeue_progress ${exp}/checkpoint.pth" \
        --log "${logfile}" --threads "${threads}" \
        --ngpu "${ngpu}" --num_nodes "${num_nodes}" -- \
        env OMP_NUM_THREADS="${threads}" MKL_NUM_THREADS="${threads}" "$@" "${smoke_args[@]}" "${keep_args[@]}" \
        --resume true
}

# average_stage N EXP : with --inference_model last<N>.pth, EXP's last N epochs averaged into EXP/last<N>.pth
# (window<N>.<phase>.<key>.<max|min>.pth: the N consecutive epochs of the best mean phase.key, as LegoNN's
# moving window of checkpoints picked by validation BLEU), with espnet_ext.bin.average_checkpoints (train_model
# made ESPnet keep them) as stage N, the decoding stage, before the decoding fingerprint is taken. The average
# is the training's product (exports and other recipes read it), so --skip_eval does not skip it. A ${train_cmd}
# job (log EXP/log/average_<model>.log): N checkpoints of a large model take GBs, too many for a login node.
epoch_average_models='^(last[0-9]+|window[0-9]+\.(train|valid)\.[A-Za-z0-9_]+\.(max|min))\.pth$'
average_stage() {
    [[ ${inference_model} =~ ${epoch_average_models} ]] || return 0
    local skip_stages="" epochs  # skip_stages: read by run_stage
    # The epoch files' names, sizes and times: a rerun skips the average until the training wrote new epochs.
    epochs=$({ find "$2" -maxdepth 1 -name '*epoch.pth' -printf '%f %s %T@\n' 2>/dev/null || true; } | sort)
    # shellcheck disable=SC2086  # ${train_cmd} is a command line
    run_stage "$1" "averaging into ${inference_model}" "$2/.${inference_model%.pth}" "$(fingerprint "${epochs}")" \
        ${train_cmd} "$2/log/average_${inference_model%.pth}.log" \
        python -m espnet_ext.bin.average_checkpoints --exp_dir "$2" --model "${inference_model}"
}

# local_data_scripts : local/data.sh and the shared shell it sources (utils/<name>.sh; utils/parse_options.sh,
# which every one sources, aside), one a line: the scripts of stage 1's fingerprint, so that editing any of them
# redoes the data preparation.
local_data_scripts() {
    echo local/data.sh
    [ -f local/data.sh ] || return 0
    sed -n 's|^\. \(utils/[a-z_]*\.sh\).*|\1|p' local/data.sh | grep -vx utils/parse_options.sh || true
}

# lm_stages N TRAIN_TEXT DEV_TEXT "TEST_TEXTS" TOKEN_TYPE TOKEN_LIST STATS_DIR : with --use_lm true (the options of
# utils/pipeline_options.sh lm_fusion), stages N, N+1 and N+2 are ../lm1/lm.sh's stages 1+3 (text, statistics in
# STATS_DIR), 4 (training of ${lm_exp}) and 5 (perplexity of DEV_TEXT and TEST_TEXTS), on TRAIN_TEXT and
# --lm_train_text. lm.sh's stage 2, the token list, is the pipeline's: TOKEN_LIST (and bpe.model beside it), so the
# LM has the vocabulary of the model it is fused with, as shallow fusion needs. The three stages share one
# fingerprint (the texts, the token list, the LM's config, arguments and --num_splits_lm).
lm_stages() {
    [ "${use_lm}" = true ] || return 0
    [ -n "${lm_config}" ] || die "--use_lm true needs --lm_config"
    local n=$1 fp lm_opts
    lm_opts=(--nj "${nj}" --ngpu "${ngpu}" --num_nodes "${num_nodes}" --train_num_threads "${train_num_threads}"
             --cmd_backend "${cmd_backend}" --lm_config "${lm_config}" --lm_args "${lm_args}"
             --lm_train_text "$2 ${lm_train_text}" --lm_dev_text "$3" --lm_test_text "$4"
             --token_type "$5" --token_list "$6" --bpemodel "$(dirname "$6")/bpe.model"
             --lm_exp "${lm_exp}" --lm_stats_dir "$7" --num_splits_lm "${num_splits_lm}")
    # --num_splits_lm only when set: the markers of LM stages run before it existed stay valid
    local lm_split_words=()
    [ "${num_splits_lm}" = 1 ] || lm_split_words=("num_splits_lm=${num_splits_lm}")
    # shellcheck disable=SC2086  # the extra LM text files, each hashed
    fp="$(fingerprint "$2" ${lm_train_text} "$6" "${lm_config}" "${lm_args}" "${lm_split_words[@]}")"
    run_stage "${n}" "LM text + statistics" "${lm_exp}" "${fp}" ./lm.sh --stage 1 --stop_stage 3 "${lm_opts[@]}"
    run_stage $((n + 1)) "LM training" "${lm_exp}" "${fp}" ./lm.sh --stage 4 --stop_stage 4 "${lm_opts[@]}"
    run_stage $((n + 2)) "LM perplexity" "${lm_exp}" "${fp}" ./lm.sh --stage 5 --stop_stage 5 "${lm_opts[@]}"
}

# attention_variant TASK CONFIG : the relaxed-attention paper's variant of the model of CONFIG for TASK (asr, mt;
# the options of utils/pipeline_options.sh attention_variants, read by espnet_ext.attention.variants): sets
# ${variant_tag} (the experiment tag's suffix) and ${variant_args} (the training's options). Exits on a bad one.
# shellcheck disable=SC2034  # variant_tag, variant_args: read by the pipeline
attention_variant() {
    local out
    out=$(python -m espnet_ext.attention.variants --config "$2" --variant "${attention_variant}" --task "$1" \
        ${relax_gamma:+--gamma "${relax_gamma}"}) || die "bad attention variant"
    variant_tag=$(sed -n 1p <<< "${out}")
    variant_args=$(sed -n 2p <<< "${out}")
}

# default_inference_tag : --inference_tag, when not given, from the decoding options: decode_<inference config>,
# + _lm_${lm_tag} with --use_lm true, + _matched with --matched_inference true (which also joins
# ${inference_args}, so the decoder relaxes its attention too)
default_inference_tag() {
    if [ -z "${inference_tag}" ]; then
        inference_tag=decode_$(basename "${inference_config}" .yaml)
        if [ "${use_lm}" = true ]; then inference_tag+="_lm_${lm_tag}"; fi
        if [ "${matched_inference}" = true ]; then inference_tag+="_matched"; fi
    fi
    if [ "${matched_inference}" = true ]; then inference_args+=" --matched_inference true"; fi
}

# corpus_settings : "NAME=value" of every corpus root db.sh defines, and the signature of the files under each
# root the recipe's data scripts name (stage 1's fingerprint, so that pointing db.sh or the environment at
# another corpus, or a release file edited, replaced, added or removed in place, redoes the data preparation).
# The signature stats every file of a corpus (minutes for LibriSpeech's or LRS3's ~300k files on a network file
# system): only when stage 1 is among this run's stages, the one stage whose fingerprint it is part of.
corpus_settings() (
    # shellcheck disable=SC1091
    . ./db.sh
    local scripts
    scripts=$(local_data_scripts)
    for name in $(sed -n 's/^\([A-Z][A-Z0-9_]*\)=.*/\1/p' db.sh); do
        printf '%s=%s\n' "${name}" "${!name:-}"
        if [ "${stage}" -gt 1 ] || [ "${stop_stage}" -lt 1 ]; then continue; fi
        # shellcheck disable=SC2086  # the script paths, one word each
        grep -qw "${name}" ${scripts} 2> /dev/null || continue
        if [ -n "${!name:-}" ] && [ -e "${!name}" ]; then corpus_signature "${!name}"; fi
    done
)

# corpus_signature PATH : hash of the relative path, size and modification time of every file under PATH (links
# followed). Cheap: one stat per file, no file is read, so a corpus of 10^5 files costs seconds, not hours.
corpus_signature() {
    find -L "$1" -type f -printf '%P\t%s\t%T@\n' 2> /dev/null | LC_ALL=C sort | sha256sum | cut -c1-16
}

# decode_set DIR KEYS MODULE HYP -- ARGS... : ESPnet's sharded decoding of one test set.
# KEYS (any Kaldi file of the set: its first column) is split over n = min(${inference_nj}, lines) jobs of
# ${decode_cmd} (logs DIR/logdir/<module>.JOB.log), each running
#   python -m MODULE ARGS... --key_file DIR/logdir/keys.JOB.scp
# where ARGS name each job's output with JOB (e.g. --output_dir DIR/logdir/output.JOB). The job hypotheses
# DIR/logdir/HYP (JOB replaced by 1..n) are merged, sorted by key, into DIR/text, which appears only once every
# job succeeded and every key was decoded. Sets ${decode_jobs}=n for further merge_shards calls.
decode_set() {
    local dir=$1 keys=$2 module=$3 hyp=$4
    shift 4
    [ "$1" = "--" ] && shift
    require_files "${keys}"
    rm -f "${dir}/text"
    decode_jobs=$(split_keys "${keys}" "${dir}/logdir" "${inference_nj}") || return 1
    local smoke_out smoke_args=()
    if [ "${smoke}" = true ]; then  # a beam no wider than a tiny corpus' vocabulary (espnet_ext.smoke)
        smoke_out=$(python -m espnet_ext.smoke decode_args -- "$@") || return 1
        [ -z "${smoke_out}" ] || mapfile -t smoke_args <<< "${smoke_out}"
    fi
    local cmd=${decode_cmd}
    [ "${inference_ngpu}" = 0 ] || cmd="${cuda_cmd} --gpu ${inference_ngpu}"
    [ -z "${inference_mem:-}" ] || cmd+=" --mem ${inference_mem}"  # a large model + LM at a wide beam: > 4G
    ${cmd} JOB=1:"${decode_jobs}" "${dir}/logdir/${module##*.}.JOB.log" \
        python -m "${module}" "$@" "${smoke_args[@]}" --key_file "${dir}/logdir/keys.JOB.scp" || return 1
    merge_shards "${dir}" "${hyp}" "${dir}/text" || return 1
    local want got
    want=$(wc -l < "${keys}")
    got=$(wc -l < "${dir}/text")
    if [ "${want}" != "${got}" ]; then
        log "${dir}/text has ${got} hypotheses for the ${want} keys of ${keys}; see ${dir}/logdir"
        rm -f "${dir}/text"
        return 1
    fi
}

# espnet_decode TASK EXP SET KEYS DATA [ARGS...] : decode_set of the test set SET by ESPnet's decoder of TASK
# (asr, mt, st: python -m espnet_ext.bin.<TASK>_inference) with EXP's ${inference_model} and ${inference_config},
# into EXP/${inference_tag}/SET/text; KEYS is the set's key file, DATA its --data_path_and_name_and_type; ARGS
# (e.g. an LM's options) and then ${inference_args} end the decoder's command line.
espnet_decode() {
    local task=$1 exp=$2 dset=$3 keys=$4 data=$5 dir
    shift 5
    dir="${exp}/${inference_tag}/${dset}"
    # shellcheck disable=SC2086  # the decoding's extra arguments
    decode_set "${dir}" "${keys}" "espnet_ext.bin.${task}_inference" output.JOB/1best_recog/text -- \
        --batch_size 1 --ngpu "${inference_ngpu}" --config "${inference_config}" --data_path_and_name_and_type "${data}" \
        "--${task}_train_config" "${exp}/config.yaml" "--${task}_model_file" "${exp}/${inference_model}" \
        "$@" --output_dir "${dir}/logdir/output.JOB" ${inference_args}
}

# merge_shards DIR PATTERN OUT : concatenate DIR/logdir/PATTERN for JOB=1..${decode_jobs}, sorted by the first
# column, into OUT (written to OUT.tmp and renamed, so OUT never holds a partial merge). A missing shard fails.
merge_shards() {
    local dir=$1 pattern=$2 out=$3 i files=()
    for i in $(seq "${decode_jobs}"); do
        files+=("${dir}/logdir/${pattern//JOB/${i}}")
    done
    require_files "${files[@]}"
    cat "${files[@]}" | sort -k1,1 > "${out}.tmp" || return 1
    mv "${out}.tmp" "${out}"
}

# score_set SCORER REF DIR LINES [ARGS...] : utils/SCORER.py --ref REF --hyp DIR/text --out_dir DIR/SCORER ARGS
# (a ${train_cmd} job, log DIR/SCORER/score.log); logs the lines LINES (sed range, e.g. 1 or 3,4) of its
# result.txt.
score_set() {
    local scorer=$1 ref=$2 dir=$3 lines=$4
    shift 4
    require_files "${ref}" "${dir}/text"
    ${train_cmd} "${dir}/${scorer}/score.log" \
        "utils/${scorer}.py" --ref "${ref}" --hyp "${dir}/text" --out_dir "${dir}/${scorer}" "$@" || return 1
    log "$(basename "${dir}"): $(sed -n "${lines}p" "${dir}/${scorer}/result.txt" | tr '\n' ' ')"
}

# score_sets SCORER REF DIR LINES [ARGS...] : score_set of each of ${test_sets}, decoded into DIR/<set>, every
# "{}" in REF and ARGS replaced by the set's name; side by side (for_each_set: each is a job that queues on a
# cluster), failing after every set ended, naming the sets that failed.
score_sets() {
    for_each_set "${test_sets}" _score_one "$@"
}
_score_one() {  # _score_one SET SCORER REF DIR LINES [ARGS...] : score_sets' work for one set
    local dset=$1 scorer=$2 ref=$3 dir=$4 lines=$5
    shift 5
    score_set "${scorer}" "${ref//\{\}/${dset}}" "${dir}/${dset}" "${lines}" "${@//\{\}/${dset}}"
}

# test_set_files DIR NAME : DIR/<set>/NAME of each of ${test_sets}, one a line
test_set_files() {
    local dset
    for dset in ${test_sets}; do echo "$1/${dset}/$2"; done
}

# write_results_md SCAN LAST NOTES : ${results_md} (default ${expdir}/RESULTS.md, as ESPnet), titled
# ${results_title}: espnet_ext.results' scan SCAN of the scored decodings in ${expdir}, under NOTES (the
# pipeline's: its configs), the wall time of this invocation when it ran a stage before LAST (the pipeline's
# RESULTS.md stage; an invocation of that stage alone, as a sweep's report, has none to tell) and
# --results_notes.
write_results_md() {
    local scan=$1 last=$2 notes=$3
    if [ "${stage}" -lt "${last}" ]; then
        notes+=" Wall time of this invocation (stages ${stage}-$((stop_stage < last ? stop_stage : last))):"
        notes+=" $((SECONDS / 60)) min $((SECONDS % 60)) s."
    fi
    [ -z "${results_notes}" ] || notes+=" ${results_notes}"
    python -m espnet_ext.results --scan "${scan}" --exp_dir "${expdir}" --test_sets "${test_sets}" \
        --title "${results_title}" --notes "${notes}" --out "${results_md:-${expdir}/RESULTS.md}" \
        --command "${command_line}"
}
