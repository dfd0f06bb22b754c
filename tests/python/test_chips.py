"""tests/python/test_chips.py - sim chips of a Worker from Python.

Owns: Worker.add_chip, chip programs written in Python (ctx.launch of the sim
test kernels, ctx.fail), device memory (chip_malloc, chip_tensor,
chip_copy_to / chip_copy_from, chip_free) and next-level tasks chained
through device tensors, with the chip hosted as a thread and as a process.
Must never: read device memory but through chip_copy_from.
"""
import numpy as np
import pytest

from conftest import need_strata

strata = need_strata()

if not strata.SIM_TEST_KERNELS:
    pytest.skip("the sim test kernel module was not built with the tree", allow_module_level=True)

HOSTS = ["thread", "process"]
N = 256


def vadd_program(ctx, a, b, c, n):
    ctx.launch("vector_add", 2, a, b, c, n)


@pytest.mark.parametrize("host", HOSTS)
def test_device_memory_round_trip(host):
    with strata.Worker(sub_workers=1) as w:
        chip = w.add_chip(host=host, kernel_module=strata.SIM_TEST_KERNELS)
        w.init()
        buf = w.chip_malloc(chip, N * 8)
        assert buf.nbytes == N * 8 and buf.chip == chip
        x = np.arange(N, dtype=np.float64) * 1.5
        w.chip_copy_to(chip, buf, x)
        y = np.zeros(N, np.float64)
        w.chip_copy_from(chip, y, buf)
        np.testing.assert_array_equal(x, y)
        w.chip_free(chip, buf)
        assert buf.nbytes == 0


@pytest.mark.parametrize("host", HOSTS)
def test_next_level_tasks_chain_through_device_tensors(host):
    with strata.Worker(sub_workers=1) as w:
        chip = w.add_chip(host=host, kernel_module=strata.SIM_TEST_KERNELS)
        vadd = w.register_chip_program(vadd_program)
        bufs = [w.chip_malloc(chip, N * 4) for _ in range(4)]
        x = np.arange(N, dtype=np.float32)
        w.chip_copy_to(chip, bufs[0], x)
        w.chip_copy_to(chip, bufs[1], 10 * x)
        a, b, c, d = (w.chip_tensor(buf, (N,), np.float32) for buf in bufs)

        # d = (a + b) + a. (One chip runs its tasks in submission order, so
        # this checks the chain's arguments, not that c's dependency is seen.)
        def orch(o):
            o.submit_next_level(vadd, strata.IN(a), strata.IN(b), strata.OUT(c), strata.u64(N),
                                worker=chip)
            o.submit_next_level(vadd, strata.IN(c), strata.IN(a), strata.OUT(d), strata.u64(N),
                                worker=chip)

        for _ in range(2):
            w.run(orch)
        out = np.zeros(N, np.float32)
        w.chip_copy_from(chip, out, bufs[3])
        np.testing.assert_array_equal(out, 12 * x)


def test_chip_program_decorator_and_block_dim():
    with strata.Worker(sub_workers=1) as w:
        chip = w.add_chip(kernel_module=strata.SIM_TEST_KERNELS)

        @w.chip_program
        def vadd(ctx, a, b, c, n):
            ctx.launch("vector_add", 0, a, b, c, n)  # 0 blocks: the call's block_dim

        bufs = [w.chip_malloc(chip, N * 4) for _ in range(3)]
        x = np.ones(N, dtype=np.float32)
        w.chip_copy_to(chip, bufs[0], x)
        w.chip_copy_to(chip, bufs[1], x)
        a, b, c = (w.chip_tensor(buf, (N,), np.float32) for buf in bufs)
        w.run(lambda o: o.submit_next_level(vadd, strata.IN(a), strata.IN(b), strata.OUT(c),
                                            strata.u64(N), worker=chip, block_dim=4))
        out = np.zeros(N, np.float32)
        w.chip_copy_from(chip, out, bufs[2])
        assert (out == 2).all()


def failing_program(ctx, a):
    ctx.fail("the program refused on purpose")


@pytest.mark.parametrize("host", HOSTS)
def test_a_failing_program_fails_its_run_and_the_chip_goes_on(host):
    with strata.Worker(sub_workers=1) as w:
        chip = w.add_chip(host=host, kernel_module=strata.SIM_TEST_KERNELS)
        bad = w.register_chip_program(failing_program)
        vadd = w.register_chip_program(vadd_program)
        bufs = [w.chip_malloc(chip, N * 4) for _ in range(3)]
        a, b, c = (w.chip_tensor(buf, (N,), np.float32) for buf in bufs)
        with pytest.raises(strata.Error, match="the program refused on purpose"):
            w.run(lambda o: o.submit_next_level(bad, strata.IN(a), worker=chip))
        w.chip_copy_to(chip, bufs[0], np.full(N, 3, np.float32))
        w.chip_copy_to(chip, bufs[1], np.full(N, 4, np.float32))
        w.run(lambda o: o.submit_next_level(vadd, strata.IN(a), strata.IN(b), strata.OUT(c),
                                            strata.u64(N), worker=chip))
        out = np.zeros(N, np.float32)
        w.chip_copy_from(chip, out, bufs[2])
        assert (out == 7).all()


def test_program_ctx_is_refused_after_its_program_returned():
    kept = []
    with strata.Worker(sub_workers=1) as w:
        chip = w.add_chip(kernel_module=strata.SIM_TEST_KERNELS)

        @w.chip_program
        def keep(ctx, a):
            kept.append(ctx)

        buf = w.chip_malloc(chip, 64)
        t = w.chip_tensor(buf, (16,), np.float32)
        w.run(lambda o: o.submit_next_level(keep, strata.IN(t), worker=chip))
        assert kept
        with pytest.raises(strata.StateError, match="after its program returned"):
            kept[0].launch("vector_add", 1)


def test_device_memory_misuse_is_refused():
    with strata.Worker(sub_workers=1) as w:
        chip = w.add_chip(kernel_module=strata.SIM_TEST_KERNELS)
        w.init()
        buf = w.chip_malloc(chip, N * 4)
        with pytest.raises(ValueError):  # not contiguous
            w.chip_copy_from(chip, np.zeros((N, 2), np.float32)[:, 0], buf)
        with pytest.raises((ValueError, strata.Error)):  # more than the buffer holds
            w.chip_copy_to(chip, buf, np.zeros(2 * N, np.float32))
        with pytest.raises((ValueError, strata.Error)):
            w.chip_tensor(buf, (2 * N,), np.float32)
