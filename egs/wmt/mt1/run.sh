#!/usr/bin/env bash
# WMT machine translation: the head-selection paper's multilingual setting (Gong et al. §4.1, Table 1) and the
# LegoNN paper's MT setups (Dalmia et al. §V-B, §V-C1; Tables I, III, VI, X, XI), one recipe on one data prep
# (local/data.sh). With WMT unset in db.sh every mode runs the embedded mini corpus (number words) on a CPU.
#   ./run.sh --mode MODE [--stage N] [--stop_stage M] [--mt_config conf/...] [mt.sh options]
# Modes, each with its own dump/<mode> and exp/<mode>:
#   multilingual_m2o  the 14 languages (mini: 11) -> English; task = source language, selection in the encoder
#   multilingual_o2m  English -> the 14 languages; task = target language, selection in the decoder
#       --mt_config conf/train_mt_{shared,subset,group,adapter}_<m2o|o2m>[_mini].yaml (default: group);
#       adapter models start from the shared model of the same mode (--init_param, default its exp dir)
#       BLEU per language: test sets <m2o|o2m>_test_<lang>; Table 1: local/table1.py. Training reads the task
#       ids through --mt_args: extra training options there must repeat them (see below). The mini test sets
#       and the configs' task_tags follow local/data.sh's --mini_train_sizes: change the three together.
#   lego_ende         WMT14 En->De, shared 32k BPE, dev newstest2013, test newstest2011-16 without 2013;
#                     tokenized BLEU with compound splitting next to sacreBLEU (Tables I, X, XI)
#   lego_deen         WMT19 De->En (no ParaCrawl) and
#   lego_roen         WMT16 Ro->En, lowercased, one joint 41k BPE, tokenized BLEU (§V-C1)
#       --mt_config conf/train_lego_{wemb,beamconv}_<ende|deroen|mini>.yaml, or conf/train_encdec_*.yaml for
#       the traditional encoder-decoder; the trained modules are exported to <exp>/modules/ (lego_export):
#       lego_deen's De-En decoder is exp/lego_deen/mt_<tag>/modules/decoder.pt
#   lego_compose      the lego_roen encoder + the lego_deen decoder (--compose_config, both trained first):
#                     composed, decoded with no training, fine-tuned end to end, decoded again (Tables III, VI)
#   lego_swap         the swap matrix of --swap_tags (lego_deen experiments of one family, e.g. two seeds:
#                     --mt_tag seed1 --mt_args "--seed 1"), on the De-En test set (§IV-B, Fig. 4)
set -euo pipefail
. ./db.sh

mode=multilingual_m2o
mt_config=""            # default per mode (see above)
init_param=""           # adapter models: the shared model they start from (default: the mode's shared exp)
compose_config=""       # lego_compose: the config of the lego_deen and lego_roen experiments composed
swap_tags=""            # lego_swap: mt tags of lego_deen experiments (at least two)
inference_model=valid.acc.ave.pth
finetune_model=""       # lego_compose: the fine-tuned model decoded (default: --inference_model's)
print_exp=false         # true: print the experiment dir of --mode (not lego_compose / lego_swap) and exit
__options_pass_to=./mt.sh
. utils/parse_options.sh

