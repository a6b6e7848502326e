#!/usr/bin/env bash
# The modularity stress test (Dalmia et al. §IV-B, Fig. 4) over experiments of one family:
#   local/swap.sh --swap_tags "TAG1 TAG2 ..." --exp_dir exp/lego_deen --inference_model M \
#       --src_text SRC --ref REF --output_dir OUT [--inference_config conf/decode_mt.yaml]
# Every encoder with every decoder of the experiments <exp_dir>/mt_<TAG> (LegoNN through the module inventory,
# a traditional encoder-decoder by its weights), decoded and scored: OUT/swap_matrix.{md,json,png}.
set -euo pipefail
swap_tags=""
exp_dir=""
inference_model=valid.acc.ave.pth
inference_config=""     # the recipe's decoding options (beam, length ratios): the diagonal as decoded there
src_text=""
ref=""
output_dir=""
. utils/parse_options.sh
. ./path.sh
experiments=()
for tag in ${swap_tags}; do
    experiments+=(--experiment "${tag}" "${exp_dir}/mt_${tag}/config.yaml" "${exp_dir}/mt_${tag}/${inference_model}")
done
[ "${#experiments[@]}" -ge 8 ] || { echo "$0: --swap_tags needs at least two experiments" >&2; exit 1; }
decoding=()
[ -z "${inference_config}" ] || decoding=(--inference_config "${inference_config}")
python -m espnet_ext.analysis.lego_swap "${experiments[@]}" --src_text "${src_text}" --ref "${ref}" \
    --output_dir "${output_dir}" "${decoding[@]}" --title "Swap matrix: ${swap_tags} (BLEU)"
