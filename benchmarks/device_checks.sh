#!/usr/bin/env bash
# On a GPU device machine with the stack staged (see the developers' guide; the S3 tests want the
# wheels of benchmarks/device_s3_wheels.txt staged too): build gpuframe, print what it finds, run
# the gpu-marked tests and the demo over UCX and TCP. Output goes to stdout and,
# when $OUT is set, to $OUT/device_checks.log. Extra arguments are passed to pytest.
# The core is built as a wheel and its module put into gpuframe/ (kept in /tmp/gpuframe-wheel
# for later calls), not installed editable: an editable install would also serve `import
# gpuframe` to another tree on PYTHONPATH (benchmarks/device_compare.sh's earlier one).
set -uo pipefail
export PYTHONPATH="$PWD:/tmp/gpustack/site" PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 \
  UCX_WARN_UNUSED_ENV_VARS=n
log="${OUT:-/tmp}/device_checks.log"
{
  echo "## $(date -u +%F' '%H:%M) UTC on $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
  start=$(date +%s)
  rm -rf /tmp/gpuframe-wheel
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/gpuframe-wheel . || exit 1
  python3 -m zipfile -e /tmp/gpuframe-wheel/gpuframe-*.whl /tmp/gpuframe-wheel/unpacked
  cp /tmp/gpuframe-wheel/unpacked/gpuframe/_core* gpuframe/
  echo "build: $(( $(date +%s) - start )) s"
  python3 -m gpuframe.cli info
  echo '$ pytest -m gpu'
  python3 -m pytest -m gpu -q -p no:cacheprovider "$@"
  for protocol in ucx tcp; do
    echo "\$ gpuframe demo --protocol $protocol --rows 20000000"
    python3 -m gpuframe.cli demo --protocol "$protocol" --rows 20000000
  done
} 2>&1 | tee "$log"
