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

from conftest import alive, child_pids, need_strata, shm_names

need_strata()

PROGRAM = textwrap.dedent("""
    import sys, time
    import numpy as np
    import strata

    def long_task(x):
        x[0] = 1
        time.sleep(120)

    with strata.Worker(sub_workers=2, sub_mode="process", help_while_waiting=False) as w:
        cb = w.register_sub(long_task)
        a = w.array((2,), np.int64)
        b = w.array((2,), np.int64)
        def orch(o):
            o.submit_sub(cb, strata.INOUT(a))
            o.submit_sub(cb, strata.INOUT(b))
        r = w.submit(orch)
        while a[0] == 0 or b[0] == 0:  # both children are inside the task
            time.sleep(0.01)
        print("running", flush=True)
        r.wait()
    print("not interrupted", flush=True)
""")


def test_sigint_while_waiting_ends_cleanly():
    before = shm_names()
    p = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        line = p.stdout.readline()
        assert line.strip() == "running", (line, p.stderr.read() if p.poll() is not None else "")
        children = child_pids(p.pid)
        assert len(children) >= 2, children  # the two sub worker processes
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "KeyboardInterrupt" in err, err
    assert "not interrupted" not in out
    assert p.returncode != 0
    left = [c for c in children if alive(c)]
    assert not left, f"child processes left running: {left}"
    assert not (shm_names() - before)
