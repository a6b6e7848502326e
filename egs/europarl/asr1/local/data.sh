#!/usr/bin/env bash
# Kaldi data dirs of the LegoNN ASR recipe, each with phn (g2p_en ARPAbet phones of the transcript) and
# phn_int (their ids in the fixed phone vocabulary data/token_list/phn/tokens.txt, espnet_ext.data.arpabet):
#   data/{train,dev,test}        the Europarl-ST English ASR sets
#   data/{ted_train,ted_dev}     TED-LIUM 3 (legacy split), for the TED pronunciation module (Table V)
#  - EUROPARL_ST empty (db.sh): the numbers world, English number words spoken by espeak-ng voices; the
#    "TED" sets are another draw (seed) of numbers and speakers: a second corpus of the same task.
#  - EUROPARL_ST set: v1.1 read from ${EUROPARL_ST} (en/<europarl_tgt>/ segment lists), lowercased without
#    punctuation (espnet_ext.data.europarl_st); TED-LIUM 3 from --tedlium (or $TEDLIUM), prepared alike.
set -euo pipefail

mini_splits="train=1500,dev=150,test=150"
mini_ted_splits="train=1500,dev=150"
mini_seed=0
mini_ted_seed=1
europarl_tgt=de         # the en/<tgt>/ segment lists the English ASR sets are read from
tedlium=${TEDLIUM:-}    # TEDLIUM_release-3/ (real corpus)
nj=2

. ./path.sh
. utils/parse_options.sh
. ./db.sh

if [ -z "${EUROPARL_ST}" ]; then
    python -m espnet_ext.data.numbers --out data/mini --langs en --modalities speech,text,phonemes \
        --splits "${mini_splits}" --seed "${mini_seed}" --nj "${nj}"
    python -m espnet_ext.data.numbers --out data/mini_ted --langs en --modalities speech,text,phonemes \
        --splits "${mini_ted_splits}" --seed "${mini_ted_seed}" --nj "${nj}"
    for split in train dev test; do
        rm -rf "data/${split}" && cp -r "data/mini/${split}" "data/${split}"
    done
    for split in train dev; do
        rm -rf "data/ted_${split}" && cp -r "data/mini_ted/${split}" "data/ted_${split}"
    done
else
    [ -n "${tedlium}" ] || { echo "$0: set TEDLIUM or --tedlium to TEDLIUM_release-3/" >&2; exit 1; }
    python -m espnet_ext.data.europarl_st prepare --root "${EUROPARL_ST}" --src en --tgt "${europarl_tgt}" \
        --splits train dev test --task asr --out data
    python -m espnet_ext.data.tedlium prepare --root "${tedlium}" --splits train dev --out data/tedlium
    for split in train dev; do
        rm -rf "data/ted_${split}" && mv "data/tedlium/${split}" "data/ted_${split}"
    done
    for dset in train dev test ted_train ted_dev; do
        python -m espnet_ext.data.arpabet g2p --text "data/${dset}/text" --out "data/${dset}/phn"
    done
fi
python -m espnet_ext.data.arpabet token_list data/token_list/phn/tokens.txt
for dset in train dev test ted_train ted_dev; do
    python -m espnet_ext.data.arpabet ids --phn "data/${dset}/phn" --out "data/${dset}/phn_int"
done
