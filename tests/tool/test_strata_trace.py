#!/usr/bin/python3
"""tests/tool/test_strata_trace.py - the strata-trace tool on the hand-written sample trace.

Owns: the checks of tools/strata-trace: the summary's numbers for
tests/data/sample_trace.json (its expected text is
tests/data/sample_trace.summary.txt), the size and validity of the PNG it
draws, the exit status 2 and message of each error, and the installed copy.
Must never: depend on timing, need a display, or write outside a temporary
directory.

Run by CTest (tests/CMakeLists.txt, label "tool") with /usr/bin/python3:
  STRATA_BUILD_DIR  a built tree: also install it into a scratch prefix and
                    run the installed tool (skipped when unset)
  CMAKE             the cmake to install with (default: cmake)
"""

import json
import os
import re
import struct
import subprocess
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "strata-trace")
SAMPLE = os.path.join(ROOT, "tests", "data", "sample_trace.json")
EXPECTED_SUMMARY = os.path.join(ROOT, "tests", "data", "sample_trace.summary.txt")
PYTHON = "/usr/bin/python3"  # the tool's interpreter (its #! line)


def run(*args, python_flags=None):
    """Runs the tool (through its #! line, or /usr/bin/python3 with flags)."""
    cmd = [TOOL] if python_flags is None else [PYTHON] + python_flags + [TOOL]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, timeout=300)


