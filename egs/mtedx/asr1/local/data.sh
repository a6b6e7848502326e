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
mini_other_train_sizes=es=150,it=150,pt=150  # its languages and training utterances
. utils/mtedx_data.sh             # the mini corpus' other options, --other_domains, --nj (shared with ../st1)

. ./path.sh
. utils/parse_options.sh
. ./db.sh

languages() { tr ',' '\n' <<< "$1" | cut -d= -f1 | paste -sd' ' -; }

if [ -z "${MTEDX}" ]; then
    root=data/mini_release
    langs=$(languages "${mini_train_sizes}" | tr ' ' ',')
    mini_tedx --train_sizes "${mini_train_sizes}" "${root}"
    if [ "${mini_other_domain}" = true ]; then
        mini_tedx --train_sizes "${mini_other_train_sizes}" data/mini_release_other other
        python -m espnet_ext.data.mtedx prepare --root data/mini_release_other \
            --langs "$(languages "${mini_other_train_sizes}")" --out data/other
        other_domains=${other_domains:+${other_domains},}other=data/other
    fi
else
    root=${MTEDX}
fi
python -m espnet_ext.data.mtedx prepare --root "${root}" --langs "${langs//,/ }" --out data
combine_domains text,lang
for dir in "${split_dirs[@]}" data/test data/test_*; do
    python -m espnet_ext.data.task_tags --task_tags "${langs//,/ }" "${dir}/lang" "${dir}/task_id"
done
for dir in "${split_dirs[@]}"; do
    python -m espnet_ext.data.task_tags --task_tags "${domains//,/ }" "${dir}/domain" "${dir}/domain_id"
done
