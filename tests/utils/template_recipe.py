"""A recipe dir around one egs/TEMPLATE pipeline for the tests of its shell stages: the pipeline, cmd.sh,
db.sh and utils/ linked, a path.sh that activates the project and puts a stand-in ``python`` first on PATH."""

import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "egs" / "TEMPLATE"


def template_recipe(
    tmp_path: Path, script: str, fake_python: str, data_sh: str | None = None
) -> Path:
    """tmp_path/recipe running egs/TEMPLATE/SCRIPT (e.g. "mt1/mt.sh"); FAKE_PYTHON: the stand-in's text, in
    which {python} is this interpreter; DATA_SH: the body of local/data.sh (none when not given)."""
    rec, bin_dir = tmp_path / "recipe", tmp_path / "bin"
    (rec / "conf").mkdir(parents=True)
    bin_dir.mkdir()
    (rec / Path(script).name).symlink_to(TEMPLATE / script)
    for f in ("cmd.sh", "db.sh"):
        (rec / f).symlink_to(TEMPLATE / "asr1" / f)
    (rec / "utils").symlink_to(ROOT / "utils")
    (rec / "path.sh").write_text(
        f". {shlex.quote(str(ROOT / 'tools' / 'activate.sh'))}\n"
        f'export PATH={shlex.quote(str(bin_dir))}:"${{PATH}}"\n'
    )
    (bin_dir / "python").write_text(fake_python.format(python=shlex.quote(sys.executable)))
    (bin_dir / "python").chmod(0o755)
    if data_sh is not None:
        (rec / "local").mkdir()
        (rec / "local/data.sh").write_text("#!/usr/bin/env bash\nset -euo pipefail\n" + data_sh)
        (rec / "local/data.sh").chmod(0o755)
    return rec
