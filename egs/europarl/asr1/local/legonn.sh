#!/usr/bin/env bash
# LegoNN module reuse for Europarl-ST English ASR (LegoNN §IV-C, Tables IV-VII), on asr.sh and the module inventory.
# Every training, decoding and scoring is an asr.sh call; what this script adds is the order and the module
# plumbing (lego_export / lego_compose / lego_ctc_decode). Stages:
#    1 Europarl and TED data, features, filtering (asr.sh 1-3; TED in ${dumpdir}/ted, ${expdir}/ted)
#    2 the De-En MT decoder: --mt_decoder, or (empty) the De-En LegoNN MT model of ${mt_recipe}
#      (egs/wmt/mt1 --mode lego_deen: trained there if need be, without its evaluation stages; its modules
#      are exported there too); beside stage 1 unless --parallel_stages false
#    3 token list = the decoder's output vocabulary (local/decoder_vocab.py; the BPE it was trained with)
#    4 Europarl LegoNN ASR: the encoder as two modules, phoneme recogniser -> pronunciation model (§V-C2),
#      + its own decoder; trained, decoded, scored (asr.sh 8-11). With --encoder_config, the paper's
#      "phoneme+pronunciation encoder-only model trained using CTC loss" (§V-C2, model legonn_ctc) instead:
#      trained only (its output is stage 9's greedy CTC)
#    5 TED LegoNN ASR, the same architecture on TED (its pronunciation model is Table V's); trained only
#    6 baseline encoder-decoder on Europarl (--baseline_config; empty skips it)
#      (4-6 run side by side, 6 beside 7-10 too, unless --parallel_stages false; each its own statistics dir)
#    7 module export and composition (jobs), two pre-trained modules or three (§VI-D):
#      iv = the Europarl ASR encoder (both its modules) + the De-En decoder (Table IV);
#      v = Europarl phoneme recogniser + TED pronunciation model + De-En decoder (Table V);
#      v_ted = TED phoneme recogniser + TED pronunciation model (+ the De-En decoder, unused by stage 9)
#    8 decoding of the composed models with no training (asr.sh 10-11)
#    9 greedy CTC decoding of encoder modules alone (Table VII; Table V's encoder-only rows), scored; each
#      test set sharded over --inference_nj jobs (decode_set), the four module decodings side by side
#   10 fine-tuning of the composed models iv and v end to end (--init_param), decoded, scored (Table VI)
#      (8-10 run side by side unless --parallel_stages false)
#   11 ${expdir}/RESULTS_legonn.md: Tables IV-VII (local/tables.py)
set -euo pipefail

stage=1
stop_stage=100
dumpdir=dump
expdir=exp
train_set=train
valid_set=dev
test_sets="test"
ted_train_set=ted_train
ted_valid_set=ted_dev
nbpe=100                # names the token dir only: the vocabulary is the decoder's
mt_decoder=""           # decoder.pt of a De-En LegoNN MT model; empty: ${mt_recipe}'s lego_deen model
mt_decoder_base=.       # dir the artefact's relative paths (its BPE model) are relative to
mt_recipe=../../wmt/mt1 # the recipe of the De-En LegoNN model when --mt_decoder is empty
mt_opts=""              # more options for ${mt_recipe}/run.sh --mode lego_deen
asr_config=""           # phoneme recogniser -> pronunciation model + decoder (Europarl and TED)
encoder_config=""       # the same encoder modules trained alone with CTC (model legonn_ctc, §IV-B3): stages 4-5
                        # train it instead of --asr_config, whose loss settings the fine-tunings of stage 10 keep
