from slurm_fixtures import slurm_cluster  # noqa: F401
