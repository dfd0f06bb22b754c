#!/usr/bin/env python3
"""bench/bench_python.py - Python-hosted sub tasks: cost per task, per run, and
of orchestration from Python.

Owns: the sweep of runs of 0, 1..256 empty Python sub tasks on process-hosted
sub workers, fitted with a line (slope: cost per task; fixed cost per run: the
run of one task less that slope; the line's intercept is shown, not judged),
the same sweep on concurrent.futures.ProcessPoolExecutor and on Dask's
local scheduler ("processes", on a pool reused across runs), the Python
submission loop timed inside the orchestration function with every task held
back by a gate task, next to the C figure of the same graph (read from
bench_build_cost --json), and the table/JSON output in the shape of the C
benchmarks (bench/bench_common.c). The strata Worker runs every slot of its
task window once before anything is timed (a slot's first use faults its
memory in).
Must never: mix the fixed and the per-task cost into one figure, time anything
but the submission loop on the orchestration row, or judge a --quick run.

Run from the repository root after the build: /usr/bin/python3 bench/bench_python.py
[--reps N] [--workers N] [--quick] [--json FILE]. The module is taken from
$STRATA_BUILD_PREFIX/python (default build/python).
"""
import argparse
import concurrent.futures
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("STRATA_BUILD_PREFIX", ROOT / "build"))
sys.path.insert(0, str(BUILD / "python"))

import numpy as np  # noqa: E402

import strata  # noqa: E402

DEFAULT_REPS = 7
MIN_REPS = 5
SWEEP = [1, 2, 4, 8, 16, 32, 64, 128, 256]
TARGET_PER_TASK_US = 4.0
TARGET_PER_RUN_US = 20.0
TARGET_RATIO = 0.2  # strata >= 5x faster per task than each anchor
UPSTREAM_PER_TASK_US = 8.08  # bench/README.md, "Quoted upstream figures"
UPSTREAM_PER_RUN_US = 43.3
NCHAINS = 8  # as bench_build_cost.c: each task reads its tile, accumulates into a chain
TILE_ELEMS = 16
BUILD_TASKS = 20000
BUILD_QUICK_TASKS = 2000
C_ROW = "build, one-call form, gated"  # bench_build_cost's row of the same graph
WINDOW = 65536  # task slots: the orchestration row holds BUILD_TASKS behind a gate


# ---- the harness (the shape of bench_common.c) ----------------------------------


class Value:
    """A figure: measured (median/min of samples), quoted, or unavailable (note)."""

    def __init__(self, kind, median=math.nan, low=math.nan, note=""):
        self.kind, self.median, self.min, self.note = kind, median, low, note

    @staticmethod
    def measured(samples):
        if not samples:
            return Value("unavailable", note="no samples")
        return Value("measured", statistics.median(samples), min(samples))

    @staticmethod
    def derived(median, low):
        return Value("measured", median, low)

    @staticmethod
    def quoted(figure):
        return Value("quoted", figure, figure)

    @staticmethod
    def unavailable(why):
        return Value("unavailable", note=why)

    def has_figure(self):
        return self.kind != "unavailable" and math.isfinite(self.median)

    def text(self):
        if self.kind == "measured":
            return f"{self.median:.3f} ({self.min:.3f})"
        if self.kind == "quoted":
            return f"{self.median:.3f} (doc)"
        return "n/a"


class Row:
    def __init__(self, metric, unit, value, target_max=0.0):
        self.metric, self.unit, self.strata, self.target_max = metric, unit, value, target_max
        self.compare = []  # [(anchor, Value, target_ratio)]

    def add(self, anchor, value, target_ratio=0.0):
        self.compare.append((anchor, value, target_ratio))
        return self

    def ratio(self, value):
        if not self.strata.has_figure() or not value.has_figure() or value.median <= 0:
            return math.nan
        return self.strata.median / value.median


