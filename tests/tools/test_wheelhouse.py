"""tools/wheelhouse.sh in dry-run mode and its package list (tools/wheelhouse_packages.py)."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import wheelhouse_packages  # noqa: E402


def test_dry_run_lists_what_training_and_inference_import_beyond_torch(tmp_path):
    done = subprocess.run(
        [str(ROOT / "tools" / "wheelhouse.sh"), str(tmp_path / "wheels"), "--dry_run"]
        + ["--python_version", "3.12", "--platform", "manylinux_2_28_x86_64"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "wheels").exists()
    lines = done.stdout.splitlines()
    packages = [line for line in lines if "==" in line and not line.startswith(("#", "/"))]
    names = {wheelhouse_packages.normalized(p.split("==")[0]) for p in packages}
    # every one pinned exactly as tools/requirements.txt pins it
    pinned = wheelhouse_packages.pins(ROOT / "tools" / "requirements.txt")
    assert all(pinned[wheelhouse_packages.normalized(p.split("==")[0])] == p for p in packages)
    for needed in (
        "espnet",
        "sentencepiece",
        "kaldiio",
        "sacrebleu",
        "jiwer",
        "espnet-g2p-en",
        "pytest",
    ):
        assert needed in names, needed
    # torch and what it brings, and tools nothing imports, stay out
    for absent in (
        "torch",
        "triton",
        "sympy",
        "networkx",
        "nvidia-cublas",
        "ruff",
        "pytest-xdist",
        "espnet-ext",
    ):
        assert absent not in names, absent
    assert not any(n.startswith(("nvidia-", "cuda-")) for n in names)
    assert (
        lines[0]
        == f"# {len(packages)} packages, written to {tmp_path / 'wheels'}/requirements.txt:"
    )
    command = shlex.split(lines[-1])
    assert command[1:5] == ["-m", "pip", "download", "--no-deps"]
    option = {
        command[i]: command[i + 1]
        for i in range(5, len(command) - 1)
        if command[i].startswith("--")
    }
    assert option["--python-version"] == "3.12" and "--abi" in option and "cp312" in command
    assert option["--platform"] == "manylinux_2_28_x86_64" and option["--dest"] == str(
        tmp_path / "wheels"
    )
    assert command[-2:] == ["-r", f"{tmp_path / 'wheels'}/requirements.txt"]


def test_torch_closure_and_name_normalisation():
    closure = wheelhouse_packages.requirement_closure("torch")
    assert {"torch", "sympy", "mpmath", "filelock"} <= closure  # mpmath: through sympy
    assert wheelhouse_packages.normalized("Espnet_G2P.en") == "espnet-g2p-en"


def test_bad_options_are_refused(tmp_path):
    script = str(ROOT / "tools" / "wheelhouse.sh")
    for args, message in (
        ([], r"wheelhouse.sh DIR"),
        ([str(tmp_path), "--python_version", "311"], r"--python_version takes 3.N, not '311'"),
        ([str(tmp_path), "--bogus"], r"unknown option --bogus"),
    ):
        done = subprocess.run([script, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and re.search(message, done.stderr), (args, done.stderr)


def test_node_packages_are_left_out_and_only_missing_ones_installed(tmp_path):
    node = tmp_path / "node.txt"
    node.write_text("SentencePiece==0.1.99\nkaldiio\n# a comment\n")
    done = subprocess.run(
        [str(ROOT / "tools" / "wheelhouse.sh"), str(tmp_path / "wheels"), "--dry_run"]
        + ["--python_version", "3.12", "--node_packages", str(node)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    names = {
        wheelhouse_packages.normalized(line.split("==")[0])
        for line in done.stdout.splitlines()
        if "==" in line and not line.startswith(("#", "/"))
    }
    assert "espnet" in names and not {"sentencepiece", "kaldiio"} & names
    # on the node: the pins whose distribution this Python has no version of
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pytest==0.0.1\nno-such-distribution-xyz==1.0\n")
    assert wheelhouse_packages.missing_requirements(requirements) == [
        "no-such-distribution-xyz==1.0"
    ]
