#!/usr/bin/env bash
# scripts/deps.sh - make sure the Debian/Ubuntu packages a command needs are present.
#
# Owns: the list of apt packages each command needs and the decision to install them.
# Must never: install anything unless running as root, touch the source tree, or
# succeed while a required package is missing.
#
# Usage: scripts/deps.sh [demo|test] [--check] [--with-optional]
#   demo             what scripts/demo.sh needs: the build toolchain, Python's
#                    headers and numpy, and matplotlib for the trace picture
#   test             what scripts/test.sh needs (the default): those plus cmocka,
#                    StarPU, lcov, clang and clang's libFuzzer runtime, pytest, Dask,
#                    Open MPI
#   --check          only report; never install (exit 1 if something required is missing)
#   --with-optional  also install the optional packages (clang-format) when root
#
# As root, missing packages are installed with apt-get (non-interactive).
# Otherwise the script prints exactly which packages are missing and the command
# that installs them, and exits 1.
set -euo pipefail

# build-essential brings gcc, make and libc headers; libgomp (the OpenMP anchor
# of the benchmarks) comes with gcc. libxxhash-dev: the library itself is built
# with xxHash's header (the callable digest a child process resolves,
# src/util/digest.c; compiled in, nothing extra to link).
DEMO_PACKAGES=(build-essential cmake pkg-config libxxhash-dev)
# python3-matplotlib (pulls in python3): tools/strata-trace draws the demo's
# trace picture with it, and the test test_strata_trace draws too; Debian's
# package, for the tool's /usr/bin/python3.
DEMO_PACKAGES+=(python3-matplotlib)
# python3-dev + python3-numpy: the Python module (python/, built with the tree
# against Debian's /usr/bin/python3) and the demo's Python example.
DEMO_PACKAGES+=(python3-dev python3-numpy)
# libcmocka-dev: unit tests. libstarpu-dev: the StarPU anchor of the benchmark
# smoke stage. lcov: the coverage stage. clang + libclang-rt-dev: the libFuzzer
# target (libclang-rt-dev is Debian's name for the default clang's compiler-rt,
# which holds libclang_rt.fuzzer-x86_64.a; clang itself does not pull it in).
TEST_PACKAGES=("${DEMO_PACKAGES[@]}" libcmocka-dev libstarpu-dev lcov clang libclang-rt-dev)
# python3-pytest: the Python suite (tests/python); python3-dask: the Dask
# anchor of bench/bench_python.py (the ProcessPoolExecutor one is stdlib).
TEST_PACKAGES+=(python3-pytest python3-dask)
# libopenmpi-dev + openmpi-bin: multi-host L4 Workers (src/mpi/) and their
# tests under mpirun (label mpi); without them those tests report "skipped".
TEST_PACKAGES+=(libopenmpi-dev openmpi-bin)
# clang-format only matters to contributors (the repo's .clang-format).
OPTIONAL_PACKAGES=(clang-format)

purpose="test"
check_only=0
with_optional=0
for arg in "$@"; do
    case "$arg" in
    demo | test) purpose="$arg" ;;
    --check) check_only=1 ;;
    --with-optional) with_optional=1 ;;
    -h | --help)
        # The header comment, up to the first line that is not a comment.
        awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
        exit 0
        ;;
    *)
        echo "deps.sh: unknown argument '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done

if [ "$purpose" = demo ]; then
    REQUIRED_PACKAGES=("${DEMO_PACKAGES[@]}")
else
    REQUIRED_PACKAGES=("${TEST_PACKAGES[@]}")
fi

say() { printf 'deps (%s): %s\n' "$purpose" "$*"; }

# "dpkg -s" also succeeds for removed-but-configured packages, so the status
# must say "install ok installed". (Not "dpkg -s | grep -q": under pipefail,
# grep quitting at the first match can fail the pipeline through SIGPIPE.)
package_installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing_among() {
    local p
    for p in "$@"; do
        package_installed "$p" || printf '%s ' "$p"
    done
}

# Without dpkg we cannot name packages; check the tools and libraries directly.
check_without_dpkg() {
    local bad=0 tool tools=(cc make cmake pkg-config)
    say "dpkg not found: this script installs packages on Debian/Ubuntu only."
    say "checking the tools directly instead."
    [ "$purpose" = demo ] || tools+=(lcov genhtml clang)
    for tool in "${tools[@]}"; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            say "missing tool: $tool"
            bad=1
        fi
    done
    /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 ||
        { say "missing: matplotlib for /usr/bin/python3 (Debian: python3-matplotlib)"; bad=1; }
    if [ "$purpose" = test ] && command -v pkg-config >/dev/null 2>&1; then
        pkg-config --exists cmocka || { say "missing library: cmocka (pkg-config cmocka)"; bad=1; }
        pkg-config --exists starpu-1.3 || # the module bench/CMakeLists.txt looks for
            { say "missing library: StarPU (pkg-config starpu-1.3)"; bad=1; }
    fi
    local mod mods="numpy"
    [ "$purpose" = demo ] || mods="numpy pytest dask"
    for mod in $mods; do
        if ! /usr/bin/python3 -c "import $mod" 2>/dev/null; then
            say "missing Python module for /usr/bin/python3: $mod"
            bad=1
        fi
    done
    if [ "$purpose" = test ] && command -v clang >/dev/null 2>&1; then
        # clang prints the bare name back when it has no such file.
        case "$(clang -print-file-name="libclang_rt.fuzzer-$(uname -m).a")" in
        /*) ;;
        *)
            say "missing library: libclang_rt.fuzzer-$(uname -m).a (clang's libFuzzer runtime)"
            bad=1
            ;;
        esac
    fi
    if [ "$bad" -ne 0 ]; then
        say "install the equivalents of: ${REQUIRED_PACKAGES[*]}"
        exit 1
    fi
    say "all required tools found."
    exit 0
}

# apt-get install needs package lists; a fresh container has none, and stale
# ones name versions the mirror no longer has.
apt_install() {
    say "installing: $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "$@"
}

command -v dpkg >/dev/null 2>&1 || check_without_dpkg

read -r -a missing <<<"$(missing_among "${REQUIRED_PACKAGES[@]}")"
read -r -a missing_optional <<<"$(missing_among "${OPTIONAL_PACKAGES[@]}")"

to_install=("${missing[@]}")
if [ "$with_optional" -eq 1 ]; then
    to_install+=("${missing_optional[@]}")
fi

if [ "${#to_install[@]}" -gt 0 ]; then
    if [ "$check_only" -eq 0 ] && [ "$(id -u)" -eq 0 ]; then
        apt_install "${to_install[@]}"
        read -r -a missing <<<"$(missing_among "${REQUIRED_PACKAGES[@]}")"
        read -r -a missing_optional <<<"$(missing_among "${OPTIONAL_PACKAGES[@]}")"
        if [ "${#missing[@]}" -gt 0 ]; then
            say "still missing after apt-get install: ${missing[*]}"
            exit 1
        fi
    elif [ "${#missing[@]}" -gt 0 ]; then
        say "missing required packages: ${missing[*]}"
        say "install them with:"
        echo
        echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}"
        echo
        say "(or run this script as root and it installs them itself)"
        exit 1
    fi
fi

if [ "${#missing_optional[@]}" -gt 0 ]; then
    say "optional, not installed: ${missing_optional[*]} (only needed to format code;" \
        "apt-get install -y ${missing_optional[*]})"
fi
say "all required packages present: ${REQUIRED_PACKAGES[*]}"