baseline_config=""      # plain encoder-decoder (empty: no baseline)
finetune_config=""      # training settings for fine-tuning a composed model (merged into its config)
inference_config=""
asr_opts=""             # options for every asr.sh call (nj, max_frames, ...; not the ones below)
cmd_backend=local       # local or slurm (cmd.sh): this script's jobs, every asr.sh call's and ${mt_recipe}'s
ngpu=0                  # GPUs per node of every training (asr.sh's and ${mt_recipe}'s, unless --mt_opts says)
num_nodes=1             # nodes of every training (>1: Slurm)
train_num_threads=1     # CPU threads of each training process
inference_nj=2          # decoding jobs per test set, of stage 9's greedy CTC and of every asr.sh call
gpu_inference=false     # true: each of those decoding jobs on one GPU (${cuda_cmd} --gpu 1; asr.sh's too)
ted_train_args=""       # more training options for the TED model (e.g. --max_epoch N): only its encoder
                        # modules are used, and their CTC interfaces learn before its decoder does
smoke=false             # a smoke run (README "Smoke runs"): every asr.sh and egs/wmt/mt1 run it starts is one
parallel_stages=true    # side by side: stages 1 and 2, 4-6, the exports and compositions of 7, 8-10, the fine-tunings,
                        # and (asr.sh's, given on) the test sets of each decoding

. ./path.sh
. utils/parse_options.sh
. ./cmd.sh
. utils/pipeline.sh

for name in asr_config finetune_config inference_config; do
    [ -n "${!name}" ] || die "--${name} is required"
done
[[ ${inference_nj} =~ ^[1-9][0-9]*$ ]] || die "--inference_nj must be a positive integer, not '${inference_nj}'"
# one value for stage 9 and asr.sh alike: asr_opts must not set another one for asr.sh
for name in cmd_backend ngpu num_nodes train_num_threads inference_nj gpu_inference parallel_stages; do
    [[ " ${asr_opts} " != *" --${name} "* ]] ||
        die "--asr_opts '${asr_opts}': give --${name} to local/legonn.sh (it passes it on to asr.sh)"
done
# The MT decoder's vocabulary (stage 3) is every model's, Europarl's and TED's alike.
token_dir="data/token_list/bpe_unigram${nbpe}"
# shellcheck disable=SC2206
common=(--nbpe "${nbpe}" --token_list_dir "${token_dir}" --inference_config "${inference_config}" ${asr_opts}
        --cmd_backend "${cmd_backend}" --ngpu "${ngpu}" --num_nodes "${num_nodes}"
        --train_num_threads "${train_num_threads}" --inference_nj "${inference_nj}"
        --gpu_inference "${gpu_inference}" --parallel_stages "${parallel_stages}")
europarl=(--dumpdir "${dumpdir}" --expdir "${expdir}" --train_set "${train_set}" --valid_set "${valid_set}"
          --test_sets "${test_sets}")
# TED is trained on only (its modules are what counts): no test set of its own
ted=(--dumpdir "${dumpdir}/ted" --expdir "${expdir}/ted" --train_set "${ted_train_set}"
     --valid_set "${ted_valid_set}" --test_sets "")

phoneme_targets() {  # phoneme_targets DUMPDIR TRAIN VALID: the CTC targets of a phoneme interface (key phn)
    echo "--train_data_path_and_name_and_type $1/fbank/$2_filtered/phn_int,phn,text_int" \
         "--valid_data_path_and_name_and_type $1/fbank/$3_filtered/phn_int,phn,text_int" \
         "--allow_variable_data_keys true"
}
europarl_phn=$(phoneme_targets "${dumpdir}" "${train_set}" "${valid_set}")
ted_phn=$(phoneme_targets "${dumpdir}/ted" "${ted_train_set}" "${ted_valid_set}")

# shellcheck disable=SC2034  # filled and read by spawn / wait_all (utils/pipeline.sh) through namerefs
data=() modules=() baseline=() after_compose=() finetunes=() exports=() compositions=() ctc_decodings=()

prepare_data() {
    ./asr.sh --stop_stage 3 "${common[@]}" "${europarl[@]}" --asr_config "${asr_config}" &&
    ./asr.sh --stage 2 --stop_stage 3 "${common[@]}" "${ted[@]}" --asr_config "${asr_config}"
}

