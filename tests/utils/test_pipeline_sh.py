"""utils/parse_options.sh and utils/pipeline.sh: Kaldi-style options and the fingerprinted stage runner."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """#!/usr/bin/env bash
# A test pipeline.
set -euo pipefail
stage=1
stop_stage=100
flag=false
name=default
fail_stage=0
. "{root}/utils/parse_options.sh"
. "{root}/utils/pipeline.sh"
work() {{ echo "ran $1 name=${{name}}" >> runs.txt; [ "$1" != "${{fail_stage}}" ]; }}
run_stage 1 "first" out "$(fingerprint "${{name}}")" work 1
run_stage 2 "second" out "$(fingerprint "${{name}}" out/.stages/stage1.done)" work 2
"""


def make(tmp_path):
    script = tmp_path / "pipe.sh"
    script.write_text(SCRIPT.format(root=ROOT))
    script.chmod(0o755)
    return lambda *args: subprocess.run(
        ["./pipe.sh", *args], cwd=tmp_path, capture_output=True, text=True
    )


def runs(tmp_path):
    return (
        (tmp_path / "runs.txt").read_text().splitlines() if (tmp_path / "runs.txt").exists() else []
    )


def test_options_are_parsed_the_kaldi_way(tmp_path):
    run = make(tmp_path)
    assert run("--name", "x", "--stop-stage", "1").returncode == 0
    assert runs(tmp_path) == ["ran 1 name=x"]
    bad = run("--no_such_option", "1")
    assert bad.returncode != 0 and "unknown option --no_such_option" in bad.stderr
    assert "takes true or false" in run("--flag", "yes").stderr
    assert "--name default" in run("--help").stdout


def test_stages_skip_when_done_and_redo_when_inputs_change(tmp_path):
    run = make(tmp_path)
    assert run().returncode == 0
    again = run()
    assert (
        "Stage 1: first: already done" in again.stderr
        and "Stage 2: second: already done" in again.stderr
    )
    assert runs(tmp_path) == ["ran 1 name=default", "ran 2 name=default"]
    assert run("--name", "other").returncode == 0  # a changed option redoes both stages
    assert runs(tmp_path)[2:] == ["ran 1 name=other", "ran 2 name=other"]


def test_a_failed_stage_leaves_no_marker_and_stops(tmp_path):
    run = make(tmp_path)
    out = run("--fail_stage", "1")
    assert out.returncode != 0 and "Stage 1 (first) failed" in out.stderr
    assert not (tmp_path / "out" / ".stages" / "stage1.done").exists()
    assert runs(tmp_path) == ["ran 1 name=default"]  # stage 2 never ran
    assert run().returncode == 0 and runs(tmp_path)[1:] == [
        "ran 1 name=default",
        "ran 2 name=default",
    ]


FAKE_DECODER = '''"""Upper-cases the keyed lines of --data into --out/hyp; fails on --fail_key."""
import argparse, pathlib
p = argparse.ArgumentParser()
p.add_argument("--data"); p.add_argument("--out"); p.add_argument("--key_file"); p.add_argument("--fail_key")
a = p.parse_args()
keys = [line.split()[0] for line in open(a.key_file)]
if a.fail_key in keys:
    raise SystemExit("cannot decode " + a.fail_key)
text = dict(line.rstrip("\\n").split(" ", 1) for line in open(a.data))
out = pathlib.Path(a.out)
out.mkdir(parents=True)
(out / "hyp").write_text("".join(k + " " + text[k].upper() + "\\n" for k in keys))
'''

DECODE_SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
stage=1
stop_stage=100
inference_nj=3
fail_key=none
. "{root}/utils/parse_options.sh"
. "{root}/egs/TEMPLATE/asr1/cmd.sh"
. "{root}/utils/pipeline.sh"
decode() {{
    decode_set exp/test data/test/text fake_decoder output.JOB/hyp -- --data data/test/text \\
        --out exp/test/logdir/output.JOB --fail_key "${{fail_key}}" || return 1
    echo "jobs=${{decode_jobs}}" > exp/jobs.txt
}}
score() {{ score_set score_wer data/test/ref exp/test 3; }}
run_stage 1 decoding exp "$(fingerprint "${{fail_key}}")" decode
run_stage 2 scoring exp "$(fingerprint exp/test/text)" score
"""


