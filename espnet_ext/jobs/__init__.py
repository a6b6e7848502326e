"""Running a recipe's jobs, Kaldi/ESPnet style: ``${train_cmd} JOB=1:${nj} log/x.JOB.log command ... JOB ...``.

- spec.py          the shared command line (options, JOB ranges) and the log header/footer
- local.py         backend: parallel processes on this machine
- slurm.py         backend: sbatch (arrays, GPUs, multi-node via srun, requeue) and waiting for the result
- slurm_config.py  ESPnet's conf/slurm.conf format
- cli.py           utils/run.py and utils/slurm.py
- launch.py        ESPnet2 training on J nodes x K GPUs through a backend
"""

from espnet_ext.jobs.cli import main, make_runner

__all__ = ["main", "make_runner"]
