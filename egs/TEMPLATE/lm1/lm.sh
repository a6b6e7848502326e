#!/usr/bin/env bash
# Language-model pipeline on ESPnet2's LM task. Used standalone and by the asr/mt pipelines for their
# LM stages. Stages:
#   1 text preparation (training text = --lm_train_text files, ids kept/added)
#   2 token list (SentencePiece or char; skipped when --token_list already exists)
#   3 statistics (ESPnet2 --collect_stats)
#   4 training
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

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh

require_options lm_config lm_train_text lm_dev_text
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

prepare_text() {
    mkdir -p "${text_dir}"
    local f i=0
    for f in ${lm_train_text}; do
        require_files "${f}"
        if [ "${lm_text_has_ids}" = true ]; then cat "${f}"; else awk -v p="lm$((i++))_" '{ printf "%s%09d %s\n", p, NR, $0 }' "${f}"; fi
    done | sort -u -k1,1 > "${text_dir}/train.txt.tmp"
    mv "${text_dir}/train.txt.tmp" "${text_dir}/train.txt"
    log "LM training text: $(wc -l < "${text_dir}/train.txt") lines"
}

make_tokens() {
    if [ -f "${token_list}" ]; then log "using existing ${token_list}"; return 0; fi
    python -m espnet_ext.text.token_list --token_type "${token_type}" --model_type "${bpemode}" \
        --vocab_size "${nbpe}" --text "${text_dir}/train.txt" --out_dir "$(dirname "${token_list}")"
}

lm_stats() {
    require_files "${text_dir}/train.txt" "${token_list}"
    awk '{ print $1 }' "${text_dir}/train.txt" > "${text_dir}/train.keys"
    awk '{ print $1 }' "${lm_dev_text}" > "${text_dir}/dev.keys"
    collect_stats espnet_ext.bin.lm_train "${lm_stats_dir}" "${nj}" "${text_dir}/train.keys" "${text_dir}/dev.keys" \
        "${tokenizer_opts[@]}" --config "${lm_config}" \
        --train_data_path_and_name_and_type "${text_dir}/train.txt,text,text" \
        --valid_data_path_and_name_and_type "${lm_dev_text},text,text" || return 1
    add_token_dim "${lm_stats_dir}" "${token_list}" "${token_type}"
}

lm_train() {
    mkdir -p "${lm_exp}"
    # shellcheck disable=SC2086
    train_model "${lm_exp}/train.log" -- python -m espnet_ext.bin.lm_train --use_preprocessor true \
        "${tokenizer_opts[@]}" --config "${lm_config}" --output_dir "${lm_exp}" \
        --train_data_path_and_name_and_type "${text_dir}/train.txt,text,text" \
        --valid_data_path_and_name_and_type "${lm_dev_text},text,text" \
        --train_shape_file "${lm_stats_dir}/train/text_shape.${token_type}" \
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
run_stage 4 "LM training" "${lm_exp}" "$(fingerprint "${lm_stats_dir}/train/text_shape.${token_type}" "${token_list}" "${lm_config}" "${lm_args}")" lm_train
run_stage 5 "LM perplexity" "${lm_exp}" "$(fingerprint "${lm_exp}/valid.loss.ave.pth" ${lm_dev_text} ${lm_test_text})" lm_perplexity
log "LM pipeline finished: ${lm_exp}"