class Table:
    def __init__(self, title, smoke):
        self.title, self.smoke, self.rows, self.notes = title, smoke, [], []

    def row(self, *args, **kw):
        r = Row(*args, **kw)
        self.rows.append(r)
        return r

    # Verdicts: None no target, True met, False missed, "smoke" not judged.
    def absolute_verdict(self, row):
        if row.target_max <= 0:
            return None
        if self.smoke:
            return "smoke"
        return row.strata.has_figure() and row.strata.median <= row.target_max

    def ratio_verdict(self, row, value, target_ratio):
        if target_ratio <= 0:
            return None
        if self.smoke:
            return "smoke"
        if value.kind == "unavailable":
            return None  # nothing to compare with: reported, not judged
        r = row.ratio(value)
        return math.isfinite(r) and r <= target_ratio

    def print(self):
        def verdict_text(v):
            return "smoke" if v == "smoke" else "" if v is None else "ok" if v else "MISS"

        print(f"\n== {self.title} ==")
        ncompare = max((len(r.compare) for r in self.rows), default=0)
        head = f"{'metric':<30} {'unit':<8} {'strata med (min)':<20} {'target':<13}"
        for k in range(ncompare):
            name = next((r.compare[k][0] for r in self.rows if k < len(r.compare)), "anchor")
            head += f" | {name + ' med (min)':<20} {'ratio':<7} {'target':<12}"
        print(head)
        for r in self.rows:
            target = (f"<={r.target_max:g} {verdict_text(self.absolute_verdict(r))}"
                      if r.target_max > 0 else "-")
            line = f"{r.metric:<30} {r.unit:<8} {r.strata.text():<20} {target:<13}"
            for anchor, value, tr in r.compare:
                ratio = r.ratio(value)
                rtext = f"{ratio:.2f}" if math.isfinite(ratio) else "-"
                ttext = (f"<={tr:.2f} {verdict_text(self.ratio_verdict(r, value, tr))}"
                         if tr > 0 else "-")
                line += f" | {value.text():<20} {rtext:<7} {ttext:<12}"
            print(line)
        seen = set()
        for r in self.rows:
            for anchor, value, _ in r.compare:
                if value.kind == "unavailable" and anchor not in seen:
                    seen.add(anchor)
                    print(f"  {anchor}: {value.note}")
        for note in self.notes:
            print(f"  {note}")
        sys.stdout.flush()


def num(v):
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def verdict_json(v):
    return None if v is None or v == "smoke" else bool(v)


def json_rows(tables, opt):
    """One object per (metric, anchor) pair, the keys of bench_report_write_json."""
    out = []
    for t in tables:
        for r in t.rows:
            common = {"metric": r.metric, "unit": r.unit, "strata": num(r.strata.median),
                      "strata_min": num(r.strata.min),
                      "target_max": num(r.target_max) if r.target_max > 0 else None,
                      "target_max_met": verdict_json(t.absolute_verdict(r)),
                      "reps": opt.reps, "workers": opt.workers, "quick": opt.quick,
                      "table": t.title}
            if not r.compare:
                out.append(common)
            for anchor, value, tr in r.compare:
                obj = dict(common)
                obj[anchor] = num(value.median)
                obj.update({"anchor": anchor, "anchor_kind": value.kind,
                            "anchor_min": num(value.min), "ratio": num(r.ratio(value)),
                            "target_ratio": tr if tr > 0 else None,
                            "target_ratio_met": verdict_json(t.ratio_verdict(r, value, tr))})
                if value.kind == "unavailable":
                    obj["note"] = value.note
                out.append(obj)
    return out


def misses(tables):
    n = 0
    for t in tables:
        for r in t.rows:
            n += t.absolute_verdict(r) is False
            n += sum(t.ratio_verdict(r, v, tr) is False for _, v, tr in r.compare)
    return n


def linear_fit(xs, ys):
    """Least squares y = a + b x: (a, b, r2)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    b = sxy / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    return a, b, (1 - ss_res / ss_tot) if ss_tot > 0 else 1.0


def fit(per_k, sizes):
    """(intercept Value, slope Value, r2) through the medians (min: through the minimums)."""
    if not all(per_k[k] for k in sizes):
        none = Value.unavailable("not measured")
        return none, none, math.nan
    a, b, r2 = linear_fit(sizes, [statistics.median(per_k[k]) for k in sizes])
    a_low, b_low, _ = linear_fit(sizes, [min(per_k[k]) for k in sizes])
    return Value.derived(a, a_low), Value.derived(b, b_low), r2


def per_run(per_k, slope):
    """What a run costs beyond its tasks: the run of one task, timed, less one
    marginal task (the slope). Median: median one-task run less the slope
    through the medians; min: the fastest one-task run less the slope through
    the minimums."""
    if not per_k.get(1) or not slope.has_figure():
        return Value.unavailable("not measured")
    return Value.derived(statistics.median(per_k[1]) - slope.median, min(per_k[1]) - slope.min)


# ---- the empty work ----------------------------------------------------------------


def empty_sub(x):
    """strata's empty sub task: one IN tensor, as bench_run_cost.c's."""


def empty_call():
    """The anchors' empty task."""


