#!/usr/bin/env bash
# The options the egs/TEMPLATE pipelines share, with their defaults; sourced by a pipeline before its own
# options and utils/parse_options.sh, so that they are options like the others (--help lists them, a recipe's
# run.sh passes them on):
#   . utils/pipeline_options.sh GROUP...
# Every pipeline gets the options at the top of this file (stages, jobs, training resources, smoke runs); each
# GROUP adds its own (name at least one: with none, `.` would hand this file the pipeline's arguments):
#   lm                  lm.sh                nothing more
#   sequence            asr.sh mt.sh st.sh   evaluation + ESPnet's --skip_* flags, the dump dir, task ids,
#                                            ESPnet's decoding config and its averaged model
#   image               cls.sh ocr.sh        evaluation + batched decoding of the best checkpoint
#   speech              asr.sh st.sh         fbank and length filtering (read by utils/speech_stages.sh)
#   translation         mt.sh st.sh          source and target vocabularies (utils/translation_tokens.sh), BLEU
#   attention_variants  asr.sh mt.sh         the relaxed-attention paper's variants
#   lm_fusion           asr.sh mt.sh         an LM trained by ../lm1/lm.sh and used in decoding
# where evaluation is: the data sets, decoding jobs and RESULTS.md. A default that differs between pipelines
# (valid_set, results_title, ...) is set by the pipeline, after this file.
# shellcheck disable=SC2034  # every variable here is read by the pipeline that sources this file

stage=1
stop_stage=100
nj=2                    # parallel jobs for features / statistics
ngpu=0                  # GPUs per node for training (0: CPU)
train_num_threads=1     # CPU threads of each training process (Slurm: --cpus-per-task, with its loader processes)
num_nodes=1             # nodes for training (>1: Slurm + ESPnet's --dist_launcher slurm)
cmd_backend=local       # local or slurm (see cmd.sh)
smoke=false             # true: a smoke run on a tiny corpus in the real layout (README "Smoke runs")

__pipeline_evaluation_options() {
    inference_nj=2          # parallel decoding jobs of each test set
    inference_mem=""        # memory of each decoding job (Slurm --mem, e.g. 16G; empty: cmd.sh's decode_cmd's)
    parallel_stages=true    # the sets side by side in the data, decoding and scoring stages (every set's jobs
                            # submitted at once; locally they share the CPUs); false: one set after another
    gpu_inference=false     # true: each decoding job on one GPU (ESPnet's option; Slurm requests it)
    expdir=exp
    local_data_opts=""      # options for local/data.sh (e.g. "--download true")
    train_set=train
    test_sets="test"
    inference_args=""       # extra arguments of the decoding entry point (e.g. "--lm_weight 0.1")
    results_md=""           # the summary of every model in ${expdir} (default ${expdir}/RESULTS.md, as ESPnet)
    results_notes=""        # extra markdown for RESULTS.md (e.g. how a λ grid chose its weight)
}

[ $# -gt 0 ] || { echo "$0: utils/pipeline_options.sh needs an option group" >&2; exit 1; }
for __group in "$@"; do
    case ${__group} in
        lm) ;;
        sequence)
            __pipeline_evaluation_options
            skip_data_prep=false    # skip the data stages (the pipeline's skip_when lines name each flag's stages)
            skip_train=false        # skip the training stages (LM, statistics, model)
            skip_eval=false         # skip decoding, scoring and RESULTS.md
            dumpdir=dump
            task_ids=""             # "NAME=TABLE ...": per-utterance task ids, <set>_filtered/TABLE as model input NAME
            inference_config=""
            inference_tag=""
            inference_model=valid.acc.ave.pth  # or last<N>.pth: average of the last N epochs
            ;;
        image)
            __pipeline_evaluation_options
            inference_batch_size=1  # images per decoding batch (batched on CPU and GPU; e.g. 64 with --gpu_inference true)
            inference_tag=decode
            inference_model=valid.acc.best.pth
            ;;
        speech)
            fbank_conf=""           # options for espnet_ext.features.fbank (e.g. --n_mels 80)
            min_frames=10           # filtering: utterances outside [min_frames, max_frames] are dropped from training
            max_frames=3000
            max_text_chars=1000     # filtering: longer transcripts (or translations) are dropped from training
            ;;
        translation)
            token_joint=false       # true: one SentencePiece model on source + target text (size --tgt_nbpe)
            src_token_type=bpe      # bpe (SentencePiece) or char
            tgt_token_type=bpe
            src_nbpe=100
            tgt_nbpe=100
            bpemode=unigram
            src_bpe_opts=""         # extra options for espnet_ext.text.token_list (source / joint model)
            tgt_bpe_opts=""         # extra options for espnet_ext.text.token_list (target model)
            bleu_opts=""            # e.g. "--tokenized_bleu --moses_lang en": also the papers' tokenized, compound-split BLEU
            ;;
        attention_variants)
            attention_variant=baseline  # baseline, smooth_focus, relaxed_cross or relaxed_self (espnet_ext.attention.variants)
            relax_gamma=""          # relaxation coefficient of the relaxed variants (default: the paper's for the task)
            matched_inference=false # relaxed attention also when decoding (the paper's "matched inference")
            ;;
        lm_fusion)
            use_lm=false
            lm_config=""
            lm_args=""
            num_splits_lm=1         # >1: lm.sh trains on the LM text in N parts, one in memory at a time (lm.sh)
            lm_train_text=""        # extra LM text (Kaldi text files); the training targets are always included
            lm_tag=""
            lm_exp=""
            inference_lm=valid.loss.ave.pth
            ;;
        *)
            echo "$0: utils/pipeline_options.sh: no option group '${__group}'" >&2
            exit 1
            ;;
    esac
done
unset -v __group
unset -f __pipeline_evaluation_options
