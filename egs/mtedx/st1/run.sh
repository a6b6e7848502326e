#!/usr/bin/env bash
# mTEDx multilingual speech translation (head selection, Gong et al. §4.3.1, Table 4): one model over the
# test directions of mTEDx, 10 trained and 3 zero-shot (it-en, it-es, pt-es: test data only), BLEU per
# direction (test sets test_<src>-<tgt>) and AVG-A / AVG-T / AVG-Z (local/bleu_table.py, RESULTS.md).
# With MTEDX unset in db.sh this runs the embedded mini corpus (numbers spoken in es, fr, it, pt translated
# into en, es, fr, it, pt) on a CPU.
#   ./run.sh [--stage N] [--stop_stage M] [--st_config conf/train_st_{shared,subset,group}[_mini].yaml]
#            [--asr_init ../asr1/exp/asr_<tag>/valid.acc.ave.pth]
#            [--tasks languages|directions|domains] [--init_from ST_MODEL] [--other_domains "D ..."]
#            [--st_args "training options besides the task ids", e.g. "--seed 2"] [st.sh options]
# The encoder starts from ../asr1's model of the same kind (--asr_init; default: ../asr1's
# train_asr_<kind>[_mini] run for the config's kind, so run ../asr1 with that config first): shared from
# shared, subset from subset, group from group (the head-selection logits of the encoder are per source
# language and come with it).
# What conditions what (--tasks; task tags from local/data.sh, the configs' model_conf):
#   languages (shared, subset, group): the encoder's task is the source language (encoder_task_tags, the
#     ASR model's languages), the decoder's the target language (decoder_task_tags); head selection thus
#     serves a zero-shot direction from a seen source and a seen target language.
#   directions (adapter): one task per trained direction (task_tags) for encoder and decoder adapters;
#     a zero-shot direction has no adapter and is refused at decoding (its test sets are left out).
#   domains (multi-domain ST, Table 5; data from local/data.sh --other_domains or --mini_other_domain true):
#     the task is the domain (task_tags), for encoder and decoder (conf/train_st_{group,subset}_domains
#     [_mini].yaml); the encoder starts from scratch unless --asr_init names ../asr1's model of the same
#     kind (its Table 3 run, as conf/sweeps/table5_mini.yaml does). The adapter model
#     (train_st_adapter_domains*) has one adapter per domain and starts from the joint shared model
#     (--init_from, required): the shared config with --tasks languages --other_domains "..." on the same
#     data. A "separate" model is the shared config on one domain: --train_set train_<domain> --valid_set
#     valid_<domain> --st_stats_dir <its own> (the joint token lists kept; its stages 2-3 and 5 run first
#     with those options, skipping stage 4).
# --other_domains: the domains besides mTEDx whose test sets test_<domain>_<src>-<tgt> are decoded too, in
#   the directions espnet_ext/data/domains.py lists (the paper's footnotes 3 and 4; the mini "other" domain's);
#   default with --tasks domains: all of them (mini: other; real: covost europarl), otherwise none.
#   Every model's decoder starts from a learned vector of the target language (target_languages).
# The adapter model starts from the trained shared ST model (--init_from, default this recipe's shared run)
# and trains only its adapters (model_conf.train_adapters_only):
#   ./run.sh --st_config conf/train_st_adapter_mini.yaml --tasks directions
set -euo pipefail
. ./db.sh
. ./path.sh

tasks=languages
init_from=""
st_config=""
st_args=""     # st.sh's, after the task ids' options
other_domains=default
dumpdir=dump    # st.sh's; the task ids are read from its features
train_set=train # st.sh's; train_<domain> / valid_<domain>: one domain's data (the "separate" models)
valid_set=valid
args=()
while [ $# -gt 0 ]; do  # our options, and the config (its kind picks the ASR model); the rest: st.sh
    case $1 in
        --tasks) tasks=$2; shift 2 ;;
        --init_from) init_from=$2; shift 2 ;;
        --st_config) st_config=$2; shift 2 ;;
        --st_args) st_args=$2; shift 2 ;;
        --other_domains) other_domains=$2; shift 2 ;;
        --dumpdir) dumpdir=$2; shift 2 ;;
        --train_set) train_set=$2; shift 2 ;;
        --valid_set) valid_set=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done

