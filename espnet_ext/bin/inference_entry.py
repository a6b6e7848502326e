"""What our ``<task>_inference`` entry points add to ESPnet2's: ``OurDecoding``, a mixin that makes subclasses of
ESPnet's ``Speech2Text`` / ``Text2Text`` take

- ``eos_threshold`` / ``lenpen`` / ``fairseq_stop``: fairseq/espresso's beam-search rules
  (espnet_ext.decoding.beam_search, espnet_ext.decoding.options),
- ``matched_inference``: relaxed attention at test time or not (espnet_ext.attention.matched_inference),
- per-utterance task ids (``task_id`` ... as extra data keys, espnet_ext.tasks.task_conditioned), set on the
  model before each utterance is decoded,

and ``run``: ESPnet's parser with these options (on the command line or in the ``--config`` YAML, the
command line winning, as ESPnet's), the LM vocabulary check, and ESPnet's decoding loop (its output files)
building our subclass. ESPnet's own ``inference()`` names its class as a module global, so the loop is ours
(tools/upstream/ has the ESPnet change that would let it take a class).
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Sequence

from espnet.nets.beam_search import Hypothesis
from espnet.nets.pytorch_backend.transformer.subsampling import TooShortUttError
from espnet2.fileio.datadir_writer import DatadirWriter
from espnet2.torch_utils.set_all_random_seed import set_all_random_seed
from espnet2.utils.types import str2bool

from espnet_ext.attention.matched_inference import OPTION as MATCHED_OPTION
from espnet_ext.attention.matched_inference import apply_matched_inference
from espnet_ext.decoding import options as decoding_options
from espnet_ext.decoding.beam_search import apply_rules, check_eos_threshold
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.lm_vocabulary import check_lm_vocabulary
from espnet_ext.tasks import task_conditioned

TASK_ID_KEYS = tuple(task_conditioned.TAG_OPTIONS.values())
OURS = (*decoding_options.KEYS, "matched_inference")


class OurDecoding:
    """Mixin before ESPnet's ``Speech2Text`` / ``Text2Text``: our decoding options as constructor arguments,
    task ids as call arguments. ``model_attr`` names the model attribute ESPnet's class sets."""

    model_attr: str

    def __init__(
        self,
        *args,
        eos_threshold: float | None = None,
        lenpen: float | None = None,
        fairseq_stop: bool = False,
        matched_inference: bool | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        apply_matched_inference(getattr(self, self.model_attr), matched_inference)
        self.beam_search = apply_rules(self.beam_search, eos_threshold, lenpen, fairseq_stop)

    def __call__(self, *args, **kwargs):
        ids = {key: kwargs.pop(key) for key in TASK_ID_KEYS if key in kwargs}
        if ids:
            getattr(self, self.model_attr).set_task_id(**ids)
        return super().__call__(*args, **kwargs)


def get_parser(espnet_get_parser):
    """ESPnet's inference parser with our options (and so our keys accepted in its ``--config`` YAML)."""
    parser = espnet_get_parser()
    group = parser.add_argument_group("espnet_ext decoding")
    for key, help_text in (
        ("eos_threshold", "EOS only if its score >= this x the best token's (none: off)"),
        ("lenpen", "rank ended hypotheses by score / length**lenpen (none: ESPnet's)"),
        ("fairseq_stop", "an utterance is done once beam_size hypotheses have ended"),
    ):
        group.add_argument(
            f"--{key}",
            type=lambda text, key=key: decoding_options.checked_value(text, key),
            default=False if key == "fairseq_stop" else None,
            help=help_text,
        )
    group.add_argument(
        MATCHED_OPTION,
        type=str2bool,
        default=None,
        help="relax the model's relaxed attention at test time (default: as in training)",
    )
    for option in task_conditioned.TAG_OPTIONS:
        group.add_argument(option, default=None, help="a <utt> <tag> file of the decoded data dir")
    return parser


def _predictor_kwargs(inference_cls, args) -> dict:
    """ESPnet's inference() passes the parsed options its class takes, and the device."""
    espnet_cls = next(c for c in inference_cls.__mro__[1:] if c.__module__.startswith("espnet2."))
    takes = set(inspect.signature(espnet_cls.__init__).parameters) - {"self", "batch_size"}
    kwargs = {key: value for key, value in vars(args).items() if key in takes}
    kwargs["device"] = "cuda" if args.ngpu >= 1 else "cpu"
    return kwargs


def _write(writer, key: str, results, nbest: int, prefix: str = "") -> None:
    for n, (text, token, token_int, hyp, *_) in zip(range(1, nbest + 1), results):
        ibest = writer[f"{n}{prefix}best_recog"]
        ibest[f"{prefix}token"][key] = " ".join(token)
        ibest[f"{prefix}token_int"][key] = " ".join(map(str, token_int))
        ibest[f"{prefix}score"][key] = str(hyp.score)
        if text is not None:
            ibest[f"{prefix}text"][key] = text


def decode(inference_cls, task_cls, args, ours: dict) -> None:
    """ESPnet's asr/st/mt ``inference()`` (one utterance at a time, its output files) with ``inference_cls``."""
    for key, refused in (
        ("batch_size", args.batch_size > 1),
        ("ngpu", args.ngpu > 1),
        ("word_lm_train_config", getattr(args, "word_lm_train_config", None) is not None),
        ("model_tag", getattr(args, "model_tag", None) is not None),
        ("enh_s2t_task", getattr(args, "enh_s2t_task", False)),
        ("multi_asr", getattr(args, "multi_asr", False)),
    ):
        if refused:
            raise ConfigError("not supported by our inference entry points", key=key)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s (%(module)s:%(lineno)d) %(levelname)s: %(message)s",
    )
    set_all_random_seed(args.seed)
    predictor = inference_cls(**_predictor_kwargs(inference_cls, args), **ours)
    train_args = getattr(predictor, inference_cls.model_attr.replace("_model", "_train_args"))
    loader = task_cls.build_streaming_iterator(
        args.data_path_and_name_and_type,
        dtype=args.dtype,
        batch_size=args.batch_size,
        key_file=args.key_file,
        num_workers=args.num_workers,
        preprocess_fn=task_cls.build_preprocess_fn(train_args, False),
        collate_fn=task_cls.build_collate_fn(train_args, False),
        allow_variable_data_keys=args.allow_variable_data_keys,
        inference=True,
    )
    with DatadirWriter(args.output_dir) as writer:
        for keys, batch in loader:
            batch = {k: v[0] for k, v in batch.items() if not k.endswith("_lengths")}
            try:
                results = predictor(**batch)
            except TooShortUttError as e:
                logging.warning(f"Utterance {keys} {e}")
                hyp = Hypothesis(score=0.0, scores={}, states={}, yseq=[])
                results = [[" ", ["<space>"], [2], hyp]] * args.nbest
            extra = None
            if isinstance(
                results, tuple
            ):  # ASR: intermediate CTC; multi-decoder ST: its ASR n-best
                results, extra = results
            key = keys[0]
            _write(writer, key, results, args.nbest)
            if isinstance(extra, dict):
                for idx, text in extra.items():
                    writer["1best_recog"][f"encoder_interctc_layer{idx}.txt"][key] = " ".join(text)
            elif extra is not None:
                _write(writer, key, extra, getattr(args, "asr_nbest", args.nbest), prefix="asr_")


