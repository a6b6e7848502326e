#!/usr/bin/env bash
# Language-model pipeline on ESPnet2's LM task. Used standalone and by the asr/mt pipelines for their
# LM stages. Stages:
#   1 text preparation (training text = --lm_train_text files, ids kept/added; a job, as the text is big):
#     sorted by id (LC_ALL=C, temporary files in the stats dir); an id found twice fails, naming it and its lines
#   2 token list (SentencePiece or char, a job; skipped when --token_list already exists)
#   3 statistics (ESPnet2 --collect_stats; the ids and shapes by jobs too)
#   4 training; --num_splits_lm N > 1 (ESPnet's option): the text and shape file split round-robin into N parts
#     (${lm_exp}/splitsN, a job: split_training_data) trained one after the other by ESPnet's --multiple_iterator,
#     so a training process (and each loader process) holds one part, not the whole text, in memory
#   5 perplexity on --lm_dev_text and --lm_test_text
# --smoke true runs every stage with the real configs on a tiny corpus: one update per epoch, model widths / 8,
# soft vocabulary sizes (utils/pipeline.sh, espnet_ext/smoke.py; README "Smoke runs").
set -euo pipefail

. utils/pipeline_options.sh lm  # stages, jobs, training resources, --smoke
lm_train_text=""        # space-separated Kaldi text files (<id> <text>) or plain text files (--lm_text_has_ids false)
lm_text_has_ids=true
lm_dev_text=""          # Kaldi text file
lm_test_text=""         # Kaldi text file (optional)
token_type=bpe          # bpe (SentencePiece) or char
token_list=""           # tokens.txt; made in stage 2 when missing
bpemodel=""             # SentencePiece model for token_type=bpe
nbpe=100
bpemode=unigram
lm_config=""
lm_args=""              # extra arguments for lm_train
lm_exp=""               # experiment dir
lm_stats_dir=""
num_splits_lm=1         # parts of the training text held in memory one at a time (stage 4, see above)

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh

require_options lm_config lm_train_text lm_dev_text
[[ ${num_splits_lm} =~ ^[1-9][0-9]*$ ]] || die "--num_splits_lm must be a positive integer, not '${num_splits_lm}'"
lm_tag=$(basename "${lm_config}" .yaml)
lm_exp=${lm_exp:-exp/lm_${lm_tag}}
lm_stats_dir=${lm_stats_dir:-exp/lm_stats_${token_type}}
text_dir="${lm_stats_dir}/text"
if [ -z "${token_list}" ]; then
    token_list="data/token_list/${token_type}${nbpe}/tokens.txt"
    [ "${token_type}" = bpe ] && bpemodel="data/token_list/${token_type}${nbpe}/bpe.model"
fi
tokenizer_opts=(--token_type "${token_type}" --token_list "${token_list}" --non_linguistic_symbols none
                --cleaner none --g2p none)
[ "${token_type}" = bpe ] && tokenizer_opts+=(--bpemodel "${bpemodel}")

# sort_text OUT HAS_IDS FILE... (a job): the training text by id, temporary files beside OUT (not the job's /tmp).
# ids must be unique (ESPnet's reader refuses a repeated one, but only once a job reads the text): a repeated id
# fails here, naming the files and lines that hold it.
sort_text() {
    local out=$1 has_ids=$2 f i=0 id
    shift 2
    if ! id=$(for f in "$@"; do
                  if [ "${has_ids}" = true ]; then cat "${f}"
                  else awk -v p="lm$((i++))_" '{ printf "%s%09d %s\n", p, NR, $0 }' "${f}"; fi
              done | sort -k1,1 -T "$(dirname "${out}")" |
                  awk -v out="${out}.tmp" '$1 == prev { print $1; exit 1 } { prev = $1; print > out }'); then
        rm -f "${out}.tmp"
        [ -n "${id}" ] || return 1  # no repeated id: sort failed, its message is above
        echo "ERROR: the LM text id ${id} is repeated, at" \
            "$(awk -v id="${id}" '$1 == id { printf "%s%s:%d", sep, FILENAME, FNR; sep = " " }' "$@")"
        return 1
    fi
    mv "${out}.tmp" "${out}"
    echo "LM training text: $(wc -l < "${out}") lines"  # counted here, not on the pipeline's node; it logs this line
}