def gate_sub(flag, *accs):
    """Holds every chain back until the orchestration loop has been timed."""
    while flag[0] == 0:
        time.sleep(0.0002)


def accumulate_sub(tile, acc):
    """The orchestration row's task (never timed)."""


class StrataSide:
    def __init__(self, workers):
        # Every task crosses to a sub worker process: the waiting thread never
        # runs one itself (help_while_waiting=False).
        self.w = strata.Worker(sub_workers=workers, sub_mode="process",
                               help_while_waiting=False, task_window=WINDOW)
        self.w.__enter__()
        self.empty = self.w.register_sub(empty_sub)
        self.gate = self.w.register_sub(gate_sub)
        self.acc_fn = self.w.register_sub(accumulate_sub)
        self.input = self.w.array((1,), np.float64)
        self.w.init()
        self.warm_window()

    def warm_window(self):
        """Runs every slot of the task window once: a slot's first use faults
        its page in (65536 slots, tens of MiB), which is a cost of the
        Worker's first minute, not of a task."""
        fn, inp, IN = self.empty, self.input, strata.IN

        def orch(o):
            for _ in range(256):
                o.submit_sub(fn, IN(inp))

        for _ in range(WINDOW // 256 + 1):
            self.w.run(orch)

    def sample(self, ntasks, runs):
        """µs per run over `runs` back-to-back runs of ntasks independent tasks."""
        fn, inp, IN = self.empty, self.input, strata.IN

        def orch(o):
            for _ in range(ntasks):
                o.submit_sub(fn, IN(inp))

        run = self.w.run
        t0 = time.perf_counter_ns()
        for _ in range(runs):
            run(orch)
        return (time.perf_counter_ns() - t0) / 1e3 / runs

    def build_sample(self, ntasks):
        """µs per task of the submission loop, every task behind the gate."""
        if not hasattr(self, "tiles") or len(self.tiles) != ntasks:
            self.tile_mem = self.w.array((ntasks * TILE_ELEMS,), np.float32)
            self.tiles = [self.tile_mem[i * TILE_ELEMS:(i + 1) * TILE_ELEMS]
                          for i in range(ntasks)]
            self.accs = [self.w.array((TILE_ELEMS,), np.float32) for _ in range(NCHAINS)]
            self.flag = self.w.array((1,), np.int32)
        tiles, accs, fn = self.tiles, self.accs, self.acc_fn
        IN, INOUT = strata.IN, strata.INOUT
        loop_ns = []

        def orch(o):
            o.submit_sub(self.gate, strata.NO_DEP(self.flag), *[INOUT(a) for a in accs])
            t0 = time.perf_counter_ns()
            for i in range(ntasks):
                o.submit_sub(fn, IN(tiles[i]), INOUT(accs[i % NCHAINS]))
            loop_ns.append(time.perf_counter_ns() - t0)
            self.flag[0] = 1

        self.flag[0] = 0
        self.w.run(orch)
        return loop_ns[0] / 1e3 / ntasks

    def close(self):
        self.w.__exit__(None, None, None)


class PoolSide:
    def __init__(self, workers):
        self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers)
        list(self.pool.map(int, range(4 * workers)))  # start every worker process

    def sample(self, ntasks, runs):
        submit, wait = self.pool.submit, concurrent.futures.wait
        t0 = time.perf_counter_ns()
        for _ in range(runs):
            wait([submit(empty_call) for _ in range(ntasks)])
        return (time.perf_counter_ns() - t0) / 1e3 / runs

    def close(self):
        self.pool.shutdown()


class DaskSide:
    """dask.delayed + dask.compute(scheduler="processes") on a reused process pool."""

    def __init__(self, workers):
        import dask  # python3-dask

        self.dask = dask
        self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers)
        list(self.pool.map(int, range(4 * workers)))
        self.delayed = dask.delayed(empty_call, pure=False)

    def sample(self, ntasks, runs):
        compute, delayed = self.dask.compute, self.delayed
        t0 = time.perf_counter_ns()
        for _ in range(runs):
            compute(*[delayed() for _ in range(ntasks)], scheduler="processes", pool=self.pool)
        return (time.perf_counter_ns() - t0) / 1e3 / runs

    def close(self):
        self.pool.shutdown()


