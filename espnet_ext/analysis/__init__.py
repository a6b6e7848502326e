"""The papers' analyses: sweeps over recipe runs, the tables and figures they report."""
