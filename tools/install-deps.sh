#!/usr/bin/env bash
# Installs what building and testing the project needs on a Debian machine:
# etcd (the storage), protoc (etcd-client's build), kubectl (end-to-end tests),
# haproxy (the fault tests' load balancer; Debian puts it in /usr/sbin, which a
# normal user's PATH lacks, so look there too), openssl (test CSRs), a C
# compiler (mimalloc, the server's allocator, is C; rustc links with it too).
set -euo pipefail
need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
command -v kubectl >/dev/null 2>&1 || need+=(kubectl)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v cc >/dev/null 2>&1 || need+=(gcc)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing: ${need[*]}"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
