"""setup.py - the build of the Python module strata with setuptools alone.

Owns: compiling python/strata/_strata*.c together with the library's
sources (src/util, core, exec, chip, ipc) into strata/_strata, and the sim
backend (libstrata_sim.so) and its test kernel module next to it, where the
library looks for "sim" (next to itself). Works offline: no downloads, no
CMake. The metadata is in pyproject.toml.
Must never: build anything but what `import strata` loads.
"""

import glob
import os

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def rel(*parts):
    return os.path.relpath(os.path.join(HERE, *parts), HERE)


def sources(*folders):
    out = []
    for f in folders:
        out += sorted(glob.glob(os.path.join(rel("src", f), "*.c")))
    return out


COMMON = dict(
    include_dirs=[rel("include"), rel("src")],
    define_macros=[("_GNU_SOURCE", None)],
    extra_compile_args=["-std=c11", "-fvisibility=hidden", "-Wno-unused-parameter"],
    libraries=["pthread", "dl", "m"],
)

# Plain shared objects (no Python init function), named as the loader wants.
PLAIN = {"strata.libstrata_sim": "libstrata_sim.so",
         "strata.libstrata_test_kernels": "libstrata_test_kernels.so"}


class BuildExt(build_ext):
    def get_ext_filename(self, fullname):
        # distutils passes the last component of the name (or the whole name)
        for name, filename in PLAIN.items():
            if fullname in (name, name.rsplit(".", 1)[1]):
                return os.path.join(*fullname.split(".")[:-1], filename)
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        return [] if ext.name in PLAIN else super().get_export_symbols(ext)


setup(
    cmdclass={"build_ext": BuildExt},
    # not build/: that is the CMake build directory of the README
    options={"build": {"build_base": "build-setuptools"}},
    ext_modules=[
        Extension(
            "strata._strata",
            sources=sorted(glob.glob(rel("python", "strata", "_strata*.c")))
            + sources("util", "core", "exec", "chip", "ipc"),
            depends=glob.glob(rel("python", "strata", "*.h")),
            **{**COMMON, "include_dirs": COMMON["include_dirs"] + [numpy.get_include()]},
        ),
        Extension(
            "strata.libstrata_sim",
            sources=sorted(glob.glob(rel("src", "backends", "sim", "*.c")))
            + [rel("src", "util", n) for n in ("alloc.c", "growable.c", "message.c")],
            **COMMON,
        ),
        Extension(
            "strata.libstrata_test_kernels",
            sources=[rel("src", "backends", "sim", "kernels", "test_kernels.c")],
            **COMMON,
        ),
    ],
)
