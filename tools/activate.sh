# shellcheck shell=bash
# Source me: puts the project's virtualenv, utils/ and offline NLTK data on the path.
_tools_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_root_dir="$(dirname "${_tools_dir}")"
if [ ! -x "${_tools_dir}/venv/bin/python" ]; then
    echo "No environment at ${_tools_dir}/venv: run ${_tools_dir}/install.sh first" >&2
    # Sourced: return to the caller's shell; run as a script: exit.
    # shellcheck disable=SC2317
    return 1 2>/dev/null || exit 1
fi
# ESPNET_EXT_PATH_PREFIX: directories that stay before the virtualenv (e.g. a wrapper of its python, as the
# test suite's fork server has).
export PATH="${ESPNET_EXT_PATH_PREFIX:+${ESPNET_EXT_PATH_PREFIX}:}${_tools_dir}/venv/bin:${_root_dir}/utils:${PATH}"
export NLTK_DATA="${_tools_dir}/nltk_data"
export PYTHONNOUSERSITE=1
# This checkout's package first, also when another checkout installed the venv in editable mode (once: the
# pipelines source this again when they call each other).
case ":${PYTHONPATH:-}:" in ":${_root_dir}:"*) ;; *) PYTHONPATH="${_root_dir}${PYTHONPATH:+:${PYTHONPATH}}" ;; esac
export PYTHONPATH
unset _tools_dir _root_dir
