/* python/strata/_strata_worker.c - the Worker type.
 *
 * Owns: a strata_worker's lifetime from Python (config by keyword, lazy
 * init with the fork handlers armed and the GIL held, close and destroy
 * with the GIL released so sub workers can finish), the count of calls in
 * progress on other threads (the C worker is destroyed when the last of
 * them leaves a closed Worker, never under one), disowning a Worker a fork
 * inherited, Worker.array, the registration of sub functions, chip programs
 * and orchestration callables and the lookup of a callable's id, and the
 * limits of a child Worker's view (changed inside its setup only, never
 * closing the C worker its parent owns).
 * Must never: call into strata while holding the GIL where a strata thread
 * may need it to finish (close, destroy, waits), fork without the GIL, or
 * hand a Worker made by another process (an ancestor, before a fork) to
 * the library: closing it here would stop the parent's children.
 */
#include "_strata.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int parse_mode(PyObject *v, strata_host_mode *out, const char *what) {
    if (!v || v == Py_None)
        return 0;
    if (PyUnicode_Check(v)) {
        if (PyUnicode_CompareWithASCIIString(v, "thread") == 0) {
            *out = STRATA_HOST_THREAD;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(v, "process") == 0) {
            *out = STRATA_HOST_PROCESS;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "strata: %s must be \"thread\" or \"process\", not %R", what, v);
    return -1;
}

static int get_u64(PyObject *v, const char *name, uint64_t max, uint64_t *out) {
    if (!v || v == Py_None)
        return 0;
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "strata.Worker: %s must be an int, not %.100s", name,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if ((x == (unsigned long long)-1 && PyErr_Occurred()) || x > max) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "strata.Worker: %s=%R is out of range", name, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* The C worker's configuration from keyword arguments (Worker(...) and
 * Worker.add_child(...) take the same ones); *path holds the trace path's
 * bytes until the config is used (Py_XDECREF it). 0 or -1 with an exception. */
int spy_worker_config_parse(PyObject *args, PyObject *kw, const char *fname,
                            strata_worker_config *cfgp, PyObject **pathp) {
    static char *names[] = {"sub_workers",
                            "sub_mode",
                            "pipeline_depth",
                            "task_window",
                            "help_while_waiting",
                            "level",
                            "heap_ring_bytes",
                            "capacity_timeout_ns",
                            "spin_ns",
                            "startup_timeout_ns",
                            "shared_arena_bytes",
                            "trace_path",
                            "trace_events_per_lane",
                            "collect_stats",
                            NULL};
    PyObject *v[14] = {0};
    char format[64];
    snprintf(format, sizeof format, "|$OOOOOOOOOOOOOO:%s", fname);
    *pathp = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, names, &v[0], &v[1], &v[2], &v[3], &v[4],
                                     &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12],
                                     &v[13]))
        return -1;
    strata_worker_config cfg = *cfgp;
    uint64_t x;
    x = cfg.sub_workers;
    if (get_u64(v[0], "sub_workers", UINT32_MAX, &x) < 0)
        return -1;
    cfg.sub_workers = (uint32_t)x;
    if (parse_mode(v[1], &cfg.sub_mode, "sub_mode") < 0)
        return -1;
    x = cfg.pipeline_depth;
    if (get_u64(v[2], "pipeline_depth", UINT32_MAX, &x) < 0)
        return -1;
    cfg.pipeline_depth = (uint32_t)x;
    x = cfg.task_window;
    if (get_u64(v[3], "task_window", UINT32_MAX, &x) < 0)
        return -1;
    cfg.task_window = (uint32_t)x;
    if (v[4] && v[4] != Py_None) {
        int t = PyObject_IsTrue(v[4]);
        if (t < 0)
            return -1;
        cfg.help_while_waiting = t;
    }
    x = (uint64_t)cfg.level;
    if (get_u64(v[5], "level", 1000, &x) < 0)
        return -1;
    cfg.level = (int)x;
    if (get_u64(v[6], "heap_ring_bytes", UINT64_MAX, &cfg.heap_ring_bytes) < 0 ||
        get_u64(v[7], "capacity_timeout_ns", UINT64_MAX, &cfg.capacity_timeout_ns) < 0)
        return -1;
    x = cfg.spin_ns;
    if (get_u64(v[8], "spin_ns", UINT32_MAX, &x) < 0)
        return -1;
    cfg.spin_ns = (uint32_t)x;
    if (get_u64(v[9], "startup_timeout_ns", UINT64_MAX, &cfg.startup_timeout_ns) < 0 ||
        get_u64(v[10], "shared_arena_bytes", UINT64_MAX, &cfg.shared_arena_bytes) < 0)
        return -1;
    PyObject *path = NULL; /* the trace path as bytes: the config's copy is made at create */
    if (v[11] && v[11] != Py_None) {
        if (!PyUnicode_FSConverter(v[11], &path))
            return -1;
        cfg.trace_path = PyBytes_AS_STRING(path);
    }
    x = cfg.trace_events_per_lane;
    if (get_u64(v[12], "trace_events_per_lane", UINT32_MAX, &x) < 0) {
        Py_XDECREF(path);
        return -1;
    }
    cfg.trace_events_per_lane = (uint32_t)x;
    if (v[13] && v[13] != Py_None) {
        int t = PyObject_IsTrue(v[13]);
        if (t < 0) {
            Py_XDECREF(path);
            return -1;
        }
        cfg.collect_stats = t;
    }
    *cfgp = cfg;
    *pathp = path;
    return 0;
}

