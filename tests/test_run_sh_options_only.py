"""Every recipe's run.sh is options only, as ESPnet's egs2: at most 60 lines, options parsed by
utils/parse_options.sh (no parser of its own), no behaviour keyed on a config file's name (what a config
does is its keys: init_param, model_conf.train_adapters_only, model), the logic in the pipelines and Python."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_SH = sorted(p for p in ROOT.glob("egs/*/*/run.sh") if p.parts[-3] != "TEMPLATE")


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_recipes_found():
    assert len(RUN_SH) >= 10 and ROOT / "egs/wmt/mt1/run.sh" in RUN_SH


@pytest.mark.parametrize("run_sh", RUN_SH, ids=name)
def test_run_sh_is_options_only(run_sh):
    text = run_sh.read_text()
    lines = text.splitlines()
    assert len(lines) <= 60, (
        f"{name(run_sh)}: {len(lines)} lines; move logic into a pipeline or Python"
    )
    assert not re.search(r"while \[ \$# -gt 0 \]|shift 2", text), (
        f"{name(run_sh)}: an option parser of its own"
    )
    # the options it declares (if any) are parsed by utils/parse_options.sh, the rest go to the pipeline
    assert "$@" in text, f"{name(run_sh)}: hands the other options to its pipeline"
    # a config's file name decides nothing: neither a glob on it nor a path built from it
    assert not re.search(r"basename[^\n]*config", text), (
        f"{name(run_sh)}: behaviour from a config file name"
    )
    assert "*adapter*" not in text, f"{name(run_sh)}: behaviour from a config file name"
