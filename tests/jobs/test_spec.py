"""The shared job command line and the log header/footer (espnet_ext/jobs/spec.py)."""

from pathlib import Path

import pytest

from espnet_ext.errors import ConfigError
from espnet_ext.jobs.spec import (
    JobRange,
    footer,
    header,
    last_exit_code,
    log_tail,
    parse_command_line,
    refuse_unknown_options,
)


def test_options_range_log_and_command():
    request = parse_command_line(
        [
            "--gpu",
            "2",
            "--mem=4g",
            "--num-threads",
            "3",
            "--time",
            "2:00:00",
            "--requeue",
            "--dependency",
            "afterok:12",
            "JOB=2:4",
            "exp/log/x.JOB.log",
            "prog",
            "--in",
            "split/JOB/keys",
            "JOBS",
        ]
    )
    assert request.options == {
        "gpu": 2,
        "mem": "4G",
        "num_threads": 3,
        "time": "2:00:00",
        "requeue": True,
        "dependency": "afterok:12",
    }
    assert request.job_range == JobRange("JOB", 2, 4)
    jobs = request.jobs()
    assert [job.id for job in jobs] == [2, 3, 4]
    assert jobs[1].log == Path("exp/log/x.3.log")
    # Plain-text replacement everywhere, as Kaldi's run.pl does.
    assert jobs[1].command == ["prog", "--in", "split/3/keys", "3S"]
    assert jobs[1].label == "JOB=3"


def test_single_job_and_single_number_range():
    request = parse_command_line(["log/a.log", "echo", "JOB"])
    (job,) = request.jobs()
    assert job.id is None and job.command == ["echo", "JOB"] and job.label == ""
    (job,) = parse_command_line(["N=7", "log/a.log", "echo", "N"]).jobs()
    assert job.id == 7 and job.command == ["echo", "7"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpu", "x", "l.log", "true"], "--gpu 'x': expected a whole number"),
        (["--num_nodes", "0", "l.log", "true"], "expected a whole number >= 1"),
        (["--mem", "lots", "l.log", "true"], "--mem 'lots'"),
        (["--time", "soon", "l.log", "true"], "--time 'soon'"),
        (["--requeue=yes", "l.log", "true"], "--requeue takes no value"),
        (
            ["--requeue_progress", "c.pth", "l.log", "true"],
            "--requeue_progress is for a requeueable",
        ),
        (["--gpu"], "--gpu needs a value"),
        (["JOB=1:3", "l.log", "true"], "does not contain JOB"),
        (["JOB=3:1", "l.JOB.log", "true"], "empty job range JOB=3:1"),
        (["l.log"], "missing the command after the log file l.log"),
        ([], "missing the log file and the command"),
    ],
)
def test_bad_command_lines_are_refused_naming_the_culprit(argv, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
        parse_command_line(argv)


def test_unknown_options_are_kept_for_the_backend_to_judge():
    request = parse_command_line(["--name", "fbank", "--gpus", "1", "l.log", "true"])
    assert request.extra_options == {"name": "fbank", "gpus": "1"}
    with pytest.raises(ConfigError, match=r"unknown option --gpus \(known: .*--gpu.*--name"):
        refuse_unknown_options(request, ["name"])
    refuse_unknown_options(parse_command_line(["--name", "x", "l.log", "true"]), ["name"])


def test_footer_of_the_last_run_decides(tmp_path):
    log = tmp_path / "x.log"
    assert last_exit_code(log) is None  # no log at all
    log.write_text(header(["prog", "a b"], "on host") + "output\n")
    assert log.read_text().splitlines()[0] == "# prog 'a b'"
    assert last_exit_code(log) is None  # still running, or cut
    with open(log, "a") as f:
        f.write(footer(3, 1.2))
    assert last_exit_code(log) == 3
    # A requeued job appends a new run: the earlier footer no longer counts until the new one ends.
    with open(log, "a") as f:
        f.write(header(["prog", "a b"], "on host (restart 1)") + "more output\n")
    assert last_exit_code(log) is None
    assert log_tail(log) == ["more output"]
    with open(log, "a") as f:
        f.write(footer(0, 5))
    assert last_exit_code(log) == 0


def test_footer_found_at_the_end_of_a_large_log(tmp_path):
    log = tmp_path / "big.log"
    with open(log, "w") as f:
        f.write(header(["train"], "on host"))
        for i in range(20000):
            f.write(f"iteration {i} loss 1.0\n")
        f.write(footer(0, 100))
    assert log.stat().st_size > 200_000
    assert last_exit_code(log) == 0
    assert log_tail(log, lines=2) == ["iteration 19998 loss 1.0", "iteration 19999 loss 1.0"]
