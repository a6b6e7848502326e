#!/usr/bin/env bash
# Kaldi data dirs for the LibriSpeech recipe, plus data/lm_extended/text: the "additional data" LM text.
#  - LIBRISPEECH empty (db.sh): the embedded mini corpus, English number words spoken by espeak-ng voices,
#    written as data/{train,dev,test}. Training holds out every number ending in ${mini_heldout_digit},
#    so the decoder's internal LM never sees those endings; the extended LM text does: all number words of
#    0..9999 and 10,000 more from the wider range 10000..99999, minus the dev/test sentences. That is the
#    relaxed-attention paper's internal-LM setting (A.4) in miniature.
#    data/test_end<digit> holds the test utterances of the held-out ending. --mini_snr_db lo:hi adds white
#    noise to every utterance at an SNR drawn from lo..hi dB (conf/sweeps/paper_noisy.yaml): clean
#    synthetic speech leaves the acoustic model certain, so shallow fusion has nothing to decide.
#    --mini_heldout_word seven (the internal-LM sweep, conf/sweeps/internal_lm.yaml) also holds out every
#    number with that word: the training transcripts then never contain "seven" or "seventeen" (only
#    "seventy", so the sound is heard) while about 27 % of dev/test sentences do, and only an LM that saw
#    the extended text knows the word; data/test_<word> holds those test utterances. Off by default: the
#    main job's test WER measures the whole task.
#    --mini_test_domain repeated_tens (conf/sweeps/paper_domain.yaml): dev and test come from a domain
#    whose numbers repeat their hundreds digit in the tens (3,335; 1,557; 220), which the training
#    transcripts hardly ever say (dev/test take the domain's numbers first), and the extended LM text is that domain's (its numbers of 0..9999 and 10000..99999,
#    dev/test sentences removed): the LM knows a regularity of the test text that the decoder's internal
#    LM never learnt, as a LibriSpeech LM knows book text beyond the transcripts. With noisy audio the
#    acoustic model confuses tens ("thirty" / "twenty"), which the domain LM can settle.
#  - LIBRISPEECH set: the OpenSLR release read from ${LIBRISPEECH} (downloaded there first with
#    --download true), written as data/{train_clean_100,dev_clean,dev_other,test_clean,test_other}, plus
#    data/dev = dev_clean + dev_other for validation; the extended LM text is the LibriSpeech LM corpus
#    (SLR11, ${LIBRISPEECH_LM}/librispeech-lm-norm.txt.gz).
set -euo pipefail

download=false
parts="train-clean-100 dev-clean dev-other test-clean test-other"
mini_splits="train=2000,dev=200,test=200"
mini_seed=0
mini_heldout_digit=7    # none: no held-out ending
mini_heldout_word=""    # e.g. seven: numbers with that word held out of training too
mini_snr_db=""          # e.g. 0:10: white noise at an SNR uniform in 0..10 dB (empty: clean audio)
mini_test_domain=""     # e.g. repeated_tens: dev/test and the extended LM text from that domain (above)
mini_lm_sentences=10000     # of 0..9999 (10000: every number)
mini_lm_wide_sentences=10000
lm_max_lines=""         # real corpus: cap the LM text (empty: all 40 M sentences)
nj=2

. ./path.sh
. utils/parse_options.sh
. ./db.sh

[ "${mini_heldout_digit}" = none ] && mini_heldout_digit=""

# test_subset NAME IDS: data/NAME, the test utterances listed in the file IDS (one id per line)
test_subset() {
    local subset="data/$1" ids=$2
    rm -rf "${subset}" && mkdir -p "${subset}"
    for f in text text.en utt2num utt2spk wav.scp; do
        awk 'NR == FNR { keep[$1]; next } $1 in keep' "${ids}" "data/test/${f}" > "${subset}/${f}"
    done
    python -m espnet_ext.data.datadir fix_spk2utt "${subset}"
}

if [ -z "${LIBRISPEECH}" ]; then
    python -m espnet_ext.data.numbers --out data/mini --langs en --modalities speech,text \
        --splits "${mini_splits}" --seed "${mini_seed}" --nj "${nj}" \
        ${mini_heldout_digit:+--exclude_last_digit "${mini_heldout_digit}"} \
        ${mini_heldout_word:+--exclude_words "${mini_heldout_word}"} \
        ${mini_snr_db:+--snr_db="${mini_snr_db}"} \
        ${mini_test_domain:+--domain_digits "${mini_test_domain}" --domain_splits dev,test}
    for split in train dev test; do
        rm -rf "data/${split}"
        cp -r "data/mini/${split}" "data/${split}"
    done
    # The test utterances of the held-out ending / word, test sets of their own.
    if [ -n "${mini_heldout_digit}" ]; then
        awk -v d=",${mini_heldout_digit}," 'index(d, "," ($2 % 10) ",") { print $1 }' data/test/utt2num \
            > data/test.ids
        test_subset "test_end${mini_heldout_digit//,/}" data/test.ids
    fi
    if [ -n "${mini_heldout_word}" ]; then
        awk -v w="${mini_heldout_word}" '{ for (i = 2; i <= NF; i++) if ($i == w) { print $1; next } }' \
            data/test/text > data/test.ids
        test_subset "test_${mini_heldout_word}" data/test.ids
    fi
    rm -f data/test.ids
    # Every number 0..9999 (those ending in the held-out digit included) and as many from 10000..99999
    # (with --mini_test_domain repeated_tens the domain's numbers of both), no dev/test sentence.
    python -m espnet_ext.data.numbers.lm_text --out data/lm_extended/text --seed "$((mini_seed + 1))" \
        --narrow "0:9999=${mini_lm_sentences}" --wide "10000:99999=${mini_lm_wide_sentences}" \
        ${mini_test_domain:+--domain_digits "${mini_test_domain}"} --exclude data/dev/text data/test/text
    exit 0
fi

if [ "${download}" = true ]; then
    # shellcheck disable=SC2086
    python -m espnet_ext.data.librispeech download --dest "${LIBRISPEECH}" --parts ${parts}
    [ -z "${LIBRISPEECH_LM}" ] || python -m espnet_ext.data.librispeech download_lm --dest "${LIBRISPEECH_LM}"
fi
# shellcheck disable=SC2086
python -m espnet_ext.data.librispeech prepare --root "${LIBRISPEECH}" --parts ${parts} --out data
python -m espnet_ext.data.datadir combine data/dev data/dev_clean data/dev_other
if [ -d data/train_clean_360 ] && [ -d data/train_other_500 ]; then  # --parts with all training parts: 960 h
    python -m espnet_ext.data.datadir combine data/train_960 data/train_clean_100 data/train_clean_360 data/train_other_500
fi
if [ -n "${LIBRISPEECH_LM}" ]; then
    python -m espnet_ext.data.librispeech lm_text --src "${LIBRISPEECH_LM}/librispeech-lm-norm.txt.gz" \
        --out data/lm_extended/text ${lm_max_lines:+--max_lines "${lm_max_lines}"}
fi
