"""tests/python/test_smoke.py - the module's own smoke test: import, a
thread- and a process-hosted run writing an array in place, a function
registered after a process Worker started, an orchestration function's own
exception, a failing sub function's traceback in the run's error, a bad
argument refused before submit, a sim chip running a Python program, the
stubs declaring every public name, and Ctrl-C in a parent leaving no child
or shared memory behind.
Run with /usr/bin/python3 -m pytest (or as a script: unittest). The full
suite is the rest of tests/python/.
"""

import ast
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

    def test_registered_after_a_process_worker_started(self):
        with strata.Worker(sub_workers=1, sub_mode="process") as w:
            a = w.array((8,), np.int64)
            w.init()

            def late(x, k):
                x += k

            f = w.register_sub(late)
            w.run(lambda o: o.submit_sub(f, strata.INOUT(a), 5))
            self.assertEqual(list(a), [5] * 8)

    def test_orchestration_exception_reaches_the_caller(self):
        with strata.Worker(sub_workers=1) as w:
            def orch(o):
                raise KeyError("from orch")

            with self.assertRaises(KeyError):
                w.run(orch)
            w.run(lambda o: None)

    def test_runtime_memory_in_a_scope(self):
        with strata.Worker(sub_workers=2, sub_mode="process") as w:
            fill = w.register_sub(lambda t, v: t.fill(v), name="fill")
            add = w.register_sub(lambda dst, src: np.add(dst, src, out=dst), name="add")
            a = w.array((64,), np.float64)

            def orch(o):
                with o.scope():
                    t = o.alloc((64,), np.float64)
                    o.submit_sub(fill, strata.OUT(t), 2.5)
                    o.submit_sub(add, strata.INOUT(a), strata.IN(t))

            w.run(orch)
            self.assertTrue(np.all(a == 2.5))

    def test_sim_chip_runs_a_python_program(self):
        if not strata.SIM_TEST_KERNELS:
            self.skipTest("no sim test kernel module")
        n = 256
        with strata.Worker(sub_workers=1) as w:
            chip = w.add_chip(kernel_module=strata.SIM_TEST_KERNELS)

            @w.chip_program
            def vadd(ctx, a, b, c, count):
                ctx.launch("vector_add", 2, a, b, c, count)

            bufs = [w.chip_malloc(chip, n * 4) for _ in range(3)]
            x = np.arange(n, dtype=np.float32)
            w.chip_copy_to(chip, bufs[0], x)
            w.chip_copy_to(chip, bufs[1], x)
            ta, tb, tc = (w.chip_tensor(b, (n,), np.float32) for b in bufs)
            w.run(lambda o: o.submit_next_level(vadd, strata.IN(ta), strata.IN(tb),
                                                strata.OUT(tc), strata.u64(n), worker=chip))
            out = np.zeros(n, np.float32)
            w.chip_copy_from(chip, out, bufs[2])
            self.assertTrue(np.all(out == 2 * x))
            with self.assertRaises(ValueError):
                w.chip_copy_from(chip, np.zeros((n, 2), np.float32)[:, 0], bufs[2])

    def test_stubs_declare_every_public_name(self):
        stub = os.path.join(os.path.dirname(strata.__file__), "__init__.pyi")
        tree = ast.parse(open(stub).read())
        declared = set()
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                declared.add(node.name)
            elif isinstance(node, ast.AnnAssign):
                declared.add(node.target.id)
        self.assertEqual(sorted(set(strata.__all__) - declared), [])

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
