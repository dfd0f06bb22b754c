"""tests/python/test_errors.py - strata's statuses as Python exceptions.

Owns: the exception classes (one per strata_status, with the values of
include/strata/status.h and the Python base classes docs/python.md names),
the statuses a Python program can provoke, a Python exception in a sub
function (TaskFailed with the traceback text; the Worker goes on), and bad
arguments refused with TypeError/ValueError before anything is submitted.
Must never: match a message more loosely than "names the bad value".
"""
import re
import time

import numpy as np
import pytest

from conftest import ROOT, need_strata

strata = need_strata()

# Exception class -> the C status it stands for, and the builtin it also is.
CLASSES = {
    "InvalidArgument": ("STRATA_EINVAL", ValueError),
    "StateError": ("STRATA_ESTATE", None),
    "Timeout": ("STRATA_ETIMEDOUT", TimeoutError),
    "TaskFailed": ("STRATA_ETASK", None),
    "EndpointError": ("STRATA_EENDPOINT", None),
    "Closed": ("STRATA_ECLOSED", None),
    "Stale": ("STRATA_ESTALE", None),
    "Poisoned": ("STRATA_EPOISONED", None),
    "CapacityError": ("STRATA_ECAPACITY", None),
    "ABIError": ("STRATA_EABI", None),
    "DeviceError": ("STRATA_EDEVICE", None),
    "NoMemory": ("STRATA_ENOMEM", MemoryError),
    "Cancelled": ("STRATA_ECANCELED", None),
}


def c_statuses():
    text = (ROOT / "include/strata/status.h").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"(STRATA_E\w+) = (-\d+)", text)}


def test_every_c_status_has_a_class():
    statuses = c_statuses()
    assert set(statuses) == {c for c, _ in CLASSES.values()}  # no status left out


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_each_status_class_maps(name):
    cname, builtin = CLASSES[name]
    cls = getattr(strata, name)
    assert issubclass(cls, strata.Error) and issubclass(strata.Error, Exception)
    if builtin is not None:
        assert issubclass(cls, builtin)
    assert cls.status == c_statuses()[cname]


def boom(x):
    raise RuntimeError("the sub function gave up on purpose")


def fill(x, v):
    x[:] = v


