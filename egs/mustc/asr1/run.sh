#!/usr/bin/env bash
# MuST-C ASR (English transcripts of the en-de talks): the ASR pre-training of the Multiformer thesis, whose
# encoder initialises ../st1. With MUSTC unset in db.sh this runs the embedded mini corpus (talks of spoken
# English numbers, segments cut by a MuST-C segment list) on a CPU in minutes; with it set, MuST-C v1 en-de.
#   ./run.sh [--stage N] [--stop_stage M] [--cmd_backend slurm] [--ngpu K --num_nodes J] [asr.sh options]
# 80-dim fbank; SentencePiece unigram: 5,000 pieces on MuST-C (fairseq's MuST-C ASR recipe), on the mini
# corpus 100 at most (its few dozen number words need fewer: --hard_vocab_limit false). Scored by WER.
# Real mode: WER as fairseq's MuST-C ASR evaluation (examples/speech_to_text/docs/mustc_example.md:
# --wer-tokenizer 13a --wer-lowercase --wer-remove-punct; the raw WER of the true-cased, punctuated text beside
# it), of the best checkpoint (valid.acc.best.pth), the one Tabla 3 scores and ../st1 starts from (thesis §5.3,
# Anexo A); --inference_model valid.acc.ave.pth scores the 10-best average instead.
set -euo pipefail
. ./db.sh

if [ -z "${MUSTC}" ]; then
    sets=(--train_set train --valid_set dev --test_sets "tst_COMMON")
    opts=(--asr_config conf/train_asr_mini.yaml --nbpe 100 --bpe_opts "--hard_vocab_limit false"
          --nj 2 --inference_nj 2 --train_num_threads "$(nproc)" --max_frames 1500)
    title="MuST-C ASR recipe on the embedded mini corpus (talks of spoken English numbers; mini scale)"
    scale=_mini
else
    sets=(--train_set train --valid_set dev --test_sets "tst_COMMON tst_HE")
    opts=(--asr_config conf/train_asr.yaml --nbpe 5000 --nj 32 --inference_nj 32 --max_frames 3000
          --inference_model valid.acc.best.pth --wer_opts "--tokenizer 13a --lowercase --remove_punct")
    title="MuST-C v1 en-de ASR (English transcripts)"
    scale=""
fi

./asr.sh "${sets[@]}" "${opts[@]}" --token_type bpe --bpemode unigram --fbank_conf "--n_mels 80" \
    --inference_config "conf/decode_asr${scale}.yaml" --results_title "${title}" "$@"
