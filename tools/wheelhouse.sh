#!/usr/bin/env bash
# Downloads the wheels a GPU node with PyTorch and no network needs to run this project (tools/gpu_check.sh
# installs them from DIR): what training and inference import beyond torch, at tools/requirements.txt's pins
# (the list: tools/wheelhouse_packages.py), for the node's Python and platform, without their dependencies.
#   tools/wheelhouse.sh DIR [--python_version 3.11] [--platform TAG]... [--node_packages FILE] [--dry_run]
# --python_version: the node's Python (default: this venv's); --platform: pip's platform tags, repeatable
# (default: glibc x86_64 wheels, manylinux_2_28 / 2_17 / 2014, and pure-Python ones); --node_packages: what the
# node already has (`pip list --format freeze` there, or one name a line), left out to keep DIR small;
# --dry_run: print the package list and the pip command, download nothing. Writes DIR/requirements.txt (the
# pins) beside the wheels.
set -euo pipefail

tools_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${tools_dir}/venv/bin/python"
dir=""
python_version=""
platforms=()
node_packages=""
dry_run=false
while [ $# -gt 0 ]; do
    case "$1" in
        --python_version) python_version=$2; shift 2 ;;
        --platform) platforms+=("$2"); shift 2 ;;
        --node_packages) node_packages=$2; shift 2 ;;
        --dry_run) dry_run=true; shift ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        -*) echo "$0: unknown option $1" >&2; exit 2 ;;
        *) [ -z "${dir}" ] || { echo "$0: one DIR only (got ${dir} and $1)" >&2; exit 2; }
           dir=$1; shift ;;
    esac
done
[ -n "${dir}" ] || { sed -n '5p' "$0" >&2; exit 2; }
[ -x "${python}" ] || { echo "$0: no environment at ${tools_dir}/venv: run tools/install.sh first" >&2; exit 1; }
python_version=${python_version:-$("${python}" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}
[[ ${python_version} =~ ^3\.[0-9]+$ ]] || { echo "$0: --python_version takes 3.N, not '${python_version}'" >&2; exit 2; }
[ ${#platforms[@]} -gt 0 ] || platforms=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)

[ -z "${node_packages}" ] || [ -f "${node_packages}" ] || { echo "$0: --node_packages ${node_packages}: no such file" >&2; exit 1; }
mapfile -t packages < <("${python}" "${tools_dir}/wheelhouse_packages.py" ${node_packages:+--skip "${node_packages}"})
[ ${#packages[@]} -gt 0 ] || { echo "$0: no package list (tools/wheelhouse_packages.py failed)" >&2; exit 1; }
abi="cp${python_version/./}"
command=("${python}" -m pip download --no-deps --dest "${dir}" --python-version "${python_version}"
         --implementation cp --abi "${abi}" --abi abi3 --abi none)
for platform in "${platforms[@]}"; do command+=(--platform "${platform}"); done
command+=(-r "${dir}/requirements.txt")

if ${dry_run}; then
    echo "# ${#packages[@]} packages, written to ${dir}/requirements.txt:"
    printf '%s\n' "${packages[@]}"
    echo "# then:"
    printf '%q ' "${command[@]}"
    echo
    exit 0
fi
mkdir -p "${dir}"
printf '%s\n' "${packages[@]}" > "${dir}/requirements.txt"
"${command[@]}"
echo "Wheelhouse ready: ${dir} (${#packages[@]} packages for Python ${python_version}); copy it to the node"
