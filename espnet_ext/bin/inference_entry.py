"""What our ``<task>_inference`` entry points add in front of ESPnet2's: the LM vocabulary check,
``--matched_inference true|false`` (relaxed attention at test time, espnet_ext.attention.matched_inference),
``eos_threshold`` / ``lenpen`` / ``fairseq_stop`` (fairseq/espresso's beam-search rules,
espnet_ext.decoding.options), on the command line or in the ``--config`` YAML, and ``--task_tag_file`` & co.
(task ids per utterance, espnet_ext.tasks.task_conditioned)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from espnet_ext.attention import matched_inference
from espnet_ext.decoding import options as decoding_options
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.lm_vocabulary import refuse_mismatched_lm
from espnet_ext.tasks import task_conditioned


def run(
    espnet_main: Callable[..., None],
    task_cls,
    model_config_option: str,
    inference_cls=None,
    argv: Sequence[str] | None = None,
) -> None:
    """Take our options off ``argv`` (default: the command line) and call ESPnet's ``main(cmd)`` with the rest.

    ``inference_cls`` is the ESPnet class that builds the beam search (Speech2Text, Text2Text).
    """
    started = False  # a ConfigError from ESPnet's run keeps its traceback; ours are one-line exits
    try:
        matched, rest = matched_inference.pop_option(sys.argv[1:] if argv is None else argv)
        given, rest = decoding_options.pop_from_argv(rest)
        with decoding_options.split_config(rest) as (from_config, rest):
            rules = {**from_config, **given}
            if rules and inference_cls is None:
                raise ConfigError(f"{', '.join(rules)}: not available for this task")
            refuse_mismatched_lm(rest, model_config_option)
            with (
                task_conditioned.decoding(espnet_main, rest, model_config_option) as rest,
                matched_inference.applied_on_build(task_cls, matched),
                decoding_options.applied_on_build(inference_cls, rules),
            ):
                started = True
                espnet_main(rest)
    except ConfigError as e:
        if started:
            raise
        sys.exit(f"error: {e}")
    except InputError as e:  # e.g. a task tag file that does not fit the model
        sys.exit(f"error: {e}")
