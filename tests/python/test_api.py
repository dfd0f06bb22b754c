"""tests/python/test_api.py - every call of the Python API (docs/python.md).

Owns: one test per API call or form of a call, each checking the result the
call is for (a value computed by the tasks, the attributes of a handle).
Must never: measure time, or depend on the order sub workers pick tasks.
"""
import re

import numpy as np
import pytest

from conftest import ROOT, need_strata

strata = need_strata()

MODES = ["thread", "process"]


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(strata VERSION ([0-9.]+)", text).group(1)


def test_version_is_the_c_library_version():
    assert strata.__version__ == project_version()


# ---- sub functions the tests register (module level: picklable by name) ------


def scale(x, k):
    x *= k


def add_into(out, a, b):
    out[:] = a + b


def fill(out, v):
    out[:] = v


def record_scalars(out, u, i, d, f, p):
    out[0] = u
    out[1] = i
    out[2] = d
    out[3] = f
    out[4] = len(p)
    out[5] = p[0]
    out[6] = float(isinstance(u, int) and isinstance(i, int))
    out[7] = float(isinstance(d, float) and isinstance(f, float) and isinstance(p, bytes))


def copy_in(out, a):
    out[:] = a


def late_fill(out):
    out[:] = 42


# ---- Worker, register, array, run ---------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_worker_runs_a_sub_task_on_an_array(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        cb = w.register_sub(scale)
        assert isinstance(cb, strata.Callable)
        a = w.array((64,), np.float32)
        assert isinstance(a, np.ndarray) and a.shape == (64,) and a.dtype == np.float32
        a[:] = np.arange(64, dtype=np.float32)
        w.run(lambda o: o.submit_sub(cb, strata.INOUT(a), strata.f32(2.0)))
        np.testing.assert_array_equal(a, 2 * np.arange(64, dtype=np.float32))


def test_enter_returns_the_worker_and_init_is_explicit_too():
    w = strata.Worker(sub_workers=1)
    with w as entered:
        assert entered is w
        cb = w.register_sub(fill)
        a = w.array((4,), np.int32)
        w.init()
        w.run(lambda o: o.submit_sub(cb, strata.OUT_EXISTING(a), 7))
        assert list(a) == [7, 7, 7, 7]


def test_sub_decorator_registers_and_returns_a_callable():
    with strata.Worker(sub_workers=1) as w:

        @w.sub
        def triple(x):
            x *= 3

        assert isinstance(triple, strata.Callable)
        a = w.array((3,), np.int64)
        a[:] = [1, 2, 3]
        w.run(lambda o: o.submit_sub(triple, strata.INOUT(a)))
        assert list(a) == [3, 6, 9]


def test_register_sub_takes_a_name():
    with strata.Worker(sub_workers=1) as w:
        cb = w.register_sub(fill, name="fill_named")
        a = w.array((2,), np.int32)
        w.run(lambda o: o.submit_sub(cb, strata.OUT_EXISTING(a), 5))
        assert list(a) == [5, 5]


@pytest.mark.parametrize("mode", MODES)
def test_config_fields_by_name(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode, pipeline_depth=1, task_window=64,
                       help_while_waiting=False) as w:
        cb = w.register_sub(scale)
        a = w.array((8,), np.float64)
        a[:] = 1
        def orch(o):  # a chain of 100 tasks through a window of 64 slots
            for _ in range(100):
                o.submit_sub(cb, strata.INOUT(a), 2.0)

        for _ in range(3):
            w.run(orch)
        np.testing.assert_array_equal(a, np.full(8, 2.0**300))


# ---- submit and the run handle -------------------------------------------------


def test_submit_returns_a_run_handle():
    with strata.Worker(sub_workers=1) as w:
        cb = w.register_sub(fill)
        a = w.array((4,), np.int32)
        r = w.submit(lambda o: o.submit_sub(cb, strata.OUT_EXISTING(a), 3))
        assert isinstance(r, strata.Run)
        r.wait()
        assert r.done()
        assert r.error() is None
        assert r.status == 0
        assert isinstance(r.id, int)
        assert list(a) == [3, 3, 3, 3]
        r2 = w.submit(lambda o: None)
        r2.wait(timeout=30)
        assert r2.id != r.id


def test_pipelined_runs_each_see_the_previous():
    with strata.Worker(sub_workers=2, pipeline_depth=2) as w:
        cb = w.register_sub(scale)
        a = w.array((16,), np.int64)
        a[:] = 1
        runs = [w.submit(lambda o: o.submit_sub(cb, strata.INOUT(a), 2)) for _ in range(10)]
        for r in runs:
            r.wait()
        assert (a == 1024).all()


# ---- tags, views, scalars --------------------------------------------------------


def test_tag_wrappers_name_the_tensor():
    with strata.Worker(sub_workers=1) as w:
        a = w.array((4,), np.float32)
        for tag in (strata.IN, strata.OUT, strata.INOUT, strata.OUT_EXISTING, strata.NO_DEP):
            assert tag(a) is not None


@pytest.mark.parametrize("mode", MODES)
def test_views_of_an_array_are_tensors(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        cb = w.register_sub(scale)
        a = w.array((1024,), np.float32)
        a[:] = 1

        def orch(o):
            o.submit_sub(cb, strata.INOUT(a), strata.f32(2.0))
            o.submit_sub(cb, strata.INOUT(a[0:512]), 3.0)

        w.run(orch)
        assert (a[:512] == 6).all() and (a[512:] == 2).all()


@pytest.mark.parametrize("mode", MODES)
def test_two_dimensional_tile_views(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        cb = w.register_sub(fill)
        m = w.array((8, 8), np.int32)

        def orch(o):
            for i in range(2):
                for j in range(2):
                    o.submit_sub(cb, strata.OUT_EXISTING(m[4 * i:4 * i + 4, 4 * j:4 * j + 4]),
                                 10 * i + j)

        w.run(orch)
        for i in range(2):
            for j in range(2):
                assert (m[4 * i:4 * i + 4, 4 * j:4 * j + 4] == 10 * i + j).all()


@pytest.mark.parametrize("mode", MODES)
def test_typed_scalars_and_payload_arrive_as_python_values(mode):
    with strata.Worker(sub_workers=1, sub_mode=mode) as w:
        cb = w.register_sub(record_scalars)
        out = w.array((8,), np.float64)
        w.run(lambda o: o.submit_sub(cb, strata.OUT_EXISTING(out), strata.u64(2**40),
                                     strata.i64(-5), strata.f64(0.25), strata.f32(1.5),
                                     strata.payload(b"\x09abc")))
        assert list(out) == [2.0**40, -5.0, 0.25, 1.5, 4.0, 9.0, 1.0, 1.0]
        out[:] = 0
        w.run(lambda o: o.submit_sub(cb, strata.OUT_EXISTING(out), 7, -3, 0.5, 2.5, b"\x01"))
        assert list(out) == [7.0, -3.0, 0.5, 2.5, 1.0, 1.0, 1.0, 1.0]


# ---- runtime memory, scopes, groups ------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_alloc_gives_runtime_memory_for_intermediates(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        f = w.register_sub(fill)
        add = w.register_sub(add_into)
        cp = w.register_sub(copy_in)
        out = w.array((256,), np.float32)

        def orch(o):
            t = o.alloc((256,), np.float32)
            u = o.alloc((256,), np.float32)
            assert isinstance(t, strata.Tensor)
            o.submit_sub(f, strata.OUT(t), 2.0)
            o.submit_sub(f, strata.OUT(u), 5.0)
            v = o.alloc((256,), np.float32)
            o.submit_sub(add, strata.OUT(v), strata.IN(t), strata.IN(u))
            o.submit_sub(cp, strata.OUT_EXISTING(out), strata.IN(v))

        w.run(orch)
        assert (out == 7).all()


def test_scope_is_a_with_block():
    with strata.Worker(sub_workers=2) as w:
        f = w.register_sub(fill)
        cp = w.register_sub(copy_in)
        out = w.array((32,), np.int32)

        def orch(o):
            for k in range(3):
                with o.scope():  # t's memory is reclaimed when the scope's tasks are done
                    t = o.alloc((8,), np.int32)
                    o.submit_sub(f, strata.OUT(t), k + 1)
                    o.submit_sub(cp, strata.OUT_EXISTING(out[k * 8:k * 8 + 8]), strata.IN(t))

        w.run(orch)
        assert list(out[:24]) == [1] * 8 + [2] * 8 + [3] * 8


@pytest.mark.parametrize("mode", MODES)
def test_submit_sub_group(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        cb = w.register_sub(scale)
        a = w.array((1024,), np.float32)
        a[:] = 1

        def orch(o):
            o.submit_sub_group(cb, [(strata.INOUT(a[0:512]), 2.0),
                                    (strata.INOUT(a[512:]), 3.0)])
            o.submit_sub(cb, strata.INOUT(a), 5.0)  # after the whole group

        w.run(orch)
        assert (a[:512] == 10).all() and (a[512:] == 15).all()


# ---- registering after init ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_registering_after_init_reaches_the_children(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        a = w.array((4,), np.int32)
        w.init()
        cb = w.register_sub(late_fill)

        def orch(o):
            for i in range(4):
                o.submit_sub(cb, strata.OUT_EXISTING(a[i:i + 1]))

        w.run(orch)
        assert list(a) == [42] * 4


def test_a_closure_after_init_in_process_mode_is_refused_clearly():
    with strata.Worker(sub_workers=1, sub_mode="process") as w:
        w.init()
        value = 1

        def closure(x):
            x[:] = value

        with pytest.raises((TypeError, ValueError, strata.Error), match=r"(?i)module-level"):
            w.register_sub(closure)


def test_a_plain_local_function_after_init_reaches_process_children():
    with strata.Worker(sub_workers=2, sub_mode="process", help_while_waiting=False) as w:
        a = w.array((2,), np.int32)
        w.init()

        def local(x):
            x[:] = 9

        cb = w.register_sub(local)
        w.run(lambda o: o.submit_sub(cb, strata.OUT_EXISTING(a)))
        assert list(a) == [9, 9]


def test_the_orch_object_is_refused_after_its_call():
    with strata.Worker(sub_workers=1) as w:
        cb = w.register_sub(fill)
        a = w.array((2,), np.int32)
        kept = []
        w.run(lambda o: kept.append(o))
        with pytest.raises(strata.StateError):
            kept[0].submit_sub(cb, strata.OUT_EXISTING(a), 1)
        assert list(a) == [0, 0]


def test_worker_close_is_idempotent_and_reports_closed():
    w = strata.Worker(sub_workers=1)
    w.init()
    assert w.initialized and not w.closed
    w.close()
    w.close()
    assert w.closed


# ---- OUT tensors without memory (strata.unallocated) ----------------------------


def total_into(out, a):
    out[0] = a.sum()


@pytest.mark.parametrize("mode", MODES)
def test_out_without_memory_gets_runtime_memory(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        f, tot = w.register_sub(fill), w.register_sub(total_into)
        res = w.array((3,), np.float64)
        seen = []

        def orch(o):
            for i in range(3):
                t = strata.unallocated((2, 4), np.float64)
                assert t.ptr == 0
                o.submit_sub(f, strata.OUT(t), float(i + 1))
                seen.append((t.ptr, t.shape, t.dtype))
                o.submit_sub(tot, strata.OUT_EXISTING(res[i:i + 1]), strata.IN(t))

        w.run(orch)
        assert list(res) == [8.0, 16.0, 24.0]
        assert all(p != 0 and s == (2, 4) and d == np.float64 for p, s, d in seen)
        assert len({p for p, _, _ in seen}) == 3  # one allocation per task


def test_a_tensor_without_memory_only_goes_out():
    with strata.Worker(sub_workers=1) as w:
        f = w.register_sub(fill)

        def orch(o):
            with pytest.raises(ValueError, match="without memory"):
                o.submit_sub(f, strata.IN(strata.unallocated(4)), 1.0)
            with pytest.raises(ValueError, match="without memory"):
                o.submit_sub(f, strata.INOUT(strata.unallocated(4)), 1.0)

        w.run(orch)