def make_decoding(tmp_path, n_utts):
    (tmp_path / "fake_decoder.py").write_text(FAKE_DECODER)
    (tmp_path / "utils").symlink_to(ROOT / "utils")
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    ids = [f"utt{i:02d}" for i in range(n_utts)]
    # keys out of order: the merged text must come back sorted by key
    (data / "text").write_text("".join(f"{k} word {k[-1]}\n" for k in reversed(ids)))
    (data / "ref").write_text("".join(f"{k} WORD {k[-1]}\n" for k in ids[:-1]) + f"{ids[-1]} X 9\n")
    script = tmp_path / "decode.sh"
    script.write_text(DECODE_SCRIPT.format(root=ROOT))
    script.chmod(0o755)
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    return lambda *args: subprocess.run(
        ["./decode.sh", *args], cwd=tmp_path, capture_output=True, text=True, env=env
    )


def test_sharded_decoding_merges_sorted_and_scores(tmp_path):
    run = make_decoding(tmp_path, 5)
    done = run()
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "exp/jobs.txt").read_text() == "jobs=3\n"
    assert sorted((tmp_path / "exp/test/logdir").glob("keys.*.scp")) == [
        tmp_path / f"exp/test/logdir/keys.{i}.scp" for i in (1, 2, 3)
    ]
    text = (tmp_path / "exp/test/text").read_text().splitlines()
    assert text == [f"utt{i:02d} WORD {i}" for i in range(5)]
    # 10 reference words, the last utterance has 2 substitutions -> WER 20 %
    result = (tmp_path / "exp/test/score_wer/result.txt").read_text()
    assert result.splitlines()[2].startswith("%WER 20.00 [ 2 / 10"), result
    assert "test: %WER 20.00" in done.stderr


def test_fewer_keys_than_jobs_gives_no_empty_job(tmp_path):
    run = make_decoding(tmp_path, 2)
    assert run().returncode == 0
    assert (tmp_path / "exp/jobs.txt").read_text() == "jobs=2\n"


def test_a_failed_job_leaves_no_merged_text(tmp_path):
    run = make_decoding(tmp_path, 5)
    failed = run("--fail_key", "utt03")
    assert failed.returncode != 0
    assert not (tmp_path / "exp/test/text").exists()
    assert not (tmp_path / "exp/.stages/stage1.done").exists()
    assert "decoding" in failed.stderr and "failed" in failed.stderr


def test_an_empty_key_file_fails_before_any_job(tmp_path):
    run = make_decoding(tmp_path, 2)
    (tmp_path / "data/test/text").write_text("")
    failed = run()
    assert failed.returncode != 0
    assert "data/test/text is empty" in failed.stderr
    assert (
        "run.py" not in failed.stderr
    )  # no job was started (once with the log path as its command)


PREPARE_SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
stage=1
stop_stage=100
skip_train=false
parallel_stages=true
local_data_opts=""
train_set=train
valid_set=dev
test_sets="test1 test2"
. "{root}/utils/parse_options.sh"
. "{root}/egs/TEMPLATE/asr1/cmd.sh"
. "{root}/utils/pipeline.sh"
skip_stages=""
skip_when "${{skip_train}}" 2 3
prepare() {{ prepare_data_dirs bash -c 'test -s data/{{}}/text && echo "checked {{}}" >> checked.txt'; }}
run_stage 1 "data preparation" data "$(date +%s)" prepare
run_stage 2 "training" exp x touch trained
run_stage 3 "more training" exp x touch trained_more
"""
# local/data.sh of the test: one data dir per set, the set named by --empty left with an empty text
DATA_SH = """#!/usr/bin/env bash
empty=""
. utils/parse_options.sh
for dset in train dev test1 test2; do
    mkdir -p "data/${dset}"
    [ "${dset}" = "${empty}" ] && : > "data/${dset}/text" || echo "${dset}1 a b" > "data/${dset}/text"
