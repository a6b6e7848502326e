#!/usr/bin/env bash
# CIFAR-100 image classification with Swin-T and relaxed self-attention (relaxed-attention paper, §4.4,
# Table 4). With CIFAR100 unset in db.sh this runs on the embedded mini corpus (one MNIST digit per
# 32x32 colour image in one of ten ink hues, 100 classes = hue x digit) with a small Swin; with it set,
# on the CIFAR-100 python release (--download true fetches it into ${CIFAR100}) with Swin-T at 224x224.
#   ./run.sh [--variant baseline|no_stochastic_depth|drloc|smooth_focus|relaxed|relaxed_no_stochastic_depth|
#             relaxed_drloc|fuzzy] [--gamma 0.1] [--fuzzy_std 0.03] [--batch 128|1024]
#            [--imagenet_checkpoint swin_tiny_patch4_window7_224.pth] [--matched_inference true]
#            [cls.sh options, e.g. --stage N --cmd_backend slurm --ngpu 1]
# Table 4's rows are these variants; "+ matched inference" is the relaxed model evaluated with
# --matched_inference true. conf/sweeps/table4.yaml runs them all, conf/sweeps/seeds.yaml Table 7.
# The official ImageNet-1k Swin-T weights: https://github.com/SwinTransformer/storage/releases/download/
# v1.0.0/swin_tiny_patch4_window7_224.pth (timm's state dicts load too).
set -euo pipefail
. ./db.sh
. ./path.sh

variant=baseline        # Table 4 row (see above; espnet_ext/attention/variants.py SWIN_ROWS)
gamma=0.1               # relaxation coefficient γ (γ0 of fuzzy relaxation); the paper's tuned value
fuzzy_std=0.03          # σ of fuzzy relaxation (the paper's tuned value)
drloc_weight=0.5        # λ of the dense relative localization loss
batch=128               # 128 (lr 1.25e-4) or 1024 (lr 1e-3), A.3.4
imagenet_checkpoint=""  # ImageNet-1k Swin-T checkpoint: "w/ pre-training" columns (real corpus)
matched_inference=false # relax at test time too ("+ matched inference")
train_args=""           # more cls_train options, e.g. "--seed 3" (Table 7)
__options_pass_to=./cls.sh
. utils/parse_options.sh

case "${batch}" in
    128) batch_args="" ;;  # the config's
    # YAML 1.1 (ESPnet reads these values with PyYAML) takes "1e-3" for a string: write the mantissa's dot.
    # 43 steps per epoch: ESPnet's unsorted sampler makes floor(45,000 / 1024) batches of the held-out train
    1024) batch_args="--batch_size 1024 --optim_conf lr=1.0e-3 --scheduler_conf max_lr=1.0e-3 \
--scheduler_conf min_lr=1.0e-5 --scheduler_conf first_cycle_steps=4300 --scheduler_conf warmup_steps=860 \
--model_conf drloc_batches_per_epoch=43" ;;
    *) echo "$0: --batch is 128 or 1024 (the paper's two settings)" >&2; exit 1 ;;
esac

threads=()  # the real corpus: ./cls.sh's one thread per training process (a GPU's), loader processes beside
if [ -z "${CIFAR100}" ]; then
    config=conf/train_swin_mini.yaml
    batch_args=""  # the mini config has its own batch size and schedule
    threads=(--train_num_threads "$(nproc)")  # on this machine's CPUs
else
    config=conf/train_swin_t.yaml
fi
# the Table 4 row: its experiment tag and model options (espnet_ext/attention/variants.py SWIN_ROWS)
row=$(python -m espnet_ext.attention.variants --task cls --config "${config}" --variant "${variant}" \
    --gamma "${gamma}" --fuzzy_std "${fuzzy_std}" --drloc_weight "${drloc_weight}") || exit 1
tag="$(sed -n 1p <<< "${row}")$([ -z "${imagenet_checkpoint}" ] || echo _pt)_b${batch}"
inference_tag=decode
if [ "${matched_inference}" = true ]; then inference_tag=decode_matched; fi

./cls.sh --cls_config "${config}" --cls_args "$(sed -n 2p <<< "${row}") ${batch_args} ${train_args}" --cls_tag "${tag}" \
    --pretrained_checkpoint "${imagenet_checkpoint}" --inference_args "--matched_inference ${matched_inference}" \
    --inference_tag "${inference_tag}" "${threads[@]}" \
    --results_title "CIFAR-100 (Swin-T, relaxed self-attention)" "$@"
