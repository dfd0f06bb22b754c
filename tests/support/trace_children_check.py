#!/usr/bin/python3
# tests/support/trace_children_check.py - what a test of process children's
# own trace events asks of one trace file (tests/unit/test_trace_children.c).
#
# Owns: finding a child's lanes by their names and checking that its events
# are there and ordered against the parent's on the shared clock.
# Must never: check durations: only presence, counts and ordering.
#
# Usage: trace_children_check.py chip FILE TASKS
#          every chip phase recorded in the chip's own process: 3 per task,
#          each inside a task bar of the chip's lane
#        trace_children_check.py worker FILE TASKS RUNS HOST
#          the child Worker's inner tasks ("n0/..."), TASKS per run, on lanes
#          of its own (HOST process: in the child's process; thread: in the
#          parent's, named "next-level 0: ..."), never the parent's
#          "next-level 0", each inside the parent's bar of the task that ran it
#        trace_children_check.py grandchip FILE TASKS HOST
#          a child Worker's own process chip: 3 phases per task on that chip's
#          lane, in a process of its own (neither
#          the parent's nor the child Worker's), each inside a bar of the lane
#        trace_children_check.py grandworker FILE TASKS RUNS CHILDHOST GRANDHOST
#          a child Worker's own child Worker: the child Worker's lane of it
#          ("next-level 0 / next-level 0") holds one bar per run; its inner
#          tasks ("n0/n0/..."), TASKS per run, each once, on lanes of its own
#          (GRANDHOST process: in a process of its own, named by its path;
#          thread: in the child Worker's, named "next-level 0 / next-level 0:
#          ..."), each inside that lane's bar of the task that ran it; its
#          runs completed, RUNS of them
#        trace_children_check.py granderror FILE RUNS
#          a failed grandchild task ("boom", "n0/n0/..."), once per run, with
#          its message as its error
#        trace_children_check.py drops FILE
#          a "dropped events" marker on a lane of the child's process
#        trace_children_check.py granddrops FILE
#          a "dropped events" marker on the orchestrator lane of a process
#          of its own (a process child Worker's process child Worker),
#          counted in otherData.dropped
# Exits 0, or 1 printing why.
import json
import sys


def ns(us):
    return round(float(us) * 1000)


def fail(why):
    print("trace_children_check: %s: %s" % (sys.argv[2], why))
    sys.exit(1)


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    evs = doc["traceEvents"]
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    main = [e["pid"] for e in evs if e.get("ph") == "M" and e["name"] == "process_name"
            and e["args"]["name"].startswith("strata ")][0]
    return doc, evs, lanes, main


def bars_on(evs, key):
    return [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in evs
            if e.get("cat") == "task" and e.get("ph") == "X" and (e["pid"], e["tid"]) == key]


def inside(a, b, bars):
    return any(s <= a and b <= t for s, t in bars)


def chip(path, tasks):
    doc, evs, lanes, main = load(path)
    chip_lanes = [k for k, n in lanes.items() if n.startswith("chip ")]
    if len(chip_lanes) != 1:
        fail("expected one chip lane, found %r" % chip_lanes)
    key = chip_lanes[0]
    if key[0] == main:
        fail("the chip's lane is in the parent's process")
    phases = [e for e in evs if e.get("cat") == "chip"]
    if len(phases) != 3 * tasks:
        fail("%d chip phases, expected %d" % (len(phases), 3 * tasks))
    bars = bars_on(evs, key)
    for e in phases:
        if (e["pid"], e["tid"]) != key:
            fail("chip phase %r not on the chip's lane" % e)
        if not inside(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), bars):
            fail("%s at %s outside the parent's dispatch-to-completion bars" % (e["name"], e["ts"]))


