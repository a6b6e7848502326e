"""tools/gpu_check.sh in dry-run mode (no GPU here): what it would install, test, benchmark and time."""

import re
import shlex
import subprocess
from pathlib import Path

import yaml

from espnet_ext.analysis.preflight import TASKS, CorpusSize, corpus_batches

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {"relaxed attention", "Multiformer", "sharp attention", "head selection", "LegoNN"}
RECIPE_TASK = {"asr1": "asr", "st1": "st", "mt1": "mt", "vsr1": "vsr", "cls1": "cls", "ocr1": "ocr"}


def dry_run(tmp_path, *options):
    work = tmp_path / "work"
    done = subprocess.run(
        [str(ROOT / "tools" / "gpu_check.sh"), "--dry_run", "--work_dir", str(work), *options]
        + ["--python", str(tmp_path / "no-such-python"), "--wheelhouse", str(tmp_path / "wheels")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (
        not work.exists()
    )  # a dry run writes nothing and runs nothing (the python named does not exist)
    lines = done.stdout.splitlines()
    commands = [shlex.split(line[2:]) for line in lines if line.startswith("+ ")]
    families = [line[2:] for line in lines if line.startswith("# ")]
    return commands, families, work


def test_install_is_offline_from_the_wheelhouse_of_only_what_the_node_lacks(tmp_path):
    commands, _, work = dry_run(tmp_path)
    install = commands[0]
    # the node's own Python (its torch and packages visible; a venv over a venv would hide them)
    assert install[:4] == [str(tmp_path / "no-such-python"), "-m", "pip", "install"]
    assert {"--no-index", "--no-deps"} <= set(install)
    assert install[install.index("--find-links") + 1] == str(tmp_path / "wheels")
    assert install[install.index("--target") + 1] == str(work / "site")
    assert install[-2:] == ["-r", str(work / "missing.txt")]


def test_gpu_tests_and_every_benchmark_run_on_cuda(tmp_path):
    commands, _, _ = dry_run(tmp_path)
    (pytest,) = [c for c in commands if c[1:3] == ["-m", "pytest"]]
    marked = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"pytest\.mark\.gpu|mark\.gpu", p.read_text())
    )
    assert pytest[pytest.index("-m", 3) + 1] == "gpu" and pytest[-len(marked) :] == marked
    assert pytest[pytest.index("-n") + 1] == "4"  # processes sharing the GPU (pytest-xdist)
    benches = [c for c in commands if c[1].startswith("tests/bench/")]
    assert sorted(Path(c[1]).name for c in benches) == sorted(
        p.name for p in (ROOT / "tests" / "bench").glob("bench_*.py")
    )
    # on CUDA each bench takes its GPU goals' batch by default (tests/bench/timing.py)
    assert all(c[2:] == ["--device", "cuda"] for c in benches)


def test_one_real_config_per_paper_family_is_timed_for_6_updates(tmp_path):
    commands, families, _ = dry_run(tmp_path)
    timings = [c for c in commands if c[1:3] == ["-m", "espnet_ext.analysis.train_timing"]]
    assert len(timings) == len(families) and set(families) == FAMILIES
    for command in timings:
        option = {command[i]: command[i + 1] for i in range(3, len(command) - 1, 2)}
        assert option["--ngpu"] == "1" and option["--updates"] == "6"
        assert "--num_workers" not in option  # each config's own loader processes, as a real run
        config = ROOT / option["--config"]
        assert config.is_file() and "mini" not in config.name, config
        # the task is the recipe's (egs/<corpus>/<task>1/conf/...)
        assert option["--task"] == RECIPE_TASK[config.relative_to(ROOT / "egs").parts[1]]
        assert option["--task"] in TASKS
        # the config's sampler splits the synthetic corpus into whole batches of one size (no remainder
        # mixed into the timed updates), at least two of them
        size = CorpusSize(*(int(option[f"--{k}"]) for k in ("utterances", "frames", "tokens")))
        espnet_options = command[19:]  # after train_timing's own 8
        vocab = int(option["--vocab"])
        sizes = corpus_batches(option["--task"], config, size, vocab, espnet_options)
        assert len(set(sizes)) == 1 and len(sizes) >= 2, (config, espnet_options, sizes)
    # the AMP goals' configs are timed in fp32 and with AMP (whatever the config itself says)
    for name in ("train_vsr_large.yaml", "train_swin_t.yaml", "train_lego_wemb_ende.yaml"):
        rows = [c for c in timings if c[c.index("--config") + 1].endswith(name)]
        amp = set()
        for row in rows:
            setting = yaml.safe_load((ROOT / row[row.index("--config") + 1]).read_text()).get(
                "use_amp", False
            )
            if "--use_amp" in row:
                setting = row[row.index("--use_amp") + 1] == "true"
            amp.add(setting)
        assert amp == {True, False}, name


def test_steps_select_what_runs_after_the_install(tmp_path):
    commands, families, _ = dry_run(tmp_path, "--steps", "timing")
    assert commands[0][2:4] == ["pip", "install"]
    assert all(c[1:3] == ["-m", "espnet_ext.analysis.train_timing"] for c in commands[1:])
    assert set(families) == FAMILIES
    commands, families, _ = dry_run(tmp_path, "--steps", "tests,bench")
    assert not families and any(c[1:3] == ["-m", "pytest"] for c in commands)
    assert any(c[1].startswith("tests/bench/") for c in commands)
    # --rows: the timing rows whose line matches, e.g. the ones a change touched
    commands, families, _ = dry_run(
        tmp_path, "--steps", "timing", "--rows", "Multiformer|train_vsr"
    )
    configs = [c[c.index("--config") + 1] for c in commands[1:]]
    assert families == ["relaxed attention"] * 2 + ["Multiformer"] * 2
    assert all("train_vsr_large" in c or "mustc/st1" in c for c in configs) and len(configs) == 4
    done = subprocess.run(
        [str(ROOT / "tools" / "gpu_check.sh"), "--dry_run", "--steps", "timings"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        done.returncode == 2 and "--steps takes tests, bench, timing; not 'timings'" in done.stderr
    )
