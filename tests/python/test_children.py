"""tests/python/test_children.py - child Workers (L4 -> L3) from Python.

Owns: Worker.add_child with a Python setup over a ChildWorker view, thread-
and process-hosted, whose own sub workers are threads or processes; an L4
graph over two children against a sequential oracle; Orch.task_args in a
child's orchestration function (zero copy both ways, scalars and payload,
None in a direct run); a failing sub function two levels down giving the
whole error path; a setup that raises; an orchestration callable registered
after init reaching a process child (whose own registrations take indices of
their own); a Worker made inside a child process being that process's own;
what a ChildWorker view refuses.
Must never: time anything, or leave a child process or shared memory behind.
"""
import os

import numpy as np
import pytest

from conftest import child_pids, need_strata

strata = need_strata()

HOSTS = [("thread", "thread"), ("thread", "process"), ("process", "thread"),
         ("process", "process")]
N = 64  # elements per child's half


def scale(x, k):
    x *= k


def add_into(out, a):
    out += a


def fill(out, v):
    out[:] = v


def child_setup(child):
    child.register_sub(scale)
    child.register_sub(add_into)
    child.register_sub(fill)


def l3_program(o):
    """One child run: c = a * k, then c += a, then c[:8] *= 2 (a chain on c)."""
    a, c, k = o.task_args()
    o.submit_sub(fill, strata.OUT_EXISTING(c), 0.0)
    o.submit_sub(add_into, strata.INOUT(c), strata.IN(a))
    o.submit_sub(scale, strata.INOUT(c), float(k))
    o.submit_sub(add_into, strata.INOUT(c), strata.IN(a))
    o.submit_sub(scale, strata.INOUT(c[:8]), 2.0)


def oracle_l3(a, k):
    c = a * k + a
    c[:8] *= 2
    return c


def no_children_left():
    assert child_pids(os.getpid()) == []


@pytest.mark.parametrize("host,sub_mode", HOSTS)
def test_an_l4_graph_over_two_children_matches_a_sequential_oracle(host, sub_mode):
    with strata.Worker(level=4, sub_workers=1) as w:
        kids = [w.add_child(host=host, sub_workers=2, sub_mode=sub_mode, setup=child_setup)
                for _ in range(2)]
        assert kids == [0, 1]
        l3 = w.register_orch(l3_program)
        top_add = w.register_sub(add_into)
        a = w.array(2 * N, np.float64)
        c = w.array(2 * N, np.float64)
        total = w.array(N, np.float64)

        def l4(o):
            # round 1 on both children, an L4 sub task over both halves, then
            # round 2 on child 0 reading what the L4 task wrote
            for i, k in enumerate(kids):
                o.submit_next_level(l3, strata.IN(a[i * N:(i + 1) * N]),
                                    strata.OUT_EXISTING(c[i * N:(i + 1) * N]), 3, worker=k)
            o.submit_sub(top_add, strata.INOUT(total), strata.IN(c[:N]))
            o.submit_sub(top_add, strata.INOUT(total), strata.IN(c[N:]))
            o.submit_next_level(l3, strata.IN(total), strata.OUT_EXISTING(c[:N]), 5,
                                worker=kids[0])

        for rnd in range(3):
            a[:] = np.arange(2 * N) + rnd
            total[:] = 0
            w.run(l4)
            h0, h1 = oracle_l3(a[:N].copy(), 3), oracle_l3(a[N:].copy(), 3)
            t = h0 + h1
            assert (total == t).all()
            assert (c[:N] == oracle_l3(t, 5)).all()
            assert (c[N:] == h1).all()
    no_children_left()


@pytest.mark.parametrize("host", ["thread", "process"])
def test_task_args_are_the_parent_memory_without_copies(host):
    seen_pid = {}

    def child_view(child):
        child.register_sub(fill)

    def l3(o):
        x, y, k, f, tag = o.task_args()
        assert (k, f, tag) == (7, 0.5, b"hello")       # the child tag is not among them
        assert not x.flags.writeable and y.flags.writeable
        y[0] = x[0] + k                                 # the orch fn's own write
        y[1] = y.__array_interface__["data"][0] % (1 << 62)
        y[2] = os.getpid()
        o.submit_sub(fill, strata.OUT_EXISTING(y[3:]), f)   # a view of the task's tensor

    with strata.Worker(level=4, sub_workers=1) as w:
        kid = w.add_child(host=host, sub_workers=1, setup=child_view)
        cb = w.register_orch(l3)
        x = w.array(4, np.float64)
        y = w.array(8, np.float64)
        x[0] = 35
        w.run(lambda o: o.submit_next_level(cb, strata.IN(x), strata.INOUT(y), 7, 0.5,
                                            b"hello", worker=kid))
        assert y[0] == 42
        assert y[1] == y.__array_interface__["data"][0] % (1 << 62)   # the same address
        assert (y[2] != os.getpid()) == (host == "process")
        assert (y[3:] == 0.5).all()
        seen_pid["ok"] = True
    assert seen_pid


