"""egs/mustc/{asr1,st1}/run.sh hand the pipelines the thesis' checkpoint choices and fairseq's MuST-C WER.

Each run.sh runs in a copy of its recipe whose pipeline (asr.sh / st.sh) only records the options it is
given, so the options are the ones run.sh passes, with MUSTC set (real mode) or empty (the mini corpus).
"""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

MUSTC = Path(__file__).resolve().parents[2] / "egs" / "mustc"
RECORD = '#!/usr/bin/env bash\nprintf "%s\\0" "$@" > options\n'


def options(task: str, tmp_path: Path, corpus: str, *args: str) -> dict[str, str]:
    """``--name value`` pairs the recipe's run.sh passes to its pipeline (the last of a repeated name)."""
    recipe = tmp_path / task
    recipe.mkdir(parents=True)
    for name in ("run.sh", "db.sh"):
        shutil.copy(MUSTC / f"{task}1" / name, recipe / name)
    pipeline = recipe / f"{task}.sh"
    pipeline.write_text(RECORD)
    pipeline.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "MUSTC": corpus}
    out = subprocess.run(
        ["bash", "run.sh", *args], cwd=recipe, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    words = (recipe / "options").read_text().split("\0")[:-1]
    pairs = {}
    for i, word in enumerate(words):
        if word.startswith("--") and i + 1 < len(words):
            pairs[word] = words[i + 1]
    return pairs


def test_real_st_encoder_starts_from_the_best_asr_checkpoint(tmp_path):
    """Thesis §5.3 / Anexo B.1: the ST encoder from the ASR run's best checkpoint (the author's README:
    --load-pretrained-encoder-from checkpoint_best.pt), not the 10-best average."""
    real = options("st", tmp_path / "real", "/corpus/mustc")
    assert real["--asr_init"] == "../asr1/exp/asr_train_asr/valid.acc.best.pth"
    assert real["--st_config"] == "conf/train_st.yaml"
    mini = options("st", tmp_path / "mini", "")
    assert mini["--asr_init"] == "../asr1/exp/asr_train_asr_mini/valid.acc.ave.pth"


def test_the_average_stays_an_option(tmp_path):
    average = "../asr1/exp/asr_train_asr/valid.acc.ave.pth"
    chosen = options("st", tmp_path, "/corpus/mustc", "--asr_init", average)
    assert chosen["--asr_init"] == average


@pytest.mark.parametrize("corpus", ["/corpus/mustc", ""])
def test_the_best_checkpoint_exists_where_st_looks_for_it(corpus, tmp_path):
    """ESPnet's trainer links <phase>.<key>.best.pth for each best_model_criterion: the ASR configs must
    keep [valid, acc, max] for valid.acc.best.pth (and valid.acc.ave.pth) to be written."""
    asr = options("asr", tmp_path / "asr", corpus)
    config = yaml.safe_load((MUSTC / "asr1" / asr["--asr_config"]).read_text())
    assert ["valid", "acc", "max"] in config["best_model_criterion"]
    st = options("st", tmp_path / "st", corpus)
    tag = Path(asr["--asr_config"]).stem
    assert Path(st["--asr_init"]).parent == Path(f"../asr1/exp/asr_{tag}")


def test_real_asr_is_scored_as_fairseqs_mustc_evaluation_on_the_best_checkpoint(tmp_path):
    """fairseq examples/speech_to_text/docs/mustc_example.md: --wer-tokenizer 13a --wer-lowercase
    --wer-remove-punct; thesis Anexo A: Tabla 3 is the WER of the checkpoints ST starts from."""
    real = options("asr", tmp_path / "real", "/corpus/mustc")
    assert real["--wer_opts"].split() == ["--tokenizer", "13a", "--lowercase", "--remove_punct"]
    assert real["--inference_model"] == "valid.acc.best.pth"
    mini = options("asr", tmp_path / "mini", "")
    assert "--wer_opts" not in mini and "--inference_model" not in mini
