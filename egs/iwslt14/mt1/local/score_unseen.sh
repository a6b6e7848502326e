#!/usr/bin/env bash
# BLEU and unseen-word recall on the sentences whose reference holds a word the MT training targets lack
# (mini corpus: "seven", "seventeen"), for decoded sets of the recipe:
#   local/score_unseen.sh exp/mt_<tag>/<decode>/test ...   -> <dir>/score_bleu_unseen/result.{txt,json}
# The set's reference is dump/raw/<set>/text.en, the training targets dump/raw/train_filtered/text.en.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 DECODE_DIR/SET..." >&2; exit 1; }
. ./path.sh
for dir in "$@"; do
    python -m espnet_ext.scoring.unseen_words --train_text dump/raw/train_filtered/text.en \
        --ref "dump/raw/$(basename "${dir}")/text.en" --hyp "${dir}/text" --out_dir "${dir}/score_bleu_unseen"
done
