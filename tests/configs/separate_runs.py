"""The "separate" rows of the head-selection sweeps (Tables 3 and 5): one shared model per domain."""

import shlex

from espnet_ext.analysis.sweep import Sweep


def last_value(line: list[str], option: str) -> str:
    """The value of ``option`` in a command line (the last one wins, as utils/parse_options.sh)."""
    return line[len(line) - 1 - line[::-1].index(option) + 1]


def check_separate_runs(sweep: Sweep, stats_option: str, config: str) -> None:
    """Each domain's model trains ``config`` on that domain's data dirs, with statistics of its own that
    ``prepare`` makes; the table's separate row takes every set from exactly one of them."""
    for domain in ("tedx", "other"):
        (train, *_) = sweep.invocations(f"separate_{domain}")
        train = shlex.split(" ".join(train))
        assert last_value(train, "--train_set") == f"train_{domain}"
        assert last_value(train, "--valid_set") == f"valid_{domain}"
        stats = last_value(train, stats_option)
        assert stats.endswith(f"_stats_{domain}") and config in train
        assert any(
            f"{stats_option} {stats}" in p and f"--train_set train_{domain}" in p
            for p in sweep.prepare
        )
    for table in sweep.analyses:
        (row,) = [r for r in table["rows"] if "separate" in r["label"]]
        given = [s for sets in row["run"].values() for s in sets]
        assert sorted(given) == sorted(sweep.sets)
        assert all(s.startswith("test_other_") for s in row["run"]["separate_other"])