def worker(path, tasks, runs, host):
    doc, evs, lanes, main = load(path)
    outer = [k for k, n in lanes.items() if n == "next-level 0"]
    if len(outer) != 1 or (outer[0][0] == main) != (host == "thread"):
        fail("expected the parent's lane next-level 0 in the %s process, found %r"
             % ("parent's" if host == "thread" else "child's", outer))
    child = outer[0][0]
    prefix = "next-level 0: " if host == "thread" else ""
    bars = bars_on(evs, outer[0])
    if len(bars) != runs:
        fail("%d bars on next-level 0, expected %d" % (len(bars), runs))
    inner = [e for e in evs if e.get("cat") == "task" and str(e["args"]["task"]).startswith("n0/")]
    if len(inner) != tasks * runs:
        fail("%d inner tasks, expected %d" % (len(inner), tasks * runs))
    per_bar = [0] * len(bars)
    for e in inner:
        if e["ph"] != "X":
            fail("inner task %s did not run" % e["args"]["task"])
        key = (e["pid"], e["tid"])
        if key == outer[0] or key[0] != child or not lanes.get(key, "").startswith(
                (prefix + "sub ", prefix + "helper")):
            fail("inner task %s on lane %r, not one of the child's own" % (e["args"]["task"], key))
        a, b = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        hit = [i for i, (s, t) in enumerate(bars) if s <= a and b <= t]
        if not hit:
            fail("inner task %s [%d, %d] outside every bar of the parent's task" % (e["args"]["task"], a, b))
        per_bar[hit[0]] += 1
    if per_bar != [tasks] * runs:
        fail("inner tasks per parent task %r, expected %d each" % (per_bar, tasks))
    done = [e for e in evs if e.get("cat") == "run" and e["pid"] == child
            and e["name"].startswith("run n0/") and e["name"].endswith("completed")]
    if len(done) != runs:
        fail("%d inner runs completed, expected %d" % (len(done), runs))


def grandchip(path, tasks, host):
    doc, evs, lanes, main = load(path)
    outer = [k for k, n in lanes.items() if n == "next-level 0"]
    if len(outer) != 1:
        fail("expected the parent's lane next-level 0, found %r" % outer)
    child = outer[0][0]
    if (child == main) != (host == "thread"):
        fail("the parent's lane next-level 0 is not in the %s process" % host)
    # the chip's process is its own, so its lane needs no prefix
    chip_lanes = [k for k, n in lanes.items() if n.startswith("chip ")]
    if len(chip_lanes) != 1:
        fail("expected one lane of the child Worker's chip, found %r" % chip_lanes)
    key = chip_lanes[0]
    if key[0] in (main, child):
        fail("the grandchild chip's lane %r is not in a process of its own" % (key,))
    phases = [e for e in evs if e.get("cat") == "chip"]
    if len(phases) != 3 * tasks:
        fail("%d chip phases, expected %d" % (len(phases), 3 * tasks))
    bars = bars_on(evs, key)
    if len(bars) != tasks:
        fail("%d task bars on the chip's lane, expected %d" % (len(bars), tasks))
    for e in phases:
        if (e["pid"], e["tid"]) != key:
            fail("chip phase %r not on the chip's lane" % e)
        if not inside(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), bars):
            fail("%s at %s outside the child Worker's bars" % (e["name"], e["ts"]))


