#!/usr/bin/env bash
# WMT MT: head selection's multilingual setting (Gong et al. §4.1) and LegoNN's MT setups (Dalmia et al. §V);
# modes, configs, options: README.md. With WMT unset in db.sh every mode runs the mini corpus (number words).
#   ./run.sh --mode MODE [--mt_config conf/...] [mt.sh options; local/compose.sh's, local/swap.sh's]
set -euo pipefail
. ./db.sh

mode=multilingual_m2o   # multilingual_m2o|o2m, lego_ende|deen|roen (trainings), lego_compose, lego_swap
__options_pass_to=./mt.sh
. utils/parse_options.sh
scale=$([ -n "${WMT}" ] || echo _mini)
pipeline=(./mt.sh --expdir "exp/${mode}" --inference_config "conf/decode_mt${scale}.yaml"
          --results_title "WMT ${mode}${scale:+ on the embedded mini corpus (number words; mini scale)}")
[ -n "${WMT}" ] || pipeline+=(--nj 2 --inference_nj 2 --train_num_threads 1)
[ -z "${WMT}" ] || pipeline+=(--nj 32 --inference_nj 32 --max_length_ratio 1.5)  # Moses' clean-corpus ratio
case ${mode} in
    multilingual_m2o|multilingual_o2m)  # the task: the non-English language (model_conf.task_tags' order)
        dir=${mode#multilingual_}
        read -ra langs <<< "cs de es fi fr kk lt lv ro ru tr"
        # real: the 14 languages, whose pairs the training holds in 10 parts, one at a time (README)
        [ -z "${WMT}" ] || { read -ra langs <<< "cs de es et fi fr gu kk lt lv ro ru tr zh"; pipeline+=(--num_splits_mt 10); }
        tags=$(printf '<2%s>,' "${langs[@]}")
        pipeline+=(--dumpdir "dump/${mode}" --mt_config "conf/train_mt_group_${dir}${scale}.yaml"
                   --train_set "${dir}_train" --valid_set "${dir}_valid" --test_sets "${langs[*]/#/${dir}_test_}"
                   --token_joint true --tgt_nbpe "$([ -n "${WMT}" ] && echo 64000 || echo 400)" --task_ids task_id=task_id
                   --inference_args "--task_tag_file lang" --local_data_opts "--task ${mode}")
        if [ "${dir}" = m2o ]; then
            pipeline+=(--src_lang mul --tgt_lang en)
            [ -n "${WMT}" ] || pipeline+=(--src_bpe_opts "--hard_vocab_limit false --max_sentencepiece_length 7")
        else  # the target language's tag <2xx> starts the source, one piece
            pipeline+=(--src_lang en --tgt_lang mul --src_bpe_opts "--hard_vocab_limit false --user_defined_symbols ${tags%,}")
        fi ;;
    lego_ende|lego_deen|lego_roen|lego_compose|lego_swap)  # compose: Ro-En data, swap: De-En
        pair=$(case ${mode} in lego_compose) echo roen ;; lego_swap) echo deen ;; *) echo "${mode#lego_}" ;; esac)
        size=$(case ${pair}${scale} in *_mini) echo mini ;; ende) echo ende ;; *) echo deroen ;; esac)
        pipeline+=(--dumpdir "dump/lego_${pair}" --src_lang "${pair:0:2}" --tgt_lang "${pair:2:2}" --train_set "${pair}_train"
                   --valid_set "${pair}_valid" --mt_config "conf/train_lego_wemb_${size}.yaml"
                   --token_list_dir "data/token_list/lego_${size}" --local_data_opts "--task lego")
        case ${pair}${scale} in
            *_mini) pipeline+=(--test_sets "${pair}_test_wmttest") ;;
            ende) pipeline+=(--test_sets "$(printf 'ende_test_newstest%s ' 2011 2012 2014 2015 2016)") ;;
            *) pipeline+=(--test_sets "${pair}_test_newstest$([ "${pair}" = roen ] && echo 2016 || echo 2019)"
                          --max_text_words 80) ;;  # §V-C1: pairs of at most 80 tokens a side
        esac
        # Table III's Ro-En encoder: the encoder-only module trained with CTC alone (§IV-B3, §V-C1), which
        # lego_roen trains and lego_compose composes (the mini scale: the LegoNN encoder-decoder's)
        [ "${mode}${scale}" != lego_roen ] || pipeline+=(--mt_config conf/train_lego_ctc_deroen.yaml)
        [ "${mode}${scale}" != lego_compose ] || pipeline+=(--encoder_config conf/train_lego_ctc_deroen.yaml)
        # §V: the moving window of 10 checkpoints of the best validation BLEU; Moses-tokenized (compound-split)
        # BLEU as multi-bleu.perl next to sacreBLEU
        [ -z "${WMT}" ] || pipeline+=(--inference_model window10.valid.bleu.max.pth
                                      --bleu_opts "--tokenized_bleu --moses_lang ${pair:2:2}")
        if [ "${mode}" = lego_compose ]; then  # its fine-tuning (§V-C1: 4 epochs) "picked by validation"
            pipeline=(local/compose.sh "${pipeline[@]:1}" --finetune_config "conf/finetune_lego${scale}.yaml")
            [ -z "${WMT}" ] || pipeline+=(--finetune_model valid.loss.best.pth)
        fi
        [ "${mode}" != lego_swap ] || pipeline=(local/swap.sh "${pipeline[@]:1}" --expdir exp/lego_deen) ;;
    *) echo "$0: unknown --mode '${mode}'" >&2; exit 1 ;;
esac
"${pipeline[@]}" "$@"