done
"""


def make_prepare(tmp_path):
    (tmp_path / "utils").symlink_to(ROOT / "utils")
    (tmp_path / "local").mkdir()
    for path, text in (
        (tmp_path / "local/data.sh", DATA_SH),
        (tmp_path / "prep.sh", PREPARE_SCRIPT),
    ):
        path.write_text(text.format(root=ROOT) if path.name == "prep.sh" else text)
        path.chmod(0o755)
    return lambda *args: subprocess.run(
        ["./prep.sh", *args], cwd=tmp_path, capture_output=True, text=True
    )


def test_prepare_data_dirs_checks_every_set_by_name(tmp_path):
    run = make_prepare(tmp_path)
    assert run("--stop_stage", "1").returncode == 0
    assert sorted((tmp_path / "checked.txt").read_text().split("\n")[:-1]) == [
        f"checked {s}" for s in ("dev", "test1", "test2", "train")
    ]  # side by side: in any order
    assert (tmp_path / "data/log/validate_test2.log").is_file()


def test_prepare_data_dirs_checks_every_other_set_and_names_the_failed(tmp_path):
    run = make_prepare(tmp_path)
    out = run("--stop_stage", "1", "--local_data_opts", "--empty test1")
    assert out.returncode != 0 and "Stage 1 (data preparation) failed" in out.stderr
    assert "_check_set failed for the set(s): test1\n" in out.stderr
    assert sorted((tmp_path / "checked.txt").read_text().split("\n")[:-1]) == [
        f"checked {s}" for s in ("dev", "test2", "train")
    ]
    assert not (tmp_path / "data/.stages/stage1.done").exists()


def test_prepare_data_dirs_in_turn_stops_at_the_first_failed_check(tmp_path):
    run = make_prepare(tmp_path)
    out = run(
        "--stop_stage", "1", "--local_data_opts", "--empty test1", "--parallel_stages", "false"
    )
    assert out.returncode != 0 and "Stage 1 (data preparation) failed" in out.stderr
    assert (tmp_path / "checked.txt").read_text().split("\n")[:-1] == [
        "checked train",
        "checked dev",
    ]
    assert not (tmp_path / "data/.stages/stage1.done").exists()


def test_skip_when_skips_the_stages_of_a_true_flag_only(tmp_path):
    run = make_prepare(tmp_path)
    assert run().returncode == 0 and (tmp_path / "trained_more").exists()
    (tmp_path / "trained_more").unlink()
    (tmp_path / "exp/.stages/stage3.done").unlink()
    skipped = run("--stage", "2", "--skip_train", "true")
    assert skipped.returncode == 0 and "Stage 3: more training: skipped" in skipped.stderr
    assert not (tmp_path / "trained_more").exists()
    # a --config file may set any value: one that is not "true" is no skip, and never run as a command
    (tmp_path / "typo.conf").write_text('skip_train="touch ran_as_a_command"\n')
    again = run("--stage", "2", "--config", "typo.conf")
    assert again.returncode == 0 and (tmp_path / "trained_more").exists()
    assert not (tmp_path / "ran_as_a_command").exists()


def pipeline(options: str, body: str) -> str:
    """A test pipeline script: stage options, OPTIONS (shell assignments), the shared shell, BODY."""
    return (
        "#!/usr/bin/env bash\nset -euo pipefail\nstage=1\nstop_stage=100\n"
        + options
        + '. "{root}/utils/parse_options.sh"\n. "{root}/utils/pipeline.sh"\n'
        + body
    )


SIDE_BY_SIDE = pipeline(
    "parallel_stages=true\nfail=false\n",
    """waits_for_b() {{  # succeeds only if stage 2 runs while it waits
    for _ in $(seq 100); do [ -f b_started ] && return 0; sleep 0.05; done
    return 1
}}
starts_b() {{ touch b_started; [ "${{fail}}" = false ]; }}
group=()
spawn group run_stage 1 "waits" out 1 waits_for_b
spawn group run_stage 2 "starts" out 2 starts_b
wait_all group || die "a stage failed"
echo finished > finished.txt
""",
)

DIES_WITH_A_BACKGROUND_JOB = pipeline(
    "",
    """long_job() {{ bash -c 'echo $$ > job.pid; exec sleep 60'; }}
