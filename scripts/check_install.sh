#!/usr/bin/env bash
# scripts/check_install.sh - run the README's "A first program" commands exactly
# as written, against a built tree, in a scratch directory.
#
# Owns: the check that a user who follows the README gets a working program:
# the first program (the C block after "<!-- check_install: first.c -->") built
# in the tree (the shell block after "<!-- check_install: in-tree -->") and
# against an installed strata through pkg-config (the block after
# "<!-- check_install: installed -->"), each printing what the README says.
# Must never: edit the commands it runs (they are the README's, so the two
# cannot drift), install outside its scratch directory, or leave it behind.
#
# The blocks run from a scratch copy of the repository root: first.c, and
# build/ and include/ as links to BUILD_DIR and the tree's headers. HOME is the
# scratch directory, so an install under $HOME stays in it; a block that
# installs anywhere else is refused before it runs.
#
# Usage: scripts/check_install.sh BUILD_DIR
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:?usage: check_install.sh BUILD_DIR}" && pwd)"
README="$ROOT/README.md"
EXPECTED="STRATA_OK: x[0] = 6"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

fail() {
    echo "check_install: $*" >&2
    exit 1
}

# readme_block NAME: the fenced block that follows "<!-- check_install: NAME -->".
readme_block() {
    awk -v marker="<!-- check_install: $1 -->" '
        $0 == marker {found = 1; next}
        found && !copying && /^```/ {copying = 1; next}
        copying && /^```$/ {exit}
        copying {print}' "$README"
}

# run_block NAME: runs the README's shell block NAME in the scratch repository
# root, echoing each command, and checks the last line the block printed.
run_block() {
    local name="$1" script="$SCRATCH/$1.sh" out
    readme_block "$name" >"$script"
    [ -s "$script" ] || fail "README.md has no block after <!-- check_install: $name -->"
    local installs
    installs="$(grep -Ew install "$script" || true)"
    # shellcheck disable=SC2016 # the README's text, not this shell's $HOME
    if [ -n "$installs" ] && grep -Evq -- '--prefix "?(\$HOME|~)/' <<<"$installs"; then
        fail "the '$name' block installs, but not under \$HOME: refusing to run it"
    fi
    echo "--> README block '$name':"
    sed 's/^/    /' "$script"
    rm -f "$SCRATCH/repo/first"
    out="$(cd "$SCRATCH/repo" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH HOME="$SCRATCH/home" \
        bash -euo pipefail "$script")" || fail "the README's '$name' commands failed (above)"
    printf '%s\n' "$out" | sed 's/^/    | /'
    [ "$(printf '%s\n' "$out" | tail -n 1)" = "$EXPECTED" ] ||
        fail "the '$name' block's program did not print: $EXPECTED"
}

mkdir -p "$SCRATCH/repo" "$SCRATCH/home"
ln -s "$BUILD" "$SCRATCH/repo/build"
ln -s "$ROOT/include" "$SCRATCH/repo/include"

readme_block first.c >"$SCRATCH/repo/first.c"
[ -s "$SCRATCH/repo/first.c" ] || fail "README.md has no block after <!-- check_install: first.c -->"
# The README's commands are lenient; the program it teaches must still be
# clean C11.
"${CC:-cc}" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$ROOT/include" "$SCRATCH/repo/first.c" ||
    fail "the README's first program does not compile cleanly as C11"

run_block in-tree
run_block installed
# The installed route is only checked if the program really ran on the
# scratch install's shared library, not a static or system-wide one.
# (ldd's output is kept first: with pipefail, grep -q quitting early would
# turn ldd's SIGPIPE into a failure.)
libs="$(ldd "$SCRATCH/repo/first")"
grep -q "libstrata\.so.* => $SCRATCH/home/" <<<"$libs" ||
    fail "the 'installed' block's program does not load libstrata.so from the install:
$libs"
echo "check_install: the README's first program builds and runs in the tree and installed: $EXPECTED"
