"""strata: hierarchical task graphs from Python.

The pure-Python layer over the C extension ``strata._strata``: the Worker
context manager and its decorators, the ChildWorker view a child Worker's
setup receives (add_child), the revivable form of a function sent
to process children started before it was registered, and the re-exports
(tag wrappers, typed scalars, Tensor, Run, Orch, the exceptions).
It must never reach into the library but through ``_strata``.

Sub functions receive their arguments in this order: the task's tensors (as
numpy arrays over the task's memory, no copy; writable unless tagged IN),
then its scalars (int or float), then its payload (bytes), if any.
"""

import atexit as _atexit
import marshal as _marshal
import os as _os
import pickle as _pickle
import sys as _sys
import types as _types
import weakref as _weakref

from . import _strata
from ._strata import (  # noqa: F401  (re-exported)
    ABIError,
    Arg,
    Callable,
    ChipBuffer,
    ProgramCtx,
    Cancelled,
    CapacityError,
    Closed,
    DeviceError,
    EndpointError,
    Error,
    InvalidArgument,
    NoMemory,
    Orch,
    Poisoned,
    MAX_GROUP,
    MAX_PAYLOAD,
    MAX_SCALARS,
    MAX_TENSORS,
    Run,
    Scope,
    Stale,
    StateError,
    TaskFailed,
    Tensor,
    Timeout,
    IN,
    OUT,
    INOUT,
    OUT_EXISTING,
    NO_DEP,
    u64,
    i64,
    f64,
    f32,
    payload,
    status_name,
    unallocated,
)

__version__ = _strata.__version__

# The sim backend's test kernel module (vector_add, gemm_tile, empty_kernel, ...):
# next to the module when installed by pip, else the build tree's.
SIM_TEST_KERNELS = getattr(_strata, "SIM_TEST_KERNELS", None)
if _os.path.exists(_os.path.join(_os.path.dirname(__file__), "libstrata_test_kernels.so")):
    SIM_TEST_KERNELS = _os.path.join(_os.path.dirname(__file__), "libstrata_test_kernels.so")

__all__ = [
    "Worker", "ChildWorker", "Run", "Orch", "Scope", "Tensor", "Callable", "Arg", "ChipBuffer", "ProgramCtx",
    "SIM_TEST_KERNELS", "MAX_TENSORS", "MAX_SCALARS", "MAX_PAYLOAD", "MAX_GROUP",
    "IN", "OUT", "INOUT", "OUT_EXISTING", "NO_DEP",
    "u64", "i64", "f64", "f32", "payload", "status_name", "unallocated",
    "Error", "InvalidArgument", "StateError", "Timeout", "TaskFailed", "EndpointError",
    "Closed", "Stale", "Poisoned", "CapacityError", "ABIError", "DeviceError", "NoMemory",
    "Cancelled",
]



# ---- functions sent to running process children ------------------------------


def _revivable(fn):
    """The bytes a process child forked before fn was registered revives fn
    from: a plain function as its code, module and defaults (a function
    defined after the fork, even in __main__, is not in the child's module),
    anything else by pickle (by reference: module-level objects only)."""
    if isinstance(fn, _types.FunctionType) and not fn.__closure__:
        form = ("code", fn.__module__, _marshal.dumps(fn.__code__), fn.__name__,
                fn.__defaults__, fn.__kwdefaults__)
    else:
        form = ("pickle", fn)
    try:
        return _pickle.dumps(form)
    except Exception as e:  # noqa: BLE001  (what pickle raises varies)
        raise TypeError(
            f"strata: {fn!r} cannot be sent to the running process children ({e}): register "
            "it before the Worker starts, or make it a module-level function") from None


def _revive(data):
    form = _pickle.loads(data)
    if form[0] == "pickle":
        fn = form[1]
        return fn.fn if isinstance(fn, Callable) else fn
    _, module, code, name, defaults, kwdefaults = form
    mod = _sys.modules.get(module) or __import__(module)
    fn = _types.FunctionType(_marshal.loads(code), mod.__dict__, name, defaults)
    fn.__kwdefaults__ = kwdefaults
    return fn


_strata._set_reviver(_revive)

_NAME_MAX = 63  # bytes of a callable's name (the C library's limit)


def _default_name(fn):
    """module.qualname; a longer one keeps its end, after a hash of the whole."""
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    if len(name.encode()) <= _NAME_MAX:
        return name
    import hashlib
    h = hashlib.blake2s(name.encode(), digest_size=4).hexdigest()
    return h + "~" + name[-(_NAME_MAX - len(h) - 1):]

# ---- Worker ---------------------------------------------------------------

_live = _weakref.WeakSet()


