"""Multi-domain ST in egs/mtedx/st1 (head selection, Table 5): local/combine_domains.py adding another
domain's data dirs to mTEDx's; run.sh's test sets and options per --tasks; and the recipe end to end on a
tiny two-domain mini corpus: the joint shared model, head selection by domain and per-domain adapters
started from the joint model, each decoded on both domains' test sets."""

import importlib.util
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import torch
from recipe_fixture import make_recipe_copy, mtedx_st_tiny, read_table, run

from espnet_ext.data import mtedx
from espnet_ext.data.datadir import read_kaldi_map, validate_data_dir
from espnet_ext.errors import InputError
from espnet_ext.nets.adapters import ADAPTER_KEY

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "combine_domains", ROOT / "egs" / "mtedx" / "st1" / "local" / "combine_domains.py"
)
combine_domains = importlib.util.module_from_spec(spec)
spec.loader.exec_module(combine_domains)
FIXTURE = ROOT / "tests" / "fixtures" / "mtedx"


@pytest.fixture
def two_domains(tmp_path):
    """mTEDx's data dirs and, as a second domain, the same release read again (same ids: prefixing needed)."""
    data, other = tmp_path / "data", tmp_path / "other"
    for out in (data, other):
        mtedx.prepare_st(FIXTURE, ["es-en"], ["es-en", "it-en"], out)
    return data, other


def test_domains_combined_with_prefixed_ids_and_domain_tags(two_domains):
    data, other = two_domains
    combine_domains.combine(data, {"europarl": other})
    domain = read_kaldi_map(data / "train" / "domain")
    assert sorted(domain.items()) == [
        ("es-en_yj7-Zq2Lr0k_00000300_00001570", "tedx"),
        ("es-en_yj7-Zq2Lr0k_00001970_00003520", "tedx"),
        ("europarl_es-en_yj7-Zq2Lr0k_00000300_00001570", "europarl"),
        ("europarl_es-en_yj7-Zq2Lr0k_00001970_00003520", "europarl"),
    ]
    text = read_kaldi_map(data / "train" / "text.tgt")
    assert text["europarl_es-en_yj7-Zq2Lr0k_00000300_00001570"] == "Thank you very much."
    segments = read_kaldi_map(data / "train" / "segments")
    assert segments["europarl_es-en_yj7-Zq2Lr0k_00000300_00001570"].startswith(
        "europarl_es-en_yj7-Zq2Lr0k "
    )
    assert "europarl_es-en_yj7-Zq2Lr0k" in read_kaldi_map(data / "train" / "wav.scp")
    validate_data_dir(data / "train", require=("text.src", "text.tgt", "domain", "direction"))
    zero_shot = data / "test_europarl_it-en"
    assert set(read_kaldi_map(zero_shot / "domain").values()) == {"europarl"}
    assert len(read_kaldi_map(zero_shot / "text.tgt")) == 2
    assert not list(data.glob("domains.*"))  # staging removed


def test_bad_domain_roots_change_nothing(two_domains, tmp_path):
    data, other = two_domains
    before = (data / "train" / "text.tgt").read_text()
    with pytest.raises(InputError, match="data dir does not exist"):
        combine_domains.combine(data, {"covost": tmp_path / "missing"})
    (other / "valid" / "text.tgt").unlink()
    with pytest.raises(InputError, match="text.tgt"):
        combine_domains.combine(data, {"covost": other})
    assert (data / "train" / "text.tgt").read_text() == before and not (
        data / "train" / "domain"
    ).exists()
    with pytest.raises(InputError, match="'tedx' is mTEDx's own domain"):
        combine_domains.combine(data, {"tedx": other})
    assert combine_domains.main(["--data", str(data), "co_vost=x"]) == 1


# run.sh with st.sh replaced by a script printing its arguments: what each mode asks of st.sh
ECHO_ST = """#!/usr/bin/env bash
printf '%s\\n' "$@"
"""


@pytest.fixture(scope="module")
def echo_recipe(tmp_path_factory):
    st = make_recipe_copy("mtedx", "st1", tmp_path_factory.mktemp("st_echo"))
    (st / "st.sh").unlink()
    (st / "st.sh").write_text(ECHO_ST)
    (st / "st.sh").chmod(stat.S_IRWXU)
    return st


