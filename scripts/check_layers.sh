#!/usr/bin/env bash
# scripts/check_layers.sh - the layering rule of docs/architecture.md
# ("Layering"), checked over every #include of the library's sources.
#
# Owns: the table of which folder may include from which, and the mapping of
# an include line to the folder it names. Run by CTest (tests/CMakeLists.txt:
# check_layers on the tree, check_layers_fixture on tests/layers/fixture).
# Must never: pass a file it cannot place (a new folder under src/ needs a row
# here and in the docs), or look at tests/, bench/ or examples/ (they may use
# any layer).
#
# Usage: scripts/check_layers.sh [ROOT]   (default: the repository)
# Prints one line per violation, "FILE:LINE: ...", then a count; exit 1 if any.
set -uo pipefail

ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT" || exit 2

# The folder (layer) a repository path belongs to, or "" if it is in none.
folder_of() {
    case "$1" in
    include/strata/*) echo public ;;
    src/util/*) echo util ;;
    src/core/*) echo core ;;
    src/chip/*) echo chip ;;
    src/ipc/*) echo ipc ;;
    src/exec/*) echo exec ;;
    src/mpi/*) echo mpi ;;
    src/backends/sim/*) echo backends/sim ;;
    python/strata/*) echo python ;;
    *) echo "" ;;
    esac
}

# Folders each folder may include from (its own included), lowest layer first.
# core and chip are siblings: neither knows the other.
allowed_from() {
    case "$1" in
    public) echo "public" ;;
    util) echo "public util" ;;
    core) echo "public util core" ;;
    chip) echo "public util chip" ;;
    ipc) echo "public util ipc" ;;
    exec) echo "public util core chip ipc exec" ;;
    mpi) echo "public util core chip ipc exec mpi" ;;
    backends/sim) echo "public util backends/sim" ;;
    python) echo "public python" ;; # the Python module: a client of the public API only
    esac
}

# What exec/ and mpi/ may include from core/: the engine's interface for
# endpoints, never the engine itself (core/engine.h).
EXEC_CORE_HEADERS="core/endpoint.h core/buffer.h"

# Library folders that must hold no test code.
LIBRARY_FOLDERS="util core chip ipc exec mpi"

# Normalise a relative path: drop "./" and resolve "dir/../".
normalise() {
    local p="$1" prev=""
    p="${p//\/.\//\/}"
    while [ "$p" != "$prev" ]; do
        prev="$p"
        p="$(printf '%s' "$p" | sed -E 's#(^|/)[^/.][^/]*/\.\./#\1#')"
    done
    printf '%s' "${p#./}"
}

# The repository path an include names, for the file including it:
# "strata/x.h" is a public header, "core/x.h" (first part a src/ folder) lives
# in src/, anything else is relative to the including file. "" if unresolved.
resolve_include() {
    local name="$1" from="$2" dir candidate
    case "$name" in
    strata/*)
        echo "include/$name"
        return
        ;;
    util/* | core/* | chip/* | ipc/* | exec/* | mpi/* | backends/*)
        echo "src/$name"
        return
        ;;
    esac
    dir="$(dirname "$from")"
    candidate="$(normalise "$dir/$name")"
    if [ -f "$candidate" ]; then
        echo "$candidate"
    fi
}

violations=0
report() {
    echo "$1"
    violations=$((violations + 1))
}

# in_list WORD "SPACE SEPARATED LIST"
in_list() {
    local item items
    read -ra items <<<"$2"
    for item in "${items[@]}"; do
        [ "$item" = "$1" ] && return 0
    done
    return 1
}

check_include() {
    local file="$1" line="$2" name="$3" from_folder="$4" target to_folder
    target="$(resolve_include "$name" "$file")"
    if [ -z "$target" ]; then
        report "$file:$line: includes $name: not found next to the file, and not a src/ or public header"
        return
    fi
    to_folder="$(folder_of "$target")"
    if [ -z "$to_folder" ]; then
        report "$file:$line: includes $name: $target is in no layer"
        return
    fi
    if ! in_list "$to_folder" "$(allowed_from "$from_folder")"; then
        report "$file:$line: includes $name: $from_folder may not include from $to_folder"
        return
    fi
    if { [ "$from_folder" = exec ] || [ "$from_folder" = mpi ]; } && [ "$to_folder" = core ] &&
        ! in_list "${target#src/}" "$EXEC_CORE_HEADERS"; then
        report "$file:$line: includes $name: $from_folder may include from core only $EXEC_CORE_HEADERS"
    fi
}

nfiles=0
while IFS= read -r file; do
    nfiles=$((nfiles + 1))
    from_folder="$(folder_of "$file")"
    if [ -z "$from_folder" ]; then
        report "$file: in no layer (add its folder to scripts/check_layers.sh and docs/architecture.md)"
        continue
    fi
    base="$(basename "$file")"
    if in_list "$from_folder" "$LIBRARY_FOLDERS" && [ "${base#test_}" != "$base" ]; then
        report "$file: test code in the library (tests/support/ is its place)"
    fi
    # Quoted includes, and bracketed ones naming a public or src/ header.
    while IFS=: read -r line name; do
        check_include "$file" "$line" "$name" "$from_folder"
    done < <(awk '
        /^[ \t]*#[ \t]*include[ \t]*"/ {
            s = $0; sub(/^[^"]*"/, "", s); sub(/".*/, "", s); print FNR ":" s; next
        }
        /^[ \t]*#[ \t]*include[ \t]*<(strata|util|core|chip|ipc|exec|mpi|backends)\// {
            s = $0; sub(/^[^<]*</, "", s); sub(/>.*/, "", s); print FNR ":" s
        }' "$file")
done < <(find src include python/strata -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null | LC_ALL=C sort)

if [ "$nfiles" -eq 0 ]; then # a wrong root must not read as a clean tree
    echo "layers: no sources under $(pwd)/src or include" >&2
    exit 2
fi
if [ "$violations" -gt 0 ]; then
    echo "$violations layering violation(s) (rules: docs/architecture.md, Layering)"
    exit 1
fi
echo "layers: OK ($nfiles files)"
