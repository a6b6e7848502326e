#!/usr/bin/env bash
# Data dirs of egs/wmt/mt1 for one --task, read from WMT release directories by espnet_ext/data/wmt.py
# (plain parallel text, tsv, newstest sgm, WMT21+ xml; python -m espnet_ext.data.wmt --help):
#  multilingual_m2o  data/m2o_{train,valid} (every language -> English, source side text.mul) and
#                    data/m2o_test_<x> per language;
#  multilingual_o2m  data/o2m_... (English -> every language, target side text.mul); the source starts with
#                    the target-language token <2x>, which tells every model (the shared one too) what to write;
#     both with `lang` (the non-English language of the pair: the task) and `task_id` (its index in --langs),
#     written by espnet_ext/data/wmt_multilingual.py in one process;
#  lego              data/{ende,deen,roen}_{train,valid} and data/<pair>_test_<set> per test set, De-En and
#                    Ro-En lowercased, and the joint dictionaries of the LegoNN setups (§V): data/token_list/
#                    lego_ende (En-De, shared BPE) and lego_deroen (one over De-En + Ro-En, so modules compose).
# Release layout, one dir per pair (the files as WMT ships them, under any names release_corpora knows):
#   <root>/<x>-en/train/   the training corpora (europarl-v7.de-en.{de,en}, commoncrawl.de-en.{de,en},
#                          news-commentary-v14.de-en.tsv, corpus.{ro,en} ...)
#   <root>/<x>-en/dev/     the dev sets (newstest2013-src.de.sgm + newstest2013-ref.en.sgm, or an xml, e.g. all of
#                          the edition's dev.tgz); valid is one of them: multilingual, the language's
#                          (--multilingual_dev, below); lego, the setup's (--<pair>_dev, below)
#   <root>/<x>-en/test/    the test sets (newstest2011..2016 sgm, wmttest2022.de-en.xml): multilingual, one
#                          per language (--multilingual_test, below) in data/<dir>_test_<x>; lego, one data dir
#                          each, named without the pair WMT puts into names from 2014 on: newstest2014-deen-src.en.sgm
#                          -> data/ende_test_newstest2014 (the -ende/-deen files of one year's set: this direction's)
#  - WMT empty (db.sh): the embedded mini corpus (espnet_ext/data/numbers/wmt.py) in that layout under
#    data/mini_release/{multilingual,lego}: number words of --mini_train_sizes' languages <-> English, German
#    split at its number morphemes ("drei hundert zwölf", so En->De BLEU has n-grams to match); the De-En
#    source, a release of its own as WMT19's, under data/mini_release/lego_compound as German writes numbers
#    ("dreihundertzwölf": split, every morpheme starts a word and the short mini training swaps them).
#  - WMT set: ${WMT}/multilingual/<x>-en for the 14 languages of the head-selection paper (Liu et al. 2020's
#    WMT collection), ${WMT}/wmt14/de-en (En-De, 4.5M pairs), ${WMT}/wmt19/de-en (De-En without ParaCrawl:
#    leave it out of train/), ${WMT}/wmt16/ro-en (Ro-En). No download: WMT's corpora come from several
#    sites under their own terms; fetch them from https://www.statmt.org/wmt14/ (wmt16, wmt19) into that layout.
# Memory does not grow with the corpora (a few hundred MB: the pairs stream to GNU sort, which holds 512M at
# most); disk does: while a data dir is written, its unsorted tables and sort's runs lie beside it under data/
# (up to about twice the finished dir).
set -euo pipefail