def st_sh_args(st: Path, *args: str, corpus: str = "") -> dict[str, str]:
    """The options run.sh gives st.sh (the last of each wins, as in st.sh)."""
    out = subprocess.run(
        ["./run.sh", *args], cwd=st, capture_output=True, text=True,
        env={**os.environ, "MTEDX": corpus},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    words = out.stdout.splitlines()
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


MINI_TEDX_TESTS = (
    "test_es-en test_es-fr test_es-it test_es-pt test_fr-en test_fr-es test_fr-pt test_pt-en "
    "test_it-en test_it-es test_pt-es"
)


def test_run_sh_test_sets_and_tasks_per_mode(echo_recipe):
    st = echo_recipe
    other = " test_other_es-en test_other_it-en test_other_it-es test_other_pt-es"
    languages = st_sh_args(st)
    assert languages["--test_sets"] == MINI_TEDX_TESTS
    assert "--encoder_task_tag_file src_lang" in languages["--inference_args"]
    joint = st_sh_args(
        st, "--st_config", "conf/train_st_shared_mini.yaml", "--other_domains", "other"
    )
    assert joint["--test_sets"] == MINI_TEDX_TESTS + other
    assert joint["--asr_init"] == "../asr1/exp/asr_train_asr_shared_mini/valid.acc.ave.pth"
    domains = st_sh_args(st, "--tasks", "domains")
    assert domains["--test_sets"] == MINI_TEDX_TESTS + other  # every domain by default
    assert domains["--st_config"] == "conf/train_st_group_domains_mini.yaml"
    assert domains["--asr_init"] == ""
    assert "task_id,text_int" in domains["--st_args"] and "domain_id" in domains["--st_args"]
    assert domains["--inference_args"].startswith("--task_tag_file domain ")
    adapter = st_sh_args(
        st, "--tasks", "domains", "--st_config", "conf/train_st_adapter_domains_mini.yaml",
        "--init_from", "exp/st_joint/valid.acc.ave.pth",
    )  # fmt: skip
    assert adapter["--st_args"].endswith("--init_param exp/st_joint/valid.acc.ave.pth")
    real = st_sh_args(
        st, "--tasks", "domains", "--other_domains", "covost", corpus="/corpora/mtedx"
    )
    covost = [s for s in real["--test_sets"].split() if s.startswith("test_covost_")]
    assert covost == [f"test_covost_{s}-en" for s in ("es", "fr", "it", "pt", "ru")]  # footnote 3
    europarl = st_sh_args(st, "--tasks", "domains", corpus="/corpora/mtedx")["--test_sets"].split()
    assert len([s for s in europarl if s.startswith("test_europarl_")]) == 11  # footnote 4


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--tasks", "domains", "--st_config", "conf/train_st_adapter_domains_mini.yaml"],
            "conf/train_st_adapter_domains_mini.yaml needs --init_from: the joint shared ST model",
        ),
        (["--other_domains", "tedx2"], "--other_domains: unknown domain 'tedx2'"),
    ],
)
def test_run_sh_refuses_before_any_stage(echo_recipe, args, message):
    out = subprocess.run(
        ["./run.sh", *args], cwd=echo_recipe, capture_output=True, text=True,
        env={**os.environ, "MTEDX": ""},
    )  # fmt: skip
    assert out.returncode != 0 and message in out.stderr and out.stdout == ""


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
            "--init_from", "exp/st_tiny_joint/valid.acc.best.pth",
        ],
    ]  # fmt: skip
    for args in runs:
        out = run(st, args + TWO_DOMAINS, env={"MTEDX": ""})
        assert out.returncode == 0, out.stderr[-4000:]
    return st


def test_two_domains_tagged_and_their_ids_in_the_dump(two_domain_runs):
    st = two_domain_runs
    domain = read_table(st / "data" / "train" / "domain")
    assert sorted(domain.values()) == ["other"] * 24 + ["tedx"] * 24
    assert all(u.startswith("other_") == (d == "other") for u, d in domain.items())
    ids = read_table(st / "dump" / "fbank" / "train_filtered" / "domain_id")
    assert ids == {u: {"tedx": "0", "other": "1"}[domain[u]] for u in ids}
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
