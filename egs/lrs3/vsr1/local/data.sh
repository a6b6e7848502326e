#!/usr/bin/env bash
# Kaldi data dirs (video.scp + text + utt2spk) for the LRS3 recipe, plus data/lm_extended/text, the additional
# LM text.
#  - LRS3 empty (db.sh): the embedded mini corpus, numbers-world mouth videos (88x88 grey, 25 fps, rendered
#    from espeak-ng's timed phonemes) as data/{train,dev,test}, and data/unlabeled: more videos without
#    their text, the self-training set. The extended LM text is number words not in dev/test.
#  - LRS3 set: the LRS3 release under ${LRS3} ({pretrain,trainval,test}/<speaker>/<id>.{mp4,txt}) read by
#    espnet_ext.data.lrs3, mouth crops cut with the landmarks of --landmarks and the reference face of
#    --mean_face (AV-HuBERT's preparation format; the pretrain part's files per clip or per trimmed piece,
#    as its tools write them) or taken from already cropped videos (--roi): one of the two is required;
#    data/dev = ${dev_size} trainval videos of whole speakers held out of training (data/trainval_nodev),
#    or with --valid_ids FILE AV-HuBERT's dev list (avhubert/preparation/data/lrs3-valid.id, 1,200 trainval
#    videos of 913 speakers, whose other videos stay in training, as its lrs3_manifest.py splits),
#    data/pretrain_trainval = the 433 h set. The mouth crops (most of the work) are made by
#    --nj ${train_cmd} jobs (JOB=1:nj, one process each, logs data/log/lrs3_rois.all.JOB.log; on Slurm each job
#    takes 1/nj of the time), after every input was checked; a rerun (e.g. after a time limit) reuses the clips
#    already cropped with the same options. --roi_size 96 stores AV-HuBERT's whole 96x96 mouth crops (its
#    align_mouth.py's) instead of their centre 88x88, for the front-end's training-time random 88x88 crop
#    (conf/train_vsr_*.yaml frontend_conf crop_size 88, augment true; needs landmarks or 96x96 ROIs). --fps_policy: videos not at 25 fps (refuse or resample).
#    The self-training set is VoxCeleb2-en, 1,326 h (AV-HuBERT's vox-en id list), given as a prepared
#    data dir of mouth crops (--voxceleb2_dir: video.scp [+ utt2spk]), copied to data/voxceleb2_en.
#    The extended LM text is the LibriSpeech LM corpus (${LIBRISPEECH_LM}/librispeech-lm-norm.txt.gz)
#    plus the LRS3 training text, as the paper's "additional data" LM.
set -euo pipefail

mini_splits="train=400,dev=60,test=60,unlabeled=400"
mini_lm_sentences=3000
mini_seed=0
landmarks=""            # real: dir of AV-HuBERT-style landmark files (or --roi)
mean_face=""            # real, with --landmarks: the reference face (AV-HuBERT: 20words_mean_face.npy)
roi=""                  # real: dir of already cropped mouth videos (or --landmarks)
fps_policy=refuse       # real: videos not at 25 fps: refuse, or resample by frame selection
voxceleb2_dir=""        # real: data dir of VoxCeleb2-en mouth crops (the unlabeled set of self-training)
dev_size=1200
roi_size=88             # real: 88 (centre crops) or 96 (AV-HuBERT's whole crops, for random crops in training)
valid_ids=""            # real: AV-HuBERT's lrs3-valid.id (trainval/<video-id>/<nnnnn> a line) as the dev set
nj=2                    # real: mouth-crop jobs of ${train_cmd}, one process each; mini: processes

. ./path.sh
. utils/parse_options.sh
. ./db.sh

# copy_tables SRC DST TABLE... : the named tables of a data dir into a fresh one
copy_tables() {
    local src=$1 dst=$2 table
    shift 2
    rm -rf "${dst}" && mkdir -p "${dst}"
    for table in "$@"; do cp "${src}/${table}" "${dst}/${table}"; done
}

if [ -z "${LRS3}" ]; then
    python -m espnet_ext.data.numbers --out data/mini --langs en --modalities speech,text,video \
        --splits "${mini_splits}" --seed "${mini_seed}" --nj "${nj}"
    for split in train dev test; do
        copy_tables "data/mini/${split}" "data/${split}" video.scp text utt2spk
    done
    copy_tables data/mini/unlabeled data/unlabeled video.scp utt2spk  # the text is not given away
    python -m espnet_ext.data.numbers --out data/mini_lm --langs en --modalities text \
        --splits "lm=${mini_lm_sentences}" --seed "$((mini_seed + 1))"
    mkdir -p data/lm_extended
    # Number words of other sentences: the dev/test sentences are left out, as an external LM corpus would.
    cut -d' ' -f2- data/dev/text data/test/text | sort -u > data/lm_extended/heldout
    cut -d' ' -f2- data/mini_lm/lm/text | sort -u | comm -23 - data/lm_extended/heldout \
        | awk '{ printf "lm%06d %s\n", NR, $0 }' > data/lm_extended/text
    rm data/lm_extended/heldout
    exit 0