scale=""
[ -n "${WMT}" ] || scale=_mini
mini_opts=(--nj 2 --inference_nj 2 --train_num_threads 1)
case "${mode}" in
    multilingual_m2o|multilingual_o2m)
        dir=${mode#multilingual_}
        if [ -z "${WMT}" ]; then
            langs="cs de es fi fr kk lt lv ro ru tr"
            opts=(--tgt_nbpe 400 --src_bpe_opts "--hard_vocab_limit false --max_sentencepiece_length 7" "${mini_opts[@]}")
        else
            langs="cs de es et fi fr gu kk lt lv ro ru tr zh"
            opts=(--tgt_nbpe 64000 --nj 32 --inference_nj 32 --max_length_ratio 1.5)
        fi
        tags=$(for x in ${langs}; do printf '<2%s>,' "${x}"; done)
        [ "${dir}" = o2m ] && opts+=(--src_bpe_opts "--hard_vocab_limit false --user_defined_symbols ${tags%,}")
        sets=(--train_set "${dir}_train" --valid_set "${dir}_valid" --token_joint true
              --test_sets "$(for x in ${langs}; do printf '%s_test_%s ' "${dir}" "${x}"; done)")
        [ "${dir}" = m2o ] && sets+=(--src_lang mul --tgt_lang en) || sets+=(--src_lang en --tgt_lang mul)
        mt_config=${mt_config:-conf/train_mt_group_${dir}${scale}.yaml}
        task_ids="--allow_variable_data_keys true"
        for part in train valid; do
            task_ids+=" --${part}_data_path_and_name_and_type dump/${mode}/raw/${dir}_${part}_filtered/task_id,task_id,text_int"
        done
        if [[ $(basename "${mt_config}") == *adapter* ]] && [ -z "${init_param}" ]; then
            shared=$(./mt.sh "${sets[@]}" --dumpdir "dump/${mode}" --expdir "exp/${mode}" \
                --mt_config "${mt_config/adapter/shared}" --inference_config conf/decode_mt.yaml --print_exp true)
            init_param=${shared}/${inference_model}
        fi
        opts+=(--local_data_opts "--task ${mode}" --mt_args "${task_ids}${init_param:+ --init_param ${init_param}}"
               --inference_args "--task_tag_file lang")
        ;;
    lego_ende|lego_deen|lego_roen|lego_compose|lego_swap)
        pair=${mode#lego_}
        case "${pair}" in compose|swap) pair=roen ;; esac
        [ "${mode}" = lego_swap ] && pair=deen
        src=${pair:0:2}; tgt=${pair:2:2}
        sets=(--train_set "${pair}_train" --valid_set "${pair}_valid" --src_lang "${src}" --tgt_lang "${tgt}")
        if [ -z "${WMT}" ]; then
            dictionary=lego_mini
            sets+=(--test_sets "${pair}_test_wmttest")
            opts=("${mini_opts[@]}")
        else
            dictionary=$([ "${pair}" = ende ] && echo lego_ende || echo lego_deroen)
            if [ "${pair}" = ende ]; then
                sets+=(--test_sets "$(for y in 2011 2012 2014 2015 2016; do printf 'ende_test_newstest%s ' "${y}"; done)")
                # Moses-tokenized, compound-split BLEU (multi-bleu.perl, as the paper) next to sacreBLEU
                opts=(--bleu_opts "--tokenized_bleu --moses_lang de")
            else
                sets+=(--test_sets "${pair}_test_$([ "${pair}" = roen ] && echo newstest2016 || echo newstest2019)")
                opts=(--bleu_opts "--tokenized_bleu --moses_lang en")
            fi
            # Ro/De-En: pairs of at most 80 tokens a side (§V-C1); ratio 1.5 (Moses' clean-corpus default)
            opts+=(--nj 32 --inference_nj 32 --max_length_ratio 1.5)
            [ "${pair}" = ende ] || opts+=(--max_text_words 80)
            # §V: "a moving window of 10 checkpoints", the one of the best validation BLEU
            inference_model=window10.valid.bleu.max.pth
            # its fine-tuning (§V-C1, conf/finetune_lego.yaml: 4 epochs) is "picked by validation"
            finetune_model=${finetune_model:-valid.loss.best.pth}
        fi
        if [ -n "${scale}" ]; then size=mini; elif [ "${pair}" = ende ]; then size=ende; else size=deroen; fi
        mt_config=${mt_config:-conf/train_lego_wemb_${size}.yaml}
        opts+=(--token_list_dir "data/token_list/${dictionary}" --local_data_opts "--task lego")
        ;;
    *) echo "$0: unknown --mode '${mode}'" >&2; exit 1 ;;
esac

inference_config=conf/decode_mt${scale}.yaml
title="WMT ${mode}"
[ -z "${scale}" ] || title+=" on the embedded mini corpus (number words; mini scale)"
# lego_compose decodes the Ro-En data of lego_roen, lego_swap the De-En data of lego_deen
data_mode=$(case "${mode}" in lego_compose) echo lego_roen ;; lego_swap) echo lego_deen ;; *) echo "${mode}" ;; esac)
mt=(./mt.sh "${sets[@]}" "${opts[@]}" --dumpdir "dump/${data_mode}" --expdir "exp/${mode}"
    --inference_config "${inference_config}" --inference_model "${inference_model}" --results_title "${title}")
[ "${print_exp}" = false ] || [[ ${mode} != lego_compose && ${mode} != lego_swap ]] ||
    { echo "$0: --print_exp: --mode ${mode} has no single experiment to print" >&2; exit 1; }
case "${mode}" in
    lego_compose)
        local/compose.sh --compose_config "${compose_config:-${mt_config}}" \
            --finetune_config "conf/finetune_lego${scale}.yaml" --finetune_model "${finetune_model}" "${mt[@]}" "$@"
        ;;
    lego_swap)
        test_set=$(sed -n 's/.*--test_sets \([^ ]*\).*/\1/p' <<< "${sets[*]}")
        local/swap.sh --swap_tags "${swap_tags}" --exp_dir exp/lego_deen --inference_model "${inference_model}" \
            --inference_config "${inference_config}" \
            --src_text "dump/${data_mode}/raw/${test_set}/text.de" --ref "dump/${data_mode}/raw/${test_set}/text.en" \
            --output_dir "exp/lego_swap/${swap_tags// /__}"
        ;;
    *)
        exp=$("${mt[@]}" --mt_config "${mt_config}" "$@" --print_exp true)
        if [ "${print_exp}" = true ]; then echo "${exp}"; exit 0; fi
        "${mt[@]}" --mt_config "${mt_config}" "$@"
        if [[ ${mode} == lego_* ]] && [[ $(basename "${mt_config}") != train_encdec* ]]; then
            local/export.sh "${exp}" "${inference_model}"
        fi
        ;;
esac
