#!/usr/bin/env bash
# The LegoNN compose scenario (Dalmia et al. §IV-C2, Tables III and VI):
#   local/compose.sh --compose_config C --finetune_config F ./mt.sh OPTIONS...
# OPTIONS are the Ro-En test data's (run.sh --mode lego_compose builds them, with --expdir exp/lego_compose).
# The Ro-En encoder (exp/lego_roen) and the De-En decoder (exp/lego_deen), both trained with config C, are
# exported (lego_export) and composed (lego_compose) into <expdir>/mt_composed_<C's name>, which mt.sh decodes and scores
# with no training (stages 9-11). Then that model is fine-tuned end to end: its config with the training
# settings of F, --init_param its weights, as <expdir>/mt_composed_<C's name>_finetuned (stages 7-11).
set -euo pipefail
compose_config=""
finetune_config=""
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

# The fine-tuning config: the composed architecture with F's training settings.
python - "${composed}/config.yaml" "${finetune_config}" "${composed}/finetune.yaml" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
config.update(yaml.safe_load(open(sys.argv[2], encoding="utf-8")))
with open(sys.argv[3] + ".tmp", "w", encoding="utf-8") as f:
    yaml.safe_dump(config, f, sort_keys=False)
PY
if cmp -s "${composed}/finetune.yaml.tmp" "${composed}/finetune.yaml"; then  # unchanged: no new fingerprint
    rm "${composed}/finetune.yaml.tmp"
else
    mv "${composed}/finetune.yaml.tmp" "${composed}/finetune.yaml"
fi
"${mt[@]}" --mt_tag "${tag}_finetuned" --mt_config "${composed}/finetune.yaml" \
    --mt_args "--init_param ${composed}/model.pth" --stage 7 --stop_stage 11
