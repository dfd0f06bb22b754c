#!/usr/bin/env bash
# scripts/demo.sh - build strata and run its main demo on the built-in default
# configuration (sim chips, thread-hosted workers, no services).
#
# Owns: the one command a new user runs to see strata work.
# Must never: need anything beyond scripts/deps.sh's packages, or write outside
# the build directory.
#
# Usage: scripts/demo.sh [args passed to the demo program]
# Environment: STRATA_BUILD_PREFIX (default <repo>/build), STRATA_JOBS (default 2).
set -euo pipefail

# The demo program: examples/<DEMO>.c, built as <build>/examples/<DEMO>.
DEMO=demo

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${STRATA_BUILD_PREFIX:-$ROOT/build}"
JOBS="${STRATA_JOBS:-2}"
# Same build type as the first stage of scripts/test.sh, so running both
# commands builds the tree once.
BUILD_TYPE=RelWithDebInfo

"$ROOT/scripts/deps.sh"

if [ ! -f "$ROOT/examples/$DEMO.c" ]; then
    echo "demo.sh: examples/$DEMO.c does not exist; set DEMO at the top of $0" >&2
    exit 1
fi

echo "==> configure ($BUILD_TYPE) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DSTRATA_SANITIZE= >/dev/null
echo "==> build (-j$JOBS)"
cmake --build "$BUILD" -j"$JOBS"

echo "==> run examples/$DEMO"
echo
exec "$BUILD/examples/$DEMO" "$@"
