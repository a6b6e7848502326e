#!/usr/bin/env bash
# mTEDx multilingual speech translation (head selection, Gong et al. §4.3.1, Tables 4 and 5): one model over the
# test directions of mTEDx, 10 trained and 3 zero-shot (it-en, it-es, pt-es: test data only), BLEU per direction
# (test sets test_<src>-<tgt>). --tasks, the configs and the encoders they start from: README.md. With MTEDX
# unset in db.sh this runs the embedded mini corpus (numbers spoken in es, fr, it, pt) on a CPU.
#   ./run.sh [--tasks languages|directions|domains] [--other_domains "D ..."] [--st_config conf/...]
#            [--asr_init ../asr1/exp/asr_<tag>/valid.acc.ave.pth] [st.sh options]
set -euo pipefail
. ./db.sh
. ./path.sh

tasks=languages         # the task: languages (source / target language), directions (adapters) or domains
other_domains=default   # domains whose test sets are decoded too (default: all with --tasks domains, else none)
__options_pass_to=./st.sh
. utils/parse_options.sh

if [ -z "${MTEDX}" ]; then
    scale=_mini all_other_domains=other
    read -ra trained <<< "es-en es-fr es-it es-pt fr-en fr-es fr-pt pt-en"
    opts=(--src_nbpe 150 --tgt_nbpe 200 --src_bpe_opts "--hard_vocab_limit false" --max_frames 1500
          --tgt_bpe_opts "--hard_vocab_limit false" --nj 2 --inference_nj 2 --train_num_threads "$(nproc)"
          --results_title "mTEDx multilingual ST recipe on the embedded mini corpus (spoken numbers; mini scale)")
else
    scale="" all_other_domains="covost europarl"
    read -ra trained <<< "el-en es-en es-fr es-it es-pt fr-en fr-es fr-pt pt-en ru-en"
    opts=(--src_nbpe 8000 --tgt_nbpe 8000 --nj 32 --inference_nj 32 --max_frames 3000
          --results_title "mTEDx multilingual ST (13 test directions)")
fi
directions=("${trained[@]}" it-en it-es pt-es)  # + the zero-shot ones
case ${tasks} in
    languages)  # the encoder (from ../asr1's model of the same kind) by source, the decoder by target language
        opts+=(--st_config "conf/train_st_group${scale}.yaml" --asr_init "../asr1/exp/asr_train_asr_group${scale}/valid.acc.ave.pth"
               --task_ids "encoder_task_id=src_lang_id decoder_task_id=tgt_lang_id target_language_id=tgt_lang_id"
               --inference_args "--encoder_task_tag_file src_lang --decoder_task_tag_file tgt_lang --target_language_tag_file tgt_lang") ;;
    directions)  # one adapter per trained direction (none for a zero-shot one), on the shared ST model
        directions=("${trained[@]}")
        opts+=(--st_config "conf/train_st_adapter${scale}.yaml" --asr_init ""
               --task_ids "task_id=direction_id target_language_id=tgt_lang_id"
               --inference_args "--task_tag_file direction --target_language_tag_file tgt_lang") ;;
    domains)
        opts+=(--st_config "conf/train_st_group_domains${scale}.yaml" --asr_init ""
               --task_ids "task_id=domain_id target_language_id=tgt_lang_id"
               --inference_args "--task_tag_file domain --target_language_tag_file tgt_lang")
        [ "${other_domains}" != default ] || other_domains=${all_other_domains} ;;
    *) echo "$0: --tasks must be languages, directions or domains, got '${tasks}'" >&2; exit 1 ;;
esac
[ "${other_domains}" != default ] || other_domains=""
# shellcheck disable=SC2086  # an assignment: set -e stops at an unknown domain
other_tests=$(python -m espnet_ext.data.domains test_sets --task st ${other_domains})

./st.sh --test_sets "${directions[*]/#/test_}${other_tests:+ ${other_tests}}" --inference_config "conf/decode_st${scale}.yaml" \
    "${opts[@]}" --train_set train --valid_set valid --src_lang src --tgt_lang tgt --bpemode unigram \
    --fbank_conf "--n_mels 80" "$@"
