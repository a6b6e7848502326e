#!/usr/bin/env bash
# mTEDx multilingual ASR (head selection, Gong et al. §4, Tables 2 and 6): one model over all languages,
# the task being the language (tag file data/<set>/lang). With MTEDX unset in db.sh this runs the embedded
# mini corpus (numbers spoken in es, fr, it, pt; much less training speech for it and pt) on a CPU; with it
# set, mTEDx's 8 languages. WER per language: the test sets test_<lang>.
#   ./run.sh [--stage N] [--stop_stage M] [--asr_config conf/train_asr_<model>[_mini].yaml] [asr.sh options]
# Every config is a task-conditioned model (model_conf.task_tags: the languages in local/data.sh's order):
# shared = the S2T Transformer baseline (no selection); subset / group = head selection, H' = 8 of H = 4,
# in encoder and decoder self-attention (group_enc / group_dec: one side only, Table 6); adapter = the
# shared model frozen plus per-language adapters (train shared first). Training reads the task ids, decoding
# the tags (--inference_args "--task_tag_file lang"); --asr_args adds training options to the task ids',
# e.g. --asr_args "--encoder_conf head_candidates=16 --decoder_conf head_candidates=16" (Fig. 2).
# Multi-domain ASR (Table 3; data from local/data.sh --other_domains or --mini_other_domain true):
# --tasks domains makes the domain the task (tag file domain, conf/train_asr_{group,subset}_domains*.yaml;
# train_asr_adapter_domains*.yaml with --asr_args "--init_param <the joint shared model>"), and
# --other_domains "D ..." decodes the other domains' test sets test_<domain>_<lang> too, in the languages
# espnet_ext/data/domains.py lists (the paper's Table 8; the mini "other" domain's); default with --tasks domains:
# all of them (mini: other; real: covost europarl), otherwise none. The joint shared model: real,
# train_asr_shared_domains.yaml (400 epochs) with --tasks domains; mini, the shared config with --tasks
# languages --other_domains "..." on the same data (conf/sweeps/table3_mini.yaml); a "separate" model the shared config
# on one domain: --train_set train_<domain> --valid_set valid_<domain> --asr_stats_dir <its own> (the joint
# token list kept; its stages 2-3 and 8 run first with those options, skipping stage 4).
# Sweeps (python -m espnet_ext.analysis.sweep run --spec conf/sweeps/<name>.yaml): table2 (shared, subset,
# group, adapter), head_candidates (Fig. 2), sides (Table 6); mini.yaml is the mini corpus' table2,
# table3_mini.yaml its Table 3.
set -euo pipefail
. ./db.sh
. ./path.sh

asr_config=""           # default: conf/train_asr_group[_mini].yaml
asr_args=""             # training options besides the task ids
tasks=languages         # what selects heads / adapters: languages (Table 2) or domains (Table 3)
other_domains=default   # see above
dumpdir=dump            # asr.sh's; the task ids are read from its features
train_set=train         # asr.sh's; train_<domain> / valid_<domain>: one domain's data (the "separate" models)
valid_set=valid
__options_pass_to=./asr.sh
. utils/parse_options.sh

case ${tasks} in
    languages) id_table=task_id; tag_file=lang ;;
    domains) id_table=domain_id; tag_file=domain ;;
    *) echo "$0: --tasks must be languages or domains, got '${tasks}'" >&2; exit 1 ;;
esac
task_ids="--allow_variable_data_keys true"
for part in train valid; do
    set_name=${part}_set
    task_ids+=" --${part}_data_path_and_name_and_type ${dumpdir}/fbank/${!set_name}_filtered/${id_table},task_id,text_int"
done
if [ -z "${MTEDX}" ]; then
    test_sets="test_es test_fr test_it test_pt"
    all_other_domains=other
    asr_config=${asr_config:-conf/train_asr_group_mini.yaml}
    opts=(--inference_config conf/decode_asr_mini.yaml
          --nbpe 150 --bpe_opts "--hard_vocab_limit false" --nj 2 --inference_nj 2
          --train_num_threads "$(nproc)" --max_frames 1500)
    title="mTEDx multilingual ASR recipe on the embedded mini corpus (spoken numbers in 4 languages; mini scale)"
else
    test_sets="test_ar test_de test_el test_es test_fr test_it test_pt test_ru"
    all_other_domains="covost europarl"
    asr_config=${asr_config:-conf/train_asr_group.yaml}
    opts=(--inference_config conf/decode_asr.yaml
          --nbpe 8000 --nj 32 --inference_nj 32 --max_frames 3000 --inference_model last10.pth)
    title="mTEDx multilingual ASR (8 languages)"
fi
if [ "${other_domains}" = default ]; then
    other_domains=""
    [ "${tasks}" = languages ] || other_domains=${all_other_domains}
fi
if [ "${tasks}" = domains ] && [[ $(basename "${asr_config}") == *adapter* ]] \
        && [[ " ${asr_args} " != *" --init_param "* ]]; then
    echo "$0: --tasks domains with ${asr_config} needs --asr_args \"--init_param <the joint shared model>\"" >&2
    exit 1
fi
# an assignment: set -e stops at an unknown domain
# shellcheck disable=SC2086
other_tests=$(python -m espnet_ext.data.domains test_sets --task asr ${other_domains})
test_sets+=${other_tests:+ ${other_tests}}

./asr.sh --train_set "${train_set}" --valid_set "${valid_set}" --test_sets "${test_sets}" --asr_config "${asr_config}" \
    --dumpdir "${dumpdir}" \
    "${opts[@]}" --token_type bpe \
    --bpemode unigram --fbank_conf "--n_mels 80" --asr_args "${task_ids} ${asr_args}" \
    --inference_args "--task_tag_file ${tag_file}" --results_title "${title}" \
    --wer_opts "--tokenizer 13a --lowercase --remove_punct" "$@"  # the authors' fairseq WER (raw WER beside it)