task=lego                   # multilingual_m2o, multilingual_o2m or lego
langs=cs,de,es,et,fi,fr,gu,kk,lt,lv,ro,ru,tr,zh   # real multilingual: the languages, in task-id order
ende_nbpe=32000             # real: the shared En-De BPE
deroen_nbpe=41000           # real: the joint De-En + Ro-En BPE
bpe_opts=""                 # more options of espnet_ext.text.token_list for the LegoNN dictionaries
mini_train_sizes=cs=1200,de=1200,es=1200,fi=150,fr=1200,kk=150,lt=150,lv=150,ro=150,ru=1200,tr=150  # mini: task-id order
mini_lego_sizes=de=3000,ro=1000     # mini LegoNN: German (En-De and De-En) and Romanian
mini_valid_size=100         # per language
mini_test_size=100          # per language
mini_seed=0
# Multilingual dev sets (valid), one per language, <x>=<set>: Gong et al. use "the WMT datasets as used by
# (Liu et al., 2020)" (§4.1; Table 7 = mBART's Table 1: each language's WMT edition, es WMT13, fr WMT14, ro WMT16,
# fi/lv/tr/zh WMT17, et WMT18, cs/de/gu/kk/lt/ru WMT19), and fairseq's preparation of that collection
# (examples/multilingual/data_scripts/download_wmt19_and_before.py, valid_files_patterns) takes as dev set
# newstest2012 (es), newstest2013 (fr), newsdev2016 (ro), newsdev2017 (lv, zh), newstest2016 (fi, tr; no
# newsdev2017 for them), newsdev2018 (et), newsdev2019 (gu, kk, lt), newstest2018 (ru); cs and de, which it
# leaves out, get their WMT19 edition's dev set as ru does, newstest2018. Mini release: newsdev for all.
multilingual_dev=cs=newstest2018,de=newstest2018,es=newstest2012,et=newsdev2018,fi=newstest2016,fr=newstest2013,gu=newsdev2019,kk=newsdev2019,lt=newsdev2019,lv=newsdev2017,ro=newsdev2016,ru=newstest2018,tr=newstest2016,zh=newsdev2017
# Multilingual test sets, one per language, <x>=<set>: the newstest of the language's WMT edition, as that
# script's test_files_patterns pick it: newstest2013 (es: wmt13 test.tgz test/newstest*), newstest2014 (fr:
# wmt14 test-full), newstest2016 (ro), newstest2017 (fi, lv, tr, zh), newstest2018 (et), newstest2019 (gu, kk,
# lt, ru). cs and de, whose directions it leaves out (cs's wmt18 pattern commented out, de only in the wmt14
# entry): newstest2019, the test set of their WMT19 edition (Table 7 = mBART's Table 1), whose dev set
# newstest2018 is valid. Mini release: wmttest for all.
multilingual_test=cs=newstest2019,de=newstest2019,es=newstest2013,et=newstest2018,fi=newstest2017,fr=newstest2014,gu=newstest2019,kk=newstest2019,lt=newstest2019,lv=newstest2017,ro=newstest2016,ru=newstest2019,tr=newstest2017,zh=newstest2017
# LegoNN dev sets (valid), one each: the paper's En-De dev set is newstest2013 (§V-B); Ro-En is "the data
# prepared by [37]" (§V-C1, Lee et al. 2018: dev newsdev2016, test newstest2016); for WMT19 De-En the paper
# names none, newstest2018 is WMT19's own dev set for it. Empty: those (real), newsdev (the mini release).
ende_dev=""
deen_dev=""
roen_dev=""
mini_nbpe=150               # mini LegoNN joint dictionary, and its SentencePiece options (German pieces of
mini_bpe_opts="--hard_vocab_limit false --max_sentencepiece_length 7"  # at most 7 characters: number morphemes)

. ./path.sh
. utils/parse_options.sh
. ./db.sh
# Run alone (not from mt.sh, which exports it): the job backend of cmd.sh's ${cmd_backend} (local).
[ -n "${train_cmd:-}" ] || . ./cmd.sh

# prepare OUT SRC TGT DIR [OPTIONS]: one data dir of every corpus of the pair in DIR
prepare() {
    local out=$1 src=$2 tgt=$3 dir=$4
    shift 4
    python -m espnet_ext.data.wmt prepare --out "${out}" --src_lang "${src}" --tgt_lang "${tgt}" --dir "${dir}" "$@"
}

# lego_pair NAME SRC TGT ROOT DEV [OPTIONS]: data/NAME_{train,valid}, data/NAME_test_<set>; valid is the dev set DEV
lego_pair() {
    local name=$1 src=$2 tgt=$3 root=$4 dev=$5
    shift 5
    prepare "data/${name}_train" "${src}" "${tgt}" "${root}/train" "$@"
    prepare "data/${name}_valid" "${src}" "${tgt}" "${root}/dev" --sets "${dev}" "$@"
    prepare "data/${name}_test" "${src}" "${tgt}" "${root}/test" --each "$@"
}

