#!/usr/bin/env bash
# data/{train,valid,test}/{text.de,text.en,text}: German -> English number words of the numbers world
# (text = the English target, ESPnet's name). The English side is lower case without punctuation, as the
# ASR recipe's transcripts, so one English BPE serves both.
set -euo pipefail

mini_splits="train=3000,valid=200,test=200"
mini_seed=0

. ./path.sh
. utils/parse_options.sh

python -m espnet_ext.data.numbers --out data/mini --langs de,en --modalities text \
    --splits "${mini_splits}" --seed "${mini_seed}"
for split in train valid test; do
    rm -rf "data/${split}"
    mkdir -p "data/${split}"
    cp "data/mini/${split}/text.de" "data/mini/${split}/text.en" "data/${split}/"
    cp "data/mini/${split}/text.en" "data/${split}/text"
done
