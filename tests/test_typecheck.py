"""ESPnet's typeguard checks: off by default (the decorator returns its target), on with ESPNET_EXT_TYPECHECK=1."""

import os
import subprocess
import sys

import pytest

# A function ESPnet decorates with @typechecked, called with an argument of the wrong type.
PROBE = """
from espnet_ext.registry import install
install(tasks=())  # what every entry point does before importing ESPnet
from espnet2.text.token_id_converter import TokenIDConverter
import typeguard
try:
    TokenIDConverter(["<blank>", "a", "<unk>"], unk_symbol=3)  # unk_symbol: str
    print("unchecked")
except typeguard.TypeCheckError:
    print("checked")
except Exception:  # the body ran and failed its own way: nobody checked the type
    print("unchecked")
"""


@pytest.mark.parametrize("value, expected", [(None, "unchecked"), ("1", "checked")])
def test_espnets_type_checks_are_off_unless_asked_for(value, expected):
    env = {k: v for k, v in os.environ.items() if k != "ESPNET_EXT_TYPECHECK"}
    if value is not None:
        env["ESPNET_EXT_TYPECHECK"] = value
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == expected


def test_unchecked_decorator_keeps_the_target_in_both_call_forms():
    from espnet_ext.typecheck import unchecked

    def f(x: int) -> int:
        return x

    assert unchecked(f) is f and unchecked()(f) is f
