#!/usr/bin/env bash
# Kaldi data dirs of multilingual mTEDx ASR for asr1: data/{train,valid,test} with every language together
# and data/test_<lang> per language (WER per language), each with a task tag file `lang` (<utt> <lang>) and
# `task_id` (<utt> <index of the language in --langs>, the ids of the configs' model_conf.task_tags);
# written by espnet_ext/data/mtedx.py from the release layout (<lang>-<lang>/data/<split>/{wav,txt}).
#  - MTEDX empty (db.sh): the embedded mini corpus, talks of number words spoken by espeak-ng in each
#    language, with deliberately unequal training amounts (--mini_train_sizes), generated in the release
#    layout under data/mini_release/ and prepared by the same reader.
#  - MTEDX set: the releases under ${MTEDX} (mtedx_<lang>-<lang>.tgz from https://www.openslr.org/100/,
#    extracted), languages --langs.
set -euo pipefail

langs=ar,de,el,es,fr,it,pt,ru     # real corpus: the languages, in task-id order
mini_train_sizes=es=800,fr=800,it=200,pt=100   # mini corpus: languages (in task-id order) and training utterances
mini_valid_size=40                # per language
mini_test_size=60                 # per language
mini_range=0:999
mini_seed=0
mini_num_speakers=6               # per language and split, disjoint
mini_segments_per_talk=10:20
nj=2

. ./path.sh
. utils/parse_options.sh
. ./db.sh

if [ -z "${MTEDX}" ]; then
    root=data/mini_release
    langs=$(echo "${mini_train_sizes}" | tr ',' '\n' | cut -d= -f1 | paste -sd, -)
    python -m espnet_ext.data.numbers.tedx --out "${root}" --train_sizes "${mini_train_sizes}" \
        --valid_size "${mini_valid_size}" --test_size "${mini_test_size}" --range "${mini_range}" \
        --seed "${mini_seed}" --num_speakers "${mini_num_speakers}" \
        --segments_per_talk "${mini_segments_per_talk}" --nj "${nj}"
else
    root=${MTEDX}
fi
python -m espnet_ext.data.mtedx prepare --root "${root}" --langs "${langs//,/ }" --out data
for dir in data/train data/valid data/test data/test_*; do
    python -m espnet_ext.data.task_tags --task_tags "${langs//,/ }" "${dir}/lang" "${dir}/task_id"
done
