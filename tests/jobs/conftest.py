"""The job backend tests share the session's real Slurm cluster (tests/slurm_fixtures.py)."""

from slurm_fixtures import slurm_cluster  # noqa: F401
