"""Multi-domain ASR and ST in egs/mtedx (head selection, Tables 3 and 5): each run.sh's test sets and
options per --tasks, and both recipes end to end on a tiny two-domain mini corpus. ST: the joint shared
model, head selection by domain and per-domain adapters started from the joint model; ASR: head selection
by domain; each decoded on both domains' test sets."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from recipe_fixture import (
    MTEDX_ASR_ARGS,
    MTEDX_TINY_ASR,
    MTEDX_TINY_DECODE,
    echo_recipe,
    echoed_args,
    make_recipe_copy,
    mtedx_st_tiny,
    read_table,
    run,
)

from espnet_ext.nets.adapters import ADAPTER_KEY


# run.sh with its pipeline (st.sh, asr.sh) replaced by a script printing its arguments: what each mode
# asks of the pipeline
@pytest.fixture(scope="module")
def echo_st(tmp_path_factory):
    return echo_recipe("mtedx", "st1", "st.sh", tmp_path_factory.mktemp("st_echo"))


@pytest.fixture(scope="module")
def echo_asr(tmp_path_factory):
    return echo_recipe("mtedx", "asr1", "asr.sh", tmp_path_factory.mktemp("asr_echo"))


def pipeline_args(recipe: Path, *args: str, corpus: str = "") -> dict[str, str]:
    """The options run.sh gives its pipeline (the last of each wins, as the pipeline parses them)."""
    return echoed_args(recipe, list(args), {"MTEDX": corpus})


MINI_TEDX_TESTS = (
    "test_es-en test_es-fr test_es-it test_es-pt test_fr-en test_fr-es test_fr-pt test_pt-en "
    "test_it-en test_it-es test_pt-es"
)


def test_st_run_sh_test_sets_and_tasks_per_mode(echo_st):
    st = echo_st
    other = " test_other_es-en test_other_it-en test_other_it-es test_other_pt-es"
    languages = pipeline_args(st)
    assert languages["--test_sets"] == MINI_TEDX_TESTS
    assert "--encoder_task_tag_file src_lang" in languages["--inference_args"]
    # st.sh reads the id tables (utils/pipeline.sh task_id_opts); --st_args are the training's other options
    assert languages["--task_ids"] == (
        "encoder_task_id=src_lang_id decoder_task_id=tgt_lang_id target_language_id=tgt_lang_id"
    )
    assert pipeline_args(st, "--st_args", "--seed 1")["--st_args"] == "--seed 1"
    # the default config's ASR model; another config names its own (--asr_init)
    assert languages["--st_config"] == "conf/train_st_group_mini.yaml"
    assert languages["--asr_init"] == "../asr1/exp/asr_train_asr_group_mini/valid.acc.ave.pth"
    joint = pipeline_args(
        st, "--st_config", "conf/train_st_shared_mini.yaml", "--other_domains", "other"
    )
    assert joint["--test_sets"] == MINI_TEDX_TESTS + other
    domains = pipeline_args(st, "--tasks", "domains", "--dumpdir", "dump_domains")
    assert domains["--test_sets"] == MINI_TEDX_TESTS + other  # every domain by default
    assert domains["--dumpdir"] == "dump_domains"
    assert domains["--task_ids"] == "task_id=domain_id target_language_id=tgt_lang_id"
    assert domains["--st_config"] == "conf/train_st_group_domains_mini.yaml"
    assert domains["--asr_init"] == ""
    assert domains["--inference_args"].startswith("--task_tag_file domain ")
    directions = pipeline_args(st, "--tasks", "directions")
    assert directions["--task_ids"] == "task_id=direction_id target_language_id=tgt_lang_id"
    assert directions["--test_sets"] == " ".join(MINI_TEDX_TESTS.split()[:8])  # no zero-shot one
    real = pipeline_args(
        st, "--tasks", "domains", "--other_domains", "covost", corpus="/corpora/mtedx"
    )
    covost = [s for s in real["--test_sets"].split() if s.startswith("test_covost_")]
    assert covost == [f"test_covost_{s}-en" for s in ("es", "fr", "it", "pt", "ru")]  # footnote 3
    europarl = pipeline_args(st, "--tasks", "domains", corpus="/corpora/mtedx")[
        "--test_sets"
    ].split()
    assert len([s for s in europarl if s.startswith("test_europarl_")]) == 11  # footnote 4


DOMAINS = "task_tags: [tedx, other], target_languages: [en, it]"
TINY_DOMAINS = {
    "joint": mtedx_st_tiny(
        "shared",
        "encoder_task_tags: [es, it], decoder_task_tags: [en, it], target_languages: [en, it]",
    ),
    "group_domains": mtedx_st_tiny("group", f"selection_kl_weight: 0.1, {DOMAINS}"),
    "adapter_domains": mtedx_st_tiny("adapter", f"train_adapters_only: true, {DOMAINS}"),
}
TESTS = ["test_es-en", "test_it-en", "test_other_es-en", "test_other_it-en"]
TWO_DOMAINS = [
    "--inference_config", "conf/tiny_decode.yaml", "--src_nbpe", "30", "--tgt_nbpe", "40",
    "--inference_model", "valid.acc.best.pth", "--train_num_threads", "1", "--nj", "1",
    "--inference_nj", "1", "--asr_init", "", "--test_sets", " ".join(TESTS),
    "--local_data_opts",
    "--mini_src_langs es,it --tgt_langs en,it --mini_st_train_sizes es-en=24,it-en=0 --mini_other_domain true"
    " --mini_other_st_train_sizes es-en=12,it-en=12 --mini_valid_size 3 --mini_test_size 3"
    " --mini_num_speakers 2 --mini_segments_per_talk 3:6",
]  # fmt: skip


def assert_domains_in_training_data(recipe: Path, tedx: int, other: int) -> None:
    """data/train tags every utterance with its domain (the other domain's ids prefixed), and the dump
    holds the domain ids training reads (tedx 0, other 1)."""
    domain = read_table(recipe / "data" / "train" / "domain")
    assert sorted(domain.values()) == ["other"] * other + ["tedx"] * tedx
    assert all(u.startswith("other_") == (d == "other") for u, d in domain.items())
    ids = read_table(recipe / "dump" / "fbank" / "train_filtered" / "domain_id")
    assert ids == {u: {"tedx": "0", "other": "1"}[domain[u]] for u in ids}


@pytest.fixture(scope="module")
def two_domain_runs(tmp_path_factory):
    """st1 on a tiny mTEDx + "other" mini corpus: the joint shared model (--tasks languages), then head
    selection by domain and per-domain adapters from the joint model (--tasks domains)."""
    st = make_recipe_copy("mtedx", "st1", tmp_path_factory.mktemp("st_domains"))
    for name, config in TINY_DOMAINS.items():
        (st / "conf" / f"tiny_{name}.yaml").write_text(config)
    (st / "conf" / "tiny_decode.yaml").write_text("beam_size: 2\nmaxlenratio: 0.0\n")
    runs = [
        ["--st_config", "conf/tiny_joint.yaml"],
        ["--tasks", "domains", "--st_config", "conf/tiny_group_domains.yaml"],
        [
            "--tasks", "domains", "--st_config", "conf/tiny_adapter_domains.yaml",
            "--st_args", "--init_param exp/st_tiny_joint/valid.acc.best.pth",
        ],
    ]  # fmt: skip
    for args in runs:
        out = run(st, args + TWO_DOMAINS, env={"MTEDX": ""})
        assert out.returncode == 0, out.stderr[-4000:]
    return st


def test_two_domains_tagged_and_their_ids_in_the_dump(two_domain_runs):
    st = two_domain_runs
    assert_domains_in_training_data(st, tedx=24, other=24)
    for test in TESTS:
        tags = set(read_table(st / "dump" / "fbank" / test / "domain").values())
        assert tags == {"other" if "other" in test else "tedx"}


def test_selection_by_domain_and_adapters_from_the_joint_model(two_domain_runs):
    st = two_domain_runs
    group = torch.load(st / "exp/st_tiny_group_domains/valid.acc.best.pth", map_location="cpu")
    logits = {k: v for k, v in group.items() if k.endswith("selection_logits")}
    assert {v.shape[0] for v in logits.values()} == {2}  # tedx, other
    assert all(v.abs().sum() > 0 for v in logits.values())  # trained away from their zero start
    joint = torch.load(st / "exp/st_tiny_joint/valid.acc.best.pth", map_location="cpu")
    adapter = torch.load(st / "exp/st_tiny_adapter_domains/valid.acc.best.pth", map_location="cpu")
    frozen = [k for k in joint if k in adapter]
    assert frozen and all(torch.equal(joint[k], adapter[k]) for k in frozen)
    assert {ADAPTER_KEY in k for k in set(adapter) - set(joint)} == {True}  # new: the adapters only


@pytest.mark.parametrize("model", ["tiny_joint", "tiny_group_domains", "tiny_adapter_domains"])
def test_every_model_scored_on_both_domains(two_domain_runs, model):
    st = two_domain_runs
    for test in TESTS:
        scored = st / "exp" / f"st_{model}" / "decode_tiny_decode" / test / "score_bleu"
        assert json.loads((scored / "result.json").read_text())["bleu"] >= 0
        refs = read_table(st / "dump" / "fbank" / test / "text.tgt")
        assert len(refs) == 3 and all(u.startswith("other_") == ("other" in test) for u in refs)


def test_asr_run_sh_test_sets_and_tasks_per_mode(echo_asr):
    asr = echo_asr
    tedx = "test_es test_fr test_it test_pt"
    languages = pipeline_args(asr)
    assert languages["--test_sets"] == tedx
    assert languages["--asr_config"] == "conf/train_asr_group_mini.yaml"
    assert languages["--task_ids"] == "task_id=task_id"
    assert languages["--inference_args"] == "--task_tag_file lang"
    domains = pipeline_args(
        asr, "--tasks", "domains", "--asr_config", "x/train_asr_group_domains_mini.yaml",
        "--dumpdir", "dump_domains",
    )  # fmt: skip
    assert domains["--test_sets"] == tedx + " test_other_es test_other_it test_other_pt"
    assert domains["--task_ids"] == "task_id=domain_id"
    assert domains["--dumpdir"] == "dump_domains"
    assert domains["--inference_args"] == "--task_tag_file domain"
    assert domains["--asr_config"] == "x/train_asr_group_domains_mini.yaml"
    joint = pipeline_args(
        asr, "--other_domains", "other", "--asr_config", "conf/train_asr_shared_mini.yaml"
    )
    assert joint["--test_sets"] == domains["--test_sets"] and joint["--inference_args"].endswith(
        " lang"
    )
    real = pipeline_args(asr, "--tasks", "domains", corpus="/corpora/mtedx")["--test_sets"].split()
    assert [s for s in real if s.startswith("test_europarl_")] == [
        f"test_europarl_{lang}" for lang in ("de", "es", "fr", "it", "pt")
    ]  # the paper's Table 8
    assert len([s for s in real if s.startswith("test_covost_")]) == 7


@pytest.mark.parametrize(
    "task, args, message",
    [
        ("st1", ["--other_domains", "tedx2"], "key '--other_domains': unknown domain 'tedx2'"),
        ("asr1", ["--tasks", "dialects"], "--tasks must be languages or domains, got 'dialects'"),
        ("asr1", ["--other_domains", "covost2"], "unknown domain 'covost2' (known: covost,"),
    ],
)
def test_run_sh_refuses_before_any_stage(echo_st, echo_asr, task, args, message):
    out = subprocess.run(
        ["./run.sh", *args], cwd=echo_st if task == "st1" else echo_asr, capture_output=True,
        text=True, env={**os.environ, "MTEDX": ""},
    )  # fmt: skip
    assert out.returncode != 0 and message in out.stderr and out.stdout == ""


@pytest.mark.parametrize(
    "task, args",
    [
        ("st1", ["--tasks", "domains", "--st_config", "conf/train_st_adapter_domains_mini.yaml"]),
        (
            "asr1",
            ["--tasks", "domains", "--asr_config", "conf/train_asr_adapter_domains_mini.yaml"],
        ),
    ],
)
def test_domain_adapters_need_the_joint_model_before_any_stage(tmp_path, task, args):
    """The domain adapter configs name no model to start from: the pipeline (espnet_ext.bin.check_init)
    refuses them until --st_args / --asr_args "--init_param <the joint shared model>" names it."""
    recipe = make_recipe_copy("mtedx", task, tmp_path)
    out = subprocess.run(
        ["./run.sh", *args], cwd=recipe, capture_output=True, text=True,
        env={**os.environ, "MTEDX": ""},
    )  # fmt: skip
    config = args[-1]
    assert out.returncode != 0 and f"{config}: key 'model_conf.train_adapters_only'" in out.stderr
    assert not (recipe / "data").exists() and not (recipe / "dump").exists()


@pytest.fixture(scope="module")
def asr_by_domain(tmp_path_factory):
    """asr1 on a tiny mTEDx + "other" mini corpus, head selection by domain (--tasks domains)."""
    asr = make_recipe_copy("mtedx", "asr1", tmp_path_factory.mktemp("asr_domains"))
    config = MTEDX_TINY_ASR.replace("task_tags: [es, it]", "task_tags: [tedx, other]")
    (asr / "conf" / "tiny_asr.yaml").write_text(config)
    (asr / "conf" / "tiny_decode.yaml").write_text(MTEDX_TINY_DECODE)
    args = [*MTEDX_ASR_ARGS, "--tasks", "domains", "--test_sets", "test_it test_other_it"]
    at = args.index("--local_data_opts") + 1
    args[at] += " --mini_other_domain true --mini_other_train_sizes it=12"
    out = run(asr, args, env={"MTEDX": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    return asr


def test_asr_selects_heads_by_domain_and_scores_both_domains(asr_by_domain):
    asr = asr_by_domain
    assert_domains_in_training_data(asr, tedx=40, other=12)
    assert set(read_table(asr / "data" / "test_other_it" / "lang").values()) == {"it"}
    model = torch.load(asr / "exp/asr_tiny_asr/valid.acc.ave.pth", map_location="cpu")
    logits = [v for k, v in model.items() if k.endswith("selection_logits")]
    assert logits and {v.shape[0] for v in logits} == {2}  # tedx, other
    for test in ("test_it", "test_other_it"):
        decoded = asr / "exp/asr_tiny_asr" / "decode_tiny_decode" / test
        assert json.loads((decoded / "score_wer" / "result.json").read_text())["wer"] >= 0
