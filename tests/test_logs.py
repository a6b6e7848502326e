"""Library reports go through logging; a command shows them on stderr unless logging is configured already."""

import subprocess
import sys
import textwrap

from espnet_ext.data import datadir


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )


def test_a_command_shows_the_package_reports_as_plain_lines_on_stderr():
    out = run(
        """
        import logging
        from espnet_ext.logs import command_logging
        log = logging.getLogger("espnet_ext.data.x")
        log.info("before")                    # no command running: INFO is not shown
        with command_logging():
            log.info("7 segments written")
            log.warning("warning: a.yaml:3: dropped")
            log.debug("not shown")
            logging.getLogger("other").info("not ours")
        log.info("after")
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == "7 segments written\nwarning: a.yaml:3: dropped\n"
    assert out.stdout == ""


def test_configured_logging_decides_and_nothing_is_shown_twice():
    out = run(
        """
        import logging, sys
        logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="LOG %(name)s: %(message)s")
        from espnet_ext.logs import command_logging
        with command_logging():
            logging.getLogger("espnet_ext.data.x").info("written")
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "LOG espnet_ext.data.x: written\n" and out.stderr == ""


def test_a_reader_command_reports_what_it_left_out(tmp_path):
    """combine (a reports_input_errors command) logs a file left out; run as a command, it is on stderr."""
    for name, files in (("a", ("text", "utt2spk", "extra")), ("b", ("text", "utt2spk"))):
        (tmp_path / name).mkdir()
        for f in files:
            (tmp_path / name / f).write_text(f"{name}1 x\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "espnet_ext.data.datadir",
            "combine",
            str(tmp_path / "out"),
            str(tmp_path / "a"),
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
    )
    assert "combine: leaving out extra: not in every source" in out.stderr, out.stderr


def test_in_a_program_the_report_is_a_log_record(tmp_path, caplog):
    for name, files in (("a", ("text", "extra")), ("b", ("text",))):
        (tmp_path / name).mkdir()
        for f in files:
            (tmp_path / name / f).write_text(f"{name}1 x\n")
    datadir.combine_data_dirs(tmp_path / "out", [tmp_path / "a", tmp_path / "b"])
    (record,) = [r for r in caplog.records if "leaving out" in r.getMessage()]
    assert record.name == "espnet_ext.data.datadir" and record.levelname == "WARNING"