def test_task_args_is_none_in_a_direct_run():
    seen = []
    with strata.Worker(sub_workers=1) as w:
        w.run(lambda o: seen.append(o.task_args()))
    assert seen == [None]


def bad_sub(x):
    raise ValueError(f"bad input {int(x[0])}")


@pytest.mark.parametrize("host", ["thread", "process"])
def test_a_failing_sub_in_a_child_gives_the_whole_path(host):
    def setup(child):
        child.register_sub(bad_sub, name="bad")
        child.register_sub(fill)

    def l3(o):
        (x,) = o.task_args()
        o.submit_sub(bad_sub, strata.INOUT(x))

    def l3_ok(o):
        (x,) = o.task_args()
        o.submit_sub(fill, strata.OUT_EXISTING(x), 1.0)

    with strata.Worker(level=4, sub_workers=1) as w:
        kid = w.add_child(host=host, name="left", sub_workers=1, help_while_waiting=False,
                          setup=setup)
        cb = w.register_orch(l3, name="l3prog")
        ok = w.register_orch(l3_ok, name="l3ok")
        x = w.array(2, np.float64)
        x[0] = 13
        with pytest.raises(strata.TaskFailed) as e:
            w.run(lambda o: o.submit_next_level(cb, strata.INOUT(x), worker=kid))
        msg = str(e.value)
        assert msg.startswith("run 1: L4 worker 0 (left): task 'l3prog' #1 failed: run 1: L3 "
                              "worker sub 0: task 'bad' #1 failed: ValueError: bad input 13"), msg
        assert "Traceback" in msg and "in bad_sub" in msg
        w.run(lambda o: o.submit_next_level(ok, strata.INOUT(x), worker=kid))   # it goes on
        assert (x == 1.0).all()
    no_children_left()


def raising_setup(child):
    child.register_sub(fill)
    raise RuntimeError("no chips today")


def test_a_setup_that_raises_fails_add_child_with_its_traceback():
    with strata.Worker(level=4, sub_workers=1) as w:
        with pytest.raises(strata.TaskFailed) as e:
            w.add_child(host="thread", setup=raising_setup)
        msg = str(e.value)
        assert "L3 child 0: setup failed: RuntimeError: no chips today" in msg
        assert "Traceback" in msg and "in raising_setup" in msg
        kid = w.add_child(host="thread", setup=child_setup)        # the Worker goes on
        cb = w.register_orch(lambda o: o.submit_sub(fill, strata.OUT_EXISTING(o.task_args()[0]),
                                                    4.0))
        x = w.array(3, np.float64)
        w.run(lambda o: o.submit_next_level(cb, strata.OUT_EXISTING(x), worker=kid))
        assert (x == 4.0).all()


def test_a_process_childs_setup_that_raises_fails_init_with_its_traceback():
    w = strata.Worker(level=4, sub_workers=1)
    try:
        w.add_child(host="process", setup=raising_setup)
        with pytest.raises(strata.Error) as e:
            w.init()
        msg = str(e.value)
        assert "setup failed: RuntimeError: no chips today" in msg, msg
        assert "Traceback" in msg and "in raising_setup" in msg
    finally:
        w.close()
    no_children_left()


def late_program(o):
    (x,) = o.task_args()
    o.submit_sub(scale, strata.INOUT(x), 10.0)


@pytest.mark.parametrize("sub_mode", ["thread", "process"])
def test_an_orchestration_callable_registered_after_init_reaches_a_process_child(sub_mode):
    def setup(child):   # registers in the child's process: indices of its own there
        for f in (fill, add_into, scale):
            child.register_sub(f)

    with strata.Worker(level=4, sub_workers=1) as w:
        kid = w.add_child(host="process", sub_workers=1, sub_mode=sub_mode, setup=setup)
        w.init()
        cb = w.register_orch(late_program)    # after init: sent to the running child
        x = w.array(4, np.float64)
        x[:] = 2
        w.run(lambda o: o.submit_next_level(cb, strata.INOUT(x), worker=kid))
        assert (x == 20.0).all()
    no_children_left()


