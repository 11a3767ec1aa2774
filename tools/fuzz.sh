#!/usr/bin/env bash
# Coverage-guided fuzzing of every target in fuzz/src/lib.rs with AFL++
# (afl.rs, stable toolchain).
#
#   tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Defaults: 120 s for each target. Seeds come from fuzz/corpus/<target>/;
# findings go to $FUZZ_OUT (default target/fuzz-out). A crash or hang is
# copied into fuzz/corpus/<target>/crash-<sha1>, where `cargo test -p fuzz`
# replays it from then on: fix it, keep the file. Prints executions, paths
# and findings per target; exits 1 if any target found something.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-120}
shift || true
out=${FUZZ_OUT:-target/fuzz-out}
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-target/afl}

if ! command -v cargo-afl >/dev/null; then
    cargo install cargo-afl --locked
fi
# Builds AFL++ itself once per toolchain; a no-op (with a complaint) after.
cargo afl config --build >/dev/null 2>&1 || true

cargo afl build --release -p fuzz --features afl --bin fuzz-afl
bin="$CARGO_TARGET_DIR/release/fuzz-afl"

if [ "$#" -eq 0 ]; then
    mapfile -t targets < <(ls fuzz/corpus)
else
    targets=("$@")
fi

# The instrumented binary reports how large a coverage map it needs.
AFL_MAP_SIZE=$(AFL_DUMP_MAP_SIZE=1 "$bin" "${targets[0]}" </dev/null || true)
export AFL_MAP_SIZE
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
export AFL_NO_AFFINITY=1
found=0
printf '%-16s %10s %8s %7s %6s %6s\n' target execs exec/s paths crash hang
for t in "${targets[@]}"; do
    rm -rf "${out:?}/$t"
    mkdir -p "$out/$t"
    cargo afl fuzz -V "$seconds" -i "fuzz/corpus/$t" -o "$out/$t" -- "$bin" "$t" \
        >"$out/$t.log" 2>&1 || { echo "afl-fuzz failed for $t; see $out/$t.log"; tail -20 "$out/$t.log"; exit 2; }
    stats="$out/$t/default/fuzzer_stats"
    get() { awk -F: -v k="$1" '$1 ~ "^"k" *$" {gsub(/ /, "", $2); print $2}' "$stats"; }
    crashes=$(get saved_crashes)
    hangs=$(get saved_hangs)
    printf '%-16s %10s %8s %7s %6s %6s\n' "$t" "$(get execs_done)" "$(get execs_per_sec)" \
        "$(get corpus_count)" "$crashes" "$hangs"
    for f in "$out/$t"/default/crashes/id:* "$out/$t"/default/hangs/id:*; do
        [ -e "$f" ] || continue
        found=1
        cp "$f" "fuzz/corpus/$t/crash-$(sha1sum "$f" | cut -c1-16)"
    done
done
exit "$found"
