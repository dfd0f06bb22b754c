"""tests/python/test_stats.py - tracing and statistics from Python.

Owns: the Worker's trace_path / trace_events_per_lane / collect_stats
keywords, Worker.stats() and Run.stats() (the C statistics as dicts), and a
trace of a Python process-hosted run checked by tests/support/trace_check.py.
Must never: assert a time's value (only that timed figures were measured).
"""
import subprocess

import numpy as np
import pytest

from conftest import ROOT, need_strata

strata = need_strata()

TRACE_CHECK = ROOT / "tests" / "support" / "trace_check.py"
MODES = ["thread", "process"]


def bump(x):
    x += 1


def fail_always(x):
    raise RuntimeError("no")


def ten_tasks(w, fn, a):
    def orch(o):
        for i in range(10):
            o.submit_sub(fn, strata.INOUT(a[i:i + 1]))
    return w.submit(orch)


@pytest.mark.parametrize("mode", MODES)
def test_collect_stats_times_every_task(mode):
    with strata.Worker(sub_workers=2, sub_mode=mode, collect_stats=True) as w:
        f = w.register_sub(bump)
        a = w.array(10, np.int64)
        run = ten_tasks(w, f, a)
        run.wait()
        rs = run.stats()
        assert rs["timed"] is True
        assert rs["tasks_run"] == 10 and rs["tasks_failed"] == 0 and rs["tasks_not_run"] == 0
        assert rs["critical_path_ns"] > 0
        ws = w.stats()
        assert ws["timed"] is True and ws["sub_workers"] == 2 and len(ws["sub"]) == 2
        ran = sum(lane["tasks_run"] for lane in ws["sub"]) + ws["helper"]["tasks_run"]
        assert ran == 10
        assert sum(lane["busy_ns"] for lane in ws["sub"]) + ws["helper"]["busy_ns"] > 0
        assert ws["elapsed_ns"] > 0 and ws["window_high_water"] >= 1
        assert len(ws["heap_ring_high_water_bytes"]) == 4
    after = w.stats()  # the figures up to the close
    assert sum(lane["tasks_run"] for lane in after["sub"]) + after["helper"]["tasks_run"] == 10


def test_stats_untimed_by_default_count_failures():
    with strata.Worker(sub_workers=1, sub_mode="process") as w:
        f = w.register_sub(fail_always)
        a = w.array(10, np.int64)
        run = ten_tasks(w, f, a)
        with pytest.raises(strata.TaskFailed):
            run.wait()
        rs = run.stats()
        assert rs["timed"] is False
        assert rs["tasks_failed"] >= 1
        assert rs["tasks_run"] + rs["tasks_not_run"] == 10
        ws = w.stats()
        assert ws["timed"] is False
        assert ws["sub"][0]["tasks_failed"] + ws["helper"]["tasks_failed"] == rs["tasks_failed"]


def test_a_trace_of_a_process_hosted_python_run(tmp_path):
    path = tmp_path / "trace.json"
    with strata.Worker(sub_workers=2, sub_mode="process", trace_path=str(path),
                       trace_events_per_lane=4096) as w:
        f = w.register_sub(bump)
        a = w.array(10, np.int64)
        ten_tasks(w, f, a).wait()
        assert w.stats()["timed"] is True  # tracing times the tasks
    assert w.trace_error() is None
    assert path.exists()
    p = subprocess.run(["/usr/bin/python3", str(TRACE_CHECK), str(path), "10"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "tasks=10 " in p.stdout
    assert "child_tasks=" in p.stdout and "child_tasks=0 " not in p.stdout


def test_an_unwritable_trace_path_is_reported_at_close(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "trace.json"
    with strata.Worker(sub_workers=1, trace_path=path) as w:
        f = w.register_sub(bump)
        a = w.array(10, np.int64)
        ten_tasks(w, f, a).wait()
    assert w.trace_error()
    assert not path.exists()


def test_bad_stats_keywords_raise():
    with pytest.raises(TypeError):
        strata.Worker(trace_events_per_lane="many")
    with pytest.raises(TypeError):
        strata.Worker(trace_path=3)
