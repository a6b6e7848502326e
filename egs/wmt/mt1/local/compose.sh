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
# --stage / --stop_stage are mt.sh's stage numbers: each of the two mt.sh runs takes its stages within them (the
# composition itself comes before either, when any stage 7-11 runs); --mt_args adds to the fine-tuning's training
# options. The experiments' tags are this script's: --mt_tag is refused.
set -euo pipefail
stage=1
stop_stage=100
mt_args=""
cmd_backend=local
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
[[ " $* " != *" --mt_tag "* ]] || { echo "$0: --mt_tag: the scenario names its experiments (composed_<C>)" >&2; exit 1; }
compose_config=${compose_config:-${mt_config}}
encoder_config=${encoder_config:-${compose_config}}
mt=(./mt.sh "$@" --cmd_backend "${cmd_backend}" --inference_model "${inference_model}")
. ./path.sh
. ./cmd.sh

# stages_within FIRST LAST : "--stage A --stop_stage B", the mt.sh stages FIRST..LAST within --stage/--stop_stage;
# fails when none is
stages_within() {
    local first=$(( stage > $1 ? stage : $1 )) last=$(( stop_stage < $2 ? stop_stage : $2 ))
    [ "${first}" -le "${last}" ] && echo "--stage ${first} --stop_stage ${last}"
}

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
# The composition (both mt.sh runs read it), redone when a module is newer: before any stage 7-11 runs.
if stages_within 7 11 > /dev/null &&
    { ! [ "${composed}/model.pth" -nt "${roen}/modules/encoder0.pt" ] ||
        ! [ "${composed}/model.pth" -nt "${deen}/modules/decoder.pt" ]; }; then
    # a job: both modules of a 1024-d model loaded, GBs
    # shellcheck disable=SC2154  # train_cmd: cmd.sh
    ${train_cmd} "${composed}/log/compose.log" python -m espnet_ext.bin.lego_compose \
        --modules "${roen}/modules/encoder0.pt" "${deen}/modules/decoder.pt" --output_dir "${composed}"
fi
if range=$(stages_within 9 11); then
    # shellcheck disable=SC2086  # the --stage / --stop_stage words
    "${mt[@]}" --mt_tag "${tag}" --mt_config "${composed}/config.yaml" --inference_model model.pth ${range}
fi

# The fine-tuning config: the composed architecture, C's loss settings, F's training settings.
if range=$(stages_within 7 11); then
    python -m espnet_ext.bin.lego_finetune_config --composed "${composed}/config.yaml" --trained "${compose_config}" \
        --settings "${finetune_config}" --out "${composed}/finetune.yaml"
    # shellcheck disable=SC2086  # the --stage / --stop_stage words
    "${mt[@]}" --mt_tag "${tag}_finetuned" --mt_config "${composed}/finetune.yaml" \
        --mt_args "${mt_args} --init_param ${composed}/model.pth" ${range} \
        ${finetune_model:+--inference_model "${finetune_model}"}
fi
