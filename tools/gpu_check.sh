#!/usr/bin/env bash
# Verifies an install on a CUDA machine and measures the project there, on a node with PyTorch and no network.
#   tools/gpu_check.sh [--wheelhouse DIR] [--work_dir DIR] [--python PY] [--steps tests,bench,timing]
#                      [--rows REGEX] [--dry_run]
#  1. what the node's Python lacks, installed offline from the wheelhouse tools/wheelhouse.sh built
#     (--wheelhouse, default tools/wheelhouse) into WORK_DIR/site, put first on PYTHONPATH
#  2. pytest -m gpu: host syncs, autocast fp16/bf16, FlexAttention against the reference, on CUDA
#  3. every benchmark of tests/bench with --device cuda at its GPU goals' batch sizes, goals printed beside
#  4. for each paper family one real config: 6 updates on synthetic batches of the paper's size through
#     ESPnet's trainer (espnet_ext.analysis.train_timing), fp32 and AMP where a goal compares them; one table:
#     update time, frames / images / tokens per second, peak memory, GPU hours of the config's schedule
# --steps: which of 2-4 to run (default all; the install of 1 is done once per --work_dir). --rows: only the
# timing rows whose line (family|task|config|sizes|options, TIMING_ROWS below) matches the extended REGEX.
# Logs and the table go to --work_dir (default ${TMPDIR:-/tmp}/gpu_check). --dry_run prints every command
# and runs none. Exit status 1 when the install, a GPU test or a timing run failed (a missed speed goal is
# reported, not a failure).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheelhouse="${root}/tools/wheelhouse"
work_dir="${TMPDIR:-/tmp}/gpu_check"
python="${PYTHON:-python3}"
dry_run=false
steps="tests,bench,timing"
rows=""
while [ $# -gt 0 ]; do
    case "$1" in
        --wheelhouse) wheelhouse=$2; shift 2 ;;
        --work_dir) work_dir=$2; shift 2 ;;
        --python) python=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --rows) rows=$2; shift 2 ;;
        --dry_run) dry_run=true; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "$0: unknown option $1" >&2; exit 2 ;;
    esac
done
for step in ${steps//,/ }; do
    case "${step}" in tests|bench|timing) ;; *) echo "$0: --steps takes tests, bench, timing; not '${step}'" >&2; exit 2 ;; esac
done
step_on() { [[ ",${steps}," == *",$1,"* ]]; }

# One row per measured config: family | task | config | utterances frames tokens vocab | ESPnet options.
# Sizes: utterances as long as the corpus' typical one, enough of them for the config's own sampler to fill
# its batches. Where the paper's update spans several GPUs, one GPU takes it as accumulated batches.
TIMING_ROWS=(
    # LegoNN WMT En-De, d 1024: 4,000 sentences an update (§V-B) as 8 batches of 500
    "LegoNN|mt|egs/wmt/mt1/conf/train_lego_wemb_ende.yaml|1000 0 30 32000|--batch_size 500 --accum_grad 8"
    "LegoNN|mt|egs/wmt/mt1/conf/train_lego_wemb_ende.yaml|1000 0 30 32000|--batch_size 500 --accum_grad 8 --use_amp true"
    # AV-HuBERT large (relaxed attention, LRS3): 8,000 frames an update (conf/finetune: 1,000 a GPU x 8 GPUs),
    # on one GPU as the config's comment says for fewer GPUs, ACCUM 2: batches of 1,000 frames left an H200
    # waiting for the host (1,556 ms an update against 546, docs/gpu.md), which hid what AMP gains
    "relaxed attention|vsr|egs/lrs3/vsr1/conf/train_vsr_large.yaml|62 125 20 1000|--batch_bins 30200000 --accum_grad 2"
    "relaxed attention|vsr|egs/lrs3/vsr1/conf/train_vsr_large.yaml|62 125 20 1000|--batch_bins 30200000 --accum_grad 2 --use_amp false"
    # Swin-T on CIFAR-100 at batch 128 (relaxed attention, A.3.4)
    "relaxed attention|cls|egs/cifar100/cls1/conf/train_swin_t.yaml|256 0 0 100|"
    "relaxed attention|cls|egs/cifar100/cls1/conf/train_swin_t.yaml|256 0 0 100|--use_amp true"
    # Multiformer against its baseline at the thesis' batch (20,000 frames x 16 batches an update)
    "Multiformer|st|egs/mustc/st1/conf/train_st.yaml|54 700 30 8000|"
    "Multiformer|st|egs/mustc/st1/conf/tuning/train_st_s2t_transformer_s.yaml|54 700 30 8000|"
    # sharp attention: batch 192
    "sharp attention|ocr|egs/mnist_seq/ocr1/conf/train_ocr_paper.yaml|384 0 5 100|"
    # head selection, mTEDx multilingual ASR
    "head selection|asr|egs/mtedx/asr1/conf/train_asr_group.yaml|114 700 30 8000|"
)
BENCHMARKS=(bench_relaxed_attention.py bench_multiformer.py bench_multiformer_configs.py bench_head_selection.py
            bench_swin_relaxed.py bench_legonn.py)
# 6 updates, the first one warming up, the median of the other 5 reported: at 20 the rows alone took longer
# than the check's 8 minutes on an H100.
UPDATES=6
# Batches are loaded by each config's own num_workers processes (train_timing's default), as a real run loads
# them: in the trainer's process, CIFAR's resizing and augmentation of 128 images took most of an H100 update.

