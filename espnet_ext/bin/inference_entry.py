"""What our ``<task>_inference`` entry points add in front of ESPnet2's: the LM vocabulary check,
``--matched_inference true|false`` (relaxed attention at test time, espnet_ext.attention.matched_inference)
and ``--task_tag_file`` & co. (task ids per utterance, espnet_ext.tasks.task_conditioned)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from espnet_ext.attention import matched_inference
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.lm_vocabulary import refuse_mismatched_lm
from espnet_ext.tasks import task_conditioned


def run(
    espnet_main: Callable[..., None],
    task_cls,
    model_config_option: str,
    argv: Sequence[str] | None = None,
) -> None:
    """Take our options off ``argv`` (default: the command line) and call ESPnet's ``main(cmd)`` with the rest."""
    try:
        matched, rest = matched_inference.pop_option(sys.argv[1:] if argv is None else argv)
    except ConfigError as e:
        sys.exit(f"error: {e}")
    refuse_mismatched_lm(rest, model_config_option)
    try:
        with (
            task_conditioned.decoding(espnet_main, rest, model_config_option) as rest,
            matched_inference.applied_on_build(task_cls, matched),
        ):
            espnet_main(rest)
    except InputError as e:  # a task tag file that does not fit the model
        sys.exit(f"error: {e}")