# The De-En model of ${mt_recipe}: trained (and its modules exported) by that recipe, read from there. Its
# paths (token lists, BPE model) are relative to that recipe. Only its decoder is needed here: its BLEU is
# that recipe's business (its own ./run.sh --mode lego_deen then runs just the evaluation stages).
mt_recipe_run() {
    # shellcheck disable=SC2086
    (cd "${mt_recipe}" && ./run.sh --mode lego_deen --skip_eval true --cmd_backend "${cmd_backend}" --ngpu "${ngpu}" \
        --num_nodes "${num_nodes}" --train_num_threads "${train_num_threads}" ${mt_opts} "$@")
}
# Stage 1 in the background while stage 2 trains the De-En model (independent inputs and outputs).
spawn data run_stage 1 "Europarl and TED data and features" "${dumpdir}/legonn" "$(date +%s)" prepare_data
if [ -z "${mt_decoder}" ]; then
    run_stage 2 "De-En LegoNN MT model (${mt_recipe})" "${expdir}/legonn" \
        "$(fingerprint "${mt_recipe}/run.sh" "${mt_opts}")" mt_recipe_run
    mt_decoder="${mt_recipe}/$(mt_recipe_run --print_exp true)/modules/decoder.pt" ||
        die "${mt_recipe}/run.sh --mode lego_deen ${mt_opts} --print_exp true failed"
    mt_decoder_base=${mt_recipe}
fi

train_and_score() {  # train_and_score CONFIG TAG LAST_STAGE ASR.SH-SET-OPTIONS... -- ASR_ARGS
    local config=$1 tag=$2 last=$3 sets=() args
    shift 3
    while [ "$1" != "--" ]; do sets+=("$1"); shift; done
    args=$2
    ./asr.sh --stage 8 --stop_stage "${last}" "${common[@]}" "${sets[@]}" --asr_config "${config}" \
        --asr_tag "${tag}" --asr_args "${args}"
}

# compose NAME ARTEFACT... : ${expdir}/asr_composed_NAME/{config.yaml,model.pth}; the decoder's BPE model is
# named by its copy in ${token_dir} (the artefact names it relative to the MT recipe). The composition is a
# ${train_cmd} job (log <out>/log/compose.log, as egs/wmt/mt1/local/compose.sh's): it loads the modules, the
# WMT decoder's ~1 GB among them.
compose() {
    local name=$1 out="${expdir}/asr_composed_$1"
    shift
    ${train_cmd} "${out}/log/compose.log" \
        python -m espnet_ext.bin.lego_compose --modules "$@" --output_dir "${out}" &&
    python -m espnet_ext.bin.lego_finetune_config --composed "${out}/config.yaml" \
        --settings <(echo "bpemodel: ${token_dir}/bpe.model") --out "${out}/config.yaml"
}
# The encoder models of stages 4-5 and the checkpoint their modules come from: an encoder-only model keeps
# checkpoints by validation loss (there is no decoder accuracy), an encoder-decoder by validation accuracy.
modules_config=${encoder_config:-${asr_config}}
modules_model=$([ -n "${encoder_config}" ] && echo valid.loss.ave.pth || echo valid.acc.ave.pth)
modules_stop=$([ -n "${encoder_config}" ] && echo 9 || echo 11)  # an encoder-only model has nothing to decode
export_modules() {  # export_modules EXP: EXP/modules/{encoder<i>,decoder}.pt, a job (log EXP/log/lego_export.log)
    ${train_cmd} "$1/log/lego_export.log" \
        python -m espnet_ext.bin.lego_export --config "$1/config.yaml" --model_file "$1/${modules_model}" \
            --output_dir "$1/modules"
}
# The trained models (the tags conf/sweeps/modules.yaml gives them too).
ep_exp="${expdir}/asr_legonn"
ep_stats="${expdir}/asr_stats_legonn"  # also the fine-tuned models' (the same Europarl data)
ted_exp="${expdir}/ted/asr_ted_legonn"
baseline_exp="${expdir}/asr_baseline"
compose_all() {  # the exports side by side, then the compositions (unless --parallel_stages false)
    spawn exports export_modules "${ep_exp}" && spawn exports export_modules "${ted_exp}" &&
    wait_all exports &&
    spawn compositions compose iv "${ep_exp}/modules/encoder0.pt" "${ep_exp}/modules/encoder1.pt" \
        "${mt_decoder}" &&
    spawn compositions compose v "${ep_exp}/modules/encoder0.pt" "${ted_exp}/modules/encoder1.pt" \
        "${mt_decoder}" &&
    spawn compositions compose v_ted "${ted_exp}/modules/encoder0.pt" "${ted_exp}/modules/encoder1.pt" \
        "${mt_decoder}" &&
    wait_all compositions
}

