"""tests/python/test_dependencies.py - dependencies of Python-built graphs.

Owns: random small graphs of read/write tasks on tiles of one array, run by
strata and compared with the same operations applied in submission order
(the sequential oracle). Each operation is order-sensitive (out = 3*out + ins
+ c, mod a prime), so a missing read-after-write, write-after-read or
write-after-write edge changes the result.
Must never: use operations that commute, or seeds that change between runs.
"""
import random

import numpy as np
import pytest

from conftest import need_strata

strata = need_strata()


NTILES = 8
TILE = 16
PRIME = 1000003


def step(out, *rest):
    """INOUT out, IN tiles..., scalar c: out = 3*out + sum(ins) + c (mod PRIME)."""
    *ins, c = rest
    acc = out * 3 + c
    for t in ins:
        acc = acc + t
    out[:] = acc % PRIME


def overwrite(out, *rest):
    """OUT_EXISTING out, IN tiles..., scalar c: out = sum(ins) + c (mod PRIME)."""
    *ins, c = rest
    acc = np.full_like(out, c)
    for t in ins:
        acc = acc + t
    out[:] = acc % PRIME


def random_graph(seed, ntasks):
    """[(kind, out tile, [in tiles], c)]; an in tile is never the out tile."""
    rng = random.Random(seed)
    ops = []
    for _ in range(ntasks):
        out = rng.randrange(NTILES)
        others = [t for t in range(NTILES) if t != out]
        ins = rng.sample(others, rng.randrange(3))
        ops.append((rng.choice(("step", "overwrite")), out, ins, rng.randrange(100)))
    return ops


def oracle(init, ops):
    tiles = init.reshape(NTILES, TILE).copy()
    for kind, out, ins, c in ops:
        acc = (tiles[out] * 3 + c) if kind == "step" else np.full(TILE, c, dtype=tiles.dtype)
        for t in ins:
            acc = acc + tiles[t]
        tiles[out] = acc % PRIME
    return tiles.reshape(-1)


def submit_ops(o, fns, tile, ops):
    for kind, out, ins, c in ops:
        tag = strata.INOUT if kind == "step" else strata.OUT_EXISTING
        o.submit_sub(fns[kind], tag(tile(out)), *[strata.IN(tile(t)) for t in ins], c)


@pytest.mark.parametrize("mode", ["thread", "process"])
@pytest.mark.parametrize("seed", range(6))
def test_random_graph_matches_the_sequential_oracle(mode, seed):
    ops = random_graph(seed, 60)
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        fns = {"step": w.register_sub(step), "overwrite": w.register_sub(overwrite)}
        a = w.array((NTILES * TILE,), np.int64)
        init = np.arange(NTILES * TILE, dtype=np.int64) % 97
        a[:] = init

        def tile(i):
            return a[i * TILE:(i + 1) * TILE]

        w.run(lambda o: submit_ops(o, fns, tile, ops))
        np.testing.assert_array_equal(a, oracle(init, ops))
        # The same graph split over pipelined runs: runs order like tasks do.
        a[:] = init
        half = len(ops) // 2
        first, second = ops[:half], ops[half:]
        r1 = w.submit(lambda o: submit_ops(o, fns, tile, first))
        r2 = w.submit(lambda o: submit_ops(o, fns, tile, second))
        r1.wait()
        r2.wait()
        np.testing.assert_array_equal(a, oracle(init, ops))


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_intermediates_in_runtime_memory_follow_the_graph(mode):
    """A chain through o.alloc tensors: out = ((x*3+1)*3+2)... in order."""
    with strata.Worker(sub_workers=2, sub_mode=mode) as w:
        st = w.register_sub(step)
        ow = w.register_sub(overwrite)
        out = w.array((TILE,), np.int64)
        src = w.array((TILE,), np.int64)
        src[:] = np.arange(TILE)

        def orch(o):
            t = o.alloc((TILE,), np.int64)
            o.submit_sub(ow, strata.OUT(t), strata.IN(src), 0)  # t = src
            for c in range(1, 11):
                o.submit_sub(st, strata.INOUT(t), c)
            o.submit_sub(ow, strata.OUT_EXISTING(out), strata.IN(t), 0)

        w.run(orch)
        want = np.arange(TILE, dtype=np.int64)
        for c in range(1, 11):
            want = (want * 3 + c) % PRIME
        np.testing.assert_array_equal(out, want)