# dictionary NAME NBPE TEXT...: one SentencePiece model over all TEXT files. Kept while its inputs are
# unchanged: the experiments (and module artefacts) made with it must go on reading the same tokens.
dictionary() {
    local name=$1 nbpe=$2 out="data/token_list/$1" inputs
    shift 2
    inputs=$(cat "$@" | md5sum)" ${nbpe} ${bpe_opts}"
    [ "$(cat "${out}/.inputs" 2> /dev/null)" != "${inputs}" ] || return 0
    local args=(--token_type bpe --model_type unigram --vocab_size "${nbpe}" --text "$@" --out_dir "${out}") mem
    # its own job, asking for the memory SentencePiece's sample takes (~30 GB for the WMT corpora), which the
    # data preparation's job does not have
    # shellcheck disable=SC2086
    mem=$(python -m espnet_ext.text.token_list "${args[@]}" ${bpe_opts} --print_job_memory) || return 1
    # shellcheck disable=SC2086
    ${train_cmd} --mem "${mem}" "data/log/token_list_${name}.log" \
        python -m espnet_ext.text.token_list "${args[@]}" ${bpe_opts} || return 1
    echo "${inputs}" > "${out}/.inputs"
}

if [ -z "${WMT}" ]; then
    langs=$(echo "${mini_train_sizes}" | tr ',' '\n' | cut -d= -f1 | paste -sd, -)
    mini=(--valid_size "${mini_valid_size}" --test_size "${mini_test_size}" --seed "${mini_seed}")
    case "${task}" in
        multilingual_*) python -m espnet_ext.data.numbers.wmt --out data/mini_release/multilingual \
            --train_sizes "${mini_train_sizes}" "${mini[@]}" ;;
        lego)
            python -m espnet_ext.data.numbers.wmt --out data/mini_release/lego \
                --train_sizes "${mini_lego_sizes}" "${mini[@]}"
            python -m espnet_ext.data.numbers.wmt --out data/mini_release/lego_compound --compound_langs de \
                --train_sizes "$(tr ',' '\n' <<< "${mini_lego_sizes}" | grep '^de=')" "${mini[@]}" ;;
    esac
fi
case "${task}" in
    multilingual_*)
        if [ -z "${WMT}" ]; then  # the mini release: newsdev and wmttest for every language
            multilingual_dev=$(tr ',' '\n' <<< "${langs}" | sed 's/$/=newsdev/' | paste -sd, -)
            multilingual_test=$(tr ',' '\n' <<< "${langs}" | sed 's/$/=wmttest/' | paste -sd, -)
        fi
        root=${WMT:+${WMT}/multilingual}
        python -m espnet_ext.data.wmt_multilingual --direction "${task#multilingual_}" \
            --root "${root:-data/mini_release/multilingual}" --out data --langs "${langs}" \
            --multilingual_dev "${multilingual_dev}" --multilingual_test "${multilingual_test}"
        ;;
    lego)
        if [ -z "${WMT}" ]; then
            ende=data/mini_release/lego/de-en; deen=data/mini_release/lego_compound/de-en
            roen=data/mini_release/lego/ro-en
            dev=(newsdev newsdev newsdev)
        else
            ende=${WMT}/wmt14/de-en; deen=${WMT}/wmt19/de-en; roen=${WMT}/wmt16/ro-en
            dev=(newstest2013 newstest2018 newsdev2016)
        fi
        lego_pair ende en de "${ende}" "${ende_dev:-${dev[0]}}"
        lego_pair deen de en "${deen}" "${deen_dev:-${dev[1]}}" --lowercase
        lego_pair roen ro en "${roen}" "${roen_dev:-${dev[2]}}" --lowercase
        deroen=(data/deen_train/text.de data/deen_train/text.en data/roen_train/text.ro data/roen_train/text.en)
        if [ -z "${WMT}" ]; then  # one dictionary for every mini module: both forms of German numbers
            bpe_opts="${bpe_opts} ${mini_bpe_opts}"
            dictionary lego_mini "${mini_nbpe}" "${deroen[@]}" data/ende_train/text.de
        else
            dictionary lego_ende "${ende_nbpe}" data/ende_train/text.en data/ende_train/text.de
            dictionary lego_deroen "${deroen_nbpe}" "${deroen[@]}"
        fi
        ;;
    *) echo "$0: --task must be multilingual_m2o, multilingual_o2m or lego, not '${task}'" >&2; exit 1 ;;
esac
