#!/usr/bin/env bash
# Start a gpuframe cluster across hosts from a shared scheduler file.
#   deploy/start-cluster.sh scheduler SCHEDULER_FILE [PROTOCOL]   on one host (ucx|tcp|tls)
#   deploy/start-cluster.sh workers   SCHEDULER_FILE              on every GPU host
# Then, from Python:  gpuframe.connect(scheduler_file=SCHEDULER_FILE)
# Tunables (environment): GPUFRAME_RMM_POOL_SIZE (0.75), GPUFRAME_DEVICE_MEMORY_LIMIT (0.8),
# GPUFRAME_LOCAL_DIRECTORY (scratch for spilling), DASHBOARD_ADDRESS (127.0.0.1:8787),
# GPUFRAME_TLS_DIR (ca.pem, cert.pem, key.pem from deploy/make-certs.sh or your own CA: with
# protocol tls, every connection is encrypted and both ends must present a certificate the CA
# signed), GPUFRAME_SCHEDULER_HOST (where the scheduler listens: loopback by default, except with
# tls; set it to accept workers from other hosts over unencrypted tcp or ucx).
set -euo pipefail
role="${1:-}"; file="${2:-}"
if [ -z "$role" ] || [ -z "$file" ]; then
  sed -n '2,12p' "$0" >&2; exit 2
fi
tls=()
if [ -n "${GPUFRAME_TLS_DIR:-}" ]; then
  for f in ca.pem cert.pem key.pem; do
    [ -r "$GPUFRAME_TLS_DIR/$f" ] || { echo "GPUFRAME_TLS_DIR: no readable $f in $GPUFRAME_TLS_DIR" >&2; exit 2; }
  done
  tls=(--tls-ca-file "$GPUFRAME_TLS_DIR/ca.pem" --tls-cert "$GPUFRAME_TLS_DIR/cert.pem"
       --tls-key "$GPUFRAME_TLS_DIR/key.pem")
fi
case "$role" in
  scheduler)
    protocol="${3:-ucx}"
    case "$protocol" in ucx|tcp) ;;
      tls) [ ${#tls[@]} -gt 0 ] || { echo "protocol tls needs GPUFRAME_TLS_DIR" >&2; exit 2; } ;;
      *) echo "unknown protocol '$protocol': ucx, tcp or tls" >&2; exit 2;;
    esac
    # Plain TCP and UCX neither encrypt nor authenticate: anyone who reaches the port can run
    # code on the cluster. So the scheduler listens on loopback unless told where to listen.
    if [ "$protocol" = tls ]; then
      host="${GPUFRAME_SCHEDULER_HOST:-}"
      echo "gpuframe scheduler: TLS, clients and workers need a certificate signed by $GPUFRAME_TLS_DIR/ca.pem" >&2
    elif [ -n "${GPUFRAME_SCHEDULER_HOST:-}" ]; then
      host="$GPUFRAME_SCHEDULER_HOST"
      echo "gpuframe scheduler: $protocol on $host, unencrypted and unauthenticated: only on a trusted network" >&2
    else
      host=127.0.0.1
      echo "gpuframe scheduler: $protocol on loopback only; set GPUFRAME_SCHEDULER_HOST to an address of this host for workers on other hosts (unencrypted), or use protocol tls" >&2
    fi
    exec dask scheduler --scheduler-file "$file" --protocol "$protocol" "${tls[@]}" \
      ${host:+--host "$host"} --dashboard-address "${DASHBOARD_ADDRESS:-127.0.0.1:8787}" ;;
  workers)
    # dask-cuda starts one worker process per visible GPU, pinned to the GPU's CPU cores and NIC.
    args=(--scheduler-file "$file"
          --rmm-pool-size "${GPUFRAME_RMM_POOL_SIZE:-0.75}"
          --device-memory-limit "${GPUFRAME_DEVICE_MEMORY_LIMIT:-0.8}"
          --pre-import cudf "${tls[@]}")
    [ -n "${GPUFRAME_LOCAL_DIRECTORY:-}" ] && args+=(--local-directory "$GPUFRAME_LOCAL_DIRECTORY")
    exec dask cuda worker "${args[@]}" ;;
  *) echo "unknown role '$role': scheduler or workers" >&2; exit 2 ;;
esac