static int worker_init_obj(SpyWorker *self, PyObject *args, PyObject *kw) {
    if (self->w) {
        PyErr_SetString(PyExc_RuntimeError, "strata.Worker: __init__ called twice");
        return -1;
    }
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    PyObject *path;
    if (spy_worker_config_parse(args, kw, "Worker", &cfg, &path) < 0)
        return -1;
    int rc = strata_worker_create(&cfg, &self->w);
    Py_XDECREF(path);
    if (rc != STRATA_OK) {
        spy_raise(rc, NULL);
        return -1;
    }
    self->mode = cfg.sub_mode;
    self->gen = spy_fork_generation;
    self->owner_pid = (long)getpid();
    if (spy_worker_slot(&self->slot) < 0)
        return -1;
    self->callables = PyDict_New();
    return self->callables ? 0 : -1;
}

int spy_worker_owned(const SpyWorker *self) {
    return self->gen == spy_fork_generation;
}

static int check_open(SpyWorker *self) {
    if (!spy_worker_owned(self)) {
        PyErr_Format(spy_error_class(STRATA_ESTATE),
                     "strata.Worker: this Worker belongs to process %ld and was inherited "
                     "through a fork; this process (%ld) cannot use it: make a new Worker here",
                     self->owner_pid, (long)getpid());
        return -1;
    }
    if (self->closed || !self->w) {
        PyErr_SetString(spy_error_class(STRATA_ECLOSED), "strata.Worker: the worker was closed");
        return -1;
    }
    if (self->child && !self->setup_open) {
        PyErr_SetString(spy_error_class(STRATA_ESTATE),
                        "strata: a child Worker's view is used inside its setup only (register "
                        "its functions and add its chips there)");
        return -1;
    }
    return 0;
}

int spy_worker_enter(SpyWorker *self) {
    if (check_open(self) < 0)
        return -1;
    self->busy++;
    return 0;
}

int spy_worker_hold(SpyWorker *self) {
    if (!self->w || !spy_worker_owned(self))
        return 0;
    self->busy++;
    return 1;
}

/* Frees the C worker of a closed Worker no call uses any more. */
static void destroy_if_idle(SpyWorker *self) {
    strata_worker *w = self->w;
    if (!w || !self->closed || self->busy > 0)
        return;
    self->w = NULL;
    /* What stats() answers from now on: the figures up to the close. */
    self->final_stats = PyMem_RawMalloc(sizeof *self->final_stats);
    if (self->final_stats && strata_worker_stats(w, self->final_stats) != STRATA_OK) {
        PyMem_RawFree(self->final_stats);
        self->final_stats = NULL;
    }
    if (self->final_stats) {
        self->final_stats->sub_workers = self->lanes_at_close[0];
        self->final_stats->next_level = self->lanes_at_close[1];
    }
    self->trace_status = strata_worker_trace_status(w);
    if (self->trace_status != STRATA_OK) {
        const char *m = strata_error_message();
        snprintf(self->trace_error, sizeof self->trace_error, "%s", m ? m : "");
    }
    Py_BEGIN_ALLOW_THREADS strata_worker_destroy(w); /* closed already: frees only */
    Py_END_ALLOW_THREADS spy_children_forget(self);  /* their workers went with it */
}

