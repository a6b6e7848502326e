#!/usr/bin/env bash
# Kaldi data dirs of MuST-C en-${tgt_lang} for the asr1 and st1 recipes: data/<split> (tst-COMMON ->
# tst_COMMON) with segments into the talk wavs, text.en (transcript), text.${tgt_lang} (translation) and
# text = text.en (what asr.sh reads); written by espnet_ext/data/mustc.py from the release layout.
#  - MUSTC empty (db.sh): the embedded mini corpus, long "talks" of English number words spoken by
#    espeak-ng voices, German (--tgt_lang) number words as translations, generated in the release layout
#    under data/mini_release/ and prepared by the same reader.
#  - MUSTC set: the release under ${MUSTC} (en-${tgt_lang}/data/...). MuST-C is handed out only after
#    accepting FBK's licence: put MUSTC_v1.0_en-${tgt_lang}.tar.gz into ${MUSTC} and this stage extracts it;
#    without it the stage stops and says where to get it.
set -euo pipefail

tgt_lang=de
splits="train dev tst-COMMON tst-HE"
mini_splits="train=2000,dev=200,tst-COMMON=200"
mini_seed=0
mini_num_speakers=8     # per split, disjoint
mini_segments_per_talk=20:40
nj=2

. ./path.sh
. utils/parse_options.sh
. ./db.sh

if [ -z "${MUSTC}" ]; then
    root=data/mini_release
    python -m espnet_ext.data.numbers.talks --out "${root}" --tgt_lang "${tgt_lang}" --splits "${mini_splits}" \
        --seed "${mini_seed}" --num_speakers "${mini_num_speakers}" \
        --segments_per_talk "${mini_segments_per_talk}" --nj "${nj}"
    splits=$(echo "${mini_splits}" | tr ',' '\n' | cut -d= -f1 | tr '\n' ' ')
else
    root=${MUSTC}
    python -m espnet_ext.data.mustc check --root "${root}" --tgt_lang "${tgt_lang}"
fi
# shellcheck disable=SC2086
python -m espnet_ext.data.mustc prepare --root "${root}" --tgt_lang "${tgt_lang}" --splits ${splits} --out data
