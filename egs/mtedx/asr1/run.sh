#!/usr/bin/env bash
# mTEDx multilingual ASR (head selection, Gong et al. §4, Tables 2, 3 and 6): one model over all languages, the
# task being the language (tag file data/<set>/lang) or, with --tasks domains, the domain (Table 3); WER per
# language on the test sets test_<lang>. The configs, multi-domain ASR and the sweeps: README.md. With MTEDX
# unset in db.sh this runs the embedded mini corpus (numbers spoken in es, fr, it, pt) on a CPU; with it set,
# mTEDx's 8 languages.
#   ./run.sh [--tasks languages|domains] [--other_domains "D ..."] [--asr_config conf/train_asr_<model>[_mini].yaml]
#            [--asr_args "training options"] [asr.sh options]
# Every config is a task-conditioned model (model_conf.task_tags: the languages in local/data.sh's order, or the
# domains); an adapter config starts from the trained shared model its init_param (or --asr_args "--init_param
# MODEL") names.
set -euo pipefail
. ./db.sh
. ./path.sh

tasks=languages         # what selects heads / adapters: languages (Table 2) or domains (Table 3)
other_domains=default   # domains whose test sets are decoded too (default: all with --tasks domains, else none)
__options_pass_to=./asr.sh
. utils/parse_options.sh

case ${tasks} in
    languages) opts=(--task_ids task_id=task_id --inference_args "--task_tag_file lang") ;;
    domains) opts=(--task_ids task_id=domain_id --inference_args "--task_tag_file domain") ;;
    *) echo "$0: --tasks must be languages or domains, got '${tasks}'" >&2; exit 1 ;;
esac
if [ -z "${MTEDX}" ]; then
    test_sets="test_es test_fr test_it test_pt"
    all_other_domains=other
    opts+=(--asr_config conf/train_asr_group_mini.yaml --inference_config conf/decode_asr_mini.yaml
           --nbpe 150 --bpe_opts "--hard_vocab_limit false" --nj 2 --inference_nj 2
           --train_num_threads "$(nproc)" --max_frames 1500
           --results_title "mTEDx multilingual ASR recipe on the embedded mini corpus (spoken numbers in 4 languages; mini scale)")
else
    test_sets="test_ar test_de test_el test_es test_fr test_it test_pt test_ru"
    all_other_domains="covost europarl"
    opts+=(--asr_config conf/train_asr_group.yaml --inference_config conf/decode_asr.yaml
           --nbpe 8000 --nj 32 --inference_nj 32 --max_frames 3000 --inference_model last10.pth
           --results_title "mTEDx multilingual ASR (8 languages)")
fi
[ "${other_domains}" != default ] || other_domains=$([ "${tasks}" = languages ] || echo "${all_other_domains}")
# shellcheck disable=SC2086  # an assignment: set -e stops at an unknown domain
other_tests=$(python -m espnet_ext.data.domains test_sets --task asr ${other_domains})

./asr.sh --train_set train --valid_set valid --test_sets "${test_sets}${other_tests:+ ${other_tests}}" \
    "${opts[@]}" --token_type bpe --bpemode unigram --fbank_conf "--n_mels 80" \
    --wer_opts "--tokenizer 13a --lowercase --remove_punct" "$@"  # the authors' fairseq WER (raw WER beside it)
