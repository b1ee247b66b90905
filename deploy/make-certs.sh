#!/usr/bin/env bash
# Make the certificates for Dask's TLS between the hosts of one gpuframe cluster: a private
# certificate authority, and one key and certificate it signs, which the scheduler, the workers
# and the clients all present (each side checks that the other's is signed by the same CA).
#   deploy/make-certs.sh DIR [DAYS]
# writes DIR/ca.pem, DIR/ca-key.pem (keep it off the cluster), DIR/cert.pem and DIR/key.pem
# (readable by its owner only). Users with their own CA give its files to start-cluster.sh and
# gpuframe.connect instead (see deploy/README.md).
set -euo pipefail
dir="${1:-}"; days="${2:-365}"
if [ -z "$dir" ]; then sed -n '2,9p' "$0" >&2; exit 2; fi
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=gpuframe cluster CA" \
  -keyout "$dir/ca-key.pem" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=gpuframe" \
  -keyout "$dir/key.pem" -out "$dir/cert.csr" 2>/dev/null
# Hosts are told apart by address, not name, so the certificate names none: Dask checks the
# chain to the CA, not the host name.
openssl x509 -req -in "$dir/cert.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
  -CAcreateserial -days "$days" -out "$dir/cert.pem" 2>/dev/null
rm -f "$dir/cert.csr" "$dir/ca.srl"
chmod 644 "$dir/ca.pem" "$dir/cert.pem"
echo "certificates in $dir: ca.pem cert.pem key.pem (and ca-key.pem: keep it off the cluster)"