void spy_worker_leave(SpyWorker *self) {
    self->busy--;
    destroy_if_idle(self);
}

int spy_worker_ensure_init(SpyWorker *self) {
    if (check_open(self) < 0)
        return -1;
    if (self->child) {
        PyErr_SetString(spy_error_class(STRATA_ESTATE),
                        "strata: a child Worker is started by its parent and runs the tasks the "
                        "parent sends it (submit_next_level); it takes no runs of its own");
        return -1;
    }
    if (self->initialized)
        return 0;
    /* The GIL stays held: a process child is forked in here, and its one
     * thread must be the one holding the interpreter (_strata_fork.c). */
    int rc = spy_with_fork_hooks(strata_worker_init, self->w);
    if (rc != STRATA_OK) {
        /* a process child's setup exception is told through its own page */
        PyObject *msg = spy_children_init_error(self, strata_error_message());
        if (msg) {
            spy_raise(rc, PyUnicode_AsUTF8(msg));
            Py_DECREF(msg);
        }
        return -1;
    }
    self->initialized = 1;
    return 0;
}

/* Closes the C worker (waits for its admitted runs) and destroys it unless
 * a call on another thread still uses it: that call's leave does. A Worker
 * inherited through a fork is only forgotten: its memory is the parent's
 * worker as it was at the fork, and its children are the parent's. */
static void shut(SpyWorker *self) {
    if (self->closed || !self->w)
        return;
    self->closed = 1;
    if (!spy_worker_owned(self) || self->child) { /* a child's worker is its parent's */
        self->w = NULL;
        spy_children_forget(self); /* not this process's to stop, or gone with the parent */
        return;
    }
    strata_worker *w = self->w;
    self->busy++;
    /* The library's statistics after a close count no sub / next-level
     * workers (their lanes' figures stay): stats() after close answers with
     * the counts as they were. */
    strata_worker_statistics *st = PyMem_RawMalloc(sizeof *st);
    if (st && strata_worker_stats(w, st) == STRATA_OK) {
        self->lanes_at_close[0] = st->sub_workers;
        self->lanes_at_close[1] = st->next_level;
    }
    PyMem_RawFree(st);
    Py_BEGIN_ALLOW_THREADS strata_worker_close(w);
    Py_END_ALLOW_THREADS spy_worker_leave(self);
}

