#!/usr/bin/env bash
# scripts/test.sh - build strata and run every test the way CI does.
#
# Owns: the list of test stages and their order:
#   1. normal build (RelWithDebInfo) + every CTest test + an install check
#      (scripts/check_install.sh: the README's first program built against
#      the installed tree through pkg-config)
#   2. AddressSanitizer + UBSan build + every CTest test
#   3. ThreadSanitizer build + the tests labelled "concurrency"
#   4. benchmark smoke run: each bench executable with --quick must exit 0
# Must never: stop at the first failing stage without a summary, hide a failure
# behind exit status 0, or use more than STRATA_JOBS cores.
#
# Usage: scripts/test.sh [normal] [asan] [tsan] [bench]   (default: all stages)
# Environment:
#   STRATA_BUILD_PREFIX  build directory of stage 1 (default <repo>/build);
#                        stages 2 and 3 use <prefix>-asan and <prefix>-tsan
#   STRATA_JOBS          parallel compile and test jobs (default 2)
#   STRATA_BENCH_TIMEOUT seconds one benchmark smoke run may take (default 300)
#   STRATA_SANITIZER_NO_ASLR=1  run sanitizer tests under setarch -R even if
#                        the probe says it is not needed
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${STRATA_BUILD_PREFIX:-$ROOT/build}"
JOBS="${STRATA_JOBS:-2}"
BENCH_TIMEOUT="${STRATA_BENCH_TIMEOUT:-300}"

# Sanitizer behaviour: fail on the first UB report, keep leak checking on, and
# give TSan the second stack of lock-order reports.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1:history_size=4}"

# ---- stage bookkeeping -------------------------------------------------------
STAGE_NAMES=()
STAGE_RESULTS=()
STAGE_SECONDS=()
STAGE_NOTES=()
any_failed=0
normal_build_failed=0 # set by stage_normal; the bench stage uses its build

# record_stage NAME RESULT SECONDS [NOTE]; RESULT is PASS, FAIL or SKIP.
record_stage() {
    STAGE_NAMES+=("$1")
    STAGE_RESULTS+=("$2")
    STAGE_SECONDS+=("$3")
    STAGE_NOTES+=("${4:-}")
    if [ "$2" = FAIL ]; then
        any_failed=1
    fi
}

banner() {
    printf '\n==== %s ====\n' "$*"
}

# run_stage NAME COMMAND...: runs the command, records PASS/FAIL and its time.
# Returns the command's status so dependent stages can be skipped.
run_stage() {
    local name="$1" start rc
    shift
    banner "$name"
    start=$SECONDS
    "$@"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        record_stage "$name" PASS $((SECONDS - start))
    else
        record_stage "$name" FAIL $((SECONDS - start)) "exit status $rc"
    fi
    return $rc
}

print_summary() {
    local i total=0
    banner "summary"
    printf '%-14s %-5s %7s  %s\n' stage result seconds note
    for i in "${!STAGE_NAMES[@]}"; do
        printf '%-14s %-5s %7s  %s\n' "${STAGE_NAMES[$i]}" "${STAGE_RESULTS[$i]}" \
            "${STAGE_SECONDS[$i]}" "${STAGE_NOTES[$i]}"
        total=$((total + STAGE_SECONDS[i]))
    done
    printf '%-14s %-5s %7s\n' total "" "$total"
    if [ $any_failed -eq 0 ]; then
        echo "ALL PASSED"
    else
        echo "FAILED: see the stages marked FAIL above"
    fi
}

# ---- building blocks -----------------------------------------------------------

# configure DIR SANITIZER EXTRA_CMAKE_ARGS...
configure() {
    local dir="$1" sanitize="$2"
    shift 2
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE="$sanitize" "$@"
}

# configure_and_build DIR SANITIZER EXTRA_CMAKE_ARGS...: the whole tree.
# shellcheck disable=SC2317 # called through run_stage "$@"
configure_and_build() {
    configure "$@" && cmake --build "$1" -j"$JOBS"
}

# Names of the CTest tests carrying a label (needs only a configured tree).
tests_with_label() {
    (cd "$1" && ctest -N -L "$2") | sed -n 's/^ *Test *#[0-9]*: *//p'
}