fi

# The options, before any video is read (the mouth crops of 433 h take hours).
die() { echo "$0: $*" >&2; exit 1; }
[[ ${nj} =~ ^[1-9][0-9]*$ ]] || die "--nj must be a positive number of jobs, not '${nj}'"
lrs3_opts=()
if [ -n "${landmarks}" ] && [ -n "${roi}" ]; then
    die "--landmarks and --roi exclude each other: give the landmark dir or the cropped videos"
elif [ -n "${landmarks}" ]; then
    [ -n "${mean_face}" ] || die "--landmarks needs --mean_face (the reference face, e.g. AV-HuBERT's 20words_mean_face.npy)"
    [ -f "${mean_face}" ] || die "--mean_face ${mean_face}: no such file"
    lrs3_opts=(--landmarks "${landmarks}" --mean_face "${mean_face}" --roi_size "${roi_size}")
elif [ -n "${roi}" ]; then
    lrs3_opts=(--roi "${roi}" --roi_size "${roi_size}")
else
    die "LRS3 is set (db.sh): give the mouth crops' source, --landmarks DIR --mean_face NPY or --roi DIR (e.g. --local_data_opts \"--roi /data/lrs3_roi\")"
fi
[ -z "${voxceleb2_dir}" ] || [ -f "${voxceleb2_dir}/video.scp" ] ||
    die "--voxceleb2_dir ${voxceleb2_dir}: no video.scp (a data dir of VoxCeleb2-en mouth crops)"
if [ -n "${valid_ids}" ]; then
    [ -f "${valid_ids}" ] || die "--valid_ids ${valid_ids}: no such file (AV-HuBERT's lrs3-valid.id)"
    lrs3_opts+=(--valid_ids "${valid_ids}")  # checked against trainval before any video is decoded
else
    [[ ${dev_size} =~ ^[1-9][0-9]*$ ]] || die "--dev_size must be a positive number of videos, not '${dev_size}'"
    trainval_videos=$(find "${LRS3}/trainval" -name '*.txt' 2> /dev/null | wc -l)
    [ "${dev_size}" -lt "${trainval_videos}" ] ||
        die "--dev_size ${dev_size}: ${LRS3}/trainval has ${trainval_videos} videos, and training needs some of them"
fi
# Run alone (not from asr.sh, which exports it): the job backend of cmd.sh's ${cmd_backend} (local).
[ -n "${train_cmd:-}" ] || . ./cmd.sh
lrs3=(python -m espnet_ext.data.lrs3 --lrs3 "${LRS3}" --out data --parts "pretrain,trainval,test"
      --fps_policy "${fps_policy}" "${lrs3_opts[@]}")
"${lrs3[@]}" --check_only  # every clip's files and --valid_ids, before hours of crop jobs
# shellcheck disable=SC2086  # ${train_cmd} is a command line
${train_cmd} JOB=1:"${nj}" data/log/lrs3_rois.all.JOB.log "${lrs3[@]}" --shard "JOB/${nj}"
"${lrs3[@]}"  # every clip cropped now: the data dirs
mkdir -p data/dev data/trainval_nodev
if [ -n "${valid_ids}" ]; then
    mv data/trainval_valid_ids data/dev/ids
else
    # dev: the first speakers of trainval (C order) until ${dev_size} videos; whole speakers, none in training.
    awk -v n="${dev_size}" '{ spk = $2 } count >= n && spk != last { done = 1 }
         { last = spk; if (!done) { print $1; count++ } }' data/trainval/utt2spk > data/dev/ids
fi
for table in video.scp text utt2spk; do
    awk 'NR == FNR { dev[$1]; next } $1 in dev' data/dev/ids "data/trainval/${table}" > "data/dev/${table}"
    awk 'NR == FNR { dev[$1]; next } !($1 in dev)' data/dev/ids "data/trainval/${table}" > "data/trainval_nodev/${table}"
done
rm data/dev/ids
[ -s data/trainval_nodev/text ] ||
    die "the dev set (--dev_size ${dev_size} or --valid_ids) takes every trainval video, none is left for training"
for dir in data/dev data/trainval_nodev; do python -m espnet_ext.data.datadir fix_spk2utt "${dir}"; done
python -m espnet_ext.data.datadir combine data/pretrain_trainval data/pretrain data/trainval_nodev
if [ -n "${voxceleb2_dir}" ]; then
    rm -rf data/voxceleb2_en && mkdir -p data/voxceleb2_en
    cp "${voxceleb2_dir}/video.scp" data/voxceleb2_en/
    if [ -f "${voxceleb2_dir}/utt2spk" ]; then cp "${voxceleb2_dir}/utt2spk" data/voxceleb2_en/; fi
fi
mkdir -p data/lm_extended
{
    cut -d' ' -f2- data/pretrain_trainval/text
    if [ -n "${LIBRISPEECH_LM}" ]; then gunzip -c "${LIBRISPEECH_LM}/librispeech-lm-norm.txt.gz"; fi
} | awk '{ printf "lm%09d %s\n", NR, $0 }' > data/lm_extended/text
