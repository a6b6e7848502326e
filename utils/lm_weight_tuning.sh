#!/usr/bin/env bash
# The LM text and LM-weight grid of the recipes that tune shallow fusion (the relaxed-attention paper's
# λ grid, A.3.3: egs/iwslt14/mt1, egs/lrs3/vsr1); sourced by their run.sh after utils/parse_options.sh.
# Reads the recipe's options ${lm_text} and ${lm_weights}:
#   lm_text      transcripts: the LM learns the training targets only (lm tag "transcripts");
#                extended: + data/lm_extended/text, the extra text local/data.sh writes (lm tag "extended")
#   lm_weights   empty: decode with the inference config's LM weight; else a grid such as "0 0.05 0.1"
#   run_with_lm PIPELINE OPTIONS... -- ARGS...
#       runs PIPELINE OPTIONS <the LM options of ${lm_text}> ARGS (ARGS last, so the caller's options win);
#       with ${lm_weights} set, python -m espnet_ext.analysis.sweep tune runs that command instead, once per
#       weight on the recipe's conf/sweeps/lm_weight.yaml, as decodings labelled decode_lm_${lm_text}.
# A --lm_text other than transcripts or extended exits 1 naming it, before anything runs.
# The recipe that sources this file sets the options read here (see above).
# shellcheck disable=SC2154

run_with_lm() {
    local command=() lm_opts
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do command+=("$1"); shift; done
    [ $# -gt 0 ] && shift  # the "--"
    case "${lm_text}" in
        transcripts) lm_opts=(--lm_tag transcripts) ;;
        extended) lm_opts=(--lm_tag extended --lm_train_text data/lm_extended/text) ;;
        *) echo "$0: --lm_text must be transcripts or extended, not '${lm_text}'" >&2; exit 1 ;;
    esac
    command+=("${lm_opts[@]}" "$@")
    if [ -z "${lm_weights}" ]; then
        "${command[@]}"
    else
        # shellcheck disable=SC1091
        . ./path.sh
        python -m espnet_ext.analysis.sweep tune --spec conf/sweeps/lm_weight.yaml --values "${lm_weights}" \
            --label "decode_lm_${lm_text}" -- "${command[@]}"
    fi
}
