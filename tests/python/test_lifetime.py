"""tests/python/test_lifetime.py - a Worker's lifetime against threads and forks.

Owns: close() racing calls that run with the GIL released on other threads
(the C worker outlives every call in progress; calls entered after close
raise strata.Closed), Workers inherited by a fork the program makes itself
(os.fork, multiprocessing's fork context: the child disowns them and never
touches the parent's), the thread states of strata threads that called
Python (released when those threads exit), Run.wait's timeout argument, and
a submit blocked on a full window letting other Python threads run.
Must never: measure time, or leave a child process behind.
"""
import math
import multiprocessing
import os
import threading

import numpy as np
import pytest

from conftest import child_pids, need_strata

strata = need_strata()

MODES = ["thread", "process"]


def fill(out, v):
    out[:] = v


def nothing():
    pass


def wait_on(path):
    """Blocks until path exists (a file the test creates): a task that
    holds its sub worker until the test lets it go, across processes."""
    import time
    while not os.path.exists(path):
        time.sleep(0.005)


# ---- close racing calls on other threads ------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_close_while_another_thread_waits_on_a_run(mode, tmp_path):
    gate = str(tmp_path / "gate")
    w = strata.Worker(sub_workers=2, sub_mode=mode)
    hold = w.register_sub(wait_on)
    out = w.array(4, np.float64)
    f = w.register_sub(fill)

    def orch(o):
        o.submit_sub(hold, strata.payload(gate.encode()))
        o.submit_sub(f, strata.OUT(out), strata.f64(7.0))

    errors = []

    def wait_thread(run):
        try:
            run.wait()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    run = w.submit(orch)
    t = threading.Thread(target=wait_thread, args=(run,))
    t.start()
    closer = threading.Thread(target=w.close)
    closer.start()  # close waits for the run, which waits for the gate
    open(gate, "w").close()
    closer.join()
    t.join()
    assert errors == []
    assert w.closed
    assert (out == 7.0).all()
    with pytest.raises(strata.Closed):
        w.submit(orch)
    with pytest.raises(strata.Closed):
        w.register_sub(nothing)


def test_close_while_another_thread_builds_a_run(tmp_path):
    w = strata.Worker(sub_workers=1, sub_mode="process")
    f = w.register_sub(fill)
    out = w.array(1, np.float64)
    inside = threading.Event()
    release = threading.Event()
    errors = []

    def orch(o):
        inside.set()
        release.wait()  # close() is called meanwhile, on the main thread
        o.submit_sub(f, strata.OUT(out), strata.f64(3.0))

    def runner():
        try:
            w.run(orch)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=runner)
    t.start()
    inside.wait()
    threading.Timer(0.2, release.set).start()
    w.close()  # returns once the run being built has finished
    t.join()
    assert errors == []
    assert out[0] == 3.0
    with pytest.raises(strata.Closed):
        w.run(orch)


def test_a_closed_worker_refuses_calls_with_a_clear_error():
    w = strata.Worker(sub_workers=1)
    w.close()
    with pytest.raises(strata.Closed, match="closed"):
        w.array(4)
    with pytest.raises(strata.Closed, match="closed"):
        w.init()


# ---- forks the program makes itself -----------------------------------------


def _use_in_child(w, f, out):
    """What a forked child does with the parent's Worker: every call raises
    (the Worker belongs to the parent), and closing it is a no-op."""
    try:
        w.run(lambda o: o.submit_sub(f, strata.OUT(out), strata.f64(-1.0)))
    except strata.StateError as e:
        assert "fork" in str(e)
    else:
        os._exit(3)
    w.close()
    # a Worker of the child's own works
    with strata.Worker(sub_workers=1, sub_mode="process") as mine:
        g = mine.register_sub(fill)
        a = mine.array(2, np.float64)
        mine.run(lambda o: o.submit_sub(g, strata.OUT(a), strata.f64(5.0)))
        if not (a == 5.0).all():
            os._exit(4)


def reap(pid, within=60.0):
    """The exit code of child pid; kills it (and fails) if it has not
    exited within `within` seconds (a child stuck on the parent's Worker)."""
    import time
    end = time.monotonic() + within
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child {pid} did not exit within {within} s")


@pytest.mark.parametrize("mode", MODES)
def test_os_fork_child_leaves_the_parents_worker_alone(mode):
    w = strata.Worker(sub_workers=2, sub_mode=mode)
    f = w.register_sub(fill)
    out = w.array(8, np.float64)
    w.run(lambda o: o.submit_sub(f, strata.OUT(out), strata.f64(1.0)))
    children = set(child_pids(os.getpid()))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _use_in_child(w, f, out)
            import atexit
            atexit._run_exitfuncs()  # what a normal exit runs: closes every live Worker
            code = 0
        finally:
            os._exit(code)
    assert reap(pid) == 0
    # the parent's children are all alive and the Worker works
    assert children <= set(child_pids(os.getpid()))
    assert (out == 1.0).all()
    w.run(lambda o: o.submit_sub(f, strata.OUT(out), strata.f64(2.0)))
    assert (out == 2.0).all()
    g = w.register_sub(nothing)  # registered after the fork: sent to the children
    w.run(lambda o: o.submit_sub(g))
    w.close()