# text_keys TEXT KEYS [TEXT KEYS...] (a job): the ids of each Kaldi text TEXT, its first column, into KEYS
text_keys() {
    while [ $# -gt 0 ]; do
        awk '{ print $1 }' "$1" > "$2.tmp"
        mv "$2.tmp" "$2"
        shift 2
    done
}

prepare_text() {
    # shellcheck disable=SC2086  # the training text files
    require_files ${lm_train_text}
    mkdir -p "${text_dir}"
    # shellcheck disable=SC2086
    as_job "${text_dir}/log/sort_text.log" sort_text "${text_dir}/train.txt" "${lm_text_has_ids}" ${lm_train_text} ||
        return 1
    log "$(grep -a '^LM training text: ' "${text_dir}/log/sort_text.log" | tail -n 1)"
}

# SentencePiece over the whole LM text: a job (make_token_list, log <token list dir>/log/token_list.log)
make_tokens() {
    if [ -f "${token_list}" ]; then log "using existing ${token_list}"; return 0; fi
    make_token_list "${token_type}" "${nbpe}" "$(dirname "${token_list}")" "" "${text_dir}/train.txt"
}

lm_stats() {
    require_files "${text_dir}/train.txt" "${token_list}"
    as_job "${text_dir}/log/keys.log" text_keys "${text_dir}/train.txt" "${text_dir}/train.keys" \
        "${lm_dev_text}" "${text_dir}/dev.keys" || return 1
    collect_stats espnet_ext.bin.lm_train "${lm_stats_dir}" "${nj}" "${text_dir}/train.keys" "${text_dir}/dev.keys" \
        "${tokenizer_opts[@]}" --config "${lm_config}" \
        --train_data_path_and_name_and_type "${text_dir}/train.txt,text,text" \
        --valid_data_path_and_name_and_type "${lm_dev_text},text,text" || return 1
    add_token_dim "${lm_stats_dir}" "${token_list}" "${token_type}"
}

lm_train() {
    mkdir -p "${lm_exp}"
    local text="${text_dir}/train.txt" shape="${lm_stats_dir}/train/text_shape.${token_type}" splits
    local train_data=(--train_data_path_and_name_and_type "${text},text,text" --train_shape_file "${shape}")
    if [ "${num_splits_lm}" -gt 1 ]; then
        splits="${lm_exp}/splits${num_splits_lm}"
        split_training_data "${lm_exp}/log/split_text.log" "${splits}" "${num_splits_lm}" \
            "${text}" lm_train.txt "${shape}" text_shape || return 1
        train_data=(--train_data_path_and_name_and_type "${splits}/lm_train.txt,text,text"
                    --train_shape_file "${splits}/text_shape" --multiple_iterator true)
    fi
    # shellcheck disable=SC2086
    train_model "${lm_exp}/train.log" -- python -m espnet_ext.bin.lm_train --use_preprocessor true \
        "${tokenizer_opts[@]}" --config "${lm_config}" --output_dir "${lm_exp}" "${train_data[@]}" \
        --valid_data_path_and_name_and_type "${lm_dev_text},text,text" \
        --valid_shape_file "${lm_stats_dir}/valid/text_shape.${token_type}" \
        --fold_length 150 ${lm_args}
}

lm_perplexity() {
    local name text
    for text in ${lm_dev_text} ${lm_test_text}; do
        name=$(basename "$(dirname "${text}")")
        ${train_cmd} "${lm_exp}/perplexity_${name}/ppl.log" \
            python -m espnet_ext.bin.lm_calc_perplexity --ngpu 0 --data_path_and_name_and_type "${text},text,text" \
                --train_config "${lm_exp}/config.yaml" --model_file "${lm_exp}/valid.loss.ave.pth" \
                --output_dir "${lm_exp}/perplexity_${name}" || return 1
        log "${name}: perplexity $(cat "${lm_exp}/perplexity_${name}/ppl")"
    done
}

run_stage 1 "LM text preparation" "${lm_stats_dir}" "$(fingerprint ${lm_train_text} "${lm_text_has_ids}")" prepare_text
run_stage 2 "LM token list" "${lm_stats_dir}" "$(fingerprint "${text_dir}/train.txt" "${token_list}" "${nbpe}" "${bpemode}")" make_tokens
run_stage 3 "LM statistics" "${lm_stats_dir}" "$(fingerprint "${text_dir}/train.txt" "${lm_dev_text}" "${token_list}" "${lm_config}")" lm_stats
run_stage 4 "LM training" "${lm_exp}" "$(fingerprint "${lm_stats_dir}/train/text_shape.${token_type}" "${token_list}" \
    "${lm_config}" "${lm_args}" "${num_splits_lm}")" lm_train
run_stage 5 "LM perplexity" "${lm_exp}" "$(fingerprint "${lm_exp}/valid.loss.ave.pth" ${lm_dev_text} ${lm_test_text})" lm_perplexity
log "LM pipeline finished: ${lm_exp}"
