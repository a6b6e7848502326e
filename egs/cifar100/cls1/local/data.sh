#!/usr/bin/env bash
# CIFAR-100 data dirs: data/{train,test}/{image.scp,text} (PNGs in data/<set>/images) and data/class_list.
#  - CIFAR100 set (db.sh): the "python version" release in ${CIFAR100} (cifar-100-python/{meta,train,test}
#    or the tarball; --download true fetches cifar-100-python.tar.gz there, md5-checked).
#  - CIFAR100 empty: the mini corpus, written as such a release into downloads/ first (the same reader
#    then runs on it): 100 classes "00".."99", two real MNIST digits per 32x32 colour image.
# The paper trains on all 50,000 training images and reports (and tunes on) the test set (A.3.4).
set -euo pipefail

download=false
train_per_class=20      # mini corpus: images per class
test_per_class=5
seed=0

. ./path.sh
. utils/parse_options.sh
. ./db.sh

if [ -n "${CIFAR100}" ]; then
    if [ "${download}" = true ]; then
        python -m espnet_ext.data.cifar100 download --dest "${CIFAR100}"
    fi
    release=${CIFAR100}
else
    release=downloads/mini-cifar-100-python_${train_per_class}_${test_per_class}_${seed}
    python -m espnet_ext.data.cifar100 mini --out "${release}" --train_per_class "${train_per_class}" \
        --test_per_class "${test_per_class}" --seed "${seed}"
fi
python -m espnet_ext.data.cifar100 prepare --release "${release}" --out data
