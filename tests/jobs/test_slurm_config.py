"""The conf/slurm.conf parser (espnet_ext/jobs/slurm_config.py)."""

from pathlib import Path

import pytest

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.jobs.slurm_config import SlurmConfig

ROOT = Path(__file__).resolve().parents[2]

# A configuration in the style ESPnet's egs2 recipes ship, with partitions.
ESPNET_STYLE = """\
# Default configuration
command sbatch --export=PATH
option name=* --job-name $0
default time=24:00:00
option time=* --time $0
option mem=* --mem-per-cpu $0
option mem=0
option num_threads=* --cpus-per-task $0
option num_threads=1 --cpus-per-task 1
option num_nodes=* --nodes $0
default gpu=0
option gpu=0 -p cpu
# Recommend allocating more CPU than, or equal to the number of GPU
option gpu=* -p gpu --gres=gpu:$0 -c $0
# note: the --max-jobs-run option is supported as a special case
# by slurm.pl and you don't have to handle it in the config file.
"""


@pytest.fixture
def espnet_style(tmp_path):
    path = tmp_path / "slurm.conf"
    path.write_text(ESPNET_STYLE)
    return SlurmConfig.load(path)


def test_command_defaults_and_option_names(espnet_style):
    assert espnet_style.command == ["sbatch", "--export=PATH"]
    assert espnet_style.defaults == {"time": "24:00:00", "gpu": "0"}
    assert espnet_style.option_names == ["gpu", "mem", "name", "num_nodes", "num_threads", "time"]


def test_defaults_apply_when_the_command_line_is_silent(espnet_style):
    assert espnet_style.option_args({}) == ["--time", "24:00:00", "-p", "cpu"]


def test_wildcard_substitutes_the_value_and_exact_values_win(espnet_style):
    args = espnet_style.option_args(
        {"gpu": 2, "mem": "4G", "num_threads": 1, "time": "1:00:00", "name": "x"}
    )
    assert args == [
        "--time",
        "1:00:00",
        "-p",
        "gpu",
        "--gres=gpu:2",
        "-c",
        "2",
        "--mem-per-cpu",
        "4G",
        "--cpus-per-task",
        "1",
        "--job-name",
        "x",
    ]
    assert espnet_style.option_args({"mem": "0", "gpu": 0}) == ["--time", "24:00:00", "-p", "cpu"]


def test_backend_options_are_not_mapped(espnet_style):
    args = espnet_style.option_args(
        {"max_jobs_run": 3, "requeue": True, "dependency": "afterok:1", "config": "c"}
    )
    assert args == ["--time", "24:00:00", "-p", "cpu"]


def test_a_value_without_a_rule_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "slurm.conf"
    path.write_text("command sbatch\noption gpu=0\n")
    config = SlurmConfig.load(path)
    with pytest.raises(ConfigError, match=rf"{path}: --gpu 1: no 'option gpu=...' line"):
        config.option_args({"gpu": 1})


@pytest.mark.parametrize(
    "text, line, message",
    [
        (
            "command sbatch\nopshun gpu=* --gres=gpu:$0\n",
            2,
            "expected 'command ...', 'option NAME=VALUE",
        ),
        ("command sbatch\noption gpu --gres=gpu:1\n", 2, "expected 'command ...'"),
        ("command sbatch\noption gpu= -p x\n", 2, "expected NAME=VALUE"),
        (
            "command sbatch\noption max_jobs_run=* --foo\n",
            2,
            "--max_jobs_run is handled by the Slurm backend",
        ),
        ("command sbatch\ndefault gpu=0 extra\n", 2, "takes nothing after the value"),
        ("command sbatch\n\n# c\noption gpu=1 -p 'unclosed\n", 4, "cannot split into words"),
        ("command\n", 1, "'command' needs the submit program"),
        (
            "command sbatch\noption gpu=* --gres=gpu:$0\ndefault mem=4G\n",
            3,
            "'default mem=4G' has no 'option mem=",
        ),
    ],
)
def test_bad_lines_are_refused_with_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "slurm.conf"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        SlurmConfig.load(path)
    assert str(error.value).startswith(f"{path}:{line}: ")
    assert message in str(error.value)


def test_missing_command_line(tmp_path):
    path = tmp_path / "slurm.conf"
    path.write_text("option gpu=0\n")
    with pytest.raises(ConfigError, match=rf"^{path}: no 'command' line"):
        SlurmConfig.load(path)


def test_missing_or_non_utf8_file(tmp_path):
    with pytest.raises(InputError, match="nope.conf: file does not exist"):
        SlurmConfig.load(tmp_path / "nope.conf")
    path = tmp_path / "latin1.conf"
    path.write_bytes(b"command sbatch\noption name=* --comment caf\xe9\n")
    with pytest.raises(InputError, match=rf"{path}:2: not valid UTF-8"):
        SlurmConfig.load(path)


def test_builtin_default_maps_the_plain_sbatch_options():
    config = SlurmConfig.default()
    assert config.command == ["sbatch", "--export=ALL"]
    assert config.option_args({}) == []
    assert config.option_args(
        {"gpu": 1, "mem": "2G", "time": "10", "num_threads": 4, "num_nodes": 2}
    ) == [
        "--gres=gpu:1",
        "--mem",
        "2G",
        "--time",
        "10",
        "--cpus-per-task",
        "4",
        "--nodes",
        "2",
    ]


def test_the_template_recipe_config_parses_and_maps_gpus():
    config = SlurmConfig.load(ROOT / "egs" / "TEMPLATE" / "asr1" / "conf" / "slurm.conf")
    assert config.command[0] == "sbatch" and "--export=ALL" in config.command
    assert config.option_args({"gpu": 2}) == ["--gres=gpu:2"]
    assert config.option_args({"num_nodes": 2, "name": "train"}) == [
        "--nodes",
        "2",
        "--job-name",
        "train",
    ]
