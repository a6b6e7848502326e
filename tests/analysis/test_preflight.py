"""The preflight harness catches a config that cannot learn (the defect it exists for)."""

from pathlib import Path

import pytest
import torch

from espnet_ext.analysis.preflight import main, preflight
from espnet_ext.errors import ConfigError

MINI_VSR = (
    Path(__file__).resolve().parents[2] / "egs" / "lrs3" / "vsr1" / "conf" / "train_vsr_mini.yaml"
)
MINI_MT = (
    Path(__file__).resolve().parents[2] / "egs" / "iwslt14" / "mt1" / "conf" / "train_mt_mini.yaml"
)
MINI_ADAPTER = (
    Path(__file__).resolve().parents[2] / "egs/mtedx/asr1/conf/train_asr_adapter_mini.yaml"
)


def test_grad_clip_zero_moves_no_parameter_and_fails(tmp_path, capsys):
    # ESPnet clips the norm to grad_clip: 0 scales every gradient by 0 (fairseq's 0 means "no clipping").
    frozen = preflight(
        "mt", MINI_MT, vocab=50, extra_args=["--grad_clip", "0"], workdir=tmp_path / "a"
    )
    assert frozen.changed == 0 and len(frozen.unchanged_names) > 0
    assert (
        main(["--task", "mt", "--config", str(MINI_MT), "--vocab", "50", "--grad_clip", "0"]) == 1
    )
    assert "0.0% of" in capsys.readouterr().out


def test_the_same_config_with_clipping_learns(tmp_path):
    result = preflight("mt", MINI_MT, vocab=50, workdir=tmp_path)
    assert result.changed_fraction > 0.9 and result.updates == 2


def _modes():
    cudnn = torch.backends.cudnn
    return (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32,
            torch.backends.cuda.matmul.allow_tf32, torch.is_anomaly_enabled())  # fmt: skip


@pytest.mark.parametrize(
    "options,seen_modes",
    [
        ([], (True, False, False)),  # deterministic, benchmark, matmul TF32
        (["--cudnn_deterministic", "false", "--cudnn_benchmark", "true"], (False, True, False)),
        (["--use_tf32", "true"], (True, False, True)),
    ],
)
def test_training_runs_in_the_modes_main_worker_sets(tmp_path, options, seen_modes):
    """AbsTask.main_worker sets torch.backends.cudnn from --cudnn_* (deterministic by default) and TF32
    from --use_tf32; the preflight trains in those modes and gives the process its own back."""
    before, seen = _modes(), []

    class Timer:
        def wrap(self, iterator, accum_grad, device):
            for batch in iterator:
                modes = _modes()
                seen.append((modes[2], modes[1], modes[4]))
                yield batch

        def stop(self):
            pass

    preflight("mt", MINI_MT, vocab=50, extra_args=options, workdir=tmp_path, timer=Timer())
    assert seen and set(seen) == {seen_modes}
    assert _modes() == before


def test_tf32_with_amp_is_refused_as_espnet_refuses_it(tmp_path):
    before = _modes()
    with pytest.raises(ConfigError, match="use_tf32"):
        preflight("mt", MINI_MT, vocab=50, extra_args=["--use_tf32", "true", "--use_amp", "true"],
                  workdir=tmp_path)  # fmt: skip
    assert _modes() == before


def test_frozen_updates_keep_the_encoder_still_for_that_many_updates(tmp_path):
    """AV-HuBERT's freeze_finetune_updates: by default all updates but the last run frozen, so the
    encoder still learns; ``frozen_updates`` (train_timing's phases) sets how many."""
    import yaml

    config = yaml.safe_load(MINI_VSR.read_text())
    config.setdefault("model_conf", {})["freeze_finetune_updates"] = 100
    path = tmp_path / "train_vsr_frozen.yaml"
    path.write_text(yaml.safe_dump(config))
    still = preflight("vsr", path, vocab=50, workdir=tmp_path / "a", frozen_updates=2)
    assert any(name.startswith("encoder.") for name in still.unchanged_names)
    learns = preflight("vsr", path, vocab=50, workdir=tmp_path / "b")
    assert not any(name.startswith("encoder.") for name in learns.unchanged_names)


