"""tests/python/test_zero_copy.py - tensors reach sub functions without copies.

Owns: the checks that a sub function's numpy array is the parent's memory
(the same address, in a process child too: the shared arena is mapped at the
same address everywhere) and that its writes are what the parent then reads.
Must never: accept an equal value as proof of no copy; the address is the proof.
"""
import os

import numpy as np
import pytest

from conftest import need_strata

strata = need_strata()


MODES = ["thread", "process"]


def worker(mode, subs=2):
    # The waiting thread never runs a task itself: in process mode every task
    # runs in a child, so the addresses below are a child's.
    return strata.Worker(sub_workers=subs, sub_mode=mode, help_while_waiting=False)


def ran_where_asked(mode, pid):
    return (pid != os.getpid()) if mode == "process" else (pid == os.getpid())


def data_address(arr):
    return arr.__array_interface__["data"][0]


def report_address(x, seen):
    # where x's first element is in this process, writable, owns its data, pid
    seen[0] = data_address(x)
    seen[1] = int(x.flags.writeable)
    seen[2] = int(x.flags.owndata)
    seen[3] = os.getpid()
    x[:] = 7


def read_address(x, seen):
    seen[0] = data_address(x)
    seen[1] = int(x.flags.writeable)


def write_and_read_back(x, seen):
    x[0] = 123.5
    seen[0] = x[0]


@pytest.mark.parametrize("mode", MODES)
def test_a_sub_function_writes_the_parents_memory_in_place(mode):
    with worker(mode) as w:
        cb = w.register_sub(report_address)
        a = w.array((1000,), np.float64)
        seen = w.array((4,), np.int64)
        before = data_address(a)
        w.run(lambda o: o.submit_sub(cb, strata.INOUT(a), strata.OUT_EXISTING(seen)))
        assert data_address(a) == before  # the parent's array was not replaced
        assert int(seen[0]) == before  # the child's array is the same memory
        assert seen[1] == 1 and seen[2] == 0  # writable, and a view, not a copy
        assert ran_where_asked(mode, int(seen[3]))
        assert (a == 7).all()


@pytest.mark.parametrize("mode", MODES)
def test_a_view_arrives_at_its_offset(mode):
    with worker(mode, 1) as w:
        cb = w.register_sub(report_address)
        a = w.array((64, 16), np.float32)
        seen = w.array((4,), np.int64)
        tile = a[8:16, 4:12]
        w.run(lambda o: o.submit_sub(cb, strata.INOUT(tile), strata.OUT_EXISTING(seen)))
        assert int(seen[0]) == data_address(tile) == data_address(a) + (8 * 16 + 4) * 4
        assert (a[8:16, 4:12] == 7).all()
        a[8:16, 4:12] = 0
        assert (a == 0).all()  # nothing outside the tile was written


@pytest.mark.parametrize("mode", MODES)
def test_an_input_arrives_read_only_over_the_same_memory(mode):
    with worker(mode, 1) as w:
        cb = w.register_sub(read_address)
        a = w.array((32,), np.int32)
        seen = w.array((2,), np.int64)
        w.run(lambda o: o.submit_sub(cb, strata.IN(a), strata.OUT_EXISTING(seen)))
        assert int(seen[0]) == data_address(a)
        assert seen[1] == 0


@pytest.mark.parametrize("mode", MODES)
def test_a_write_is_seen_by_the_next_task_in_the_child(mode):
    with worker(mode) as w:
        cb = w.register_sub(write_and_read_back)
        a = w.array((4,), np.float64)
        seen = w.array((1,), np.float64)
        w.run(lambda o: o.submit_sub(cb, strata.INOUT(a), strata.OUT_EXISTING(seen)))
        assert a[0] == 123.5 and seen[0] == 123.5


def test_worker_array_is_a_view_kept_alive_by_its_base():
    with strata.Worker(sub_workers=1) as w:
        a = w.array((16,), np.int16)
        assert not a.flags.owndata and a.base is not None
        assert a.flags.c_contiguous and a.flags.writeable
        v = a[4:8]
        del a
        v[:] = 3  # the buffer lives as long as a view of it does
        assert (v == 3).all()
