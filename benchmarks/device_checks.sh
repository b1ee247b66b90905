#!/usr/bin/env bash
# On a GPU device machine with the stack staged (see the developers' guide; the S3 tests want the
# wheels of benchmarks/device_s3_wheels.txt staged too): build gpuframe, print what it finds, run
# the gpu-marked tests and the demo over UCX and TCP. Output goes to stdout and,
# when $OUT is set, to $OUT/device_checks.log. Extra arguments are passed to pytest.
set -uo pipefail
export PYTHONPATH=/tmp/gpustack/site PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 UCX_WARN_UNUSED_ENV_VARS=n
log="${OUT:-/tmp}/device_checks.log"
{
  echo "## $(date -u +%F' '%H:%M) UTC on $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
  start=$(date +%s)
  python3 -m pip install -q --no-build-isolation --no-deps -e . || exit 1
  echo "build: $(( $(date +%s) - start )) s"
  python3 -m gpuframe.cli info
  echo '$ pytest -m gpu'
  python3 -m pytest -m gpu -q -p no:cacheprovider "$@"
  for protocol in ucx tcp; do
    echo "\$ gpuframe demo --protocol $protocol --rows 20000000"
    python3 -m gpuframe.cli demo --protocol "$protocol" --rows 20000000
  done
} 2>&1 | tee "$log"