def run(inference_cls, task_cls, espnet_get_parser, argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` (default: the command line) with ESPnet's parser and ours, then decode with
    ``inference_cls`` (an ``OurDecoding`` subclass of ESPnet's class); errors in our options exit
    with one line naming the file and key."""
    from espnet.utils.cli_utils import get_commandline_args

    print(get_commandline_args(), file=sys.stderr)
    try:
        args = get_parser(espnet_get_parser).parse_args(argv)
        ours = {key: vars(args).pop(key) for key in OURS}
        for key in decoding_options.KEYS:  # YAML values do not pass through argparse's type
            ours[key] = decoding_options.checked_value(ours[key], key, "--config")
        check_eos_threshold(ours["eos_threshold"])
        tag_files = {
            option: vars(args).pop(option.lstrip("-")) for option in task_conditioned.TAG_OPTIONS
        }
        config_option = inference_cls.model_attr.replace("_model", "_train_config")
        model_config = getattr(args, config_option)
        if model_config and args.lm_train_config:
            check_lm_vocabulary(model_config, args.lm_train_config)
        with task_conditioned.task_id_data(
            {option: name for option, name in tag_files.items() if name is not None},
            model_config,
            args.data_path_and_name_and_type,
        ) as extra:
            if extra:
                args.data_path_and_name_and_type = [*args.data_path_and_name_and_type, *extra]
                args.allow_variable_data_keys = True
            decode(inference_cls, task_cls, args, ours)
    except (ConfigError, InputError) as e:  # e.g. a task tag file that does not fit the model
        sys.exit(f"error: {e}")
