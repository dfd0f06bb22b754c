"""tests/python/conftest.py - what every Python test of strata shares.

Owns: importing the module (skip when it was not built, fail when the build
said it would be: STRATA_PYTHON_REQUIRED=1, set by the CTest registration),
the shared-memory leak check around every test, and small helpers.
Must never: build the module, or hide an import error behind a skip when
the module was expected.
"""
import os
import pathlib
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
REQUIRED = os.environ.get("STRATA_PYTHON_REQUIRED") == "1"

try:
    import strata
    IMPORT_ERROR = None
except ImportError as e:  # the module was not built, or refuses to load
    strata = None
    IMPORT_ERROR = e


def pytest_configure(config):
    if IMPORT_ERROR is not None and REQUIRED:
        # The build was configured with the Python module: a missing module is
        # a broken build, never a skip.
        raise pytest.UsageError(
            f"import strata failed although STRATA_PYTHON_REQUIRED=1: {IMPORT_ERROR!r}"
            f" (PYTHONPATH={os.environ.get('PYTHONPATH', '')!r}); the build was configured with"
            " STRATA_BUILD_PYTHON=ON: install python3-dev and python3-numpy (scripts/deps.sh)"
            " and rebuild, or configure with -DSTRATA_BUILD_PYTHON=OFF")


def need_strata():
    """The strata module, or a skip of the calling test module saying why."""
    if IMPORT_ERROR is not None:
        pytest.skip(f"the strata module is not built or not on PYTHONPATH ({IMPORT_ERROR}); "
                    "build with -DSTRATA_BUILD_PYTHON=ON and set PYTHONPATH=<build>/python",
                    allow_module_level=True)
    return strata


def shm_names():
    """strata's shared-memory names (ipc/shm_region.h: /dev/shm/strata-*)."""
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("strata-")}
    except FileNotFoundError:
        return set()


@pytest.fixture(autouse=True)
def no_shm_left():
    """Names are unlinked right after they are made: one that outlives a test leaks."""
    before = shm_names()
    yield
    left = shm_names() - before
    if left:  # another test program may be between making a name and unlinking it
        time.sleep(0.2)
        left &= shm_names()
    assert not left, f"left in /dev/shm: {sorted(left)}"


def child_pids(pid):
    """Pids of the live processes whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(d))
    return out


def alive(pid):
    """Whether pid names a process that has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
