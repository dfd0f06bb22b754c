"""tests/python/test_interrupt.py - Ctrl-C in the Python parent.

Owns: a Python program (run as a subprocess) that waits on a long run with
process-hosted sub workers and gets SIGINT: it must end with
KeyboardInterrupt, leave no child process behind (the Worker's __exit__
closes and reaps them) and no /dev/shm/strata-* name.
Must never: send the signal before the run is known to be executing.
"""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import alive, child_pids, need_strata, shm_names

strata = need_strata()

PROGRAM = textwrap.dedent("""
    import sys, time
    import numpy as np
    import strata

    NTASKS, SECONDS = int(sys.argv[1]), float(sys.argv[2])

    def task(x):
        x[0] += 1
        time.sleep(SECONDS)

    with strata.Worker(sub_workers=2, sub_mode="process", help_while_waiting=False) as w:
        cb = w.register_sub(task)
        a = w.array((2,), np.int64)
        b = w.array((2,), np.int64)
        def orch(o):
            for i in range(NTASKS):
                o.submit_sub(cb, strata.INOUT(a if i % 2 else b))
        r = w.submit(orch)
        while a[0] == 0 or b[0] == 0:  # both children are inside a task
            time.sleep(0.01)
        print("running", flush=True)
        r.wait()
    print("not interrupted", flush=True)
""")


def interrupt(ntasks, seconds, within):
    """Run PROGRAM, SIGINT it once both children run a task; it must have
    ended within `within` seconds (the run would take far longer)."""
    before = shm_names()
    p = subprocess.Popen([sys.executable, "-c", PROGRAM, str(ntasks), str(seconds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(
                             os.path.dirname(os.path.abspath(strata.__file__)))))
    try:
        line = p.stdout.readline()
        assert line.strip() == "running", (line, p.stderr.read() if p.poll() is not None else "")
        children = child_pids(p.pid)
        assert len(children) >= 2, children  # the two sub worker processes
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=within)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert "KeyboardInterrupt" in err, err
    assert "not interrupted" not in out
    assert p.returncode != 0
    left = [c for c in children if alive(c)]
    assert not left, f"child processes left running: {left}"
    assert not (shm_names() - before)


def test_sigint_during_a_long_run_of_short_tasks_ends_cleanly():
    interrupt(ntasks=400, seconds=0.2, within=30)  # the run: 40 s on two sub workers


def test_sigint_during_one_long_task_ends_cleanly():
    # The children run 120 s bodies: only their interruption (the Worker's
    # __exit__ kills a process child running a task) ends it within 10 s.
    interrupt(ntasks=2, seconds=120, within=10)
