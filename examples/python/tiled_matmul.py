#!/usr/bin/env python3
"""examples/python/tiled_matmul.py - a tiled matrix product from Python.

Owns: the Python demo scripts/demo.sh runs: C = A @ B over numpy tiles of
arrays every sub worker sees (Worker.array), each output tile accumulated
by a chain of INOUT tasks (one per k), then relu and a sum of every tile
into runtime memory (o.alloc) and a final total, all on process-hosted sub
workers (one interpreter each: the tile products run in parallel, no GIL),
checked against numpy's own product.
Must never: copy a tile into or out of a task, or print OK without checking.

Usage: examples/python/tiled_matmul.py [--n N] [--tile T] [--workers W] [--runs R]
(needs the built module: PYTHONPATH=build/python).
"""
import argparse
import sys
import time

import numpy as np

import strata


def gemm_acc(c, a, b):
    """c += a @ b on one output tile (c: INOUT, a and b: IN)."""
    c += a @ b


def zero(c):
    c[:] = 0


def relu_sum(out, c):
    """out[0] = sum(max(c, 0)) of one tile (out: runtime memory)."""
    out[0] = np.maximum(c, 0).sum()


def total(out, *parts):
    out[0] = sum(p[0] for p in parts)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=256, help="matrix size (default 256)")
    p.add_argument("--tile", type=int, default=64, help="tile size, divides n (default 64)")
    p.add_argument("--workers", type=int, default=2, help="sub worker processes (default 2)")
    p.add_argument("--runs", type=int, default=3, help="runs, each on new A and B (default 3)")
    opt = p.parse_args(argv)
    n, ts = opt.n, opt.tile
    if n <= 0 or ts <= 0 or n % ts:
        p.error(f"--tile {ts} must divide --n {n}")
    nt = n // ts

    with strata.Worker(sub_workers=opt.workers, sub_mode="process") as w:
        gemm = w.register_sub(gemm_acc)
        clear = w.register_sub(zero)
        rsum = w.register_sub(relu_sum)
        tot = w.register_sub(total)
        a = w.array((n, n), np.float64)
        b = w.array((n, n), np.float64)
        c = w.array((n, n), np.float64)
        result = w.array((opt.runs,), np.float64)
        rng = np.random.default_rng(7)

        def tile(m, i, j):  # a view: the task gets this memory, not a copy
            return m[i * ts:(i + 1) * ts, j * ts:(j + 1) * ts]

        def orch(o, run):
            for i in range(nt):
                for j in range(nt):
                    o.submit_sub(clear, strata.OUT_EXISTING(tile(c, i, j)))
                    for k in range(nt):  # a chain: each waits for the one before
                        o.submit_sub(gemm, strata.INOUT(tile(c, i, j)),
                                     strata.IN(tile(a, i, k)), strata.IN(tile(b, k, j)))
            parts = []
            for i in range(nt):
                for j in range(nt):
                    part = o.alloc((1,), np.float64)
                    o.submit_sub(rsum, strata.OUT(part), strata.IN(tile(c, i, j)))
                    parts.append(strata.IN(part))
            o.submit_sub(tot, strata.OUT_EXISTING(result[run:run + 1]), *parts)

        ok = True
        print(f"C = A @ B, {n}x{n} in {ts}x{ts} tiles ({nt**3} tile products in {nt*nt} "
              f"INOUT chains), then sum(relu(C)); {opt.workers} process-hosted sub workers")
        for run in range(opt.runs):
            a[:] = rng.standard_normal((n, n))
            b[:] = rng.standard_normal((n, n))
            t0 = time.perf_counter()
            w.run(lambda o: orch(o, run))
            dt = time.perf_counter() - t0
            want_c = a @ b
            want = np.maximum(want_c, 0).sum()
            good = np.allclose(c, want_c) and np.isclose(result[run], want)
            ok &= bool(good)
            print(f"run {run + 1}: sum(relu(A @ B)) = {result[run]:.6f}, numpy {want:.6f}, "
                  f"{dt * 1e3:.1f} ms: {'OK' if good else 'MISMATCH'}")
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