# A sanitizer runtime can fail to start on kernels with a large mmap
# randomisation ("FATAL: ThreadSanitizer: unexpected memory mapping"). Probe it
# with a tiny program; if it fails, retry with ASLR disabled for the process
# tree (setarch -R), and as a last resort (root only) lower vm.mmap_rnd_bits.
# Prints the command prefix the tests must run under (possibly empty).
SANITIZER_PREFIX=()
# The failure depends on where ASLR happens to put things: try a few starts.
probe_runs() {
    local i
    for i in 1 2 3 4 5; do
        "$@" 2>&1 || return 1
    done
}
choose_sanitizer_prefix() {
    local flag="$1" probe_dir probe out
    probe_dir="$(mktemp -d)"
    probe="$probe_dir/probe"
    cat >"$probe_dir/probe.c" <<'EOF'
#include <pthread.h>
static int shared;
static void *touch(void *arg) { (void)arg; __atomic_fetch_add(&shared, 1, __ATOMIC_RELAXED); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, touch, 0); pthread_join(t, 0); return shared == 1 ? 0 : 1; }
EOF
    SANITIZER_PREFIX=()
    if ! "${CC:-cc}" -fsanitize="$flag" -pthread "$probe_dir/probe.c" -o "$probe" 2>"$probe_dir/cc.log"; then
        echo "cannot build a -fsanitize=$flag program:" >&2
        cat "$probe_dir/cc.log" >&2
        rm -rf "$probe_dir"
        return 1
    fi
    if [ "${STRATA_SANITIZER_NO_ASLR:-0}" = 1 ]; then
        out="STRATA_SANITIZER_NO_ASLR=1 asks for ASLR off"
    elif out="$(probe_runs "$probe")"; then
        echo "sanitizer probe ($flag): runs as is"
        rm -rf "$probe_dir"
        return 0
    fi
    echo "sanitizer probe ($flag): $(printf '%s' "$out" | head -n 3)"
    if out="$(probe_runs setarch "$(uname -m)" -R "$probe")"; then
        echo "sanitizer probe ($flag): works with ASLR disabled; running tests under setarch -R"
        SANITIZER_PREFIX=(setarch "$(uname -m)" -R)
        rm -rf "$probe_dir"
        return 0
    fi
    if [ "$(id -u)" -eq 0 ] && [ -w /proc/sys/vm/mmap_rnd_bits ]; then
        echo "sanitizer probe ($flag): lowering vm.mmap_rnd_bits from" \
            "$(cat /proc/sys/vm/mmap_rnd_bits) to 28 (the known workaround)"
        echo 28 >/proc/sys/vm/mmap_rnd_bits
        if out="$(probe_runs "$probe")"; then
            rm -rf "$probe_dir"
            return 0
        fi
    fi
    echo "the $flag sanitizer cannot run on this machine; try as root:" \
        "sysctl vm.mmap_rnd_bits=28" >&2
    rm -rf "$probe_dir"
    return 1
}

# ---- stages ----------------------------------------------------------------------

stage_normal() {
    local dir="$PREFIX"
    normal_build_failed=1
    run_stage "build" configure_and_build "$dir" "" || {
        record_stage "test" SKIP 0 "build failed"
        return
    }
    normal_build_failed=0
    run_stage "test" ctest --test-dir "$dir" --output-on-failure --no-tests=error -j"$JOBS"
    run_stage "install" "$ROOT/scripts/check_install.sh" "$dir"
}

stage_asan() {
    local dir="$PREFIX-asan"
    run_stage "asan-build" configure_and_build "$dir" address \
        -DSTRATA_BUILD_BENCH=OFF -DSTRATA_BUILD_EXAMPLES=OFF || {
        record_stage "asan-test" SKIP 0 "build failed"
        return
    }
    banner "asan-test"
    local start=$SECONDS
    if ! choose_sanitizer_prefix address,undefined; then
        record_stage "asan-test" FAIL $((SECONDS - start)) "sanitizer runtime cannot start"
        return
    fi
    "${SANITIZER_PREFIX[@]}" ctest --test-dir "$dir" --output-on-failure --no-tests=error -j"$JOBS"
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        record_stage "asan-test" PASS $((SECONDS - start))
    else
        record_stage "asan-test" FAIL $((SECONDS - start)) "exit status $rc"
    fi
}

