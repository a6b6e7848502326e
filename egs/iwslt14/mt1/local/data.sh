#!/usr/bin/env bash
# Data dirs data/{train,valid,test} (text.de, text.en, text = English) for the IWSLT14 de->en recipe, plus
# data/lm_extended/text: the "additional data" LM text (English).
#  - IWSLT14 empty (db.sh): the embedded mini corpus, German number words -> English number words
#    (num2words, 0..9999). The MT training set holds out every number ending in ${mini_heldout_digit}
#    and every number whose English words contain ${mini_heldout_word}: the decoder never writes "seven"
#    or "seventeen" in training (only "seventy"), so its internal LM learns that they do not exist and,
#    at test time, writes another word in their place (about 27 % of valid/test need them).
#    valid/test keep those numbers. The extended LM text knows them: English number words of all of 0..9999
#    (held-out numbers included) and as many from the wider range 10000..99999, minus every valid/test
#    sentence, so the LM never saw a test target either. An LM on the MT training targets only
#    ("transcripts") cannot help there; the extended one can when the decoder's internal LM is suppressed:
#    the relaxed-attention paper's IWSLT14 + MuST-C LM setting (§4.3) in miniature.
#    --mini_test_domain repeated_tens (conf/sweeps/paper_domain.yaml): valid and test come from a domain
#    whose numbers repeat their hundreds digit in the tens (3,335; 1,557; 220), which the training
#    targets hardly ever say (valid/test take the domain's numbers first), and the extended LM text is that domain's: the LM knows a regularity of the test targets that
#    the decoder's internal LM never learnt. --mini_source_noise P replaces each German character with
#    probability P in every split (espnet_ext.data.text_noise), the analogue of noisy audio: the model has to
#    guess some source words, and there the domain LM can settle the choice.
#  - IWSLT14 set: the IWSLT 2014 de-en release read from ${IWSLT14} (fetched there first with
#    --download true), split as fairseq's prepare-iwslt14.sh (valid = every 23rd training pair, test =
#    dev2010 + dev2012 + tst2010 + tst2011 + tst2012; see espnet_ext/data/iwslt14.py), lowercased as there
#    (--lowercase false keeps case). The extended LM text is ${IWSLT14_LM} (one English sentence per line;
#    the paper used the MuST-C English transcripts), lowercased alike, minus the valid/test sentences.
set -euo pipefail

download=false
lowercase=true
mini_splits="train=4000,valid=300,test=300"
mini_seed=0
mini_heldout_digit=7    # none: no held-out ending
mini_heldout_word=seven # English; none: no held-out word
mini_test_domain=""     # e.g. repeated_tens: valid/test and the extended LM text from that domain (above)
mini_source_noise=""    # e.g. 0.2: German characters replaced with that probability in every split (above)
mini_lm_sentences=10000     # of 0..9999 (10000: every number)
mini_lm_wide_sentences=10000

. ./path.sh
. utils/parse_options.sh
. ./db.sh

[ "${mini_heldout_digit}" = none ] && mini_heldout_digit=""
[ "${mini_heldout_word}" = none ] && mini_heldout_word=""

# keep_unseen TEXT EXCLUDED... : TEXT without the sentences of the EXCLUDED Kaldi text files
keep_unseen() {
    local text=$1
    shift
    awk 'FILENAME != ARGV[ARGC - 1] { $1 = ""; seen[substr($0, 2)] = 1; next }
         { line = $0; $1 = ""; if (!(substr($0, 2) in seen)) print line }' "$@" "${text}"
}

mkdir -p data/lm_extended
if [ -z "${IWSLT14}" ]; then
    # German source numbers as German writes them, one compound ("dreihundertzwölf"): the split form the
    # En->De corpora use so that German *targets* have n-grams for BLEU buys nothing here, and the 4-epoch
    # mini model does not learn it (test BLEU 48 instead of 84; RESULTS.md).
    python -m espnet_ext.data.numbers --out data/mini --langs de,en --modalities text \
        --compound_langs de --splits "${mini_splits}" --seed "${mini_seed}" \
        ${mini_heldout_digit:+--exclude_last_digit "${mini_heldout_digit}"} \
        ${mini_heldout_word:+--exclude_words "${mini_heldout_word}" --exclude_words_lang en} \
        ${mini_test_domain:+--domain_digits "${mini_test_domain}" --domain_splits valid,test}
    for split in train valid test; do
        rm -rf "data/${split}"
        mkdir -p "data/${split}"
        cp "data/mini/${split}/text.de" "data/mini/${split}/text.en" "data/${split}/"
        cp "data/mini/${split}/text.en" "data/${split}/text"   # the target side under ESPnet's name
        [ -z "${mini_source_noise}" ] || python -m espnet_ext.data.text_noise --prob "${mini_source_noise}" \
            --seed "${mini_seed}" "data/${split}/text.de" "data/${split}/text.de"
    done
    # English words of 0..9999 and as many of 10000..99999 (with --mini_test_domain repeated_tens only the
    # domain's); the valid/test sentences are removed below.
    python -m espnet_ext.data.numbers.lm_text --out data/lm_extended/all.tmp --seed "$((mini_seed + 1))" \
        --narrow "0:9999=${mini_lm_sentences}" --wide "10000:99999=${mini_lm_wide_sentences}" \
        ${mini_test_domain:+--domain_digits "${mini_test_domain}"}
else
    if [ "${download}" = true ]; then
        python -m espnet_ext.data.iwslt14 download --dest "${IWSLT14}"
    fi
    lowercase_opt=()
    [ "${lowercase}" = true ] && lowercase_opt=(--lowercase)
    python -m espnet_ext.data.iwslt14 prepare --root "${IWSLT14}" --out data "${lowercase_opt[@]}"
    : > data/lm_extended/all.tmp
    if [ -n "${IWSLT14_LM}" ]; then
        [ -f "${IWSLT14_LM}" ] || { echo "IWSLT14_LM=${IWSLT14_LM}: no such file" >&2; exit 1; }
        # Kaldi ids for plain lines; blank lines dropped; whitespace runs collapsed.
        awk -v lc="${lowercase}" 'NF { $1 = $1; if (lc == "true") $0 = tolower($0); printf "ext-%09d %s\n", NR, $0 }' \
            "${IWSLT14_LM}" > data/lm_extended/all.tmp
    fi
fi
keep_unseen data/lm_extended/all.tmp data/valid/text data/test/text | sort -k1,1 > data/lm_extended/text.tmp
mv data/lm_extended/text.tmp data/lm_extended/text
rm data/lm_extended/all.tmp
