#!/usr/bin/env bash
# On a 2-GPU device machine with the stack staged: the join and ingest benchmarks of an earlier
# tree of gpuframe and of this one, taking turns on the same machine in the same call, so that a
# change (a redesign) is compared on equal terms. BEFORE is a folder holding that tree's
# gpuframe/ (with a built _core module) and benchmarks/; this tree's gpuframe/ needs its _core
# too. One group per argument; output goes to stdout and, when $OUT is set, to
# $OUT/compare-<group>.log.
#   git archive <commit> gpuframe benchmarks | tar -x -C .before
#   bash benchmarks/device_compare.sh .before join ingest
set -uo pipefail
before="$(cd "$1" && pwd)"
shift
after="$(pwd)"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 UCX_WARN_UNUSED_ENV_VARS=n
rows=${ROWS_PER_GPU:-100000000}
repeats=${REPEATS:-3}
types=${INGEST_TYPES:-int,string}
run() { echo "\$ PYTHONPATH=$PYTHONPATH $*"; "$@"; }
for group in "$@"; do
  {
    echo "## $group: $(date -u +%F' '%H:%M) UTC on $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
    for tree in "$before" "$after"; do
      echo "### $([ "$tree" = "$before" ] && echo before || echo after): $tree"
      export PYTHONPATH="$tree:/tmp/gpustack/site"
      case "$group" in
        join)  # dask-cuda's shape over UCX: the shuffle join and the default merge
          run python3 "$tree/benchmarks/join.py" --device gpu --protocols ucx \
            --rows-per-worker "$rows" --shapes dask-cuda --baselines "" --repeats "$repeats" \
            --dask-cuda off ;;
        ingest)  # 2 GiB of Parquet a GPU, cold and warm, against the raw read
          gpus=$(nvidia-smi -L | wc -l)
          run python3 "$tree/benchmarks/ingest.py" --device gpu --protocol ucx \
            --bytes "$((2 * gpus))GiB" --files "$((16 * gpus))" --types "$types" \
            --run-lengths 1 --cardinalities 0 --compressions snappy --repeats "$repeats" \
            --dir /tmp/ingest --engines raw,gpuframe ;;
        *) echo "unknown group: $group (join, ingest)"; exit 2 ;;
      esac
    done
  } 2>&1 | tee "${OUT:-/tmp}/compare-$group.log"
done
