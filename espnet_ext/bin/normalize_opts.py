"""The feature-normalisation options a speech training gets: the config decides.

    python -m espnet_ext.bin.normalize_opts --config conf/train.yaml --stats_file exp/stats/train/feats_stats.npz

asr.sh and st.sh pass these words to ESPnet's training. A config that sets ``normalize`` (``utterance_mvn``,
as fairseq's utterance CMVN, or null) keeps it: nothing is printed, so a command-line ``--normalize`` cannot
override it. A config without ``normalize``, or with ``global_mvn`` and no ``normalize_conf.stats_file``, gets
ESPnet's global mean-variance normalisation over the collected statistics:
``--normalize global_mvn --normalize_conf stats_file=FILE``.

Order. ESPnet normalises after SpecAugment (``ESPnetASRModel.encode``: specaug, then normalize), fairseq's
S2T recipes before it (their data config: ``transforms: {_train: [utterance_cmvn, specaugment]}``, fairseq
``examples/speech_to_text/data_utils.py`` gen_config_yaml). With ``utterance_mvn`` / ``utterance_cmvn`` the
masked frames therefore enter ESPnet's per-utterance statistics and are not at the utterance mean after
normalisation, as fairseq's (masked with the normalised utterance's mean, 0) are. ``normalize:
utterance_cmvn_specaug`` takes fairseq's order (``espnet_ext.features.utterance_cmvn``): the CMVN, then in
training SpecAugment from ``normalize_conf.specaug_conf``, with ``specaug: null``; a config that sets both
would mask twice and is refused. The real MuST-C (Multiformer) and mTEDx (head selection) configs use it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import yaml

from espnet_ext.errors import ConfigError, InputError, reports_input_errors


def normalize_opts(config: dict, stats_file: str, path: str | Path | None = None) -> list[str]:
    """The training options for the normalisation of ``config`` (a training config's mapping)."""
    if "normalize" not in config:
        return ["--normalize", "global_mvn", "--normalize_conf", f"stats_file={stats_file}"]
    normalize = config["normalize"]
    conf = config.get("normalize_conf") or {}
    if not isinstance(conf, dict):
        raise ConfigError(f"expected a mapping, got {conf!r}", path=path, key="normalize_conf")
    if normalize == "utterance_cmvn_specaug" and config.get("specaug") is not None:
        raise ConfigError(
            "utterance_cmvn_specaug runs SpecAugment itself (normalize_conf.specaug_conf): set specaug: null",
            path=path,
            key="specaug",
        )
    if normalize == "global_mvn" and "stats_file" not in conf:
        return ["--normalize_conf", f"stats_file={stats_file}"]
    return []


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True, help="the training config (YAML)")
    parser.add_argument(
        "--stats_file", required=True, help="feats_stats.npz of the collected statistics"
    )
    args = parser.parse_args(argv)
    if not args.config.is_file():
        raise InputError("no such config", path=args.config)
    config = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
    if not isinstance(config, dict):
        raise ConfigError("a training config is a mapping", path=args.config)
    print(" ".join(normalize_opts(config, args.stats_file, args.config)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
