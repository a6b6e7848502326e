#!/usr/bin/env bash
# The LegoNN compose scenario (Dalmia et al. §IV-C2, Tables III and VI):
#   local/compose.sh --compose_config C --finetune_config F ./mt.sh OPTIONS...
# OPTIONS are the Ro-En test data's (run.sh --mode lego_compose builds them, with --expdir exp/lego_compose).
# The Ro-En encoder (exp/lego_roen) and the De-En decoder (exp/lego_deen), both trained with config C, are
# exported (lego_export) and composed (lego_compose) into <expdir>/mt_composed_<C's name>, which mt.sh decodes and scores
# with no training (stages 9-11). Then that model is fine-tuned end to end: its config with the training
# settings of F and C's loss settings (espnet_ext.bin.lego_finetune_config), --init_param its weights, as
# <expdir>/mt_composed_<C's name>_finetuned (stages 7-11), which decodes --finetune_model.
set -euo pipefail
compose_config=""
finetune_config=""
finetune_model=""       # the fine-tuned model decoded (default: the OPTIONS' --inference_model)
. utils/parse_options.sh
mt=("$@")
. ./path.sh

exp_of() { "${mt[@]}" --expdir "exp/$1" --mt_config "${compose_config}" --print_exp true; }
model=$(sed -n 's/.*--inference_model \([^ ]*\).*/\1/p' <<< "${mt[*]}")
roen=$(exp_of lego_roen)
deen=$(exp_of lego_deen)
for exp in "${roen}" "${deen}"; do
    if ! [ -f "${exp}/${model}" ]; then
        echo "$0: ${exp}/${model} missing: train it first (run.sh --mode lego_roen / lego_deen" \
            "--mt_config ${compose_config})" >&2
        exit 1
    fi
    local/export.sh "${exp}" "${model}"
done
tag=composed_$(basename "${compose_config}" .yaml)
composed=$("${mt[@]}" --mt_tag "${tag}" --mt_config "${compose_config}" --print_exp true)
if ! [ "${composed}/model.pth" -nt "${roen}/modules/encoder0.pt" ] || ! [ "${composed}/model.pth" -nt "${deen}/modules/decoder.pt" ]; then
    python -m espnet_ext.bin.lego_compose --modules "${roen}/modules/encoder0.pt" "${deen}/modules/decoder.pt" \
        --output_dir "${composed}"
fi
"${mt[@]}" --mt_tag "${tag}" --mt_config "${composed}/config.yaml" --inference_model model.pth --stage 9 --stop_stage 11

# The fine-tuning config: the composed architecture, C's loss settings, F's training settings.
python -m espnet_ext.bin.lego_finetune_config --composed "${composed}/config.yaml" --trained "${compose_config}" \
    --settings "${finetune_config}" --out "${composed}/finetune.yaml"
"${mt[@]}" --mt_tag "${tag}_finetuned" --mt_config "${composed}/finetune.yaml" \
    --mt_args "--init_param ${composed}/model.pth" --stage 7 --stop_stage 11 \
    ${finetune_model:+--inference_model "${finetune_model}"}
