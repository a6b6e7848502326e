#!/usr/bin/env bash
# The LegoNN compose scenario (Dalmia et al. §IV-C2, Tables III and VI), run.sh --mode lego_compose:
#   local/compose.sh --finetune_config F [--compose_config C] [--encoder_config E] [--finetune_model M] [mt.sh options]
# The mt.sh options are the Ro-En test data's (--dumpdir dump/lego_roen --expdir exp/lego_compose ...).
# The Ro-En encoder (exp/lego_roen, trained with config E, default C: run.sh's real mode names the encoder-only
# conf/train_lego_ctc_deroen.yaml, Table III) and the De-En decoder (exp/lego_deen, trained with config C, default
# --mt_config), both exported by mt.sh (stage 9), are composed (lego_compose) into <expdir>/mt_composed_<C's name>,
# which mt.sh decodes and scores with no training (stages 9-11). Then that model is fine-tuned end to end: its
# config with the training settings of F and C's loss settings (espnet_ext.bin.lego_finetune_config),
# --init_param its weights, as <expdir>/mt_composed_<C's name>_finetuned (stages 7-11), which decodes M
# (default: --inference_model).
set -euo pipefail
compose_config=""
encoder_config=""
finetune_config=""
finetune_model=""
mt_config=""
inference_model=valid.acc.ave.pth
print_exp=false
__options_pass_to=./mt.sh
. utils/parse_options.sh
[ "${print_exp}" = false ] || { echo "$0: --print_exp: no single experiment to print" >&2; exit 1; }
compose_config=${compose_config:-${mt_config}}
encoder_config=${encoder_config:-${compose_config}}
mt=(./mt.sh "$@" --inference_model "${inference_model}")
. ./path.sh

exp_of() { "${mt[@]}" --expdir "exp/$1" --mt_config "$2" --print_exp true; }
roen=$(exp_of lego_roen "${encoder_config}")
deen=$(exp_of lego_deen "${compose_config}")
for module in "${roen}/modules/encoder0.pt" "${deen}/modules/decoder.pt"; do
    if ! [ -f "${module}" ]; then
        echo "$0: ${module} missing: train it first (run.sh --mode lego_roen --mt_config ${encoder_config}," \
            "--mode lego_deen --mt_config ${compose_config})" >&2
        exit 1
    fi
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