def slow(x):
    time.sleep(1.0)
    x[:] = 1


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_python_exception_fails_the_task_with_its_traceback(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        bad = w.register_sub(boom)
        good = w.register_sub(fill)
        a = w.array((8,), np.int32)
        r = w.submit(lambda o: o.submit_sub(bad, strata.INOUT(a)))
        with pytest.raises(strata.TaskFailed) as ei:
            r.wait()
        assert ei.value.status == c_statuses()["STRATA_ETASK"]
        err = r.error()
        assert r.status == c_statuses()["STRATA_ETASK"]
        for text in ("Traceback", "RuntimeError", "the sub function gave up on purpose",
                     "in boom"):
            assert text in err, f"{text!r} not in the run's error: {err!r}"
        assert "the sub function gave up on purpose" in str(ei.value)
        # The worker keeps working: the next run is fine.
        w.run(lambda o: o.submit_sub(good, strata.OUT_EXISTING(a), 4))
        assert (a == 4).all()


def test_run_raises_the_same_error():
    with strata.Worker(sub_workers=1) as w:
        bad = w.register_sub(boom)
        a = w.array((8,), np.int32)
        with pytest.raises(strata.TaskFailed, match="gave up on purpose"):
            w.run(lambda o: o.submit_sub(bad, strata.INOUT(a)))


def test_an_exception_in_the_orchestration_function_fails_the_run():
    with strata.Worker(sub_workers=1) as w:
        good = w.register_sub(fill)
        a = w.array((8,), np.int32)

        def orch(o):
            raise KeyError("orchestration gave up")

        with pytest.raises((strata.Error, KeyError), match="orchestration gave up"):
            w.run(orch)
        w.run(lambda o: o.submit_sub(good, strata.OUT_EXISTING(a), 2))
        assert (a == 2).all()


def test_timeout_is_a_timeout_error_and_the_run_goes_on():
    with strata.Worker(sub_workers=1) as w:
        cb = w.register_sub(slow)
        a = w.array((2,), np.int32)
        r = w.submit(lambda o: o.submit_sub(cb, strata.OUT_EXISTING(a)))
        with pytest.raises(strata.Timeout):
            r.wait(timeout=0.01)
        assert not r.done()
        r.wait()
        assert r.done() and (a == 1).all()


def test_state_error_adding_a_chip_after_init():
    with strata.Worker(sub_workers=1) as w:
        w.init()
        with pytest.raises(strata.StateError, match="init"):
            w.add_chip(backend="sim")


def test_closed_worker_refuses_runs():
    w = strata.Worker(sub_workers=1)
    with w:
        w.init()
    with pytest.raises((strata.Closed, strata.StateError)):
        w.run(lambda o: None)


def test_bad_config_value_is_refused_by_name():
    with pytest.raises((ValueError, TypeError), match="pipeline_depth"):
        with strata.Worker(sub_workers=1, pipeline_depth=7) as w:
            w.init()
    with pytest.raises((ValueError, TypeError), match="sub_mode"):
        strata.Worker(sub_workers=1, sub_mode="carrier pigeon")
    with pytest.raises(TypeError, match="no_such_field"):
        strata.Worker(no_such_field=1)


# ---- bad arguments: refused before anything is submitted -------------------------


def count_call(counter, x):
    counter[0] += 1


def bad_argument_cases(w, a):
    """(description, orchestration call, exception type, message pattern)."""
    f64 = w.array((4,), np.float64)
    cmplx = a.view(np.complex128)  # strata memory, a dtype strata has no name for
    m = w.array((8, 8), np.float32)
    return [
        ("unknown callable", lambda o, cb: o.submit_sub(print, strata.INOUT(a)),
         (TypeError, ValueError), r"(?i)callable|regist"),
        ("a plain numpy array not from Worker.array",
         lambda o, cb: o.submit_sub(cb, strata.INOUT(np.zeros(4))), (TypeError, ValueError),
         r"(?i)worker\.array|strata|shared"),
        ("wrong dtype", lambda o, cb: o.submit_sub(cb, strata.INOUT(cmplx)),
         (TypeError, ValueError), r"(?i)dtype|complex"),
        ("non-contiguous view where a tensor must be element-strided",
         lambda o, cb: o.submit_sub(cb, strata.INOUT(m[::-1])), ValueError,
         r"(?i)stride|contiguous|negative"),
        ("a tensor where a scalar goes", lambda o, cb: o.submit_sub(cb, a, f64),
         TypeError, r"(?i)tag|IN|OUT|tensor|scalar"),
        ("a scalar of an unknown type", lambda o, cb: o.submit_sub(cb, strata.INOUT(a), "str"),
         TypeError, r"(?i)str|scalar"),
        ("a float where u64 is asked", lambda o, cb: o.submit_sub(cb, strata.INOUT(a),
                                                                  strata.u64(1.5)),
         TypeError, r"(?i)int|u64"),
        ("a negative u64", lambda o, cb: o.submit_sub(cb, strata.INOUT(a), strata.u64(-1)),
         (ValueError, OverflowError), r"(?i)u64|negative|range"),
        ("payload that is not bytes", lambda o, cb: o.submit_sub(cb, strata.INOUT(a),
                                                                 strata.payload("text")),
         TypeError, r"(?i)bytes"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_bad_arguments_raise_before_submitting(case):
    with strata.Worker(sub_workers=1) as w:
        cb = w.register_sub(count_call)
        counter = w.array((1,), np.int64)
        a = w.array((4,), np.int64)
        desc, call, exc, pattern = bad_argument_cases(w, a)[case]
        raised = []

        def orch(o):
            try:
                call(o, cb)
            except exc as e:  # raised at the call, inside the orchestration function
                raised.append(e)
                raise

        with pytest.raises(Exception):
            w.run(orch)
        assert raised, f"{desc}: no {exc} at the call"
        assert re.search(pattern, str(raised[0])), f"{desc}: message {raised[0]}"
        # Nothing ran, and the worker still works.
        w.run(lambda o: o.submit_sub(cb, strata.INOUT(counter), strata.IN(a)))
        assert counter[0] == 1


def test_tag_wrapper_refuses_what_is_not_a_tensor():
    with pytest.raises(TypeError):
        strata.INOUT("not an array")
    with pytest.raises(TypeError):
        strata.IN(3)


def test_register_sub_refuses_what_is_not_callable():
    with strata.Worker(sub_workers=1) as w:
        with pytest.raises(TypeError, match="(?i)callable"):
            w.register_sub(42)


def test_array_refuses_a_dtype_strata_has_no_name_for():
    with strata.Worker(sub_workers=1) as w:
        with pytest.raises((TypeError, ValueError), match="(?i)dtype|complex"):
            w.array((4,), np.complex128)
        with pytest.raises((TypeError, ValueError)):
            w.array((-1,), np.float32)