run() {  # run LOG CMD... : print the command; unless a dry run, run it with its output also in LOG
    local log=$1
    shift
    printf '+ %s\n' "$(printf '%q ' "$@")"
    ${dry_run} && return 0
    local start=${SECONDS} status=0
    "$@" 2>&1 | tee "${log}" || status=${PIPESTATUS[0]}
    echo "(${log##*/}: $((SECONDS - start)) s, exit status ${status})"
    return "${status}"
}

failed=()
logs="${work_dir}/logs"
${dry_run} || mkdir -p "${logs}"

# 1. Environment: the node's PyTorch, the rest from the wheelhouse.
if ! ${dry_run}; then
    "${python}" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
        { echo "$0: ${python} has no PyTorch with a CUDA device" >&2; exit 1; }
    [ -f "${wheelhouse}/requirements.txt" ] ||
        { echo "$0: no wheelhouse at ${wheelhouse}: build it with tools/wheelhouse.sh (where there is a network)" >&2; exit 1; }
fi
# Only what the node lacks: a venv over a Python that is itself a venv (as PyTorch images ship it) would not
# see that venv's torch, so the missing distributions go to a --target directory put first on PYTHONPATH.
site="${work_dir}/site"
missing="${work_dir}/missing.txt"
${dry_run} || PYTHONPATH="${site}" "${python}" "${root}/tools/wheelhouse_packages.py" --missing \
    "${wheelhouse}/requirements.txt" > "${missing}"
if ${dry_run} || [ -s "${missing}" ]; then  # an earlier check of this --work_dir may have installed all
    run "${logs}/install.log" "${python}" -m pip install --no-index --no-deps --no-build-isolation --no-compile \
        --target "${site}" --find-links "${wheelhouse}" -r "${missing}" || { echo "$0: install failed: ${logs}/install.log" >&2; exit 1; }
fi
py="${python}"
cd "${root}"
export PYTHONPATH="${site}:${root}" NLTK_DATA="${root}/tools/nltk_data" PYTHONNOUSERSITE=1 ESPNET_EXT_FORKSERVER=0
if ! ${dry_run}; then
    "${py}" -c 'import torch; print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")'
    pinned=$(sed -n 's/^torch==//p' tools/requirements.txt)
    "${py}" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '${pinned}')" ||
        echo "note: the node's torch is not tools/requirements.txt's ${pinned}: torchaudio/torchvision wheels may not match"
fi

# 2. The GPU tests.
if step_on tests; then
    mapfile -t gpu_tests < <(grep -rlE 'pytest\.mark\.gpu|mark\.gpu' tests --include='test_*.py' | sort)
    # 4 processes share the GPU where the node has pytest-xdist: the compiled-layer tests spend their time
    # compiling on the CPU (55 tests took 160 s in one process on an H100's 16 cores)
    workers=(-p no:xdist)
    if ${dry_run} || "${py}" -c 'import xdist' 2> /dev/null; then workers=(-n 4); fi
    run "${logs}/pytest_gpu.log" "${py}" -m pytest -q "${workers[@]}" -p no:cacheprovider --durations=15 -m gpu "${gpu_tests[@]}" ||
        failed+=("pytest -m gpu (${logs}/pytest_gpu.log)")
fi

# 3. Benchmarks (exit 1 also when a goal is missed: reported below, not a failure of the check).
missed=()
step_on bench || BENCHMARKS=()
for bench in "${BENCHMARKS[@]}"; do
    run "${logs}/${bench%.py}.log" "${py}" "tests/bench/${bench}" --device cuda || missed+=("${bench}")
done

# 4. The timing table.
table="${work_dir}/timing.md"
step_on timing || TIMING_ROWS=()
step_on timing && ! ${dry_run} && "${py}" -c 'import sys, torch; print(f"Measured on {torch.cuda.get_device_name()}, torch {torch.__version__}, {sys.argv[1]} updates each (the first one not counted).")' "${UPDATES}" > "${table}"
step_on timing && ! ${dry_run} && "${py}" -c 'from espnet_ext.analysis.train_timing import HEADER; print(HEADER)' >> "${table}"
i=0
for row in "${TIMING_ROWS[@]}"; do
    [[ -z "${rows}" || "${row}" =~ ${rows} ]] || continue
    IFS='|' read -r family task config size extra <<< "${row}"
    read -r utterances frames tokens vocab <<< "${size}"
    i=$((i + 1))
    log="${logs}/timing_${i}.log"
    echo "# ${family}"
    # shellcheck disable=SC2086  # extra: ESPnet options, one word each
    if run "${log}" "${py}" -m espnet_ext.analysis.train_timing --task "${task}" --config "${config}" --ngpu 1 \
        --updates "${UPDATES}" --utterances "${utterances}" --frames "${frames}" --tokens "${tokens}" \
        --vocab "${vocab}" ${extra}; then
        ${dry_run} || grep '^| ' "${log}" | tail -n 1 >> "${table}"
        ${dry_run} || grep '^waiting for the data loader' "${log}" || true
    else
        failed+=("timing of ${config} ${extra} (${log})")
        ${dry_run} || echo "| ${config} ${extra} | ${task} | failed: ${log} | | | | | | |" >> "${table}"
    fi
done

${dry_run} && exit 0
if step_on timing; then
    echo
    cat "${table}"
fi
[ ${#missed[@]} -eq 0 ] || echo "benchmarks with a missed goal (or an error; see their logs in ${logs}): ${missed[*]}"
if [ ${#failed[@]} -gt 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "GPU check passed in ${SECONDS} s; table: ${table}"
