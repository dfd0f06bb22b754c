"""tests/python/test_crash.py - a process-hosted sub that dies.

Owns: a Python sub function ending its process (os._exit, SIGKILL to
itself) inside a process-hosted sub worker: the run fails with
EndpointError naming the child and how it ended (docs/guide.md, "A crash is
contained"), the tasks depending on it do not run, and later runs go on
with the sub workers that are left.
Must never: crash a thread-hosted sub, or let the waiting thread help run
sub tasks (help_while_waiting=False): either would end the test process.
"""
import os
import signal

import numpy as np
import pytest

from conftest import need_strata

strata = need_strata()



def die_exit(x):
    os._exit(7)


def die_kill(x):
    os.kill(os.getpid(), signal.SIGKILL)


def add_one(x):
    x += 1


@pytest.mark.parametrize("fn,how", [(die_exit, "exited with status 7"),
                                    (die_kill, "killed by signal 9")])
def test_a_dying_sub_process_fails_only_its_run(fn, how):
    with strata.Worker(sub_workers=2, sub_mode="process", help_while_waiting=False) as w:
        die = w.register_sub(fn)
        inc = w.register_sub(add_one)
        a = w.array((4,), np.int64)
        b = w.array((4,), np.int64)

        def orch(o):
            o.submit_sub(die, strata.INOUT(a))
            o.submit_sub(inc, strata.INOUT(a))  # depends on the dying task: never runs

        r = w.submit(orch)
        with pytest.raises((strata.EndpointError, strata.TaskFailed)) as ei:
            r.wait()
        err = r.error()
        assert how in err and "while running task" in err and "(pid " in err, err
        assert isinstance(ei.value, strata.EndpointError), (type(ei.value), err)
        assert (a == 0).all()  # the dependant did not run
        # Later runs go on with the sub worker that is left.
        def four(o):
            for _ in range(4):
                o.submit_sub(inc, strata.INOUT(b))

        for _ in range(3):
            w.run(four)
        assert (b == 12).all()


def test_with_every_sub_gone_tasks_fail_at_once_with_the_reason():
    with strata.Worker(sub_workers=1, sub_mode="process", help_while_waiting=False) as w:
        die = w.register_sub(die_kill)
        inc = w.register_sub(add_one)
        a = w.array((4,), np.int64)
        with pytest.raises(strata.EndpointError):
            w.run(lambda o: o.submit_sub(die, strata.INOUT(a)))
        for _ in range(2):
            with pytest.raises(strata.EndpointError, match="killed by signal 9"):
                w.run(lambda o: o.submit_sub(inc, strata.INOUT(a)))
        assert (a == 0).all()
