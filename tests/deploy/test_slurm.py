"""deploy/slurm/gpuframe.sbatch run as SLURM would run it, on this machine: `srun`, `scontrol`
and `dask cuda worker` are stand-ins (srun runs its command here; the worker is a plain CPU
`dask worker`), everything else is the script's own: the scheduler started on the first node, the
scheduler file awaited, workers on every node, the user's script joining with gpuframe.connect,
and the cluster stopped when the script ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from stand_ins import DASK, REAL_DASK, install

ROOT = Path(__file__).resolve().parents[2]
SBATCH = ROOT / "deploy" / "slurm" / "gpuframe.sbatch"

STAND_INS = {
    "scontrol": 'echo localhost\n',
    "srun": 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n',
    # No GPU here: dask-cuda's worker becomes two plain workers; the scheduler takes any port.
    "dask": DASK,
}

USER_SCRIPT = '''
import os, sys
import pandas as pd
import gpuframe

engine = gpuframe.connect(scheduler_file=os.environ["GPUFRAME_SCHEDULER_FILE"], timeout=60)
engine.client.wait_for_workers(2, timeout=60)
left = pd.DataFrame({"k": range(1000), "a": range(1000)})
right = pd.DataFrame({"k": range(0, 2000, 2), "b": range(1000)})
got = gpuframe.merge(gpuframe.from_pandas(left, npartitions=4),
                     gpuframe.from_pandas(right, npartitions=4), on="k",
                     broadcast_bytes=0).to_pandas()
expected = left.merge(right, on="k")
assert got.sort_values("k").reset_index(drop=True).equals(expected), got
print("workers", len(engine.workers), "rows", len(got))
engine.client.close()
'''


@pytest.mark.timeout(180)
def test_the_sbatch_script_runs_a_job_on_the_cluster_it_starts(tmp_path):
    stand_ins = install(tmp_path / "bin", STAND_INS)
    script = tmp_path / "query.py"
    script.write_text(USER_SCRIPT)
    env = {**os.environ,
           "PATH": f"{stand_ins}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "REAL_DASK": REAL_DASK, "WORKERS_PER_NODE": "2",
           "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "localhost",
           "SLURM_JOB_NUM_NODES": "1", "GPUFRAME_SHARED_DIR": str(tmp_path / "shared"),
           "GPUFRAME_DEPLOY": str(ROOT / "deploy"), "GPUFRAME_PROTOCOL": "tcp",
           "DASHBOARD_ADDRESS": "127.0.0.1:0"}
    done = subprocess.run(["bash", str(SBATCH), str(script)], env=env, capture_output=True,
                          text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "workers 2 rows 500" in done.stdout
    # the cluster went with the job: no process still names the job's scheduler file
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "shared")], capture_output=True)
    assert leftover.returncode == 1, leftover.stdout


def test_the_sbatch_script_names_its_usage():
    done = subprocess.run(["bash", str(SBATCH)], capture_output=True, text=True)
    assert done.returncode == 2 and "sbatch" in done.stderr