def start_dask(workers):
    try:
        return DaskSide(workers), None
    except ImportError as e:
        return None, f"not installed (apt-get install python3-dask): {e}"


# ---- the measurements --------------------------------------------------------------


def measure_sweep(opt, sides, why, tables):
    """Each repetition sweeps every size on every runtime (slow phases spread).
    why[name]: the unavailable Value of an anchor that could not start."""
    sizes = SWEEP[:6] if opt.quick else SWEEP
    budget = {"strata": 512 if opt.quick else 4096, "process pool": 128 if opt.quick else 1024,
              "dask": 32 if opt.quick else 256}
    min_runs = 3 if opt.quick else 5
    per_k = {name: {k: [] for k in [0] + sizes} for name in sides}
    for name, side in sides.items():  # warm up: first runs start caches and pools
        if side:
            side.sample(4, 3)
    for _ in range(opt.reps):
        for k in [0] + sizes:
            for name, side in sides.items():
                if side:
                    runs = max(min_runs, budget[name] // max(k, 1))
                    per_k[name][k].append(side.sample(k, runs))
    t = Table(f"tasks-per-run sweep (Worker.run, empty Python sub tasks with one IN tensor on "
              f"{opt.workers} process-hosted sub workers; anchors: the same empty function): "
              f"{opt.workers} workers, median of {opt.reps}", opt.quick)
    for k in [0] + sizes:
        r = t.row(f"run of {k} tasks", "us/run", Value.measured(per_k["strata"][k]))
        for name in ("process pool", "dask"):
            r.add(name, Value.measured(per_k[name][k]) if sides[name] else why[name])
    # The marginal cost of each step, through the medians: where the curve
    # bends (bench/README.md, "the sweep's shape").
    t.notes = ["marginal us/task between sizes (medians): " + "; ".join(
        f"{name} " + " ".join(
            f"{b}>{c}:{(statistics.median(per_k[name][c]) - statistics.median(per_k[name][b])) / (c - b):.1f}"
            for b, c in zip(sizes, sizes[1:]))
        for name in sides if sides[name])]
    t.print()
    tables.append(t)
    fits = {name: fit(per_k[name], sizes) if sides[name] else (why[name], why[name], math.nan)
            for name in sides}
    t = Table("per task: least-squares line through the sweep's medians (min: through its "
              "minimums); per run: the run of 1 task less that slope"
              f" (r2 strata {fits['strata'][2]:.3f}, process pool {fits['process pool'][2]:.3f},"
              f" dask {fits['dask'][2]:.3f})", opt.quick)
    r = t.row("per task", "µs", fits["strata"][1], TARGET_PER_TASK_US)
    r.add("process pool", fits["process pool"][1], TARGET_RATIO)
    r.add("dask", fits["dask"][1], TARGET_RATIO)
    r.add("upstream", Value.quoted(UPSTREAM_PER_TASK_US))
    runs = {name: per_run(per_k[name], fits[name][1]) if sides[name] else why[name]
            for name in sides}
    r = t.row("per run", "µs", runs["strata"], TARGET_PER_RUN_US)
    r.add("process pool", runs["process pool"])
    r.add("dask", runs["dask"])
    r.add("upstream", Value.quoted(UPSTREAM_PER_RUN_US))
    r = t.row("run of 1 task (info)", "µs", Value.measured(per_k["strata"][1]))
    for name in ("process pool", "dask"):
        r.add(name, Value.measured(per_k[name][1]) if sides[name] else why[name])
    r = t.row("empty run (info)", "µs", Value.measured(per_k["strata"][0]))
    for name in ("process pool", "dask"):
        r.add(name, Value.measured(per_k[name][0]) if sides[name] else why[name])
    r = t.row("intercept of the fit (info)", "µs", fits["strata"][0])
    r.add("process pool", fits["process pool"][0])
    r.add("dask", fits["dask"][0])
    t.notes = [
        "per task: the slope of the line; per run: the run of 1 task (median) less the slope, "
        "the same for every column: what a run costs beyond its one task",
        "info rows (not judged): the run of 1 task, an empty run (no task: no child is "
        "involved), and the line's intercept, which overstates a run's cost because small "
        "runs pay a hand-off per task that large runs pipeline away (bench/README.md)",
        "strata: Worker(sub_mode='process', help_while_waiting=False): every task runs in a "
        "sub worker process",
        "process pool: concurrent.futures.ProcessPoolExecutor(max_workers=workers); a run = "
        "submit every call, wait for all",
        "dask: dask.delayed(pure=False) + dask.compute(scheduler='processes') on a "
        "ProcessPoolExecutor reused across runs",
        "upstream: Python-hosted L3 sub tasks, quoted (bench/README.md, \"Quoted upstream "
        "figures\")"]
    t.print()
    tables.append(t)


def c_build_figure(opt):
    """The C figure of the same graph: bench_build_cost's one-call row, run now."""
    exe = BUILD / "bench" / "bench_build_cost"
    if not exe.exists():
        return Value.unavailable(f"{exe} not built")
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "c.json"
        cmd = [str(exe), "--reps", str(opt.reps), "--workers", str(opt.workers),
               "--json", str(out)] + (["--quick"] if opt.quick else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return Value.unavailable(f"bench_build_cost exited {p.returncode}")
        for obj in json.loads(out.read_text()):
            if obj["metric"] == C_ROW:
                return Value.derived(obj["strata"], obj["strata_min"])
    return Value.unavailable(f"bench_build_cost has no row '{C_ROW}'")


def measure_build(opt, side, tables):
    ntasks = BUILD_QUICK_TASKS if opt.quick else BUILD_TASKS
    side.build_sample(ntasks)  # warm up (views and chains made once, outside the timing)
    samples = [side.build_sample(ntasks) for _ in range(opt.reps)]
    t = Table(f"orchestration from Python per task (IN tile + INOUT accumulator, {NCHAINS} "
              f"chains): {ntasks} tasks per run, {opt.workers} workers, median of {opt.reps}",
              opt.quick)
    t.row("orchestration per task", "µs", Value.measured(samples)).add("C", c_build_figure(opt))
    t.notes = [
        "strata: the loop of o.submit_sub(fn, strata.IN(tile), strata.INOUT(acc)) inside the "
        "orchestration function; gated = every task waits for a gate task, opened after the loop",
        f"C: bench_build_cost's '{C_ROW}' row (strata_orch_sub with STRATA_IN/STRATA_INOUT), "
        "run by this benchmark with the same --reps/--workers/--quick"]
    t.print()
    tables.append(t)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Python process-hosted sub tasks (per task, per run) vs "
                    "ProcessPoolExecutor and Dask; orchestration cost from Python vs C.")
    p.add_argument("--reps", type=int, default=None,
                   help=f"repetitions each median is taken over (default {DEFAULT_REPS})")
    p.add_argument("--workers", type=int, default=2,
                   help="sub worker processes for strata and every anchor (default 2)")
    p.add_argument("--quick", action="store_true", help="CI smoke run: small sizes")
    p.add_argument("--json", metavar="FILE", help="also write the rows as one JSON array")
    opt = p.parse_args(argv)
    if opt.reps is None:
        opt.reps = MIN_REPS if opt.quick else DEFAULT_REPS
    if not 1 <= opt.reps <= 1000 or not 1 <= opt.workers <= 64:
        p.error("--reps needs 1..1000 and --workers 1..64")
    if opt.reps < MIN_REPS:
        print(f"note: --reps {opt.reps} < {MIN_REPS}: figures are a smoke test, not a "
              "measurement", file=sys.stderr)
    return opt


def main(argv):
    opt = parse_args(argv)
    strata_side = StrataSide(opt.workers)
    dask_side, dask_why = start_dask(opt.workers)
    sides = {"strata": strata_side, "process pool": PoolSide(opt.workers), "dask": dask_side}
    why = {"dask": Value.unavailable(dask_why or "")}
    tables = []
    try:
        measure_sweep(opt, sides, why, tables)
        measure_build(opt, strata_side, tables)
    finally:
        for side in sides.values():
            if side:
                side.close()
    if opt.json:
        with open(opt.json, "w") as f:
            f.write("[" + ",".join("\n  " + json.dumps(o, ensure_ascii=False)
                                   for o in json_rows(tables, opt)) + "\n]\n")
    if opt.quick:
        print("targets not judged: --quick is a smoke run (sizes too small for a reportable "
              "figure)")
    else:
        print(f"targets missed: {misses(tables)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
