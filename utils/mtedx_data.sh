#!/usr/bin/env bash
# What the mTEDx recipes' data preparations (egs/mtedx/asr1 and st1 local/data.sh) share; sourced before
# utils/parse_options.sh, so the options below are theirs (--help lists them):
#   mini_tedx SIZES_OPTION SIZES OUT [DOMAIN]  the embedded mini corpus in mTEDx's release layout under OUT
#                                              (espnet_ext.data.numbers.tedx; SIZES_OPTION --train_sizes for
#                                              ASR languages, --st_train_sizes for ST directions)
#   combine_domains TABLES                     the --other_domains added to data/ (espnet_ext.data.domains,
#                                              each checked for TABLES); sets ${domains} ("tedx,<others>") and
#                                              ${split_dirs} (data/train, data/valid and each domain's own);
#                                              every dir gets a `domain` table (mTEDx's: tedx)
# shellcheck disable=SC2034  # the options are read by the sourcing script (and by the functions below)

mini_valid_size=40                # mini corpus: per language (ASR) or trained direction (ST)
mini_test_size=60                 # per language or direction
mini_range=0:999
mini_seed=0
mini_num_speakers=6               # per language or direction and split, disjoint
mini_segments_per_talk=10:20
mini_other_domain=false           # also generate the numbers world's second domain ("other")
other_domains=""                  # <domain>=<root of Kaldi data dirs>,... (multi-domain ASR / ST)
nj=2

mini_tedx() {
    python -m espnet_ext.data.numbers.tedx "$1" "$2" --out "$3" --domain "${4:-tedx}" \
        --valid_size "${mini_valid_size}" --test_size "${mini_test_size}" --range "${mini_range}" \
        --seed "${mini_seed}" --num_speakers "${mini_num_speakers}" \
        --segments_per_talk "${mini_segments_per_talk}" --nj "${nj}"
}

combine_domains() {
    local dir
    domains=tedx
    rm -rf data/train_* data/valid_*  # a previous run's domain dirs (combine writes them anew)
    if [ -n "${other_domains}" ]; then  # adds a domain table to train and valid, test_<domain>_* dirs and
        # each domain's own data/{train,valid}_<domain> (the "separate" models)
        # shellcheck disable=SC2086
        python -m espnet_ext.data.domains combine --data data --require "$1" ${other_domains//,/ } || return 1
        domains+=",$(tr ',' '\n' <<< "${other_domains}" | cut -d= -f1 | paste -sd, -)"
    fi
    split_dirs=(data/train data/valid)
    for dir in data/train_* data/valid_*; do [ ! -d "${dir}" ] || split_dirs+=("${dir}"); done
    for dir in "${split_dirs[@]}" data/test data/test_*; do
        [ -f "${dir}/domain" ] || awk '{print $1, "tedx"}' "${dir}/text" > "${dir}/domain"
    done
}
