#!/usr/bin/env bash
# scripts/demo.sh - build strata and run its main demo on the built-in default
# configuration (sim chips, thread-hosted workers, no services).
#
# Owns: the one command a new user runs to see strata work.
# Must never: need anything beyond scripts/deps.sh's demo packages, or write
# outside the build directory (the README's picture is a copy made by hand).
#
# Usage: scripts/demo.sh [args passed to the demo program]
#   The arguments go to examples/demo (--n, --tile, --runs, --workers); with
#   -h/--help it builds, prints the demo's options and runs no demo. A bad argument
#   makes examples/demo exit 2, and so does this script.
#   One demo (TRACED_DEMO) runs with tracing on; its trace summary is printed and
#   its swimlane picture drawn: <build>/demo-trace.json and <build>/demo-trace.png.
# Environment: STRATA_BUILD_PREFIX (default <repo>/build), STRATA_JOBS (default 2).
set -euo pipefail

# The demo programs: examples/<name>.c, built as <build>/examples/<name>, each
# entry "<name> [fixed arguments]". The first gets the script's arguments: the
# engine demo (tiled GEMM + reduction on sub workers, pipelined runs); then the
# L3 demo with two sim chips and sub workers (device buffers loaded once, chip
# programs, host reduction), once with its chips and sub workers hosted as
# threads and once as processes of their own (the same program, a switch).
DEMOS=(demo "l3_two_chips --host thread" "l3_two_chips --host process")
# The entry of DEMOS run with tracing on (STRATA_TRACE, docs/tracing.md): its
# trace is written to <build>/demo-trace.json, summarised by tools/strata-trace
# and drawn as <build>/demo-trace.png, the picture in the README
# (docs/images/demo-trace.png is a copy of it, drawn with DRAW_OPTIONS).
TRACED_DEMO="l3_two_chips --host process"
DRAW_OPTIONS=(--edges --width 1600 --height 800)

# Then the Python demo (examples/python/<name>.py, on the module the build
# made: tiled numpy matrix product on process-hosted sub workers, checked).
PY_DEMOS=(tiled_matmul)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STRATA_BUILD_PREFIX:-$ROOT/build}"
JOBS="${STRATA_JOBS:-2}"
TRACE="$BUILD/demo-trace.json"
PICTURE="$BUILD/demo-trace.png"
# Same build type as the first stage of scripts/test.sh, so running both
# commands builds the tree once.
BUILD_TYPE=RelWithDebInfo

"$ROOT/scripts/deps.sh" demo

for entry in "${DEMOS[@]}"; do
    d="${entry%% *}"
    if [ ! -f "$ROOT/examples/$d.c" ]; then
        echo "demo.sh: examples/$d.c does not exist; fix DEMOS at the top of $0" >&2
        exit 1
    fi
done
for d in "${PY_DEMOS[@]}"; do
    if [ ! -f "$ROOT/examples/python/$d.py" ]; then
        echo "demo.sh: examples/python/$d.py does not exist; fix PY_DEMOS at the top of $0" >&2
        exit 1
    fi
done

traced_found=0
for entry in "${DEMOS[@]}"; do
    [ "$entry" = "$TRACED_DEMO" ] && traced_found=1
done
if [ $traced_found = 0 ]; then
    echo "demo.sh: TRACED_DEMO '$TRACED_DEMO' is not an entry of DEMOS; fix it at the top of $0" >&2
    exit 1
fi

echo "==> configure ($BUILD_TYPE) in $BUILD"
# The Python module is built for Debian's python3 (the one with numpy), whatever
# python3 comes first on PATH; scripts/test.sh configures the same way.
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DSTRATA_SANITIZE= \
    -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
echo "==> build (-j$JOBS)"
cmake --build "$BUILD" -j"$JOBS"

for arg in "$@"; do
    case "$arg" in
    -h | --help)
        echo "scripts/demo.sh [ARGS]: builds strata, runs examples/${DEMOS[0]} ARGS, then the other demos"
        "$BUILD/examples/${DEMOS[0]}" --help
        exit 0
        ;;
    esac
done

rm -f "$TRACE" "$PICTURE" # a picture must never come from an earlier run's trace
first=1
for entry in "${DEMOS[@]}"; do
    read -r -a cmd <<<"$entry" # the program's name, then its fixed arguments
    trace_env=(-u STRATA_TRACE) # one trace: the user's STRATA_TRACE must not reach the others
    if [ "$entry" = "$TRACED_DEMO" ]; then
        trace_env=("STRATA_TRACE=$TRACE")
        echo "==> run examples/$entry (tracing to $TRACE)"
    else
        echo "==> run examples/$entry"
    fi
    echo
    if [ $first = 1 ]; then
        env "${trace_env[@]}" "$BUILD/examples/${cmd[0]}" "${cmd[@]:1}" "$@"
        first=0
    else
        env "${trace_env[@]}" "$BUILD/examples/${cmd[0]}" "${cmd[@]:1}"
    fi
    echo
done

# The traced demo must have written its trace: every build of strata records one.
if [ ! -s "$TRACE" ]; then
    echo "==> trace: examples/$TRACED_DEMO wrote no trace to $TRACE (STRATA_TRACE was set)" >&2
    exit 1
fi
echo "==> trace summary of examples/$TRACED_DEMO (tools/strata-trace summary $TRACE)"
echo
"$ROOT/tools/strata-trace" summary "$TRACE"
echo
echo "==> trace picture (tools/strata-trace draw)"
"$ROOT/tools/strata-trace" draw "$TRACE" -o "$PICTURE" "${DRAW_OPTIONS[@]}"

for d in "${PY_DEMOS[@]}"; do
    echo "==> run examples/python/$d.py"
    echo
    if [ ! -d "$BUILD/python/strata" ]; then
        echo "demo.sh: the Python module was not built ($BUILD/python/strata is missing):" \
            "install python3-dev and python3-numpy (scripts/deps.sh demo) and run this again" >&2
        exit 1
    fi
    PYTHONPATH="$BUILD/python" /usr/bin/python3 "$ROOT/examples/python/$d.py"
    echo
done
