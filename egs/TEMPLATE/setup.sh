#!/usr/bin/env bash
# Creates a new recipe dir linked to the shared template, as ESPnet's TEMPLATE/asr1/setup.sh does.
#   egs/TEMPLATE/setup.sh egs/<corpus>/<task>1
# Then write local/data.sh, run.sh and conf/*.yaml (see README "Adding a recipe").
set -euo pipefail

[ $# -eq 1 ] || { sed -n '2,4p' "$0" >&2; exit 1; }
dir=$1
task=$(basename "${dir}")
task=${task%1}
template="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ -f "${template}/${task}1/${task}.sh" ] || { echo "$0: no pipeline ${template}/${task}1/${task}.sh" >&2; exit 1; }
[ -e "${dir}" ] && { echo "$0: ${dir} already exists" >&2; exit 1; }

mkdir -p "${dir}/conf" "${dir}/local"
# Recipes live two levels below egs/, so every link is relative and survives moving the checkout.
ln -s "../../TEMPLATE/${task}1/${task}.sh" "${dir}/${task}.sh"
for f in path.sh cmd.sh db.sh; do ln -s "../../TEMPLATE/asr1/${f}" "${dir}/${f}"; done
case "${task}" in asr | mt | st) ln -s ../../TEMPLATE/lm1/lm.sh "${dir}/lm.sh" ;; esac  # pipelines with LM stages
ln -s ../../../utils "${dir}/utils"
ln -s ../../../TEMPLATE/asr1/conf/slurm.conf "${dir}/conf/slurm.conf"
echo "Created ${dir}: now write ${dir}/local/data.sh, ${dir}/run.sh and ${dir}/conf/*.yaml"
