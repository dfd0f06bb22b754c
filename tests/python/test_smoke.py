"""tests/python/test_smoke.py - the module's own smoke test: import, a
thread- and a process-hosted run writing an array in place, a failing sub
function's traceback in the run's error, a bad argument refused before
submit, and Ctrl-C in a parent leaving no child or shared memory behind.
Run with /usr/bin/python3 -m pytest (or as a script: unittest). The full
suite is the rest of tests/python/.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

import numpy as np

import strata


def _shm():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith("strata-"))


class Smoke(unittest.TestCase):
    def run_mode(self, mode):
        with strata.Worker(sub_workers=2, sub_mode=mode) as w:
            @w.sub
            def scale(x, k):
                x *= k

            @w.sub
            def whoami(out):
                out[0] = os.getpid()

            a = w.array((1024,), np.float32)
            a[:] = 1
            pids = w.array((1,), np.int64)

            def orch(o):
                o.submit_sub(scale, strata.INOUT(a), strata.f32(2.0))
                o.submit_sub(scale, strata.INOUT(a[0:512]), 3.0)
                o.submit_sub(whoami, strata.OUT(pids))

            w.run(orch)
            self.assertTrue(np.all(a[:512] == 6.0))
            self.assertTrue(np.all(a[512:] == 2.0))
            return int(pids[0])

    def test_thread_run_writes_in_place(self):
        self.assertEqual(self.run_mode("thread"), os.getpid())

    def test_process_run_writes_in_place_from_a_child(self):
        pid = self.run_mode("process")
        self.assertNotEqual(pid, os.getpid())
        self.assertNotEqual(pid, 0)

    def test_exception_fails_the_task_with_its_traceback(self):
        with strata.Worker(sub_workers=1, sub_mode="process") as w:
            @w.sub
            def boom(x):
                raise RuntimeError("kaboom 42")

            a = w.array((4,), np.float64)
            with self.assertRaises(strata.TaskFailed) as cm:
                w.run(lambda o: o.submit_sub(boom, strata.IN(a)))
            self.assertIn("RuntimeError: kaboom 42", str(cm.exception))
            self.assertIn("Traceback", str(cm.exception))
            w.run(lambda o: None)  # the worker keeps working

    def test_untagged_array_is_a_type_error(self):
        with strata.Worker(sub_workers=1) as w:
            f = w.register_sub(lambda x: None, name="noop")
            a = w.array((4,), np.float64)
            with self.assertRaises(TypeError):
                w.run(lambda o: o.submit_sub(f, a))
            with self.assertRaises(ValueError):
                w.run(lambda o: o.submit_sub(f, strata.IN(np.zeros(4))))

    def test_ctrl_c_leaves_no_child_and_no_shm(self):
        before = _shm()
        script = textwrap.dedent("""
            import sys, time, numpy as np, strata
            with strata.Worker(sub_workers=2, sub_mode="process") as w:
                @w.sub
                def slow(x):
                    time.sleep(0.3)
                a = w.array((8,), np.float64)
                def orch(o):
                    for _ in range(200):
                        o.submit_sub(slow, strata.INOUT(a))
                r = w.submit(orch)
                print("waiting", flush=True)
                try:
                    r.wait()
                except KeyboardInterrupt:
                    print("interrupted", flush=True)
                    raise
        """)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
        self.assertEqual(p.stdout.readline().strip(), "waiting")
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        self.assertIn("interrupted", out)
        self.assertIn("KeyboardInterrupt", err)
        # no process of the session is left (the children are reaped)
        left = subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True)
        self.assertEqual(left.stdout.strip(), "")
        self.assertEqual(_shm(), before)


if __name__ == "__main__":
    unittest.main()