static void worker_dealloc(SpyWorker *self) {
    shut(self);
    PyMem_RawFree(self->final_stats);
    Py_XDECREF(self->callables);
    Py_XDECREF(self->child_keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *worker_init_method(SpyWorker *self, PyObject *unused) {
    if (spy_worker_ensure_init(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *worker_abort(SpyWorker *self, PyObject *unused) {
    if (spy_worker_owned(self)) /* an inherited one's tasks are the parent's */
        spy_worker_abort(self->slot);
    Py_RETURN_NONE;
}

/* strata_worker_interrupt: a process child running a task is killed, so the
 * close that follows does not wait for a long body (a thread's task still
 * runs to its end). Only a Worker this process owns, never a child's view. */
static PyObject *worker_interrupt(SpyWorker *self, PyObject *unused) {
    if (self->closed || !self->w || !spy_worker_owned(self) || self->child)
        Py_RETURN_NONE;
    strata_worker *w = self->w;
    self->busy++;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = strata_worker_interrupt(w);
    Py_END_ALLOW_THREADS spy_worker_leave(self);
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *worker_close(SpyWorker *self, PyObject *unused) {
    shut(self);
    Py_RETURN_NONE;
}

static PyObject *worker_array(SpyWorker *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"shape", "dtype", NULL};
    PyObject *shape, *dtype = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:array", names, &shape, &dtype))
        return NULL;
    if (self->child)
        return PyErr_Format(spy_error_class(STRATA_ESTATE),
                            "strata: Worker.array on a child Worker: make the arrays with the "
                            "top-level Worker (every child sees them)");
    if (spy_worker_enter(self) < 0)
        return NULL;
    PyObject *dt = dtype ? dtype : (PyObject *)&PyFloat_Type;
    PyObject *a = spy_buffer_array((PyObject *)self, self->w, shape, dt);
    spy_worker_leave(self);
    return a;
}

static PyObject *register_fn(SpyWorker *self, PyObject *fn, PyObject *name, int kind,
                             PyObject *revivable);

/* _register(fn, name, kind, revivable): kind 0 = sub function. */
static PyObject *worker_register(SpyWorker *self, PyObject *args) {
    PyObject *fn, *name, *revivable;
    int kind;
    if (!PyArg_ParseTuple(args, "OUiO:_register", &fn, &name, &kind, &revivable))
        return NULL;
    if (spy_worker_enter(self) < 0)
        return NULL;
    PyObject *c = register_fn(self, fn, name, kind, revivable);
    spy_worker_leave(self);
    return c;
}

static PyObject *register_fn(SpyWorker *self, PyObject *fn, PyObject *name, int kind,
                             PyObject *revivable) {
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "strata: register: %R is not callable", fn);
    const char *cname = PyUnicode_AsUTF8(name);
    if (!cname)
        return NULL;
    uint32_t index;
    if (kind != 0 && kind != 1 && kind != 2)
        return PyErr_Format(PyExc_ValueError, "strata: unknown callable kind %d", kind);
    if (spy_callables_add(fn, revivable == Py_None ? NULL : revivable, self->slot, &index) < 0)
        return NULL;
    strata_callable id = -1;
    int rc;
    if (kind == 1) {
        rc = spy_worker_register_program(self, cname, index, &id);
    } else if (kind == 2) {
        Py_BEGIN_ALLOW_THREADS rc = strata_worker_register_orch(
            self->w, cname, spy_child_orch_trampoline, (void *)(uintptr_t)index, &id);
        Py_END_ALLOW_THREADS
    } else {
        Py_BEGIN_ALLOW_THREADS rc = strata_worker_register_sub(self->w, cname, spy_sub_trampoline,
                                                               (void *)(uintptr_t)index, &id);
        Py_END_ALLOW_THREADS
    }
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    SpyCallable *c = PyObject_New(SpyCallable, &SpyCallable_Type);
    if (!c)
        return NULL;
    Py_INCREF(fn);
    c->fn = fn;
    Py_INCREF(name);
    c->name = name;
    c->worker = (PyObject *)self;
    c->id = id;
    c->kind = kind;
    if (PyDict_SetItem(self->callables, fn, (PyObject *)c) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

int spy_callable_id(SpyWorker *self, PyObject *fn, int kind, strata_callable *out) {
    return spy_callable_find(self, fn, kind, out, NULL);
}

int spy_callable_find(SpyWorker *self, PyObject *fn, int kind, strata_callable *out,
                      int *found_kind) {
    PyObject *c = fn;
    if (!Py_IS_TYPE(fn, &SpyCallable_Type)) {
        c = PyDict_GetItemWithError(self->callables, fn);
        if (!c) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError,
                             "strata: %R is not registered with this Worker (use w.sub / "
                             "w.register_sub first)",
                             fn);
            return -1;
        }
    }
    SpyCallable *sc = (SpyCallable *)c;
    if (sc->worker != (PyObject *)self) {
        PyErr_Format(PyExc_ValueError, "strata: %R is registered with another Worker", fn);
        return -1;
    }
    static const char *kinds[] = {"sub function", "chip program", "orchestration callable"};
    /* a next-level task (kind 1) names a chip program or, for a child Worker,
     * an orchestration callable */
    if (sc->kind != kind && !(kind == 1 && sc->kind == 2)) {
        PyErr_Format(PyExc_TypeError, "strata: %R is a %s, not a %s", fn, kinds[sc->kind],
                     kind ? "chip program or orchestration callable" : "sub function");
        return -1;
    }
    *out = sc->id;
    if (found_kind)
        *found_kind = sc->kind;
    return 0;
}

static PyObject *lane_dict(const strata_lane_stats *l) {
    return Py_BuildValue("{sKsKsK}", "tasks_run", (unsigned long long)l->tasks_run, "tasks_failed",
                         (unsigned long long)l->tasks_failed, "busy_ns",
                         (unsigned long long)l->busy_ns);
}

static PyObject *lanes_list(const strata_lane_stats *l, uint32_t n) {
    PyObject *list = PyList_New(n);
    for (uint32_t i = 0; list && i < n; i++) {
        PyObject *d = lane_dict(&l[i]);
        if (!d) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

/* strata_worker_statistics as a dict of the same field names. */
static PyObject *stats_dict(const strata_worker_statistics *st) {
    PyObject *sub = lanes_list(st->sub, st->sub_workers);
    PyObject *next = lanes_list(st->next, st->next_level);
    PyObject *helper = lane_dict(&st->helper);
    PyObject *d = NULL;
    if (sub && next && helper)
        d = Py_BuildValue(
            "{sOsIsIsKsOsOsOsKsKsKsIs[KKKK]sKsK}", "timed", st->timed ? Py_True : Py_False,
            "sub_workers", st->sub_workers, "next_level", st->next_level, "elapsed_ns",
            (unsigned long long)st->elapsed_ns, "sub", sub, "helper", helper, "next", next,
            "overhead_tasks", (unsigned long long)st->overhead_tasks, "overhead_mean_ns",
            (unsigned long long)st->overhead_mean_ns, "overhead_max_ns",
            (unsigned long long)st->overhead_max_ns, "window_high_water", st->window_high_water,
            "heap_ring_high_water_bytes", (unsigned long long)st->heap_ring_high_water_bytes[0],
            (unsigned long long)st->heap_ring_high_water_bytes[1],
            (unsigned long long)st->heap_ring_high_water_bytes[2],
            (unsigned long long)st->heap_ring_high_water_bytes[3], "trace_events",
            (unsigned long long)st->trace_events, "trace_dropped",
            (unsigned long long)st->trace_dropped);
    Py_XDECREF(sub);
    Py_XDECREF(next);
    Py_XDECREF(helper);
    return d;
}

static PyObject *worker_stats(SpyWorker *self, PyObject *unused) {
    if (self->closed && self->final_stats && !self->w)
        return stats_dict(self->final_stats);
    if (spy_worker_enter(self) < 0)
        return NULL;
    strata_worker_statistics *st = PyMem_RawMalloc(sizeof *st);
    if (!st) {
        spy_worker_leave(self);
        return PyErr_NoMemory();
    }
    int rc = strata_worker_stats(self->w, st);
    spy_worker_leave(self);
    PyObject *d = rc == STRATA_OK ? stats_dict(st) : spy_raise(rc, NULL);
    PyMem_RawFree(st);
    return d;
}

/* The trace file's fate, once closed: None when written (or not asked
 * for), else why it could not be. */
static PyObject *worker_trace_error(SpyWorker *self, PyObject *unused) {
    if (!self->closed || self->w)
        Py_RETURN_NONE;
    if (self->trace_status == STRATA_OK)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(self->trace_error, (Py_ssize_t)strlen(self->trace_error),
                                "replace");
}

static PyObject *worker_submit(SpyWorker *self, PyObject *orch) {
    return spy_worker_submit(self, orch);
}

static PyObject *get_initialized(SpyWorker *self, void *u) {
    return PyBool_FromLong(self->initialized && !self->closed && self->w);
}
static PyObject *get_closed(SpyWorker *self, void *u) {
    return PyBool_FromLong(self->closed);
}
static PyObject *get_sub_slots(SpyWorker *self, void *u) {
    return PyLong_FromUnsignedLong(
        self->w && spy_worker_owned(self) ? strata_worker_sub_slots(self->w) : 0);
}
static PyObject *get_is_child(SpyWorker *self, void *u) {
    return PyBool_FromLong(self->child);
}
static PyObject *get_sub_mode(SpyWorker *self, void *u) {
    return PyUnicode_FromString(self->mode == STRATA_HOST_PROCESS ? "process" : "thread");
}

static PyGetSetDef worker_getset[] = {
    {"initialized", (getter)get_initialized, NULL, "True once started (and not closed)", NULL},
    {"closed", (getter)get_closed, NULL, "True once closed", NULL},
    {"sub_slots", (getter)get_sub_slots, NULL, "distinct worker indices task bodies may see", NULL},
    {"sub_mode", (getter)get_sub_mode, NULL, "\"thread\" or \"process\"", NULL},
    {"is_child", (getter)get_is_child, NULL, "True for a child Worker's view (add_child's setup)",
     NULL},
    {NULL},
};

static PyMethodDef worker_methods[] = {
    {"init", (PyCFunction)worker_init_method, METH_NOARGS,
     "Start the sub workers and chips (done by the first submit otherwise)."},
    {"close", (PyCFunction)worker_close, METH_NOARGS,
     "Wait for admitted runs, stop every child and free the worker. Idempotent."},
    {"_abort", (PyCFunction)worker_abort, METH_NOARGS,
     "Fail every task of this Worker that starts from now on (Ctrl-C)."},
    {"_interrupt", (PyCFunction)worker_interrupt, METH_NOARGS,
     "Kill the process children running a task; cancel the live runs (Ctrl-C)."},
    {"array", (PyCFunction)(void (*)(void))worker_array, METH_VARARGS | METH_KEYWORDS,
     "array(shape, dtype=float): a zeroed numpy array on memory every child sees."},
    {"_register", (PyCFunction)worker_register, METH_VARARGS, NULL},
    {"add_child", (PyCFunction)(void (*)(void))spy_worker_add_child, METH_VARARGS | METH_KEYWORDS,
     "add_child(host=\"thread\", setup=None, name=None, **worker config): before init; a child "
     "Worker (L4 -> L3); returns its worker id for submit_next_level."},
    {"add_chip", (PyCFunction)(void (*)(void))spy_worker_add_chip, METH_VARARGS | METH_KEYWORDS,
     "add_chip(backend=\"sim\", host=\"thread\", kernel_module=None, device_id=0, "
     "sim_cores=2, pipeline_depth=0, **sim knobs): before init; returns the chip's worker id."},
    {"chip_malloc", (PyCFunction)spy_worker_chip_malloc, METH_VARARGS,
     "chip_malloc(chip, nbytes): device memory of a chip (a ChipBuffer)."},
    {"chip_free", (PyCFunction)spy_worker_chip_free, METH_VARARGS, "chip_free(chip, dev)."},
    {"chip_tensor", (PyCFunction)(void (*)(void))spy_worker_chip_tensor,
     METH_VARARGS | METH_KEYWORDS,
     "chip_tensor(dev, shape, dtype=float, offset=0): a row-major view of device memory."},
    {"chip_copy_to", (PyCFunction)spy_worker_chip_copy_to, METH_VARARGS,
     "chip_copy_to(chip, dev, array, offset=0): host array -> device (synchronous)."},
    {"chip_copy_from", (PyCFunction)spy_worker_chip_copy_from, METH_VARARGS,
     "chip_copy_from(chip, array, dev, offset=0): device -> host array (synchronous)."},
    {"stats", (PyCFunction)worker_stats, METH_NOARGS,
     "stats(): strata_worker_stats as a dict (after close: the figures up to the close)."},
    {"trace_error", (PyCFunction)worker_trace_error, METH_NOARGS,
     "trace_error(): after close, why the trace file could not be written, or None."},
    {"submit", (PyCFunction)worker_submit, METH_O,
     "submit(orch): call orch(o) to build a run's graph; returns the strata.Run."},
    {NULL},
};

PyTypeObject SpyWorker_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata._strata.Worker",
    .tp_basicsize = sizeof(SpyWorker),
    .tp_dealloc = (destructor)worker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_methods = worker_methods,
    .tp_getset = worker_getset,
    .tp_init = (initproc)worker_init_obj,
    .tp_new = PyType_GenericNew,
    .tp_doc = "The C side of strata.Worker.",
};

int spy_worker_init_types(PyObject *module) {
    if (PyType_Ready(&SpyWorker_Type) < 0)
        return -1;
    Py_INCREF(&SpyWorker_Type);
    return PyModule_AddObject(module, "Worker", (PyObject *)&SpyWorker_Type);
}