def own_worker(out):
    """In a child's sub worker: a Worker made here is this process's own."""
    with strata.Worker(sub_workers=1) as inner:
        f = inner.register_sub(fill)
        a = inner.array(2, np.float64)
        inner.run(lambda o: o.submit_sub(f, strata.OUT(a), 6.0))
        out[:] = a.sum()


def test_a_worker_made_inside_a_process_child_is_its_own():
    def setup(child):
        child.register_sub(own_worker)

    def l3(o):
        (x,) = o.task_args()
        o.submit_sub(own_worker, strata.OUT_EXISTING(x))

    with strata.Worker(level=4, sub_workers=1) as w:
        kid = w.add_child(host="process", sub_workers=1, help_while_waiting=False, setup=setup)
        cb = w.register_orch(l3)
        x = w.array(1, np.float64)
        w.run(lambda o: o.submit_next_level(cb, strata.OUT_EXISTING(x), worker=kid))
        assert x[0] == 12.0
    no_children_left()


def test_a_child_view_is_changed_inside_its_setup_only():
    views = []

    def setup(child):
        assert isinstance(child, strata.ChildWorker) and child.is_child
        views.append(child)
        with pytest.raises(strata.StateError):
            child.array(4)
        with pytest.raises(strata.StateError):
            child.run(lambda o: None)
        child.register_sub(fill)

    with strata.Worker(level=4, sub_workers=1) as w:
        kid = w.add_child(setup=setup)
        with pytest.raises(strata.StateError):
            views[0].register_sub(scale)          # after its setup
        cb = w.register_orch(l3_program)
        chip = w.add_chip(kernel_module=strata.SIM_TEST_KERNELS)
        a = w.array(4, np.float64)
        with pytest.raises(ValueError, match="not a child Worker"):
            w.run(lambda o: o.submit_next_level(cb, strata.IN(a), worker=chip))
        with pytest.raises(TypeError, match="not a sub function"):
            w.run(lambda o: o.submit_sub(cb, strata.IN(a)))
        assert kid == 0
    with pytest.raises(strata.Closed):
        views[0].register_sub(scale)              # the parent is gone


@pytest.mark.parametrize("host", ["thread", "process"])
def test_a_group_over_two_children_runs_one_run_on_each(host):
    def l3(o):
        out, k = o.task_args()
        o.submit_sub(fill, strata.OUT_EXISTING(out), float(k))

    with strata.Worker(level=4, sub_workers=1) as w:
        kids = [w.add_child(host=host, sub_workers=1, setup=child_setup) for _ in range(2)]
        cb = w.register_orch(l3)
        x = w.array(8, np.float64)
        w.run(lambda o: o.submit_next_level_group(
            cb, [(strata.OUT_EXISTING(x[:4]), 1), (strata.OUT_EXISTING(x[4:]), 2)],
            workers=kids))
        assert list(x) == [1.0] * 4 + [2.0] * 4
    no_children_left()


def raising_program(o):
    raise KeyError("no graph today")


@pytest.mark.parametrize("host", ["thread", "process"])
def test_an_exception_in_a_childs_orchestration_function_is_in_the_run_error(host):
    with strata.Worker(level=4, sub_workers=1) as w:
        kid = w.add_child(host=host, name="right", sub_workers=1, setup=child_setup)
        bad = w.register_orch(raising_program, name="nograph")
        ok = w.register_orch(late_program)
        x = w.array(2, np.float64)
        r = w.submit(lambda o: o.submit_next_level(bad, strata.INOUT(x), worker=kid))
        with pytest.raises(strata.TaskFailed) as e:
            r.wait()
        msg = str(e.value)
        assert msg.startswith("run 1: L4 worker 0 (right): task 'nograph' #1 failed: run 1: "
                              "orchestration function failed (STRATA_ETASK): KeyError: 'no "
                              "graph today'"), msg
        assert "in raising_program" in msg and r.error() == msg
        x[:] = 1
        w.run(lambda o: o.submit_next_level(ok, strata.INOUT(x), worker=kid))   # it goes on
        assert (x == 10.0).all()
    no_children_left()