group=()
spawn group run_stage 1 "long" out 1 long_job
for _ in $(seq 100); do [ -s job.pid ] && break; sleep 0.05; done
run_stage 2 "fails" out 2 false
""",
)


def running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def write_script(tmp_path, text):
    script = tmp_path / "pipe.sh"
    script.write_text(text.format(root=ROOT))
    script.chmod(0o755)
    return lambda *args: subprocess.run(
        ["./pipe.sh", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_spawned_stages_run_side_by_side_or_in_turn(tmp_path):
    run = write_script(tmp_path, SIDE_BY_SIDE)
    out = run()
    assert out.returncode == 0, out.stderr  # stage 1 saw stage 2 start while it waited
    assert (tmp_path / "out/.stages/stage1.done").exists()
    assert (tmp_path / "out/.stages/stage2.done").exists()
    (tmp_path / "b_started").unlink()
    for marker in (tmp_path / "out/.stages").iterdir():
        marker.unlink()
    in_turn = run("--parallel_stages", "false")  # stage 1 waits in vain for the stage after it
    assert in_turn.returncode != 0 and "Stage 1 (waits) failed" in in_turn.stderr
    assert not (tmp_path / "b_started").exists()


def test_a_failed_spawned_stage_fails_the_pipeline_after_the_others_end(tmp_path):
    run = write_script(tmp_path, SIDE_BY_SIDE)
    out = run("--fail", "true")
    assert out.returncode != 0 and "a stage failed" in out.stderr
    assert (tmp_path / "out/.stages/stage1.done").exists()  # the other one was waited for
    assert not (tmp_path / "out/.stages/stage2.done").exists()
    assert not (tmp_path / "finished.txt").exists()


def test_a_pipeline_that_dies_stops_its_background_stages(tmp_path):
    run = write_script(tmp_path, DIES_WITH_A_BACKGROUND_JOB)
    out = run()
    assert out.returncode != 0 and "Stage 2 (fails) failed" in out.stderr
    pid = int((tmp_path / "job.pid").read_text())
    for _ in range(
        40
    ):  # a signalled process may take a moment; a zombie no parent reaps is dead too
        if not running(pid):
            break
        time.sleep(0.05)
    assert not running(pid), "the background stage's process outlived the pipeline"
    assert not (tmp_path / "out/.stages/stage1.done").exists()


# for_each_set: decode's per-set function (decode_set's global ${decode_jobs} set first, read at its end) under a
# decode() whose local inference_nj it must see, as asr.sh's pseudo_label hands its own to decode.
EACH_SET = pipeline(
    'parallel_stages=true\ntest_sets="a b"\nfail=none\nmeet=meet\n',
    """one() {{  # one SET MEET : its start and end in log.txt; MEET=meet: it waits (5 s at most) for the other's start
    local other=a
    [ "$1" != a ] || other=b
    decode_jobs=$1
    echo "start $1 nj=${{inference_nj}} $2" >> log.txt
    touch "started_$1"
    [ "$1" != "${{fail}}" ] || return 1
    if [ "$2" = meet ]; then
        for _ in $(seq 100); do [ -f "started_${{other}}" ] && break; sleep 0.05; done
        [ -f "started_${{other}}" ] || return 1
    fi
    sleep 0.2
    echo "end $1 jobs=${{decode_jobs}}" >> log.txt
}}
decode() {{ local inference_nj=7; for_each_set "${{test_sets}}" one "${{meet}}"; }}
run_stage 1 decoding out 1 decode
echo finished > finished.txt
""",
)


def log_lines(tmp_path):
    return (tmp_path / "log.txt").read_text().splitlines()


def test_for_each_set_runs_the_sets_side_by_side(tmp_path):
    run = write_script(tmp_path, EACH_SET)
    out = run()
    assert out.returncode == 0, out.stderr  # each set saw the other start while it waited
    lines = log_lines(tmp_path)
    assert sorted(lines[:2]) == ["start a nj=7 meet", "start b nj=7 meet"]
    assert sorted(lines[2:]) == ["end a jobs=a", "end b jobs=b"]  # each set's own decode_jobs
    assert (tmp_path / "finished.txt").exists()


def test_for_each_set_runs_the_sets_in_turn_without_parallel_stages(tmp_path):
    run = write_script(tmp_path, EACH_SET)
    out = run("--parallel_stages", "false", "--meet", "alone")
    assert out.returncode == 0, out.stderr
    assert log_lines(tmp_path) == [
        "start a nj=7 alone",
        "end a jobs=a",
        "start b nj=7 alone",
        "end b jobs=b",
    ]
    (tmp_path / "log.txt").unlink()
    for started in tmp_path.glob("started_*"):
        started.unlink()
    (tmp_path / "out/.stages/stage1.done").unlink()
    waits = run("--parallel_stages", "false")  # set a waits in vain for the set after it
    assert waits.returncode != 0 and "one failed for the set(s): a" in waits.stderr
    assert log_lines(tmp_path) == ["start a nj=7 meet"]


# Three sets side by side, each a local runner's request of four jobs that record how many run at once.
SHARED_CPUS = pipeline(
    'parallel_stages=true\ncmd_backend=local\ntest_sets="a b c"\n',
    """one() {{
    echo "$1 ${{ESPNET_EXT_LOCAL_CPUS:-unset}}" >> shares.txt
    "{python}" "{root}/utils/run.py" JOB=1:4 "logs/$1.JOB.log" "{python}" "{probe}" overlap marks "$1_JOB" 0.4
}}
mkdir -p marks
for_each_set "${{test_sets}}" one
""",
)


def test_sets_side_by_side_share_the_local_runners_cpus(tmp_path):
    text = SHARED_CPUS.replace("{python}", sys.executable)
    text = text.replace("{probe}", str(ROOT / "tests/jobs/probe_job.py"))
    write_script(tmp_path, text)
    env = {**os.environ, "ESPNET_EXT_LOCAL_CPUS": "3"}

    def run(*args):
        return subprocess.run(
            ["./pipe.sh", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
        )

    out = run()
    assert out.returncode == 0, out.stderr
    assert sorted((tmp_path / "shares.txt").read_text().splitlines()) == ["a 1", "b 1", "c 1"]
    seen = [int(p.read_text()) for p in (tmp_path / "marks").glob("*.seen")]
    assert len(seen) == 12 and max(seen) <= 3  # one job a set at a time: 3 CPUs in all, not 3 x 3
    (tmp_path / "shares.txt").unlink()
    assert (
        run("--cmd_backend", "slurm").returncode == 0
    )  # a cluster queues the sets' jobs: no share
    assert sorted((tmp_path / "shares.txt").read_text().splitlines()) == ["a 3", "b 3", "c 3"]


def test_for_each_set_fails_after_the_other_sets_end_naming_the_failed(tmp_path):
    run = write_script(tmp_path, EACH_SET)
    out = run("--fail", "a")
    assert out.returncode != 0 and "Stage 1 (decoding) failed" in out.stderr
    assert "one failed for the set(s): a\n" in out.stderr
    assert "end b jobs=b" in log_lines(
        tmp_path
    )  # b met a, then ended: it was waited for, not stopped
    assert not (tmp_path / "out/.stages/stage1.done").exists()
    assert not (tmp_path / "finished.txt").exists()
    (tmp_path / "log.txt").unlink()
    in_turn = run("--fail", "a", "--parallel_stages", "false", "--meet", "alone")
    assert in_turn.returncode != 0 and "one failed for the set(s): a\n" in in_turn.stderr
    assert log_lines(tmp_path) == [
        "start a nj=7 alone"
    ]  # in turn, nothing after the failed set starts


def test_corpus_settings_change_when_a_release_file_changes_in_place(tmp_path):
    """Stage 1's fingerprint takes corpus_settings: a corpus file edited (its time), replaced (its size),
    added or removed under an unchanged corpus path must change it; an unset root prints its name only."""
    corpus = tmp_path / "corpus"
    (corpus / "txt").mkdir(parents=True)
    text = corpus / "txt" / "train.en"
    text.write_text("one\n")
    unread = tmp_path / "unread"  # a root db.sh sets that this recipe's data scripts never name
    unread.mkdir()
    (tmp_path / "db.sh").write_text(
        f"CORPUS=${{CORPUS:-{corpus}}}\nOTHER=\nCORPUS_EXTRA={unread}\n"
    )
    (tmp_path / "local").mkdir()
    (tmp_path / "local/data.sh").write_text('python -m reader --root "${CORPUS}"\n')

    def settings(stage=1) -> str:
        script = f'. "{ROOT}/utils/pipeline.sh" && stage={stage} stop_stage=100 && corpus_settings'
        out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    first = settings()
    lines = first.splitlines()
    assert lines[0] == f"CORPUS={corpus}" and lines[2:] == ["OTHER=", f"CORPUS_EXTRA={unread}"]
    assert settings() == first
    # the signature stats every file: only when stage 1 runs, for the roots the data scripts name
    assert settings(stage=2).splitlines() == [lines[0], *lines[2:]]
    seen = [first]
    os.utime(text, (1_000_000_000, 1_000_000_000))  # edited in place: same name and size
    seen.append(settings())
    text.write_text("one, two\n")  # replaced by another size
    os.utime(text, (1_000_000_000, 1_000_000_000))
    seen.append(settings())
    (corpus / "txt" / "train.de").write_text("eins\n")
    seen.append(settings())
    text.unlink()
    seen.append(settings())
    assert len(set(seen)) == len(seen)


TASK_IDS = pipeline(
    'task_ids=""\n',
    """opts=$(task_id_opts dump/train_filtered dump/valid_filtered "${{task_ids}}")
