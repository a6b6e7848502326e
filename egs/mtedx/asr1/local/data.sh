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
# Every dir also gets `domain` (<utt> tedx) and train/valid `domain_id` (the position in tedx and the other
# domains, in their order): multi-domain ASR (Table 3, run.sh --tasks domains). --other_domains
# "<domain>=<data root>,...": each root holds Kaldi data dirs train, valid, test_<lang> with text and lang,
# as the CoVoST 2 / Europarl-ST readers write them (python -m espnet_ext.data.{covost2,europarl_st}
# prepare --task asr, one language each, combined per split); their train and valid are added to ours
# (ids prefixed by the domain), their tests become test_<domain>_<lang> (espnet_ext/data/domains.py).
# --mini_other_domain true generates such a domain from the numbers world (other voices, faster speech,
# --mini_other_train_sizes) as "other".
set -euo pipefail

langs=ar,de,el,es,fr,it,pt,ru     # real corpus: the languages, in task-id order
mini_train_sizes=es=800,fr=800,it=200,pt=100   # mini corpus: languages (in task-id order) and training utterances
mini_valid_size=40                # per language
mini_test_size=60                 # per language
mini_range=0:999
mini_seed=0
mini_num_speakers=6               # per language and split, disjoint
mini_segments_per_talk=10:20
mini_other_domain=false           # also generate the numbers world's second domain ("other")
mini_other_train_sizes=es=150,it=150,pt=150  # its languages and training utterances
other_domains=""                  # <domain>=<root of Kaldi data dirs>,... (multi-domain ASR)
nj=2

. ./path.sh
. utils/parse_options.sh
. ./db.sh

tedx() {  # tedx OUT SIZES [DOMAIN]: the mini corpus' ASR releases
    python -m espnet_ext.data.numbers.tedx --out "$1" --train_sizes "$2" --domain "${3:-tedx}" \
        --valid_size "${mini_valid_size}" --test_size "${mini_test_size}" --range "${mini_range}" \
        --seed "${mini_seed}" --num_speakers "${mini_num_speakers}" \
        --segments_per_talk "${mini_segments_per_talk}" --nj "${nj}"
}
languages() { tr ',' '\n' <<< "$1" | cut -d= -f1 | paste -sd' ' -; }

if [ -z "${MTEDX}" ]; then
    root=data/mini_release
    langs=$(languages "${mini_train_sizes}" | tr ' ' ',')
    tedx "${root}" "${mini_train_sizes}"
    if [ "${mini_other_domain}" = true ]; then
        tedx data/mini_release_other "${mini_other_train_sizes}" other
        python -m espnet_ext.data.mtedx prepare --root data/mini_release_other \
            --langs "$(languages "${mini_other_train_sizes}")" --out data/other
        other_domains=${other_domains:+${other_domains},}other=data/other
    fi
else
    root=${MTEDX}
fi
python -m espnet_ext.data.mtedx prepare --root "${root}" --langs "${langs//,/ }" --out data
domains=tedx
rm -rf data/train_* data/valid_*  # a previous run's domain dirs (combine writes them anew)
if [ -n "${other_domains}" ]; then  # adds a domain table to train and valid, test_<domain>_* dirs and
    # each domain's own data/{train,valid}_<domain> (the "separate" models)
    # shellcheck disable=SC2086
    python -m espnet_ext.data.domains combine --data data --require text,lang ${other_domains//,/ }
    domains+=",$(tr ',' '\n' <<< "${other_domains}" | cut -d= -f1 | paste -sd, -)"
fi
split_dirs=(data/train data/valid)
for dir in data/train_* data/valid_*; do [ ! -d "${dir}" ] || split_dirs+=("${dir}"); done
for dir in "${split_dirs[@]}" data/test data/test_*; do
    [ -f "${dir}/domain" ] || awk '{print $1, "tedx"}' "${dir}/text" > "${dir}/domain"
    python -m espnet_ext.data.task_tags --task_tags "${langs//,/ }" "${dir}/lang" "${dir}/task_id"
done
for dir in "${split_dirs[@]}"; do
    python -m espnet_ext.data.task_tags --task_tags "${domains//,/ }" "${dir}/domain" "${dir}/domain_id"
done
