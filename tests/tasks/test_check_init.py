"""espnet_ext.bin.check_init: an adapter model (train_adapters_only) must name the trained model it starts
from, in its config or its training options; the pipelines refuse it before any stage otherwise."""

import pytest

from espnet_ext.bin import check_init

ADAPTER = "model: task_conditioned\nmodel_conf:\n    train_adapters_only: true\n"


@pytest.mark.parametrize(
    "config, args, ok",
    [
        (ADAPTER, [], False),
        (ADAPTER, ["--seed", "1"], False),
        (ADAPTER, ["--init_param"], False),  # no value
        (ADAPTER, ["--seed", "1", "--init_param", "exp/shared/valid.acc.ave.pth"], True),
        (ADAPTER + "init_param:\n-   exp/shared/valid.acc.ave.pth\n", [], True),
        ("model: task_conditioned\nmodel_conf:\n    train_adapters_only: false\n", [], True),
        ("model: task_conditioned\n", [], True),
    ],
)
def test_adapter_models_need_a_trained_model(tmp_path, capsys, config, args, ok):
    path = tmp_path / "train_x.yaml"
    path.write_text(config)
    assert check_init.main(["--config", str(path), "--", *args]) == (0 if ok else 1)
    if not ok:
        err = capsys.readouterr().err
        assert f"{path}: key 'model_conf.train_adapters_only'" in err and "--init_param" in err


def test_a_missing_config_is_left_to_the_stage_that_reads_it(tmp_path):
    # the data stages run without a training config (egs/mustc/st1's test of --asr_init)
    assert check_init.main(["--config", str(tmp_path / "none.yaml")]) == 0
