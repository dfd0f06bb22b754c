"""tests/python/test_docs.py - every example of docs/python.md runs.

Owns: extracting each ```python block of the Python guide and running it as
a program of its own (a fresh interpreter, from an empty directory), which
must exit 0; blocks check their own results with assert.
Must never: skip a block, or run blocks in one process (a block's Worker
must not be another's).
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, need_strata

strata = need_strata()

GUIDE = ROOT / "docs" / "python.md"


def python_blocks():
    text = GUIDE.read_text()
    blocks = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        blocks.append(pytest.param(m.group(1), id=f"line{line}"))
    return blocks


def test_the_guide_has_examples():
    assert len(python_blocks()) >= 5


@pytest.mark.parametrize("code", python_blocks())
def test_guide_example_runs(code, tmp_path):
    # The block runs elsewhere: it finds the module this test imported.
    here = os.path.dirname(os.path.dirname(os.path.abspath(strata.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env=env)
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
