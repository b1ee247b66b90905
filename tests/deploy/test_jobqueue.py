"""dask-jobqueue's SLURMCluster, as deploy/README.md shows it, driving gpuframe: `sbatch` and
`scancel` are stand-ins that run a job's script on this machine in a session of its own and kill
that session; everything else is dask-jobqueue's own (the job script it writes, its scheduler,
scaling by jobs), and the user's side is `gpuframe.connect(cluster.scheduler_address)`. No GPU
here: the workers are the default `distributed` workers, not `dask cuda worker`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from stand_ins import check_a_shuffle_join, install

import gpuframe

SLURMCluster = pytest.importorskip("dask_jobqueue").SLURMCluster

STAND_INS = {
    # the job's script (which dask-jobqueue deletes once submitted) runs from a copy, detached
    # in a session of its own, so that scancel stops all of it
    "sbatch": 'job=$(mktemp); cat "${1:-/dev/stdin}" > "$job"\n'
              'setsid bash "$job" >"$job.log" 2>&1 < /dev/null &\n'
              'echo "Submitted batch job $!"\n',
    "scancel": 'for id in "$@"; do kill -- "-$id" 2>/dev/null || true; done\n',
}


@pytest.fixture
def slurm_commands(tmp_path, monkeypatch):
    folder = install(tmp_path / "bin", STAND_INS)
    monkeypatch.setenv("PATH", f"{folder}:{Path(sys.executable).parent}:{os.environ['PATH']}")
    return folder


@pytest.mark.timeout(180)
def test_connect_joins_a_slurm_cluster_of_dask_jobqueue(slurm_commands, tmp_path):
    with SLURMCluster(cores=2, processes=2, memory="2GB", walltime="00:10:00",
                      log_directory=str(tmp_path / "logs"),
                      scheduler_options={"host": "127.0.0.1",
                                         "dashboard_address": "127.0.0.1:0"}) as cluster:
        cluster.scale(jobs=1)
        with gpuframe.connect(cluster.scheduler_address, timeout=60) as engine:
            check_a_shuffle_join(engine, 2)
