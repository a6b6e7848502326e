"""egs/cifar100/cls1 picks its checkpoint on images held out of train, never on the test set, and each
config's cosine schedule spans the training it runs on that smaller training set."""

import re
import subprocess

import pytest
import yaml
from espnet2.samplers.unsorted_batch_sampler import UnsortedBatchSampler
from recipe_fixture import ROOT

RECIPE = ROOT / "egs" / "cifar100" / "cls1"


def steps_per_epoch(images: int, batch_size: int, tmp_path) -> int:
    """Batches per epoch as ESPnet's unsorted sampler (batch_type: unsorted) cuts ``images`` keys."""
    keys = tmp_path / f"keys_{images}"
    keys.write_text("".join(f"img{n:06d} x\n" for n in range(images)))
    return len(UnsortedBatchSampler(batch_size, str(keys)))


def batch_1024_options() -> dict[str, float]:
    """run.sh --batch 1024's --scheduler_conf / --batch_size overrides."""
    text = (RECIPE / "run.sh").read_text()
    (case,) = re.findall(r'1024\) batch_args="(.*?)" ;;', text, re.S)
    options = dict(re.findall(r"--(?:scheduler_conf |)(\w+)[= ]([\d.e-]+)", case))
    return {k: float(v) for k, v in options.items()}


@pytest.mark.parametrize(
    "config, images, batch_override, warmup_epochs",
    [
        # the mini corpus: 20 training images per class, 2 held out (local/data.sh's default)
        ("train_swin_mini.yaml", 100 * (20 - 2), False, 1),
        # CIFAR-100: 500 per class, 50 held out; Swin's 20 warm-up epochs
        ("train_swin_t.yaml", 100 * (500 - 50), False, 20),
        ("train_swin_t.yaml", 100 * (500 - 50), True, 20),
    ],
)
def test_schedule_spans_the_held_out_training_set(
    config, images, batch_override, warmup_epochs, tmp_path
):
    conf = yaml.safe_load((RECIPE / "conf" / config).read_text())
    schedule = dict(conf["scheduler_conf"])
    batch_size = conf["batch_size"]
    if batch_override:
        options = batch_1024_options()
        batch_size = int(options.pop("batch_size"))
        schedule.update(options)
    per_epoch = steps_per_epoch(images, batch_size, tmp_path)
    assert schedule["first_cycle_steps"] == conf["max_epoch"] * per_epoch
    assert schedule["warmup_steps"] == warmup_epochs * per_epoch


def test_validating_on_a_test_set_is_refused_before_any_work(tmp_path):
    out = subprocess.run(
        ["./cls.sh", "--cls_config", "conf/train_swin_mini.yaml", "--valid_set", "test"],
        cwd=RECIPE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "--valid_set test is also a test set" in out.stderr
    assert "Stage" not in out.stderr


def test_the_recipe_validates_on_its_held_out_split():
    text = (ROOT / "egs" / "TEMPLATE" / "cls1" / "cls.sh").read_text()
    assert re.search(r"^valid_set=valid\b", text, re.M)
    data_sh = (RECIPE / "local" / "data.sh").read_text()
    assert "--valid_per_class" in data_sh
    assert "--valid_set" not in (RECIPE / "run.sh").read_text()  # the template's default holds