echo "${{opts}}" > opts.txt
""",
)


def test_task_id_opts_name_each_table_of_both_sets(tmp_path):
    """--task_ids "NAME=TABLE ...": ESPnet's data options of each id table, train then valid."""
    run = write_script(tmp_path, TASK_IDS)
    assert run().returncode == 0 and (tmp_path / "opts.txt").read_text() == "\n"  # none: nothing
    assert run("--task_ids", "task_id=domain_id target_language_id=tgt_lang_id").returncode == 0
    assert (tmp_path / "opts.txt").read_text().split() == [
        "--allow_variable_data_keys", "true",
        "--train_data_path_and_name_and_type", "dump/train_filtered/domain_id,task_id,text_int",
        "--train_data_path_and_name_and_type", "dump/train_filtered/tgt_lang_id,target_language_id,text_int",
        "--valid_data_path_and_name_and_type", "dump/valid_filtered/domain_id,task_id,text_int",
        "--valid_data_path_and_name_and_type", "dump/valid_filtered/tgt_lang_id,target_language_id,text_int",
    ]  # fmt: skip
    bad = run("--task_ids", "task_id")
    assert bad.returncode != 0 and "--task_ids: 'task_id' is not NAME=TABLE" in bad.stderr


# A scorer standing in for utils/score_*.py: writes what it was given; fails on a reference named "fail".
FAKE_SCORER = """#!/usr/bin/env python3
import argparse, pathlib, sys
p = argparse.ArgumentParser()
for name in ("--ref", "--hyp", "--out_dir", "--extra"):
    p.add_argument(name)
a = p.parse_args()
if "fail" in a.ref:
    sys.exit("cannot score " + a.ref)
out = pathlib.Path(a.out_dir)
out.mkdir(parents=True, exist_ok=True)
(out / "result.txt").write_text(f"ref {a.ref}\\nhyp {a.hyp}\\nextra {a.extra}\\n")
"""
FAKE_CMD = """#!/usr/bin/env bash
log=$1
shift
mkdir -p "$(dirname "${log}")"
"$@" > "${log}" 2>&1
"""
SCORE_SETS = pipeline(
    'test_sets="a b"\n',
    """train_cmd=./fake_cmd.sh
test_set_files exp/dec text > files.txt
run_stage 1 scoring exp/dec "$(fingerprint $(test_set_files exp/dec text))" \\
    score_sets score_fake "data/{{}}/ref" exp/dec 1,2 --extra "exp/dec/{{}}/extra"
""",
)


