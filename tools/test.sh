#!/usr/bin/env bash
# Runs the workspace's tests (what `cargo test --workspace --no-fail-fast`
# runs) with several test binaries at once.
#
# Most of the suite is end-to-end: a test binary spends its time waiting on
# servers, etcd and kubectl, not computing, so one binary after another
# leaves the machine's cores idle. This builds every test target once, then
# runs the test binaries (with the working directory and environment cargo
# would give them) in TEST_LANES lanes, the slowest first. Each
# target's output goes to a log printed when it ends; the logs of failed
# targets are printed again at the end, and the exit status is 1 if any
# failed.
#
#   TEST_LANES=3 ./tools/test.sh
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO="${CARGO:-cargo}"
LANES="${TEST_LANES:-3}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# Build everything once; the list of targets comes from cargo's own
# description of what it built.
if ! "$CARGO" test --workspace --no-run --message-format=json-render-diagnostics \
  >"$logs/build.json"; then
  echo "tools/test.sh: the test build failed" >&2
  exit 1
fi

# One line per target: "<label>\t<package directory>\t<test executable>".
# The executables are run directly, not through `cargo test -p ..`: cargo
# resolves features per selected package, so a per-package invocation would
# build other variants of shared crates than the workspace build made.
python3 - "$logs/build.json" >"$logs/targets" <<'PY'
import json, os, sys
# Known to take longest (seconds in CI): started first so the lanes end
# together.
slow = ["kube_crate_suite", "crd_row_memory", "chaos", "controller_faults",
        "aggregation", "kubectl_write", "admission_plugins", "namespaces",
        "api", "faults"]
rows = []
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m.get("profile", {}).get("test"):
        continue
    t = m["target"]
    kind = t["kind"][0]
    pkg_dir = os.path.dirname(m["manifest_path"])
    label = f"{os.path.basename(pkg_dir)} {kind} {t['name']}"
    rank = slow.index(t["name"]) if kind == "test" and t["name"] in slow else len(slow)
    rows.append((rank, label, pkg_dir, m["executable"]))
rows.sort(key=lambda r: r[0])
for _, label, pkg_dir, exe in rows:
    print(f"{label}\t{pkg_dir}\t{exe}")
PY
# Doc tests: one target for the whole workspace, through cargo (the same
# selection as the build above, so nothing is built again).
printf 'doc tests\t%s\t\n' "$PWD" >>"$logs/targets"

run_one() {
  local line="$1" logs="$2" cargo="$3"
  local label dir exe
  IFS=$'\t' read -r label dir exe <<<"$line"
  local log="$logs/$(echo "$label" | tr ' /' '__').log"
  local start=$SECONDS rc
  if [ -z "$exe" ]; then
    (cd "$dir" && $cargo test --workspace --doc) >"$log" 2>&1
  else
    # What `cargo test` gives a test binary: its package's directory as
    # the working directory and CARGO_MANIFEST_DIR, and CARGO.
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" CARGO="$(command -v "$cargo")" "$exe") >"$log" 2>&1
  fi
  rc=$?
  local took=$((SECONDS - start))
  if [ $rc -eq 0 ]; then
    echo "=== ok   $label (${took}s)"
    grep -E "^test result" "$log" | sed 's/^/    /'
  else
    echo "=== FAIL $label (${took}s)"
    cat "$log"
    touch "$log.failed"
  fi
}
export -f run_one

echo "tools/test.sh: $(wc -l <"$logs/targets") targets in $LANES lanes"
xargs -d '\n' -P "$LANES" -I{} bash -c 'run_one "$1" "$2" "$3"' _ {} "$logs" "$CARGO" \
  <"$logs/targets"

failed=$(find "$logs" -name '*.failed' | wc -l)
if [ "$failed" -ne 0 ]; then
  echo
  echo "tools/test.sh: $failed target(s) failed:"
  for f in "$logs"/*.failed; do
    echo "  $(basename "${f%.log.failed}")"
  done
  for f in "$logs"/*.failed; do
    echo
    echo "===== ${f%.failed}"
    tail -n 200 "${f%.failed}"
  done
  exit 1
fi
echo "tools/test.sh: every target passed"