# Only the concurrency tests run under TSan, so only they (and the library)
# are built there.
stage_tsan() {
    local dir="$PREFIX-tsan" start=$SECONDS targets
    banner "tsan-build"
    if ! configure "$dir" thread -DSTRATA_BUILD_BENCH=OFF -DSTRATA_BUILD_EXAMPLES=OFF; then
        record_stage "tsan-build" FAIL $((SECONDS - start)) "configure failed"
        record_stage "tsan-test" SKIP 0 "build failed"
        return
    fi
    mapfile -t targets < <(tests_with_label "$dir" concurrency)
    if [ ${#targets[@]} -eq 0 ]; then
        record_stage "tsan-build" SKIP $((SECONDS - start)) "no test is labelled concurrency"
        record_stage "tsan-test" SKIP 0 "no test is labelled concurrency"
        return
    fi
    # Building re-checks the globs; if that found new tests, build those too.
    local built=() _
    for _ in 1 2 3; do
        echo "concurrency tests: ${targets[*]}"
        if ! cmake --build "$dir" -j"$JOBS" --target "${targets[@]}"; then
            record_stage "tsan-build" FAIL $((SECONDS - start)) "build failed"
            record_stage "tsan-test" SKIP 0 "build failed"
            return
        fi
        built=("${targets[@]}")
        mapfile -t targets < <(tests_with_label "$dir" concurrency)
        [ "${targets[*]}" = "${built[*]}" ] && break
    done
    record_stage "tsan-build" PASS $((SECONDS - start))

    banner "tsan-test"
    start=$SECONDS
    if ! choose_sanitizer_prefix thread; then
        record_stage "tsan-test" FAIL $((SECONDS - start)) "sanitizer runtime cannot start"
        return
    fi
    "${SANITIZER_PREFIX[@]}" ctest --test-dir "$dir" --output-on-failure -L concurrency -j"$JOBS"
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        record_stage "tsan-test" PASS $((SECONDS - start)) "${#targets[@]} tests"
    else
        record_stage "tsan-test" FAIL $((SECONDS - start)) "exit status $rc"
    fi
}

# Benchmarks are smoke-tested only: --quick must finish and exit 0. They run
# one at a time (they measure the whole machine).
stage_bench() {
    local dir="$PREFIX/bench" start=$SECONDS b rc failed=0 count=0 benches
    banner "bench-smoke"
    if [ "$normal_build_failed" -ne 0 ]; then
        record_stage "bench-smoke" SKIP 0 "normal build failed"
        return
    fi
    if [ ! -d "$dir" ]; then
        record_stage "bench-smoke" SKIP 0 "no $dir (run the normal stage first)"
        return
    fi
    mapfile -t benches < <(find "$dir" -maxdepth 1 -type f -perm -u+x ! -name '*.so*' | sort)
    if [ ${#benches[@]} -eq 0 ]; then
        record_stage "bench-smoke" SKIP 0 "no benchmark built"
        return
    fi
    for b in "${benches[@]}"; do
        echo "--> $(basename "$b") --quick"
        timeout --kill-after=10 "$BENCH_TIMEOUT" "$b" --quick
        rc=$?
        count=$((count + 1))
        if [ "$rc" -ne 0 ]; then
            echo "FAIL: $(basename "$b") --quick exited with status $rc" \
                "$([ "$rc" -eq 124 ] && echo "(timed out after ${BENCH_TIMEOUT}s)")"
            failed=$((failed + 1))
        fi
    done
    if [ "$failed" -eq 0 ]; then
        record_stage "bench-smoke" PASS $((SECONDS - start)) "$count benchmarks"
    else
        record_stage "bench-smoke" FAIL $((SECONDS - start)) "$failed of $count failed"
    fi
}

# ---- main ------------------------------------------------------------------------

stages=("$@")
if [ ${#stages[@]} -eq 0 ]; then
    stages=(normal asan tsan bench)
fi
for s in "${stages[@]}"; do
    case "$s" in
    normal | asan | tsan | bench) ;;
    -h | --help)
        sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "test.sh: unknown stage '$s' (normal, asan, tsan, bench)" >&2
        exit 2
        ;;
    esac
done

run_stage "deps" "$ROOT/scripts/deps.sh" || {
    print_summary
    exit 1
}
for s in "${stages[@]}"; do
    case "$s" in
    normal) stage_normal ;;
    asan) stage_asan ;;
    tsan) stage_tsan ;;
    bench) stage_bench ;;
    esac
done
print_summary
exit $any_failed
