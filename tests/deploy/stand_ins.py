"""Stand-ins for the commands a GPU cluster's launchers call, so their scripts and manifests run on
this CPU machine: `dask cuda worker` becomes plain `dask worker`s (the GPU-only options dropped),
and a `dask scheduler` takes the port given in `SCHEDULER_PORT` (any free one without it) and
listens on `SCHEDULER_HOST` where that is set. And the join each launcher's test runs on the
cluster it made."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import gpuframe

DASK = '''if [ "$1 $2" = "cuda worker" ]; then
  shift 2; args=()
  while [ $# -gt 0 ]; do
    case "$1" in --rmm-pool-size|--device-memory-limit|--pre-import) shift 2 ;;
      *) args+=("$1"); shift ;; esac
  done
  exec "$REAL_DASK" worker "${args[@]}" --nworkers "${WORKERS_PER_NODE:-1}" --nthreads 1 \\
    --no-dashboard
fi
[ "$1" = scheduler ] && set -- "$@" --port "${SCHEDULER_PORT:-0}" \
  ${SCHEDULER_HOST:+--host "$SCHEDULER_HOST"}
exec "$REAL_DASK" "$@"
'''

REAL_DASK = str(Path(sys.executable).with_name("dask"))


def install(folder: Path, commands: dict[str, str]) -> Path:
    """Each of ``commands`` (name: bash body) as an executable script in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in commands.items():
        path = folder / name
        path.write_text("#!/usr/bin/env bash\n" + body)
        path.chmod(0o755)
    return folder


def check_a_shuffle_join(engine: gpuframe.Engine, workers: int) -> None:
    """On ``engine``, once ``workers`` workers joined it: a shuffle join equals pandas'."""
    engine.client.wait_for_workers(workers, timeout=60)
    left = pd.DataFrame({"k": range(1000), "a": range(1000)})
    right = pd.DataFrame({"k": range(0, 2000, 2), "b": range(1000)})
    got = gpuframe.merge(gpuframe.from_pandas(left, npartitions=4, engine=engine),
                         gpuframe.from_pandas(right, npartitions=4, engine=engine), on="k",
                         broadcast_bytes=0).to_pandas()
    assert len(engine.workers) == workers
    pd.testing.assert_frame_equal(got.sort_values("k", ignore_index=True),
                                  left.merge(right, on="k"))
