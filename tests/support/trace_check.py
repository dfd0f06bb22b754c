#!/usr/bin/python3
# tests/support/trace_check.py - checks one strata trace file against the
# format (docs/api.md "Tracing and statistics") for the tests.
#
# Owns: the structural checks a test asks for; prints what it counted.
# Must never: check times beyond ordering (timing goes into benchmarks).
#
# Usage: trace_check.py FILE EXPECTED_TASKS   (-1: any number)
#        trace_check.py --dir DIR [--expect-chip-phases]
#                                             (every file in DIR, any number;
#                                             the flag: some chip phase exists)
# Prints "tasks=N edges=E dropped=D chain_ns=S pids=P child_tasks=C
# window_waits=W" on success (S: the summed durations of the tasks named
# "chain", in ns; C: tasks recorded with a child process's pid; W: "window
# full" waits); exits 1 with a reason.
import json
import sys


def ns(us):
    return round(float(us) * 1000)


def fail(why):
    print("trace_check: %s: %s" % (current[0], why))
    sys.exit(1)


def main():
    if sys.argv[1] == "--dir":  # every file there, any number of tasks
        import os
        names = sorted(os.listdir(sys.argv[2]))
        if not names:
            fail("no trace file in " + sys.argv[2])
        for name in names:
            check(os.path.join(sys.argv[2], name), -1)
        if "--expect-chip-phases" in sys.argv and chip_phases[0] == 0:
            fail("no chip phase event in any file")
        print("files=%d chip_phases=%d" % (len(names), chip_phases[0]))
        return
    print(check(sys.argv[1], int(sys.argv[2])))


current = [""]
chip_phases = [0]


def check(path, expected):
    current[0] = path
    with open(path, encoding="utf-8", errors="strict") as f:
        doc = json.load(f)
    other = doc.get("otherData", {})
    for key in ("producer", "format", "clock", "t0_ns", "dropped", "lanes"):
        if key not in other:
            fail("otherData lacks " + key)
    evs = doc["traceEvents"]
    named = {(e["pid"], e["tid"]) for e in evs if e.get("ph") == "M" and e["name"] == "thread_name"}
    procs = {e["pid"] for e in evs if e.get("ph") == "M" and e["name"] == "process_name"}
    tasks = {}
    for e in evs:
        if e.get("ph") != "M" and (e["pid"], e["tid"]) not in named:
            fail("event on a lane without a name: %r" % e)
        if e.get("ph") != "M" and e["pid"] not in procs:
            fail("event of a process without a name: %r" % e)
        if e.get("cat") == "task":
            tid = e["args"]["task"]
            if "member" in e["args"]:  # a group's members share the task id
                tid = "%s/%d" % (tid, e["args"]["member"])
            if tid in tasks:
                fail("task %s appears twice" % tid)
            tasks[tid] = e
            if e["ph"] == "X" and ns(e["dur"]) < 0:
                fail("task %s ends before it starts" % tid)
    if expected >= 0 and len(tasks) != expected:
        fail("%d tasks in the trace, expected %d" % (len(tasks), expected))
    starts, ends = {}, {}
    for e in evs:
        if e.get("cat") == "dep":
            (starts if e["ph"] == "s" else ends)[e["id"]] = e
    if set(starts) != set(ends):
        fail("unpaired flow events")
    for i, s in starts.items():
        if ns(s["ts"]) > ns(ends[i]["ts"]):
            fail("edge %d points from a later end to an earlier start" % i)
    for tid, e in tasks.items():
        for p in e["args"].get("deps", []):
            pe = tasks.get(p) or tasks.get(p + "/0")
            if pe is None:
                fail("task %s depends on %s, not in the trace" % (tid, p))
            if ns(pe["ts"]) + ns(pe["dur"]) > ns(e["ts"]):
                fail("task %s starts before its producer %s ended" % (tid, p))
    dropped = int(other["dropped"])
    marks = sum(e["args"]["count"] for e in evs if e.get("name") == "dropped events")
    if marks != dropped:
        fail("dropped events marks say %d, otherData %d" % (marks, dropped))
    # Child processes' events, on the parent's clock: inside the window from
    # their dispatch by the parent.
    main_pid = [e["pid"] for e in evs if e.get("ph") == "M" and e["name"] == "process_name"
                and e["args"]["name"].startswith("strata ")][0]
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    child = 0
    for tid, e in tasks.items():
        if e["pid"] == main_pid or e["ph"] != "X":
            continue
        child += 1
        # Sub workers time their bodies in the child; next-level children
        # (chips, child Workers) are timed from dispatch to completion.
        if lanes[(e["pid"], e["tid"])].startswith("sub ") and not e["args"]["measured"]:
            fail("task %s of a child process was not measured there" % tid)
        if ns(e["ts"]) < ns(e["args"]["dispatch_us"]):
            fail("task %s of child %d starts before its dispatch" % (tid, e["pid"]))
    chain = sum(ns(e["dur"]) for e in tasks.values() if e["name"] == "chain" and e["ph"] == "X")
    # A chip's native phases lie inside the bar of a task on the same lane.
    bars = {}
    for e in tasks.values():
        if e["ph"] == "X":
            bars.setdefault((e["pid"], e["tid"]), []).append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    for e in evs:
        if e.get("cat") != "chip":
            continue
        chip_phases[0] += 1
        a, b = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        if not any(s <= a and b <= t for s, t in bars.get((e["pid"], e["tid"]), [])):
            fail("%s at %s lies outside every task of its lane" % (e["name"], e["ts"]))
    waits = sum(1 for e in evs if e.get("cat") == "wait" and e["name"] == "window full")
    for e in evs:
        if e.get("cat") == "wait" and ns(e["dur"]) < 0:
            fail("a wait ends before it began")
    return ("tasks=%d edges=%d dropped=%d chain_ns=%d pids=%d child_tasks=%d window_waits=%d"
            % (len(tasks), len(starts), dropped, chain, len(procs), child, waits))


main()
