#!/usr/bin/env python3
"""Tables IV-VII of the LegoNN paper from the scores of local/legonn.sh (``score_wer/result.json`` files).

    local/tables.py --expdir exp --test_set test --europarl asr_train_legonn_mini \
        [--baseline asr_train_baseline_mini] [--encoder_only] --out exp/RESULTS_legonn.md

``--encoder_only``: the Europarl modules come from an encoder-only model (§V-C2), which has no decoder of its
own to decode with, so Table IV has no "own decoder" row (the paper's has none).

A cell whose score file is missing (its stage not run) is written "-" and listed under the tables.
"""

import argparse
import json
import sys
from pathlib import Path

from espnet_ext.fileio import atomic_write


class Scores:
    def __init__(self, expdir: Path, test_set: str):
        self.expdir, self.test_set, self.missing = expdir, test_set, []

    def _read(self, pattern: str, what: str) -> str:
        files = sorted(self.expdir.glob(f"{pattern}/{self.test_set}/score_wer/result.json"))
        if not files:
            self.missing.append(
                f"{what}: no {self.expdir}/{pattern}/{self.test_set}/score_wer/result.json"
            )
            return "-"
        return f"{json.loads(files[0].read_text(encoding='utf-8'))['wer']:.1f}"

    def decoded(self, exp: str, what: str) -> str:
        return self._read(f"{exp}/decode_*", what)

    def ctc(self, exp: str, module: int, what: str) -> str:
        return self._read(f"{exp}/ctc_greedy_module{module}", what)


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expdir", type=Path, required=True)
    parser.add_argument("--test_set", required=True)
    parser.add_argument(
        "--europarl", required=True, help="experiment dir of the Europarl LegoNN ASR"
    )
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--encoder_only", action="store_true", help="--europarl has no decoder")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    s = Scores(args.expdir, args.test_set)
    baseline = s.decoded(args.baseline, "baseline") if args.baseline else "-"
    if not args.baseline:
        s.missing.append("baseline: not trained in this run (empty --baseline_config)")
    composed_iv = s.decoded("asr_composed_iv", "Table IV composed")
    composed_v = s.decoded("asr_composed_v", "Table V composed")
    parts = [
        table(
            "Table IV: %WER, the Europarl ASR encoder + the De-En MT decoder (no fine-tuning)",
            ["ASR task", "Europarl %WER"],
            [
                ["Baseline Europarl Enc-Dec", baseline],
                [
                    "LegoNN encoder only (greedy CTC)",
                    s.ctc(args.europarl, 1, "Table IV encoder only"),
                ],
                *(
                    []
                    if args.encoder_only
                    else [
                        [
                            "LegoNN Enc-Dec (its own decoder)",
                            s.decoded(args.europarl, "Table IV own decoder"),
                        ]
                    ]
                ),
                ["+ De-En MT LegoNN decoder (WEmb)", composed_iv],
            ],
        ),
        table(
            "Table V: %WER, the encoder as two modules; TED modules combined with Europarl and MT ones",
            ["ASR task", "Europarl %WER"],
            [
                ["Baseline Europarl Enc-Dec", baseline],
                [
                    "TED phoneme recogniser + TED pronunciation model",
                    s.ctc("asr_composed_v_ted", 1, "Table V TED+TED"),
                ],
                [
                    "Europarl phoneme recogniser + TED pronunciation model",
                    s.ctc("asr_composed_v", 1, "Table V EP+TED"),
                ],
                [
                    "Europarl phoneme recogniser + TED pronunciation model + De-En decoder",
                    composed_v,
                ],
            ],
        ),
        table(
            "Table VI: %WER before and after end-to-end fine-tuning of the composed models",
            ["Composed LegoNN model", "No fine-tuning", "With fine-tuning"],
            [
                [
                    "Table IV: Europarl ASR encoder + De-En decoder",
                    composed_iv,
                    s.decoded("asr_finetuned_iv", "Table VI iv"),
                ],
                [
                    "Table V: Europarl phoneme rec. + TED pron. model + De-En decoder",
                    composed_v,
                    s.decoded("asr_finetuned_v", "Table VI v"),
                ],
            ],
        ),
        table(
            "Table VII: greedy CTC decoding at the output of encoder modules",
            ["Encoder module", "Interface", "Error rate (%)"],
            [
                [
                    "Europarl phoneme recogniser",
                    "phones (PER)",
                    s.ctc(args.europarl, 0, "Table VII phones"),
                ],
                [
                    "Europarl phoneme rec. + pronunciation model",
                    "BPE (WER)",
                    s.ctc(args.europarl, 1, "Table VII BPE"),
                ],
                [
                    "TED phoneme rec. + pronunciation model",
                    "BPE (WER)",
                    s.ctc("asr_composed_v_ted", 1, "Table VII TED"),
                ],
            ],
        ),
    ]
    text = f"Test set: {args.test_set}.\n\n" + "\n".join(parts)
    if s.missing:
        text += "\nNot measured:\n\n" + "".join(f"- {m}\n" for m in s.missing)
    with atomic_write(args.out) as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
