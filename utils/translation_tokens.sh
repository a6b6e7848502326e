#!/usr/bin/env bash
# Source and target vocabularies of the translation pipelines (mt.sh, st.sh); sourced after utils/pipeline.sh
# once the options are parsed. Reads ${token_joint} ${src_token_type} ${tgt_token_type} ${src_nbpe}
# ${tgt_nbpe} ${bpemode} ${src_lang} ${tgt_lang} (and ${token_list_dir}: a given joint vocabulary) and sets
#   src_token_dir tgt_token_dir src_token_list tgt_token_list   data/token_list/<type>_<lang> (joint: <src><tgt>)
#   tokenizer_opts   ESPnet's --token_* / --src_token_* / --bpemodel options of the *_train entry points
# make_translation_tokens (a stage function) trains them on ${train_dir}/${src_text} and ${train_dir}/${tgt_text}.
# The pipeline that sources this file sets the options read here (see above).
# shellcheck disable=SC2154

token_name() {  # token_name TYPE NBPE LANG -> dir name under data/token_list
    if [ "$1" = bpe ]; then echo "bpe_${bpemode}$2_$3"; else echo "char_$3"; fi
}
if [ -n "${token_list_dir:-}" ]; then
    [ "${src_token_type}" = "${tgt_token_type}" ] || die "--token_list_dir needs one token type for both sides"
    src_token_dir=${token_list_dir}
    tgt_token_dir=${token_list_dir}
elif [ "${token_joint}" = true ]; then
    [ "${src_token_type}" = "${tgt_token_type}" ] || die "--token_joint true needs one token type for both sides"
    src_token_dir="data/token_list/$(token_name "${tgt_token_type}" "${tgt_nbpe}" "${src_lang}${tgt_lang}")"
    tgt_token_dir=${src_token_dir}
else
    src_token_dir="data/token_list/$(token_name "${src_token_type}" "${src_nbpe}" "${src_lang}")"
    tgt_token_dir="data/token_list/$(token_name "${tgt_token_type}" "${tgt_nbpe}" "${tgt_lang}")"
fi
src_token_list="${src_token_dir}/tokens.txt"
tgt_token_list="${tgt_token_dir}/tokens.txt"
tokenizer_opts=(--token_type "${tgt_token_type}" --token_list "${tgt_token_list}"
                --src_token_type "${src_token_type}" --src_token_list "${src_token_list}"
                --non_linguistic_symbols none --cleaner none --g2p none)
[ "${tgt_token_type}" = bpe ] && tokenizer_opts+=(--bpemodel "${tgt_token_dir}/bpe.model")
[ "${src_token_type}" = bpe ] && tokenizer_opts+=(--src_bpemodel "${src_token_dir}/bpe.model")

make_translation_tokens() {
    if [ -n "${token_list_dir:-}" ]; then
        require_files "${tgt_token_list}"
        [ "${tgt_token_type}" != bpe ] || require_files "${tgt_token_dir}/bpe.model"
    elif [ "${token_joint}" = true ]; then
        make_token_list "${tgt_token_type}" "${tgt_nbpe}" "${tgt_token_dir}" "${src_bpe_opts}" \
            "${train_dir}/${src_text}" "${train_dir}/${tgt_text}"
    else
        make_token_list "${src_token_type}" "${src_nbpe}" "${src_token_dir}" "${src_bpe_opts}" "${train_dir}/${src_text}" &&
        make_token_list "${tgt_token_type}" "${tgt_nbpe}" "${tgt_token_dir}" "${tgt_bpe_opts}" "${train_dir}/${tgt_text}"
    fi
}