def png_size(path):
    """(width, height) from the PNG signature and IHDR chunk; fails on anything else."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature: %r" % data[:8]
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13, "first chunk is %r (%d bytes), not IHDR" % (kind, length)
    body = data[16:29]
    (crc,) = struct.unpack(">I", data[29:33])
    assert zlib.crc32(kind + body) == crc, "IHDR CRC mismatch"
    assert data[-12:-8] == b"\x00\x00\x00\x00" and data[-8:-4] == b"IEND", "no IEND chunk at the end"
    width, height = struct.unpack(">II", body[:8])
    return width, height


def sample_doc():
    with open(SAMPLE) as f:
        return json.load(f)


class Scratch(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path


class SummaryTest(Scratch):
    def summary(self, *extra, path=SAMPLE):
        r = run("summary", path, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_summary_matches_expected_text(self):
        # Line 1 names the file as given; the rest is the stable format.
        out = self.summary().splitlines()
        self.assertEqual(out[0], "strata trace: " + SAMPLE)
        with open(EXPECTED_SUMMARY) as f:
            expected = f.read().splitlines()
        self.assertEqual(out[1:], expected[1:])

    def test_lane_utilisation_tasks_and_failed(self):
        out = self.summary()
        self.assertIn("span: 555.000 us, 5 lanes, 8 tasks ran (1 failed), 1 not run", out)
        lanes = {
            "sub 0 (pid 4100)": ("70.000 us", "12.6%", "3", "1"),
            "sub 1 (pid 4100)": ("50.000 us", "9.0%", "2", "0"),
            "chip sim:0 (pid 4101)": ("285.000 us", "51.4%", "3", "0"),
            "orchestrator (pid 4100)": ("0.000 us", "0.0%", "0", "0"),
        }
        for lane, (busy, util, tasks, failed) in lanes.items():
            pattern = r"^  %s +%s +%s +%s +%s$" % tuple(map(re.escape, (lane, busy, util, tasks, failed)))
            self.assertRegex(out, re.compile(pattern, re.M), lane)
        self.assertNotIn("runs (pid", out, "the run phase lane is not a worker lane")

    def test_critical_path_of_each_run(self):
        self.assertEqual(critical_path_lines(self.summary()), EXPECTED_PATHS)

    def test_critical_path_from_flow_events_alone(self):
        doc = sample_doc()
        for ev in doc["traceEvents"]:
            ev.get("args", {}).pop("deps", None)
        path = self.write("flows_only.json", json.dumps(doc))
        self.assertEqual(critical_path_lines(self.summary(path=path)), EXPECTED_PATHS)

    def test_critical_path_from_deps_args_alone(self):
        doc = sample_doc()
        doc["traceEvents"] = [ev for ev in doc["traceEvents"] if ev.get("cat") != "dep"]
        path = self.write("deps_only.json", json.dumps(doc))
        self.assertEqual(critical_path_lines(self.summary(path=path)), EXPECTED_PATHS)

    def test_a_group_is_its_member_that_ended_last(self):
        # Two members of task 9:0 share its id; the consumer 9:1 depends on
        # the group, so the path runs through the member that ended last.
        def x(tid, task, ts, dur, **args):
            a = {"run": 9, "task": task, "worker": tid, "status": "ok"}
            a.update(args)
            return {"ph": "X", "cat": "task", "name": "k", "pid": 1, "tid": 10 + tid,
                    "ts": ts, "dur": dur, "args": a}
        doc = {"traceEvents": [
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 10, "args": {"name": "sub 0"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 11, "args": {"name": "sub 1"}},
            x(0, "9:0", 0.0, 30.0, member=0),
            x(1, "9:0", 0.0, 70.0, member=1),
            x(0, "9:1", 80.0, 5.0, deps=["9:0"]),
            x(0, "9:0", 0.0, 10.0, member=2)],
            "otherData": {"producer": "strata", "format": 1, "dropped": 0}}
        path = self.write("group.json", json.dumps(doc))
        out = self.summary(path=path)
        self.assertIn("  run 9: 75.000 us over 2 tasks", out)

    def test_long_critical_path_is_cut_at_path_tasks(self):
        out = self.summary("--path-tasks", "2")
        run1 = out.split("  run 1: 175.000 us over 4 tasks\n")[1].split("  run 2:")[0].splitlines()
        self.assertEqual([line.split()[0] for line in run1[:2]], ["1:0", "1:1"])
        self.assertEqual(run1[2:], ["    ... and 2 more tasks (--path-tasks N lists more)"])

    def test_slowest_tasks(self):
        out = self.summary("--top", "3")
        section = out.split("slowest tasks (top 3):\n")[1].split("\n\n")[0].splitlines()
        self.assertEqual([line.split()[:3] for line in section],
                         [["1:1", "gemm", "100.000"], ["2:1", "gemm", "90.000"], ["1:2", "gemm", "80.000"]])

    def test_chip_gaps_above_threshold(self):
        # Gaps of 61, 4 and 115 us between the chip lane's events.
        self.assertIn("chip sim:0 (pid 4101): 2 gaps, total 176.000 us, largest 115.000 us "
                      "(from 310.000 us to 425.000 us)", self.summary())
        self.assertIn("chip sim:0 (pid 4101): 3 gaps, total 180.000 us, largest 115.000 us",
                      self.summary("--gap-us", "1"))
        self.assertIn("chip sim:0 (pid 4101): no gaps", self.summary("--gap-us", "200"))

    def test_dropped_events(self):
        out = self.summary()
        drops = out.split("dropped events: ")[1].splitlines()
        self.assertEqual(drops, ["15", "  sub 1 (pid 4100): 12", "  chip sim:0 (pid 4101): 3"])

    def test_dropped_total_disagreeing_with_markers_is_reported(self):
        doc = sample_doc()
        doc["otherData"]["dropped"] = 20
        out = self.summary(path=self.write("drops.json", json.dumps(doc)))
        self.assertIn("(the lanes' markers add up to 15, otherData.dropped says 20)", out)


EXPECTED_PATHS = [
    "run 1: 175.000 us over 4 tasks", "1:0 make_x", "1:1 gemm", "1:3 relu_sum", "1:4 check",
    "run 2: 135.000 us over 3 tasks", "2:0 make_x", "2:1 gemm", "2:2 relu_sum",
]


def critical_path_lines(out):
    section = out.split("critical path (per run, task durations along the dependency edges):\n")[1]
    lines = []
    for line in section.split("\n\n")[0].splitlines():
        line = line.strip()
        lines.append(line if line.startswith("run ") else " ".join(line.split()[:2]))
    return lines


class DrawTest(Scratch):
    def draw(self, *extra):
        out = os.path.join(self.tmp, "trace.png")
        r = run("draw", SAMPLE, "-o", out, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def test_png_of_the_default_size(self):
        self.assertEqual(png_size(self.draw()), (1600, 800))

    def test_png_of_the_requested_size_with_edges(self):
        # 1000/96 inches is not exact in binary: the size must still come out exact.
        for width, height, dpi in ((1000, 333, 96), (640, 480, 72), (1201, 701, 150)):
            out = self.draw("--edges", "--width", str(width), "--height", str(height), "--dpi", str(dpi))
            self.assertEqual(png_size(out), (width, height), "dpi %d" % dpi)

    def test_bad_size_is_an_argument_error(self):
        r = run("draw", SAMPLE, "-o", os.path.join(self.tmp, "x.png"), "--width", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("'0' must be positive", r.stderr)


class ErrorTest(Scratch):
    def assert_fails(self, args, message, **kw):
        r = run(*args, **kw)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(message, r.stderr)
        self.assertEqual(r.stdout, "")

    def test_missing_file(self):
        path = os.path.join(self.tmp, "absent.json")
        self.assert_fails(["summary", path], "strata-trace: %s: no such file" % path)

    def test_bad_json(self):
        path = self.write("bad.json", '{"traceEvents": [')
        self.assert_fails(["summary", path], "strata-trace: %s: not valid JSON:" % path)

    def test_not_a_strata_trace(self):
        path = self.write("other.json", json.dumps({"traceEvents": [], "otherData": {"producer": "chrome"}}))
        self.assert_fails(["summary", path],
                          '%s: not a strata trace (otherData.producer is "chrome", expected "strata")' % path)
        path = self.write("plain.json", json.dumps({"traceEvents": []}))
        self.assert_fails(["draw", path, "-o", os.path.join(self.tmp, "x.png")],
                          '%s: not a strata trace (otherData.producer is null, expected "strata")' % path)

    def test_unknown_format_version(self):
        doc = sample_doc()
        doc["otherData"]["format"] = 2
        path = self.write("v2.json", json.dumps(doc))
        self.assert_fails(["summary", path], "%s: trace format 2, this tool reads format 1" % path)

    def test_malformed_event(self):
        doc = sample_doc()
        first = next(ev for ev in doc["traceEvents"] if ev.get("args", {}).get("task") == "1:0")
        del first["ts"]
        path = self.write("no_ts.json", json.dumps(doc))
        self.assert_fails(["summary", path], '%s: a "X" event without a usable ts, dur or args' % path)

    def test_dependency_cycle(self):
        doc = sample_doc()
        for ev in doc["traceEvents"]:
            if ev.get("args", {}).get("task") == "1:0":
                ev["args"]["deps"] = ["1:4"]
        path = self.write("cycle.json", json.dumps(doc))
        self.assert_fails(["summary", path], "%s: the dependency edges form a cycle through task" % path)

    def test_missing_matplotlib(self):
        # python3 -S leaves out site-packages and dist-packages: no matplotlib.
        out = os.path.join(self.tmp, "x.png")
        self.assert_fails(["draw", SAMPLE, "-o", out], "draw needs matplotlib: apt-get install python3-matplotlib",
                          python_flags=["-S"])
        self.assertFalse(os.path.exists(out))
        r = run("summary", SAMPLE, python_flags=["-S"])
        self.assertEqual(r.returncode, 0, "the summary needs no matplotlib: " + r.stderr)


class InstalledTest(Scratch):
    @unittest.skipUnless(os.environ.get("STRATA_BUILD_DIR"), "STRATA_BUILD_DIR not set")
    def test_installed_tool_runs(self):
        prefix = os.path.join(self.tmp, "prefix")
        r = subprocess.run([os.environ.get("CMAKE", "cmake"), "--install", os.environ["STRATA_BUILD_DIR"],
                            "--prefix", prefix], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        tool = os.path.join(prefix, "bin", "strata-trace")
        self.assertTrue(os.access(tool, os.X_OK), "%s is not an executable" % tool)
        r = subprocess.run([tool, "summary", SAMPLE], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dropped events: 15", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
