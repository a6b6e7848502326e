#!/usr/bin/env bash
# MuST-C speech translation (English speech -> German text), the Multiformer thesis' setup: the ST encoder
# starts from the ASR model of ../asr1 (run that recipe first; --asr_init FILE picks another model, as long
# as its encoder has the ST config's architecture). Real mode: its best checkpoint, valid.acc.best.pth (thesis
# §5.3 and Anexo B.1; the author's command, mt-upc/fairseq examples/multiformer/README.md:
# --load-pretrained-encoder-from ${ASR_SAVE_DIR}/checkpoint_best.pt, best by validation loss there, by
# validation accuracy here: the configs' best_model_criterion); --asr_init ../asr1/exp/asr_train_asr/
# valid.acc.ave.pth starts from the 10-best average instead. Mini: the average, as its RESULTS.md was measured.
# With MUSTC unset in db.sh this runs the embedded mini corpus (talks of spoken English numbers -> German
# number words) on a CPU; with it set, MuST-C v1 en-de.
#   ./run.sh [--stage N] [--stop_stage M] [--cmd_backend slurm] [--ngpu K --num_nodes J] [st.sh options]
# 80-dim fbank; SentencePiece unigram: target 8,000 pieces on MuST-C (fairseq's MuST-C ST recipe), source
# 5,000 (the ASR recipe's); on the mini corpus 100 at most each, German pieces of at most 7 characters (whole
# compounds otherwise). Scored by BLEU (sacrebleu, signature in the results).
set -euo pipefail
. ./db.sh

if [ -z "${MUSTC}" ]; then
    sets=(--train_set train --valid_set dev --test_sets "tst_COMMON")
    opts=(--st_config conf/train_st_mini.yaml --asr_init ../asr1/exp/asr_train_asr_mini/valid.acc.ave.pth
          --src_nbpe 100 --tgt_nbpe 100 --src_bpe_opts "--hard_vocab_limit false"
          --tgt_bpe_opts "--hard_vocab_limit false --max_sentencepiece_length 7"
          --nj 2 --inference_nj 2 --train_num_threads "$(nproc)" --max_frames 1500)
    title="MuST-C ST recipe on the embedded mini corpus (talks of spoken English numbers -> German; mini scale)"
    scale=_mini
else
    sets=(--train_set train --valid_set dev --test_sets "tst_COMMON tst_HE")
    opts=(--st_config conf/train_st.yaml --asr_init ../asr1/exp/asr_train_asr/valid.acc.best.pth
          --src_nbpe 5000 --tgt_nbpe 8000 --nj 32 --inference_nj 32 --max_frames 3000)
    title="MuST-C v1 en-de ST"
    scale=""
fi

./st.sh "${sets[@]}" "${opts[@]}" --src_lang en --tgt_lang de --bpemode unigram --fbank_conf "--n_mels 80" \
    --inference_config "conf/decode_st${scale}.yaml" --results_title "${title}" "$@"