def test_a_large_image_corpus_keeps_every_label_among_the_classes(tmp_path):
    from espnet_ext.analysis.preflight import NUM_CLASSES, CorpusSize, SyntheticCorpus

    corpus = SyntheticCorpus(tmp_path, "cls", {}, 100, size=CorpusSize(NUM_CLASSES + 28, 0, 0))
    corpus.write()
    labels = [int(line.split()[1]) for line in (tmp_path / "label").read_text().splitlines()]
    assert len(labels) == NUM_CLASSES + 28 and set(labels) == set(range(NUM_CLASSES))


def test_speech_normalisation_is_the_pipelines(tmp_path):
    """As asr.sh / st.sh: the config's normalisation, else global_mvn over the statistics."""
    from espnet_ext.analysis.preflight import SyntheticCorpus

    def options(config: dict) -> list[str]:
        corpus = SyntheticCorpus(tmp_path / str(len(config)), "asr", config, 20)
        corpus.write()
        return corpus.options

    own = options({"normalize": "utterance_cmvn_specaug", "specaug": None})
    assert "--normalize" not in own and "--normalize_conf" not in own
    default = options({})
    assert default[default.index("--normalize") + 1] == "global_mvn"


def test_the_fingerprint_sees_one_weight_moved_by_its_last_bit():
    import torch

    from espnet_ext.analysis.preflight import _fingerprint

    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        weights = torch.randn(1000, 7).to(dtype)
        before = _fingerprint(weights)
        assert _fingerprint(weights.clone()) == before
        moved = weights.clone()
        moved[123, 4] = torch.nextafter(moved[123, 4], torch.tensor(float("inf"), dtype=dtype))
        assert _fingerprint(moved) != before, dtype
    nan = torch.full((3,), float("nan"))
    assert _fingerprint(nan) == _fingerprint(nan.clone())


def test_gradient_use_names_what_some_backward_pass_did_not_reach():
    from espnet_ext.analysis.preflight import GradientUse

    model = torch.nn.ModuleDict({"always": torch.nn.Linear(2, 2), "once": torch.nn.Linear(2, 2)})
    model["frozen"] = torch.nn.Linear(2, 2).requires_grad_(False)
    use = GradientUse(model)
    x = torch.ones(1, 2)
    (model["always"](x) + model["once"](x) + model["frozen"](x)).sum().backward()
    assert use.partly_unused() == []
    twice = model["always"](x)
    (twice + twice).sum().backward()  # a parameter used twice in a pass counts once
    assert use.passes["always.weight"] == 2
    assert use.partly_unused() == ["once.weight", "once.bias"]
    use.remove()
    model["always"](x).sum().backward()
    assert use.passes["always.weight"] == 2


def test_a_config_with_parameters_some_batch_leaves_out_must_allow_them_for_ddp(tmp_path, capsys):
    """The adapter configs: the synthetic batches hold tasks 0 and 1, so the adapters of tasks 2 and 3
    get no gradient; DistributedDataParallel would stop unless ``unused_parameters: true`` (as they set).
    """
    as_shipped = preflight("asr", MINI_ADAPTER, vocab=50, workdir=tmp_path / "a")
    assert as_shipped.unused_parameters and as_shipped.ddp_ready
    assert as_shipped.partly_unused and all(".per_task.2." in n or ".per_task.3." in n
                                            for n in as_shipped.partly_unused)  # fmt: skip
    off = ["--unused_parameters", "false"]
    assert not preflight(
        "asr", MINI_ADAPTER, vocab=50, extra_args=off, workdir=tmp_path / "b"
    ).ddp_ready
    argv = ["--task", "asr", "--config", str(MINI_ADAPTER), "--vocab", "50", *off]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "not ready for several GPUs" in out and "encoder.adapters.0.per_task.2." in out


def test_a_statistic_ddp_could_not_average_is_refused(tmp_path):
    """ESPnet's trainer averages the reported statistics over the GPUs (recursive_average), asserting
    that each has the batch weight's shape; one process never does. The preflight checks every forward."""
    from espnet_ext.analysis.preflight import check_gatherable_stats

    weight = torch.tensor([4])
    check_gatherable_stats(torch.nn.Linear(1, 1), (), (None, {"loss": torch.ones(1)}, weight))
    with pytest.raises(
        RuntimeError, match="reports 'kl' of shape \\(\\), not the batch weight's \\(1,\\)"
    ):
        check_gatherable_stats(torch.nn.Linear(1, 1), (), (None, {"kl": torch.tensor(0.5)}, weight))
    group = MINI_ADAPTER.with_name("train_asr_group_mini.yaml")  # head selection's KL statistic
    assert preflight("asr", group, vocab=50, workdir=tmp_path).changed > 0
