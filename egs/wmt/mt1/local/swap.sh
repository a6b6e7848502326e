#!/usr/bin/env bash
# The modularity stress test (Dalmia et al. §IV-B, Fig. 4), run.sh --mode lego_swap, over experiments of one
# family (e.g. two seeds of lego_deen):
#   local/swap.sh --swap_tags "TAG1 TAG2 ..." --expdir exp/lego_deen --swap_dir exp/lego_swap [mt.sh options]
# Every encoder with every decoder of the experiments <expdir>/mt_<TAG> (LegoNN through the module inventory,
# a traditional encoder-decoder by their weights), each decoded (--inference_model, --inference_config: the
# diagonal as mt.sh decodes it) on the first of --test_sets in --dumpdir and scored:
# <swap_dir>/<TAG1>__<TAG2>.../swap_matrix.{md,json,png}. N experiments are N^2 decodings of the test set: one
# job of the backend (--cmd_backend), on one GPU with --gpu_inference true (log <swap_dir>/log/<TAG1>__....log).
# mt.sh's other options do not apply and are ignored.
set -euo pipefail
swap_tags=""
swap_dir=exp/lego_swap
expdir=exp
dumpdir=dump
test_sets="test"
src_lang=de
tgt_lang=en
inference_model=valid.acc.ave.pth
inference_config=""
print_exp=false
cmd_backend=local
gpu_inference=false
__options_pass_to=./mt.sh
. utils/parse_options.sh
[ "${print_exp}" = false ] || { echo "$0: --print_exp: no single experiment to print" >&2; exit 1; }
. ./path.sh
. ./cmd.sh
experiments=()
for tag in ${swap_tags}; do
    experiments+=(--experiment "${tag}" "${expdir}/mt_${tag}/config.yaml" "${expdir}/mt_${tag}/${inference_model}")
done
[ "${#experiments[@]}" -ge 8 ] || { echo "$0: --swap_tags needs at least two experiments" >&2; exit 1; }
decoding=()
[ -z "${inference_config}" ] || decoding=(--inference_config "${inference_config}")
read -r test_set _ <<< "${test_sets}"
case ${gpu_inference} in
    true) cmd="${cuda_cmd} --gpu 1" device=cuda ;;
    false) cmd=${decode_cmd} device=cpu ;;
    *) echo "$0: --gpu_inference must be true or false, not '${gpu_inference}'" >&2; exit 1 ;;
esac
name=${swap_tags// /__}
# shellcheck disable=SC2086  # ${cmd} is a command line
${cmd} "${swap_dir}/log/${name}.log" python -m espnet_ext.analysis.lego_swap "${experiments[@]}" \
    --src_text "${dumpdir}/raw/${test_set}/text.${src_lang}" --ref "${dumpdir}/raw/${test_set}/text.${tgt_lang}" \
    --output_dir "${swap_dir}/${name}" "${decoding[@]}" --device "${device}" --title "Swap matrix: ${swap_tags} (BLEU)"