class Worker(_strata.Worker):
    """An L3 worker: sub workers (threads or processes) and chips.

    ``with strata.Worker(sub_workers=2, sub_mode="process") as w: ...``
    starts at the first submit / run (or ``w.init()``) and is closed and
    destroyed by ``__exit__`` (also on KeyboardInterrupt: no child process
    or shared memory is left). Config fields are keyword arguments named as
    in ``strata_worker_config``.
    """

    def __init__(self, **config):
        super().__init__(**config)
        self._process_children = self.sub_mode == "process"
        _live.add(self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self._abort()  # the queued tasks fail at once: close waits only for running ones
            self._interrupt()  # and a process child running one is killed: no wait for its body
        self.close()
        return False

    def register_sub(self, fn, name=None):
        """Register fn as a sub function; returns its strata.Callable.

        Before init a process child inherits it; after init it is sent to
        the running children (see _revivable)."""
        if not callable(fn):
            raise TypeError(f"strata: register_sub: {fn!r} is not callable")
        if name is None:
            name = _default_name(fn)
        return self._register(fn, name, 0, self._revivable_if_needed(fn))

    def _revivable_if_needed(self, fn):
        if self.initialized and self._process_children:
            return _revivable(fn)
        return None

    def add_child(self, host="thread", setup=None, name=None, **config):
        """Add a child Worker (before init): an L3 under this L4. Returns its
        worker id: tasks reach it with o.submit_next_level(orch_fn, ...,
        worker=id), each one whole run of the child.

        config: the child's own Worker keywords (sub_workers, sub_mode, ...).
        setup(child) runs where the child lives (here for host="thread"; in
        the child's process, forked at init, for host="process") and gets a
        strata.ChildWorker: register the child's sub functions and chip
        programs and add its chips there. An exception in it fails add_child
        (host="thread") or init (host="process") with its traceback."""
        child = super().add_child(host=host, setup=setup, name=name, **config)
        if host == "process":
            self._process_children = True
        return child

    def register_orch(self, fn, name=None):
        """Register fn(o) as an orchestration callable: a child Worker runs
        it as one whole run (o builds the child's graph; o.task_args() is the
        parent task's arguments). Returns its strata.Callable."""
        if not callable(fn):
            raise TypeError(f"strata: register_orch: {fn!r} is not callable")
        name = _default_name(fn) if name is None else name
        return self._register(fn, name, 2, self._revivable_if_needed(fn))

    def orch(self, fn=None, *, name=None):
        """Decorator form of register_orch."""
        if fn is None:
            return lambda f: self.register_orch(f, name)
        return self.register_orch(fn, name)

    def add_chip(self, backend="sim", host="thread", **config):
        """Add a chip (before init); returns its worker id for submit_next_level.

        config: kernel_module, device_id, sim_cores, pipeline_depth and the sim
        knobs prepare_delay_ns, kernel_delay_ns, fault, fault_code, fault_run,
        fault_kernel, fault_block, refuse_overlap."""
        chip = super().add_chip(backend=backend, host=host, **config)
        if host == "process":
            self._process_children = True
        return chip

    def register_chip_program(self, fn, name=None):
        """Register fn(ctx, *tensors, *scalars[, payload]) as a chip program:
        ctx.launch(kernel, blocks, *words) enqueues kernels (a word is an int
        or a strata.Tensor: its device address). Returns its strata.Callable."""
        if not callable(fn):
            raise TypeError(f"strata: register_chip_program: {fn!r} is not callable")
        name = _default_name(fn) if name is None else name
        return self._register(fn, name, 1, self._revivable_if_needed(fn))

    def chip_program(self, fn=None, *, name=None):
        """Decorator form of register_chip_program."""
        if fn is None:
            return lambda f: self.register_chip_program(f, name)
        return self.register_chip_program(fn, name)

    def sub(self, fn=None, *, name=None):
        """Decorator form of register_sub: ``@w.sub`` or ``@w.sub(name=...)``."""
        if fn is None:
            return lambda f: self.register_sub(f, name)
        return self.register_sub(fn, name)

    def run(self, orch):
        """submit(orch) and wait: raises the run's error."""
        self.submit(orch).wait()


class ChildWorker(Worker):
    """The view of a child Worker that add_child's setup receives: register
    its sub functions / chip programs and add its chips (and children) as on
    a top-level Worker, inside the setup only. Its runs are its parent's
    tasks: it has no init, submit, run or arrays of its own, and its parent
    closes it."""

    def __init__(self):  # made by the library (the setup trampoline) only
        self._process_children = False

    def __enter__(self):
        raise StateError("strata: a child Worker is closed by its parent")

    def __repr__(self):
        return f"<strata.ChildWorker sub_mode={self.sub_mode!r}>"


_strata._set_child_class(ChildWorker)


@_atexit.register
def _close_all():
    for w in list(_live):
        w.close()
