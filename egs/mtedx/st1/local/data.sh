#!/usr/bin/env bash
# Kaldi data dirs of multilingual mTEDx ST for st1: data/{train,valid} (the trained directions together),
# data/test (every test direction) and data/test_<src>-<tgt> per direction (BLEU per direction), written by
# espnet_ext/data/mtedx.py (prepare_st) from the release layout <src>-<tgt>/data/<split>/{wav,txt}, with
#   text.src / text.tgt    transcript / translation (st.sh --src_lang src --tgt_lang tgt)
#   src_lang, tgt_lang, direction, domain    task tags <utt> <tag>
# and, for training and validation, the task ids ESPnet reads (text_int; espnet_ext.data.task_tags):
#   src_lang_id   position of the source language in --src_langs: the encoder's task (head selection by
#                 source language; the same list as ../asr1's model_conf.task_tags, whose encoder starts ours)
#   tgt_lang_id   position of the target language in --tgt_langs: the decoder's task and its start symbol
#   direction_id  position of the direction in the trained directions: the adapter model's task
#   domain_id     position of the domain in --domains (multi-domain ST: selection by domain)
#  - MTEDX empty (db.sh): the embedded mini corpus (espnet_ext/data/numbers/tedx.py): number words spoken in
#    the source language, translated into the target language, mTEDx's directions whose source ../asr1's
#    mini corpus speaks, unequal amounts, the zero-shot it-en, it-es, pt-es with test data only
#    (--mini_st_train_sizes, size 0 = zero-shot); generated under data/mini_release/.
#  - MTEDX set: the releases under ${MTEDX} (mtedx_<src>-<tgt>.tgz from https://www.openslr.org/100/,
#    extracted): --train_directions, --zero_shot_directions.
# Multi-domain ST (Table 5): --other_domains "<domain>=<data root>,...": each root holds Kaldi data dirs
# train, valid, test_<src>-<tgt> with the tables above (text.src, text.tgt, src_lang, tgt_lang, direction),
# as the CoVoST 2 / Europarl-ST readers (espnet_ext/data/{covost2,europarl_st}.py) write them; their train
# and valid are added to ours, their tests become test_<domain>_<src>-<tgt>. --mini_other_domain true
# generates such a domain from the numbers world (other voices, faster speech) as "other".
set -euo pipefail

train_directions="el-en es-en es-fr es-it es-pt fr-en fr-es fr-pt pt-en ru-en"  # real corpus
zero_shot_directions="it-en it-es pt-es"                                         # real: test only
src_langs=ar,de,el,es,fr,it,pt,ru        # real: the encoder's task order (../asr1's --langs)
tgt_langs=en,es,fr,it,pt                 # the decoder's task order (target languages)
mini_src_langs=es,fr,it,pt               # mini: ../asr1's mini languages, in its task order
# mini: direction=training utterances (0: zero-shot, test only), in direction-id order
mini_st_train_sizes=es-en=400,es-fr=60,es-it=80,es-pt=240,fr-en=360,fr-es=240,fr-pt=150,pt-en=360,it-en=0,it-es=0,pt-es=0
mini_other_st_train_sizes=es-en=200,it-en=150,it-es=150,pt-es=150  # it: directions mTEDx lacks
. utils/mtedx_data.sh                    # the mini corpus' other options, --other_domains, --nj (shared with ../asr1)

. ./path.sh
. utils/parse_options.sh
. ./db.sh

trained() { tr ',' '\n' <<< "$1" | grep -v '=0$' | cut -d= -f1 | paste -sd' ' -; }
zero_shot() { tr ',' '\n' <<< "$1" | grep '=0$' | cut -d= -f1 | paste -sd' ' -; }

if [ -z "${MTEDX}" ]; then
    root=data/mini_release
    src_langs=${mini_src_langs}
    train_directions=$(trained "${mini_st_train_sizes}")
    zero_shot_directions=$(zero_shot "${mini_st_train_sizes}")
    mini_tedx --st_train_sizes "${mini_st_train_sizes}" "${root}"
    if [ "${mini_other_domain}" = true ]; then
        mini_tedx --st_train_sizes "${mini_other_st_train_sizes}" data/mini_release_other other
        python -m espnet_ext.data.mtedx prepare_st --root data/mini_release_other --out data/other \
            --train_directions "$(trained "${mini_other_st_train_sizes}")" \
            --test_directions "$(trained "${mini_other_st_train_sizes}") $(zero_shot "${mini_other_st_train_sizes}")"
        other_domains=${other_domains:+${other_domains},}other=data/other
    fi
else
    root=${MTEDX}
fi
python -m espnet_ext.data.mtedx prepare_st --root "${root}" --train_directions "${train_directions}" \
    --test_directions "${train_directions} ${zero_shot_directions}" --out data
combine_domains text.src,text.tgt,tgt_lang
for dir in "${split_dirs[@]}"; do
    python -m espnet_ext.data.task_tags --task_tags "${src_langs//,/ }" "${dir}/src_lang" "${dir}/src_lang_id"
    python -m espnet_ext.data.task_tags --task_tags "${tgt_langs//,/ }" "${dir}/tgt_lang" "${dir}/tgt_lang_id"
    python -m espnet_ext.data.task_tags --task_tags "${domains//,/ }" "${dir}/domain" "${dir}/domain_id"
    if [ -z "${other_domains}" ]; then  # other domains have directions of their own
        python -m espnet_ext.data.task_tags --task_tags "${train_directions}" "${dir}/direction" "${dir}/direction_id"
    fi
done