decode_composed() {
    local name
    for name in iv v; do
        ./asr.sh --stage 10 --stop_stage 11 "${common[@]}" "${europarl[@]}" --skip_train true \
            --asr_config "${expdir}/asr_composed_${name}/config.yaml" --asr_tag "composed_${name}" \
            --inference_model model.pth || return 1
    done
}

# ctc_score EXP MODEL MODULE KIND: greedy CTC of encoder module MODULE, scored against words (bpe) or phones
# (phn); the test sets side by side (for_each_set), each sharded over ${inference_nj} jobs (decode_set; on a GPU
# each with --gpu_inference true)
ctc_score() {
    for_each_set "${test_sets}" ctc_score_one "$@"
}
ctc_score_one() {  # ctc_score_one SET EXP MODEL MODULE KIND : ctc_score's work for one test set
    local dset=$1 exp=$2 model=$3 module=$4 kind=$5 dir ref words=()
    [ "${kind}" = bpe ] && words=(--words)
    dir="${exp}/ctc_greedy_module${module}/${dset}"
    ref="${dumpdir}/fbank/${dset}/text"
    [ "${kind}" = bpe ] || ref="${dumpdir}/fbank/${dset}/phn"
    decode_set "${dir}" "${dumpdir}/fbank/${dset}/feats.scp" espnet_ext.bin.lego_ctc_decode output.JOB -- \
        --asr_train_config "${exp}/config.yaml" --asr_model_file "${exp}/${model}" \
        --feats_scp "${dumpdir}/fbank/${dset}/feats.scp" --module "${module}" "${words[@]}" \
        --device "${inference_device}" --output "${dir}/logdir/output.JOB" &&
    score_set score_wer "${ref}" "${dir}" 3
}
ctc_all() {  # the four decodings side by side (independent outputs), in turn with --parallel_stages false
    spawn ctc_decodings ctc_score "${ep_exp}" "${modules_model}" 0 phn &&
    spawn ctc_decodings ctc_score "${ep_exp}" "${modules_model}" 1 bpe &&
    spawn ctc_decodings ctc_score "${expdir}/asr_composed_v" model.pth 1 bpe &&
    spawn ctc_decodings ctc_score "${expdir}/asr_composed_v_ted" model.pth 1 bpe &&
    wait_all ctc_decodings
}

# finetune_one NAME: the composed model asr_composed_NAME trained end to end (its config with the loss settings
# of ${asr_config}, which trained its modules, and the training settings of ${finetune_config}), decoded, scored
finetune_one() {
    local composed="${expdir}/asr_composed_$1"
    python -m espnet_ext.bin.lego_finetune_config --composed "${composed}/config.yaml" --trained "${asr_config}" \
        --settings "${finetune_config}" --out "${composed}/finetune.yaml" &&
    ./asr.sh --stage 9 --stop_stage 11 "${common[@]}" "${europarl[@]}" --asr_stats_dir "${ep_stats}" \
        --asr_config "${composed}/finetune.yaml" \
        --asr_tag "finetuned_$1" --asr_args "--init_param ${composed}/model.pth ${europarl_phn}"
}
finetune() {  # both compositions, side by side unless --parallel_stages false
    spawn finetunes finetune_one iv && spawn finetunes finetune_one v && wait_all finetunes
}