def grandworker(path, tasks, runs, child_host, grand_host):
    doc, evs, lanes, main = load(path)
    top = [k for k, n in lanes.items() if n == "next-level 0"]
    if len(top) != 1:
        fail("expected the parent's lane next-level 0, found %r" % top)
    child = top[0][0]
    if (child == main) != (child_host == "thread"):
        fail("the parent's lane next-level 0 is not in the %s process" % child_host)
    mid = [k for k, n in lanes.items() if n == "next-level 0 / next-level 0"]
    if len(mid) != 1:
        fail("expected the child Worker's lane of its own child Worker, found %r" % mid)
    grand = mid[0][0]
    if grand_host == "thread" and grand != child:
        fail("the thread-hosted grandchild's lane is not in the child Worker's process")
    if grand_host == "process" and grand in (main, child):
        fail("the process-hosted grandchild's lane is not in a process of its own")
    procs = {e["pid"]: e["args"]["name"] for e in evs
             if e.get("ph") == "M" and e["name"] == "process_name"}
    if grand_host == "process" and procs.get(grand) != "next-level 0: L2 child 0 (process)":
        fail("the grandchild's process is named %r" % procs.get(grand))
    # beside the child Worker's own lanes its lanes say whose they are
    prefix = "next-level 0 / next-level 0: " if grand_host == "thread" else ""
    bars = bars_on(evs, mid[0])
    if len(bars) != runs:
        fail("%d bars on the child Worker's lane of its child, expected %d" % (len(bars), runs))
    inner = [e for e in evs if e.get("cat") == "task"
             and str(e["args"]["task"]).startswith("n0/n0/")]
    if len(inner) != tasks * runs:
        fail("%d grandchild tasks, expected %d" % (len(inner), tasks * runs))
    if len({e["args"]["task"] for e in inner}) != len(inner):
        fail("a grandchild task is in the file twice")
    per_bar = [0] * len(bars)
    for e in inner:
        if e["ph"] != "X":
            fail("grandchild task %s did not run" % e["args"]["task"])
        key = (e["pid"], e["tid"])
        if key[0] != grand or not lanes.get(key, "").startswith(
                (prefix + "sub ", prefix + "helper")):
            fail("grandchild task %s on lane %r (%r), not one of its own"
                 % (e["args"]["task"], key, lanes.get(key)))
        a, b = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        hit = [i for i, (s, t) in enumerate(bars) if s <= a and b <= t]
        if not hit:
            fail("grandchild task %s [%d, %d] outside every bar of the child Worker's task"
                 % (e["args"]["task"], a, b))
        per_bar[hit[0]] += 1
    if per_bar != [tasks] * runs:
        fail("grandchild tasks per child Worker task %r, expected %d each" % (per_bar, tasks))
    done = [e for e in evs if e.get("cat") == "run" and e["pid"] == grand
            and e["name"].startswith("run n0/n0/") and e["name"].endswith("completed")
            and lanes.get((e["pid"], e["tid"])) == prefix + "runs"]
    if len(done) != runs:
        fail("%d grandchild runs completed on its runs lane, expected %d" % (len(done), runs))


def granderror(path, runs):
    doc, evs, lanes, main = load(path)
    boom = [e for e in evs if e.get("cat") == "task" and e.get("ph") == "X"
            and e["name"] == "boom" and str(e["args"]["task"]).startswith("n0/n0/")]
    if len(boom) != runs:
        fail("%d failed grandchild tasks, expected %d" % (len(boom), runs))
    for e in boom:
        if e["args"]["status"] != "failed" or e["args"].get("error") != "grandchild boom":
            fail("grandchild task %s: status %r, error %r" % (
                e["args"]["task"], e["args"]["status"], e["args"].get("error")))


def granddrops(path):
    doc, evs, lanes, main = load(path)
    mid = [k for k, n in lanes.items() if n == "next-level 0 / next-level 0"]
    if len(mid) != 1:
        fail("expected the child Worker's lane of its own child Worker, found %r" % mid)
    grand = mid[0][0]
    marks = [e for e in evs if e.get("name") == "dropped events" and e["pid"] == grand]
    if len(marks) != 1 or marks[0]["args"]["count"] <= 0:
        fail("expected one dropped-events marker in the grandchild's process, found %r" % marks)
    if lanes.get((marks[0]["pid"], marks[0]["tid"])) != "orchestrator":
        fail("the grandchild's marker is not on its orchestrator lane")
    if doc["otherData"]["dropped"] < marks[0]["args"]["count"]:
        fail("otherData.dropped %d does not count the grandchild's %d"
             % (doc["otherData"]["dropped"], marks[0]["args"]["count"]))


def drops(path):
    doc, evs, lanes, main = load(path)
    marks = [e for e in evs if e.get("name") == "dropped events" and e["pid"] != main]
    if not marks or marks[0]["args"]["count"] <= 0:
        fail("no dropped-events marker in a child's process")
    if lanes.get((marks[0]["pid"], marks[0]["tid"])) != "orchestrator":
        fail("the child's marker is not on its orchestrator lane")


if sys.argv[1] == "chip":
    chip(sys.argv[2], int(sys.argv[3]))
elif sys.argv[1] == "grandchip":
    grandchip(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif sys.argv[1] == "worker":
    worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
elif sys.argv[1] == "grandworker":
    grandworker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
elif sys.argv[1] == "granderror":
    granderror(sys.argv[2], int(sys.argv[3]))
elif sys.argv[1] == "granddrops":
    granddrops(sys.argv[2])
else:
    drops(sys.argv[2])