train_ids() {  # train_ids NAME=TABLE...: ESPnet data options of the id tables (text_int) for train and valid
    local part set_name pair opts="--allow_variable_data_keys true"
    for part in train valid; do
        set_name=${part}_set
        for pair in "$@"; do
            opts+=" --${part}_data_path_and_name_and_type ${dumpdir}/fbank/${!set_name}_filtered/${pair#*=},${pair%%=*},text_int"
        done
    done
    echo "${opts}"
}

if [ -z "${MTEDX}" ]; then
    scale=_mini
    train_sets="es-en es-fr es-it es-pt fr-en fr-es fr-pt pt-en"
    zero_shot_sets="it-en it-es pt-es"
    opts=(--src_nbpe 150 --tgt_nbpe 200 --src_bpe_opts "--hard_vocab_limit false"
          --tgt_bpe_opts "--hard_vocab_limit false" --nj 2 --inference_nj 2
          --train_num_threads "$(nproc)" --max_frames 1500)
    title="mTEDx multilingual ST recipe on the embedded mini corpus (spoken numbers; mini scale)"
    all_other_domains=other
else
    scale=""
    train_sets="el-en es-en es-fr es-it es-pt fr-en fr-es fr-pt pt-en ru-en"
    zero_shot_sets="it-en it-es pt-es"
    opts=(--src_nbpe 8000 --tgt_nbpe 8000 --nj 32 --inference_nj 32 --max_frames 3000)
    title="mTEDx multilingual ST (13 test directions)"
    all_other_domains="covost europarl"
fi

case ${tasks} in
    languages)
        st_config=${st_config:-conf/train_st_group${scale}.yaml}
        ids=$(train_ids encoder_task_id=src_lang_id decoder_task_id=tgt_lang_id target_language_id=tgt_lang_id)
        tags="--encoder_task_tag_file src_lang --decoder_task_tag_file tgt_lang --target_language_tag_file tgt_lang"
        test_sets="${train_sets} ${zero_shot_sets}"
        ;;
    directions)
        st_config=${st_config:-conf/train_st_adapter${scale}.yaml}
        init_from=${init_from:-exp/st_train_st_shared${scale}_asrinit/valid.acc.ave.pth}
        ids="$(train_ids task_id=direction_id target_language_id=tgt_lang_id) --init_param ${init_from}"
        tags="--task_tag_file direction --target_language_tag_file tgt_lang"
        test_sets=${train_sets}   # an adapter model has no zero-shot direction
        ;;
    domains)
        st_config=${st_config:-conf/train_st_group_domains${scale}.yaml}
        ids=$(train_ids task_id=domain_id target_language_id=tgt_lang_id)
        if [[ $(basename "${st_config}") == *adapter* ]]; then
            if [ -z "${init_from}" ]; then
                echo "$0: --tasks domains with ${st_config} needs --init_from: the joint shared ST model" >&2
                exit 1
            fi
            ids+=" --init_param ${init_from}"
        fi
        tags="--task_tag_file domain --target_language_tag_file tgt_lang"
        test_sets="${train_sets} ${zero_shot_sets}"
        [ "${other_domains}" != default ] || other_domains=${all_other_domains}
        ;;
    *) echo "$0: --tasks must be languages, directions or domains, got '${tasks}'" >&2; exit 1 ;;
esac
kind=$(basename "${st_config}" .yaml)
kind=${kind#train_st_}
asr_init=(--asr_init "../asr1/exp/asr_train_asr_${kind%_mini}${scale}/valid.acc.ave.pth")
[ "${tasks}" = languages ] || asr_init=(--asr_init "")   # adapters: all from the shared ST model
[ "${other_domains}" != default ] || other_domains=""
# shellcheck disable=SC2001
test_sets=$(sed 's/\([^ ]*\)/test_\1/g' <<< "${test_sets}")
# an assignment: set -e stops at an unknown domain
# shellcheck disable=SC2086
other_tests=$(python -m espnet_ext.data.domains test_sets --task st ${other_domains})
test_sets+=${other_tests:+ ${other_tests}}

./st.sh --train_set "${train_set}" --valid_set "${valid_set}" --test_sets "${test_sets}" --dumpdir "${dumpdir}" \
    --st_config "${st_config}" --inference_config "conf/decode_st${scale}.yaml" "${asr_init[@]}" \
    "${opts[@]}" --src_lang src --tgt_lang tgt --bpemode unigram --fbank_conf "--n_mels 80" \
    --st_args "${ids}${st_args:+ ${st_args}}" --inference_args "${tags}" --results_title "${title}" "${args[@]}"