def _mp_child(w, f, out, q):
    try:
        _use_in_child(w, f, out)
        q.put("ok")
    except BaseException as e:  # noqa: BLE001
        q.put(repr(e))


@pytest.mark.parametrize("mode", MODES)
def test_multiprocessing_fork_child_leaves_the_parents_worker_alone(mode):
    ctx = multiprocessing.get_context("fork")
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        f = w.register_sub(fill)
        out = w.array(8, np.float64)
        w.run(lambda o: o.submit_sub(f, strata.OUT(out), strata.f64(1.0)))
        q = ctx.Queue()
        p = ctx.Process(target=_mp_child, args=(w, f, out, q))
        p.start()
        assert q.get(timeout=60) == "ok"
        p.join()
        assert p.exitcode == 0
        w.run(lambda o: o.submit_sub(f, strata.OUT(out), strata.f64(2.0)))
        assert (out == 2.0).all()


def spoil(out, v):
    out[:] = -v


def test_a_forked_childs_registrations_and_aborts_never_reach_the_parent():
    """The tables a process child reads functions and abort flags from are
    the parent's: a fork's own Workers write theirs, never the parent's."""
    w = strata.Worker(sub_workers=1, sub_mode="process")
    out = w.array(2, np.float64)
    w.init()
    r, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.read(r, 1)  # the parent has registered fill (not yet sent to its child)
            with strata.Worker(sub_workers=1, sub_mode="process") as mine:
                mine.init()
                mine.register_sub(spoil)  # the index the parent's fill has
                mine._abort()  # the slot the parent's next Worker takes
            w._abort()  # the parent's own Worker: disowned here
            code = 0
        finally:
            os._exit(code)
    g = w.register_sub(fill)
    os.write(wr, b"x")
    assert reap(pid) == 0
    w.run(lambda o: o.submit_sub(g, strata.OUT(out), strata.f64(4.0)))
    assert (out == 4.0).all()
    w.close()
    with strata.Worker(sub_workers=1, sub_mode="process") as w2:
        h = w2.register_sub(fill)
        a = w2.array(2, np.float64)
        w2.run(lambda o: o.submit_sub(h, strata.OUT(a), strata.f64(6.0)))
        assert (a == 6.0).all()


# ---- thread states of strata threads ----------------------------------------


def test_thread_hosted_subs_release_their_thread_states():
    def cycle():
        with strata.Worker(sub_workers=2, sub_mode="thread") as w:
            f = w.register_sub(fill)
            out = w.array(16, np.float64)

            def orch(o):
                for _ in range(8):
                    o.submit_sub(f, strata.OUT(out), strata.f64(1.0))
            w.submit(orch).wait()

    cycle()  # the first Worker may create what later ones reuse
    before = strata._strata._thread_states()
    for _ in range(10):
        cycle()
    assert strata._strata._thread_states() == before


# ---- Run.wait's timeout -----------------------------------------------------


@pytest.mark.parametrize("timeout", [math.inf, 1e300, 2.0**64])
def test_wait_with_an_infinite_or_huge_timeout_waits_forever(timeout):
    with strata.Worker(sub_workers=1) as w:
        f = w.register_sub(fill)
        out = w.array(2, np.float64)
        w.submit(lambda o: o.submit_sub(f, strata.OUT(out), strata.f64(9.0))).wait(timeout)
        assert (out == 9.0).all()


@pytest.mark.parametrize("timeout", [math.nan, -1.0, -math.inf])
def test_wait_with_a_nan_or_negative_timeout_raises(timeout):
    with strata.Worker(sub_workers=1) as w:
        f = w.register_sub(fill)
        out = w.array(2, np.float64)
        run = w.submit(lambda o: o.submit_sub(f, strata.OUT(out), strata.f64(9.0)))
        with pytest.raises(ValueError, match="timeout"):
            run.wait(timeout)
        run.wait()


def test_wait_with_zero_timeout_polls(tmp_path):
    gate = str(tmp_path / "gate")
    with strata.Worker(sub_workers=1, sub_mode="process") as w:
        hold = w.register_sub(wait_on)
        run = w.submit(lambda o: o.submit_sub(hold, strata.payload(gate.encode())))
        with pytest.raises(strata.Timeout):
            run.wait(0)
        open(gate, "w").close()
        run.wait()


# ---- a submit blocked on capacity -------------------------------------------


def test_a_submit_blocked_on_a_full_window_lets_other_threads_run(tmp_path):
    gate = str(tmp_path / "gate")
    with strata.Worker(sub_workers=1, sub_mode="process", task_window=8,
                       capacity_timeout_ns=30 * 10**9) as w:
        hold = w.register_sub(wait_on)
        f = w.register_sub(nothing)

        def opener():
            # Goes on after its sleep only if the submitting thread lets go
            # of the GIL while its submit waits for a slot; the gate frees
            # the window.
            import time
            time.sleep(0.3)
            open(gate, "w").close()

        def orch(o):
            o.submit_sub(hold, strata.payload(gate.encode()))
            threading.Thread(target=opener).start()
            for _ in range(64):
                o.submit_sub(f)

        w.run(orch)
