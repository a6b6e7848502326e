"""Scoring of hypothesis against reference Kaldi text files: ``wer`` (jiwer WER/CER) and ``bleu`` (sacrebleu).

Both write ``<out_dir>/result.json`` (read by ``espnet_ext.results``) and a readable
``<out_dir>/result.txt``; ``utils/score_wer.py`` and ``utils/score_bleu.py`` are their command
lines.
"""
