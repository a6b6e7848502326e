#!/usr/bin/env bash
# Kaldi data dirs for the LibriSpeech recipe.
#  - LIBRISPEECH empty (db.sh): the embedded mini corpus, English number words spoken by espeak-ng voices,
#    written as data/{train,dev,test}.
#  - LIBRISPEECH set: the OpenSLR release read from ${LIBRISPEECH} (downloaded there first with
#    --download true), written as data/{train_clean_100,dev_clean,dev_other,test_clean,test_other}, plus
#    data/dev = dev_clean + dev_other for validation.
set -euo pipefail

download=false
parts="train-clean-100 dev-clean dev-other test-clean test-other"
mini_splits="train=2000,dev=200,test=200"
mini_seed=0
nj=2

. ./path.sh
. utils/parse_options.sh
. ./db.sh

if [ -z "${LIBRISPEECH}" ]; then
    python -m espnet_ext.data.numbers --out data/mini --langs en --modalities speech,text \
        --splits "${mini_splits}" --seed "${mini_seed}" --nj "${nj}"
    for split in train dev test; do
        rm -rf "data/${split}"
        cp -r "data/mini/${split}" "data/${split}"
    done
    exit 0
fi

if ${download}; then
    # shellcheck disable=SC2086
    python -m espnet_ext.data.librispeech download --dest "${LIBRISPEECH}" --parts ${parts}
fi
# shellcheck disable=SC2086
python -m espnet_ext.data.librispeech prepare --root "${LIBRISPEECH}" --parts ${parts} --out data
python -m espnet_ext.data.datadir combine data/dev data/dev_clean data/dev_other
