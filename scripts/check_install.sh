#!/usr/bin/env bash
# scripts/check_install.sh - install a built tree into a scratch prefix and
# build the README's first program against it through pkg-config.
#
# Owns: the check that the installed headers, libraries and strata.pc work
# from wherever the tree is installed, and that the README's first program
# compiles and prints what the README says.
# Must never: install outside its scratch directory or leave it behind.
#
# Usage: scripts/check_install.sh BUILD_DIR
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:?usage: check_install.sh BUILD_DIR}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

cmake --install "$BUILD" --prefix "$SCRATCH/prefix" >/dev/null
PC_DIR="$(dirname "$(find "$SCRATCH/prefix" -name strata.pc | head -n 1)")"
[ -f "$PC_DIR/strata.pc" ] || { echo "no strata.pc installed" >&2; exit 1; }

# The first C block of the README, under "## A first program".
awk '/^## A first program/ {section = 1} section && /^```c$/ {copy = 1; next}
     copy && /^```$/ {exit} copy {print}' "$ROOT/README.md" >"$SCRATCH/first.c"
[ -s "$SCRATCH/first.c" ] || { echo "README has no first program" >&2; exit 1; }

flags="$(PKG_CONFIG_PATH="$PC_DIR" pkg-config --cflags --libs strata)"
libdir="$(PKG_CONFIG_PATH="$PC_DIR" pkg-config --variable=libdir strata)"
# shellcheck disable=SC2086 # pkg-config output is a list of flags
"${CC:-cc}" -std=c11 -Wall -Wextra -Werror "$SCRATCH/first.c" $flags \
    -Wl,-rpath,"$libdir" -o "$SCRATCH/first"
out="$("$SCRATCH/first")"
echo "installed tree ($PC_DIR/strata.pc): first program printed: $out"
[ "$out" = "STRATA_OK: x[0] = 6" ] || { echo "expected: STRATA_OK: x[0] = 6" >&2; exit 1; }