def make_scoring(tmp_path, sets):
    (tmp_path / "utils").mkdir()
    for path, text in (
        (tmp_path / "utils" / "score_fake.py", FAKE_SCORER),
        (tmp_path / "fake_cmd.sh", FAKE_CMD),
    ):
        path.write_text(text)
        path.chmod(0o755)
    for dset in sets:
        (tmp_path / "data" / dset).mkdir(parents=True)
        (tmp_path / "data" / dset / "ref").write_text("u1 x\n")
        (tmp_path / "exp" / "dec" / dset).mkdir(parents=True)
        (tmp_path / "exp" / "dec" / dset / "text").write_text("u1 x\n")
    return write_script(tmp_path, SCORE_SETS)


def test_score_sets_scores_each_test_set_under_its_name(tmp_path):
    run = make_scoring(tmp_path, ["a", "b"])
    out = run()
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "files.txt").read_text() == "exp/dec/a/text\nexp/dec/b/text\n"
    for dset in ("a", "b"):
        result = (tmp_path / f"exp/dec/{dset}/score_fake/result.txt").read_text()
        assert result == (
            f"ref data/{dset}/ref\nhyp exp/dec/{dset}/text\nextra exp/dec/{dset}/extra\n"
        )
        assert f"{dset}: ref data/{dset}/ref hyp exp/dec/{dset}/text" in out.stderr  # lines 1,2


def test_score_sets_scores_every_other_set_and_names_the_one_that_failed(tmp_path):
    run = make_scoring(tmp_path, ["a", "fail", "b"])
    out = run("--test_sets", "a fail b")
    assert out.returncode != 0 and "Stage 1 (scoring) failed" in out.stderr
    assert "_score_one failed for the set(s): fail" in out.stderr
    assert (tmp_path / "exp/dec/a/score_fake/result.txt").exists()
    assert (tmp_path / "exp/dec/b/score_fake/result.txt").exists()  # side by side: b was scored too
    assert (
        "cannot score data/fail/ref" in (tmp_path / "exp/dec/fail/score_fake/score.log").read_text()
    )


