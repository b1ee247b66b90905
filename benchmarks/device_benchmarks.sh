#!/usr/bin/env bash
# On a 2-GPU device machine with the stack staged and gpuframe built (benchmarks/device_checks.sh
# first): the benchmarks behind the issues' GPU goals, one group per argument, so that each group
# fits one device call. Output goes to stdout and, when $OUT is set, to $OUT/<group>.log.
#   bash benchmarks/device_benchmarks.sh partition join-ucx join-tcp ingest ingest-formats \
#     ingest-remote ingest-selective
# (ingest: ENGINES=raw,gpuframe,pyarrow,dask,dask_cudf adds the CPU readers, minutes more)
set -uo pipefail
export PYTHONPATH=${PYTHONPATH:-/tmp/gpustack/site} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 UCX_WARN_UNUSED_ENV_VARS=n
rows=${ROWS_PER_GPU:-200000000}
run() { echo "\$ $*"; "$@"; }
for group in "$@"; do
  {
    echo "## $group: $(date -u +%F' '%H:%M) UTC on $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
    case "$group" in
      partition)  # issue #5: one GPU, 100M rows x 4 columns
        for d in 8 64; do
          run python3 benchmarks/partition.py --device gpu --rows 100000000 --destinations "$d" --phases
        done ;;
      join-ucx)  # issue #4: dask-cuda's shape and the seed's, with dask-cuda's own benchmark
        run python3 benchmarks/join.py --device gpu --protocols ucx --rows-per-worker "$rows" \
          --shapes dask-cuda,seed,zipf --baselines "" --repeats 3 --dask-cuda on \
          --partitions-per-worker 2,4 --stages ;;
      join-tcp)
        run python3 benchmarks/join.py --device gpu --protocols tcp --rows-per-worker "$rows" \
          --shapes dask-cuda --baselines "" --repeats 2 --dask-cuda on --stages ;;
      ingest)  # issue #3: 4 GiB of Parquet per dataset (2 GiB a GPU), cold and warm
        gpus=$(nvidia-smi -L | wc -l)
        run python3 benchmarks/ingest.py --device gpu --protocol ucx --bytes "$((2 * gpus))GiB" \
          --files "$((16 * gpus))" --types int,string --run-lengths 1 --cardinalities 0 \
          --compressions snappy --repeats 3 --dir /tmp/ingest --engines "${ENGINES:-raw,gpuframe,dask_cudf}" ;;
      ingest-formats)  # issue #29: ORC and CSV (cuDF's own readers, through dask_cudf, beside)
        gpus=$(nvidia-smi -L | wc -l)
        run python3 benchmarks/ingest.py --device gpu --protocol ucx --bytes "${gpus}GiB" \
          --files "$((16 * gpus))" --formats orc,csv --types int,string --run-lengths 1 \
          --cardinalities 0 --compressions snappy --repeats 3 --dir /tmp/ingest \
          --engines "${ENGINES:-raw,gpuframe,dask_cudf}" ;;
      ingest-remote)  # issue #3: HTTP and S3 servers on loopback, untuned against fixed settings
        stores=http
        if python3 -c "import boto3, moto" 2>/dev/null; then stores=http,s3
        else echo "S3 skipped: stage the stack with benchmarks/device_s3_wheels.txt's wheels"; fi
        run python3 benchmarks/ingest_remote.py --device gpu --stores "$stores" --bytes 2GiB \
          --s3-bytes 512MiB --files 16 --threads 4,16,64 --task-sizes 1MiB,16MiB \
          --raw-threads 16,64 --repeats 3 ;;
      ingest-selective)  # issue #3: filtered reads over HTTP, bytes fetched against needed
        run python3 benchmarks/ingest_selective.py --device gpu --bytes 2GiB --files 16 ;;
      *) echo "unknown group: $group (partition, join-ucx, join-tcp, ingest, ingest-remote," \
              "ingest-selective)"; exit 2 ;;
    esac
  } 2>&1 | tee "${OUT:-/tmp}/$group.log"
done
