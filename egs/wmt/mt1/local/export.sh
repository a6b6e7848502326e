#!/usr/bin/env bash
# local/export.sh EXP MODEL: the modules of a trained LegoNN experiment as inventory artefacts (lego_export),
# EXP/modules/{encoder0.pt,decoder.pt}, redone whenever EXP/MODEL is newer than them. A run that stopped
# before training has nothing to export yet.
set -euo pipefail
exp=$1 model=$2
. ./path.sh
if [ -f "${exp}/${model}" ] && ! [ "${exp}/modules/decoder.pt" -nt "${exp}/${model}" ]; then
    python -m espnet_ext.bin.lego_export --config "${exp}/config.yaml" --model_file "${exp}/${model}" \
        --output_dir "${exp}/modules"
fi