RESULTS = pipeline(
    'expdir=exp\ntest_sets="test"\nresults_title="A title"\nresults_md=""\nresults_notes=""\n'
    'command_line="./pipe.sh --x 1"\n',
    'write_results_md mt 11 "Configs: \\`c.yaml\\`."\n',
)


def test_write_results_md_tells_the_wall_time_of_the_stages_run(tmp_path):
    write_script(tmp_path, RESULTS)
    # espnet_ext.results of this tree, run by this interpreter
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }

    def run(*args):
        return subprocess.run(
            ["./pipe.sh", *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
        )

    def notes(*args, out="exp/RESULTS.md"):
        done = run(*args)
        assert done.returncode == 0, done.stderr
        lines = (tmp_path / out).read_text().splitlines()
        assert lines[0] == "# A title" and "./pipe.sh --x 1" in (tmp_path / out).read_text()
        return lines[2]

    (tmp_path / "exp").mkdir()
    assert re.fullmatch(
        r"Configs: `c\.yaml`\. Wall time of this invocation \(stages 3-11\): 0 min [0-9]+ s\.",
        notes("--stage", "3"),
    )
    assert "(stages 1-5)" in notes("--stop_stage", "5")
    # the RESULTS.md stage alone (a sweep's report) has no wall time to tell; --results_notes come last
    assert notes("--stage", "11", "--results_notes", "λ tuned.") == "Configs: `c.yaml`. λ tuned."
    assert (
        notes("--stage", "11", "--results_md", "out/R.md", out="out/R.md") == "Configs: `c.yaml`."
    )


def test_local_data_scripts_are_data_sh_and_the_shared_shell_it_sources(tmp_path):
    """Stage 1's fingerprint hashes them: an edit of the shared file redoes the data preparation too."""

    def scripts():
        out = subprocess.run(
            ["bash", "-c", f'. "{ROOT}/utils/pipeline.sh" && local_data_scripts'],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0 and not out.stderr, out.stderr
        return out.stdout.split()

    assert scripts() == ["local/data.sh"]  # none yet: its name alone, as fingerprint takes it
    (tmp_path / "local").mkdir()
    (tmp_path / "local/data.sh").write_text(
        "x=1\n. utils/corpus_options.sh  # shared\n. ./path.sh\n. utils/parse_options.sh\n"
    )
    assert scripts() == ["local/data.sh", "utils/corpus_options.sh"]


DECODING_NAMES = pipeline(
    'inference_config=conf/decode_x.yaml\ninference_tag=""\ninference_args="--beam_size 2"\nuse_lm=false\n'
    'lm_tag=lm_a\nmatched_inference=false\nattention_variant=baseline\nrelax_gamma=""\n',
    """attention_variant mt {config}
default_inference_tag
printf '%s\\n' "${{variant_tag}}" "${{variant_args}}" "${{inference_tag}}" "${{inference_args}}" > names.txt
""",
)


def test_attention_variant_and_the_default_inference_tag(tmp_path):
    """The experiment and decoding names asr.sh and mt.sh take from the variant and decoding options."""
    config = ROOT / "egs" / "iwslt14" / "mt1" / "conf" / "train_mt_mini.yaml"
    (tmp_path / "pipe.sh").write_text(
        DECODING_NAMES.replace("{config}", str(config)).format(root=ROOT)
    )
    (tmp_path / "pipe.sh").chmod(0o755)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def run(*args):
        return subprocess.run(
            ["./pipe.sh", *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
        )

    def names(*args):
        out = run(*args)
        assert out.returncode == 0, out.stderr
        return (tmp_path / "names.txt").read_text().splitlines()

    assert names() == ["", "", "decode_decode_x", "--beam_size 2"]
    relaxed = ("--attention_variant", "relaxed_cross", "--relax_gamma", "0.2")
    assert names(*relaxed, "--use_lm", "true", "--matched_inference", "true") == [
        "_relaxed_cross_g0.2",
        "--decoder relaxed_transformer --decoder_conf attention_sites.src_attn.gamma=0.2",
        "decode_decode_x_lm_lm_a_matched",
        "--beam_size 2 --matched_inference true",
    ]
    given = names("--inference_tag", "mine", "--matched_inference", "true")
    assert given[2:] == ["mine", "--beam_size 2 --matched_inference true"]
    bad = run("--attention_variant", "nonsense")
    assert bad.returncode != 0 and "bad attention variant" in bad.stderr


def test_large_files_are_hashed_once_per_version(tmp_path):
    """fingerprint hashes a file of DIGEST_CACHE_BYTES or more once per (path, size, time, inode) and
    reuses its digest from exp/.file_digests, printing what sha256sum prints; any change rehashes."""
    big = tmp_path / "big.txt"
    big.write_text("a" * 100)
    script = f'. "{ROOT}/utils/pipeline.sh" && DIGEST_CACHE_BYTES=64 && file_digest big.txt'

    def digest() -> str:
        out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    plain = subprocess.run(
        ["sha256sum"], input=big.read_bytes(), capture_output=True, check=True
    ).stdout.decode()
    assert digest() == plain
    cache = tmp_path / "exp/.file_digests"
    assert len(cache.read_text().splitlines()) == 1
    # a stale digest is what the cache says while the file's stat is unchanged: proof it was not rehashed
    path, stat, _ = cache.read_text().rstrip("\n").split("\t")
    cache.write_text(f"{path}\t{stat}\tcafe  -\n")
    assert digest() == "cafe  -\n"
    # the same size, another time: hashed again (and the new digest appended)
    os.utime(big, (1_000_000_000, 1_000_000_000))
    assert digest() == plain
    big.write_text("b" * 100)  # edited: same size, a new time
    assert (
        digest()
        == subprocess.run(
            ["sha256sum"], input=b"b" * 100, capture_output=True, check=True
        ).stdout.decode()
    )
    assert len(cache.read_text().splitlines()) == 3
    # small files are hashed every time, never cached
    (tmp_path / "small.txt").write_text("x")
    small = f'. "{ROOT}/utils/pipeline.sh" && file_digest small.txt'
    out = subprocess.run(["bash", "-c", small], cwd=tmp_path, capture_output=True, text=True)
    assert (
        out.stdout
        == subprocess.run(
            ["sha256sum"], input=b"x", capture_output=True, check=True
        ).stdout.decode()
    )
    assert "small.txt" not in cache.read_text()


def test_split_keys_keeps_unchanged_parts_and_drops_the_extra_ones(tmp_path):
    (tmp_path / "text").write_text("".join(f"u{i} words {i}\n" for i in range(6)))
    split = tmp_path / "split"

    def split_keys(nj):
        script = f'set -euo pipefail\nstage=1\nstop_stage=1\n. "{ROOT}/utils/pipeline.sh"\nsplit_keys text split {nj}\n'
        out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert split_keys(3) == "3"
    first = {p.name: p.stat().st_ino for p in split.glob("keys.*.scp")}
    assert (split / "keys.2.scp").read_text() == "u1\nu4\n"
    assert (
        split_keys(3) == "3"
    )  # a rerun: the same parts, the files a waiting job may read untouched
    assert {p.name: p.stat().st_ino for p in split.glob("keys.*.scp")} == first
    assert split_keys(2) == "2"
    assert sorted(p.name for p in split.iterdir()) == ["keys.1.scp", "keys.2.scp"]
    assert (split / "keys.2.scp").read_text() == "u1\nu3\nu5\n"


# decode_set through a stand-in ${decode_cmd} that records its options and writes the one job's hypothesis
DECODE_MEM = pipeline(
    'inference_nj=1\ninference_mem=""\n',
    """printf 'u1 a\\n' > keys
decode_cmd="$PWD/rec"
decode_set out keys probe output.JOB -- --x 1
""",
)


def test_decoding_jobs_ask_for_the_memory_given(tmp_path):
    (tmp_path / "rec").write_text(
        '#!/usr/bin/env bash\necho "$@" >> calls.txt\nmkdir -p out/logdir && echo "u1 A" > out/logdir/output.1\n'
    )
    (tmp_path / "rec").chmod(0o755)
    run = write_script(tmp_path, DECODE_MEM)
    assert run().returncode == 0
    assert run("--inference_mem", "16G").returncode == 0
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls[0].startswith("JOB=1:1 out/logdir/probe.JOB.log python -m probe")
    assert calls[1].startswith("--mem 16G JOB=1:1 out/logdir/probe.JOB.log")
    assert (tmp_path / "out" / "text").read_text() == "u1 A\n"
