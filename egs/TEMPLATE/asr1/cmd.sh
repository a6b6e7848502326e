# Sourced by the pipelines after option parsing: picks the job backend for ${cmd_backend}.
#   ${train_cmd}  CPU jobs (features, statistics, training on CPU)
#   ${cuda_cmd}   GPU jobs (the pipeline adds --gpu N)
#   ${decode_cmd} decoding jobs
# Every command takes Kaldi-style options, e.g. ${train_cmd} JOB=1:4 log/x.JOB.log command ... JOB ...
case "${cmd_backend:-local}" in
    local)
        export train_cmd="utils/run.py"
        export cuda_cmd="utils/run.py"
        export decode_cmd="utils/run.py"
        ;;
    slurm)
        # Partition names, memory and time limits live in conf/slurm.conf (ESPnet's format).
        export train_cmd="utils/slurm.py --config conf/slurm.conf"
        export cuda_cmd="utils/slurm.py --config conf/slurm.conf"
        export decode_cmd="utils/slurm.py --config conf/slurm.conf --mem 4G"
        ;;
    *)
        echo "cmd.sh: unknown cmd_backend '${cmd_backend}' (local or slurm)" >&2
        return 1
        ;;
esac
