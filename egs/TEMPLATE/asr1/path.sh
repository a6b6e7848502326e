# Sourced by every pipeline from its recipe dir (egs/<corpus>/<task>1): the project's environment.
# Resolved through the symlink, so a recipe dir anywhere (e.g. a copy on scratch space) finds the project.
# shellcheck disable=SC1091
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../../tools/activate.sh" || exit 1
export LC_ALL=C                  # byte order for sorted Kaldi files
export PYTHONIOENCODING=UTF-8
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # one thread per job: parallelism comes from jobs
export MKL_NUM_THREADS=${OMP_NUM_THREADS}