wait_all data || die "stage 1 failed (its error is above)"
[ -f "${mt_decoder}" ] || [ "${stop_stage}" -lt 3 ] || die "no MT decoder artefact ${mt_decoder}"
run_stage 3 "token list of the MT decoder" "${token_dir}" "$(fingerprint "${mt_decoder}")" \
    local/decoder_vocab.py --artefact "${mt_decoder}" --base_dir "${mt_decoder_base}" --out_dir "${token_dir}"
# Stages 4-6 train independent models, each with its own statistics dir. With --parallel_stages true
# (default) they run side by side, and the baseline (needed by stage 11 only) beside stages 7-10 too.
spawn modules run_stage 4 "Europarl LegoNN ASR, phoneme + pronunciation modules" "${ep_exp}/legonn" "$(date +%s)" \
    train_and_score "${modules_config}" legonn "${modules_stop}" "${europarl[@]}" --asr_stats_dir "${ep_stats}" \
    -- "${europarl_phn}"
spawn modules run_stage 5 "TED LegoNN ASR, phoneme + pronunciation modules" "${ted_exp}/legonn" "$(date +%s)" \
    train_and_score "${modules_config}" ted_legonn 9 "${ted[@]}" --asr_stats_dir "${expdir}/ted/asr_stats_ted_legonn" \
    -- "${ted_phn} ${ted_train_args}"  # its modules are what counts
if [ -n "${baseline_config}" ]; then
    spawn baseline run_stage 6 "baseline encoder-decoder" "${baseline_exp}/legonn" "$(date +%s)" \
        train_and_score "${baseline_config}" baseline 11 "${europarl[@]}" \
        --asr_stats_dir "${expdir}/asr_stats_baseline" -- ""
fi
wait_all modules || die "a LegoNN training stage failed (its error is above)"
run_stage 7 "module export and composition" "${expdir}/legonn" \
    "$(fingerprint "${ep_exp}/${modules_model}" "${ted_exp}/${modules_model}" "${mt_decoder}")" compose_all
# 8-10 only read the composed models: side by side
spawn after_compose run_stage 8 "decoding the composed models (no training)" "${expdir}/legonn" "$(date +%s)" \
    decode_composed
# Stage 9 decodes by itself (not through asr.sh, whose markers skip what is done): its own fingerprint
ctc_inputs=("${ep_exp}/${modules_model}" "${expdir}/asr_composed_v/model.pth" "${expdir}/asr_composed_v_ted/model.pth")
for dset in ${test_sets}; do
    ctc_inputs+=("${dset}" "${dumpdir}/fbank/${dset}/"{feats.scp,text,phn})
done
spawn after_compose run_stage 9 "greedy CTC decoding of encoder modules" "${expdir}/legonn" \
    "$(fingerprint "${ctc_inputs[@]}")" ctc_all
spawn after_compose run_stage 10 "fine-tuning the composed models" "${expdir}/legonn" "$(date +%s)" finetune
wait_all after_compose || die "a stage of 8-10 failed (its error is above)"
wait_all baseline || die "the baseline training stage failed (its error is above)"
run_stage 11 "Tables IV-VII" "${expdir}/legonn" "$(date +%s)" \
    python local/tables.py --expdir "${expdir}" --test_set "${test_sets%% *}" --europarl "$(basename "${ep_exp}")" \
        ${baseline_config:+--baseline "$(basename "${baseline_exp}")"} ${encoder_config:+--encoder_only} \
        --out "${expdir}/RESULTS_legonn.md"
log "Finished: ${expdir}/RESULTS_legonn.md"
