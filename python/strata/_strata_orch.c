/* python/strata/_strata_orch.c - runs built by a Python orchestration
 * function.
 *
 * Owns: Worker.submit (strata_worker_submit with the GIL released and a
 * trampoline that takes it to call the Python function), the Orch type (the
 * submit calls, alloc, scopes, task_args; invalid once the function returns;
 * a child Worker's runs attach one over the child's strata_orch, and a task
 * for a child carries the child's tag as its last scalar), and the
 * Run type (waits in slices with the GIL released so Ctrl-C is seen, the
 * run's error as an exception; it keeps every object whose memory the
 * run's tasks use alive until the run is finished).
 * Must never: hold the GIL across a strata call that may wait for a task
 * (a thread-hosted sub function needs it), or drop a run's memory before
 * the run is finished.
 */
#include "_strata.h"

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- Orch --------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD strata_orch *o; /* NULL once the orchestration function returned */
    SpyWorker *worker;
    PyObject *keep; /* list: objects the run's tasks use */
    int hidden;     /* a child's run: its task's last scalar names the child (not the user's) */
} SpyOrch;

typedef struct {
    PyObject_HEAD SpyOrch *orch;
    int open;
} SpyScope;

static PyTypeObject SpyScope_Type;

static void orch_dealloc(SpyOrch *self) {
    Py_XDECREF(self->worker);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int orch_live(SpyOrch *self) {
    if (!self->o) {
        PyErr_SetString(spy_error_class(STRATA_ESTATE),
                        "strata.Orch: used after its orchestration function returned");
        return -1;
    }
    return 0;
}

/* Runs a submit call with the GIL released: a submit may wait for
 * capacity (a full window or heap ring), which thread-hosted sub functions
 * and Python chip programs need the GIL to free, and during which any other
 * Python thread of the program should run. */
#define SUBMIT(call)                                                                               \
    do {                                                                                           \
        int rc_;                                                                                   \
        Py_BEGIN_ALLOW_THREADS rc_ = (call);                                                       \
        Py_END_ALLOW_THREADS;                                                                      \
        if (rc_ != STRATA_OK)                                                                      \
            return spy_raise(rc_, NULL);                                                           \
        spy_items_write_back(&it);                                                                 \
    } while (0)

static int items_start(spy_items *it, SpyOrch *self) {
    it->nitems = 0;
    it->ntensors = 0;
    it->nback = 0;
    it->keep = self->keep;
    return 0;
}

static PyObject *orch_submit_sub(SpyOrch *self, PyObject *const *args, Py_ssize_t n) {
    if (orch_live(self) < 0)
        return NULL;
    if (n < 1)
        return PyErr_Format(PyExc_TypeError, "Orch.submit_sub(fn, *args): fn is missing");
    strata_callable fn;
    if (spy_callable_id(self->worker, args[0], 0, &fn) < 0)
        return NULL;
    spy_items it;
    items_start(&it, self);
    if (spy_items_add_array(&it, args + 1, n - 1, 0) < 0)
        return NULL;
    strata_orch *o = self->o;
    SUBMIT(strata_orch_submit_sub_items(o, fn, it.items, it.nitems));
    Py_RETURN_NONE;
}

static int members_items(spy_items *it, PyObject *members, int *n) {
    PyObject *seq = PySequence_Fast(members, "strata: a group's members must be a sequence");
    if (!seq)
        return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    if (m < 1 || m > STRATA_MAX_GROUP) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "strata: a group of %zd members (1..%d)", m,
                     STRATA_MAX_GROUP);
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < m; i++)
        rc = spy_items_add(it, PySequence_Fast_GET_ITEM(seq, i), (int)i);
    Py_DECREF(seq);
    *n = (int)m;
    return rc;
}

static PyObject *orch_submit_sub_group(SpyOrch *self, PyObject *args) {
    PyObject *fnobj, *members;
    if (!PyArg_ParseTuple(args, "OO:submit_sub_group", &fnobj, &members))
        return NULL;
    if (orch_live(self) < 0)
        return NULL;
    strata_callable fn;
    if (spy_callable_id(self->worker, fnobj, 0, &fn) < 0)
        return NULL;
    spy_items it;
    items_start(&it, self);
    int m;
    if (members_items(&it, members, &m) < 0)
        return NULL;
    strata_orch *o = self->o;
    SUBMIT(strata_orch_submit_sub_group_items(o, fn, it.items, it.nitems));
    Py_RETURN_NONE;
}

static int call_config(PyObject *kw, strata_call_config *cfg, int *worker, PyObject **workers) {
    memset(cfg, 0, sizeof *cfg);
    if (!kw)
        return 0;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &k, &v)) {
        if (PyUnicode_CompareWithASCIIString(k, "block_dim") == 0) {
            cfg->block_dim = (uint32_t)PyLong_AsUnsignedLong(v);
        } else if (PyUnicode_CompareWithASCIIString(k, "diagnostics") == 0) {
            cfg->flags = PyObject_IsTrue(v) ? STRATA_CALL_DIAGNOSTICS : 0;
        } else if (worker && PyUnicode_CompareWithASCIIString(k, "worker") == 0) {
            *worker = (int)PyLong_AsLong(v);
        } else if (workers && PyUnicode_CompareWithASCIIString(k, "workers") == 0) {
            *workers = v;
        } else {
            PyErr_Format(PyExc_TypeError, "strata: unexpected keyword argument %R", k);
            return -1;
        }
        if (PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* A task for a child Worker carries, as its last scalar, the tag that tells
 * the child's orchestration trampoline which child view's callables the
 * Python function names (task_args() leaves it out). */
static int add_child_tag(spy_items *it, SpyWorker *w, int worker_id) {
    uint64_t tag;
    if (spy_child_tag(w, worker_id, &tag) < 0)
        return -1;
    if (it->nitems >= sizeof it->items / sizeof it->items[0]) {
        PyErr_SetString(PyExc_ValueError, "strata: too many arguments");
        return -1;
    }
    strata_arg *a = &it->items[it->nitems++];
    memset(a, 0, sizeof *a);
    a->kind = STRATA_ARG_U64;
    a->v.u64 = tag;
    return 0;
}

static PyObject *orch_submit_next_level(SpyOrch *self, PyObject *args, PyObject *kw) {
    if (orch_live(self) < 0)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1)
        return PyErr_Format(PyExc_TypeError, "Orch.submit_next_level(fn, *args): fn is missing");
    strata_callable fn;
    int kind;
    if (spy_callable_find(self->worker, PyTuple_GET_ITEM(args, 0), 1, &fn, &kind) < 0)
        return NULL;
    strata_call_config cfg;
    int worker = 0;
    if (call_config(kw, &cfg, &worker, NULL) < 0)
        return NULL;
    spy_items it;
    items_start(&it, self);
    PyObject *rest = PyTuple_GetSlice(args, 1, n);
    int rc = rest ? spy_items_add(&it, rest, 0) : -1;
    Py_XDECREF(rest);
    if (rc < 0 || (kind == 2 && add_child_tag(&it, self->worker, worker) < 0))
        return NULL;
    strata_orch *o = self->o;
    SUBMIT(strata_orch_submit_next_level_items(o, fn, &cfg, worker, it.items, it.nitems));
    Py_RETURN_NONE;
}

static int group_child_items(spy_items *it, PyObject *members, PyObject *workers, SpyWorker *w,
                             int *n) {
    PyObject *seq = PySequence_Fast(members, "strata: a group's members must be a sequence");
    PyObject *ids = seq ? PySequence_Fast(workers, "submit_next_level_group: workers must be a "
                                                   "sequence")
                        : NULL;
    int rc = seq && ids ? 0 : -1;
    Py_ssize_t m = rc == 0 ? PySequence_Fast_GET_SIZE(seq) : 0;
    if (rc == 0 && (m < 1 || m > STRATA_MAX_GROUP || PySequence_Fast_GET_SIZE(ids) != m)) {
        PyErr_Format(PyExc_ValueError,
                     "strata: a group of %zd members (1..%d) needs as many workers", m,
                     STRATA_MAX_GROUP);
        rc = -1;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < m; i++) {
        long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(ids, i));
        rc = (id == -1 && PyErr_Occurred())
                 ? -1
                 : spy_items_add(it, PySequence_Fast_GET_ITEM(seq, i), (int)i);
        if (rc == 0)
            rc = add_child_tag(it, w, (int)id);
    }
    Py_XDECREF(seq);
    Py_XDECREF(ids);
    *n = (int)m;
    return rc;
}

static PyObject *orch_submit_next_level_group(SpyOrch *self, PyObject *args, PyObject *kw) {
    PyObject *fnobj, *members;
    if (!PyArg_ParseTuple(args, "OO:submit_next_level_group", &fnobj, &members))
        return NULL;
    if (orch_live(self) < 0)
        return NULL;
    strata_callable fn;
    int kind;
    if (spy_callable_find(self->worker, fnobj, 1, &fn, &kind) < 0)
        return NULL;
    strata_call_config cfg;
    PyObject *workers = NULL;
    if (call_config(kw, &cfg, NULL, &workers) < 0)
        return NULL;
    spy_items it;
    items_start(&it, self);
    int m;
    if (!workers)
        return PyErr_Format(PyExc_TypeError, "submit_next_level_group: workers= is required");
    if (kind == 2) { /* each member for a child Worker: its items, then its child's tag */
        if (group_child_items(&it, members, workers, self->worker, &m) < 0)
            return NULL;
    } else if (members_items(&it, members, &m) < 0) {
        return NULL;
    }
    int ids[STRATA_MAX_GROUP];
    PyObject *seq = PySequence_Fast(workers, "submit_next_level_group: workers must be a sequence");
    if (!seq)
        return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != m) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "submit_next_level_group: %d members but %zd workers",
                            m, PySequence_Fast_GET_SIZE(seq));
    }
    for (int i = 0; i < m; i++)
        ids[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    if (PyErr_Occurred())
        return NULL;
    strata_orch *o = self->o;
    SUBMIT(strata_orch_submit_next_level_group_items(o, fn, &cfg, ids, it.items, it.nitems));
    Py_RETURN_NONE;
}

static PyObject *orch_alloc(SpyOrch *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"shape", "dtype", NULL};
    PyObject *shape, *dtype = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:alloc", names, &shape, &dtype))
        return NULL;
    if (orch_live(self) < 0)
        return NULL;
    int dt = spy_dtype_of(dtype ? dtype : (PyObject *)&PyFloat_Type);
    if (dt < 0)
        return NULL;
    PyObject *seq = PyLong_Check(shape) ? PyTuple_Pack(1, shape) : PySequence_Tuple(shape);
    if (!seq)
        return NULL;
    Py_ssize_t rank = PyTuple_GET_SIZE(seq);
    int64_t dims[STRATA_MAX_RANK] = {0};
    if (rank < 1 || rank > STRATA_MAX_RANK) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "Orch.alloc: shape must have 1..%d dimensions",
                            STRATA_MAX_RANK);
    }
    for (Py_ssize_t i = 0; i < rank; i++)
        dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
    Py_DECREF(seq);
    if (PyErr_Occurred())
        return NULL;
    strata_tensor t;
    int rc = strata_orch_alloc(self->o, (int)rank, dims, (strata_dtype)dt, &t);
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    return spy_tensor_new(&t, NULL);
}

static PyObject *orch_scope(SpyOrch *self, PyObject *unused) {
    if (orch_live(self) < 0)
        return NULL;
    SpyScope *s = PyObject_New(SpyScope, &SpyScope_Type);
    if (!s)
        return NULL;
    Py_INCREF(self);
    s->orch = self;
    s->open = 0;
    return (PyObject *)s;
}

static PyObject *orch_run_id(SpyOrch *self, void *u) {
    if (orch_live(self) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(strata_orch_run_id(self->o));
}

/* In a child Worker's run: the parent task's arguments, in the order a sub
 * function receives them (host tensors as numpy arrays over the same
 * memory, writable unless IN, usable as tensors of the child's tasks;
 * device tensors as strata.Tensor; scalars; the payload), as a tuple. None
 * in a run submitted directly. */
static PyObject *orch_task_args(SpyOrch *self, PyObject *unused) {
    if (orch_live(self) < 0)
        return NULL;
    const strata_task_view *v = strata_orch_task_args(self->o);
    if (!v)
        Py_RETURN_NONE;
    uint32_t rec, nscalars = v->nscalars;
    if (self->hidden && spy_child_tag_of(v, &rec))
        nscalars--;
    Py_ssize_t n = (Py_ssize_t)v->ntensors + nscalars + (v->payload ? 1 : 0);
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    Py_ssize_t k = 0;
    for (uint32_t i = 0; i < v->ntensors; i++) {
        PyObject *x = spy_task_tensor_object(&v->tensors[i], v->tags[i] != STRATA_IN);
        if (!x)
            goto fail;
        PyTuple_SET_ITEM(t, k++, x);
    }
    for (uint32_t i = 0; i < nscalars; i++) {
        PyObject *x = spy_scalar_object(v->scalar_types[i], v->scalars[i]);
        if (!x)
            goto fail;
        PyTuple_SET_ITEM(t, k++, x);
    }
    if (v->payload) {
        PyObject *x = PyBytes_FromStringAndSize(v->payload, v->payload_bytes);
        if (!x)
            goto fail;
        PyTuple_SET_ITEM(t, k++, x);
    }
    return t;
fail:
    Py_DECREF(t);
    return NULL;
}

static PyMethodDef orch_methods[] = {
    {"task_args", (PyCFunction)orch_task_args, METH_NOARGS,
     "task_args(): in a child Worker's run, the parent task's arguments (tensors as numpy "
     "arrays over the same memory, then scalars, then the payload); None in a direct run."},
    {"submit_sub", (PyCFunction)(void (*)(void))orch_submit_sub, METH_FASTCALL,
     "submit_sub(fn, *args): one task for any idle sub worker."},
    {"submit_sub_group", (PyCFunction)orch_submit_sub_group, METH_VARARGS,
     "submit_sub_group(fn, members): one task run by len(members) sub workers at once; "
     "members[i] is member i's argument sequence."},
    {"submit_next_level", (PyCFunction)(void (*)(void))orch_submit_next_level,
     METH_VARARGS | METH_KEYWORDS,
     "submit_next_level(fn, *args, worker=0, block_dim=0): one task for a chip (fn a chip "
     "program) or a child Worker (fn an orchestration callable: one run of the child)."},
    {"submit_next_level_group", (PyCFunction)(void (*)(void))orch_submit_next_level_group,
     METH_VARARGS | METH_KEYWORDS,
     "submit_next_level_group(prog, members, workers=[...], block_dim=0)."},
    {"alloc", (PyCFunction)(void (*)(void))orch_alloc, METH_VARARGS | METH_KEYWORDS,
     "alloc(shape, dtype=float): runtime memory of this run (a strata.Tensor)."},
    {"scope", (PyCFunction)orch_scope, METH_NOARGS,
     "scope(): a with-block bounding the lifetime of runtime memory."},
    {NULL},
};

static PyGetSetDef orch_getset[] = {
    {"run_id", (getter)orch_run_id, NULL, "the id of the run being built", NULL},
    {NULL},
};

PyTypeObject SpyOrch_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.Orch",
    .tp_basicsize = sizeof(SpyOrch),
    .tp_dealloc = (destructor)orch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = orch_methods,
    .tp_getset = orch_getset,
    .tp_doc = "The graph builder handed to an orchestration function (valid during the call).",
};

/* ---- Scope -------------------------------------------------------------- */

static void scope_dealloc(SpyScope *self) {
    Py_XDECREF(self->orch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *scope_enter(SpyScope *self, PyObject *unused) {
    if (orch_live(self->orch) < 0)
        return NULL;
    if (self->open)
        return PyErr_Format(PyExc_RuntimeError, "strata: a scope entered twice");
    int rc = strata_orch_scope_begin(self->orch->o);
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    self->open = 1;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *scope_exit(SpyScope *self, PyObject *args) {
    if (!self->open)
        Py_RETURN_FALSE;
    self->open = 0;
    if (orch_live(self->orch) < 0)
        return NULL;
    int rc = strata_orch_scope_end(self->orch->o);
    if (rc != STRATA_OK && !PyErr_Occurred())
        return spy_raise(rc, NULL);
    Py_RETURN_FALSE;
}

static PyMethodDef scope_methods[] = {
    {"__enter__", (PyCFunction)scope_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)scope_exit, METH_VARARGS, NULL},
    {NULL},
};

static PyTypeObject SpyScope_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.Scope",
    .tp_basicsize = sizeof(SpyScope),
    .tp_dealloc = (destructor)scope_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = scope_methods,
    .tp_doc = "with o.scope(): ... (strata_orch_scope_begin / _end)",
};

/* ---- Run ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD strata_run *run;
    PyObject *worker;
    PyObject *keep; /* released once the run is seen finished */
    unsigned gen;   /* spy_fork_generation of the process that submitted it */
} SpyRun;

/* Waits for the run with the GIL released, in slices so a signal (Ctrl-C)
 * raises in the waiting thread. Returns the wait's status, or 1 with an
 * exception set (a signal). deadline: CLOCK_MONOTONIC ns, UINT64_MAX for none. */
static int run_wait_slices(strata_run *run, uint64_t deadline) {
    const uint64_t slice = 50ull * 1000 * 1000;
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        uint64_t until = deadline - now < slice || deadline <= now ? deadline : now + slice;
        int rc;
        Py_BEGIN_ALLOW_THREADS rc = strata_run_wait_until(run, until);
        Py_END_ALLOW_THREADS if (rc != STRATA_ETIMEDOUT || until == deadline) return rc;
        if (PyErr_CheckSignals() < 0)
            return 1;
    }
}

/* ---- the unbounded wait and Ctrl-C --------------------------------------- */

/* An unbounded wait is the fast one (the waiting thread collects results and
 * runs sub tasks: help_while_waiting), but it cannot be cut into slices. On
 * the main thread it runs with a SIGINT handler of its own in front of
 * Python's: the first SIGINT calls Python's (KeyboardInterrupt once the wait
 * returns) and aborts the Worker (every task that starts from then on
 * fails at once, so the run fails and ends when its running tasks do); a
 * second one during the same wait terminates the process (the default
 * action: the children see their parent gone and exit). The first one also
 * wakes the interrupter thread, which calls strata_worker_interrupt (not
 * callable from a handler: it takes the engine lock): a process child
 * running a task is killed, so the wait ends without waiting for a long
 * body. The state below is the one wait on the main thread in progress. */
static pthread_t main_thread;
static volatile sig_atomic_t sigint_count;
static uint32_t sigint_slot;
static strata_worker *sigint_worker; /* the waited run's worker, if this process owns it */
static struct sigaction sigint_prev;

/* The interrupter: one thread per process, started by its first guarded
 * wait, every signal blocked (they go to the main thread). `go` is posted by
 * the handler (sem_post is async-signal-safe), `done` when the interrupt
 * returned: the wait takes it before its worker may be released. */
static sem_t interrupter_go, interrupter_done;
static pid_t interrupter_pid; /* the process it runs in (0: none yet; a fork has none) */

static void *interrupter_main(void *arg) {
    (void)arg;
    for (;;) {
        while (sem_wait(&interrupter_go) != 0) {
        }
        if (sigint_worker)
            (void)strata_worker_interrupt(sigint_worker);
        sem_post(&interrupter_done);
    }
    return NULL;
}

/* 1 if the interrupter runs in this process. */
static int interrupter_ready(void) {
    if (interrupter_pid == getpid())
        return 1;
    if (sem_init(&interrupter_go, 0, 0) != 0 || sem_init(&interrupter_done, 0, 0) != 0)
        return 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, interrupter_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return 0;
    pthread_detach(t);
    interrupter_pid = getpid();
    return 1;
}

static void on_sigint(int sig) {
    if (sigint_count++ > 0) {
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
        return;
    }
    spy_worker_abort(sigint_slot);
    sem_post(&interrupter_go);
    if (sigint_prev.sa_flags & SA_SIGINFO)
        sigint_prev.sa_sigaction(sig, NULL, NULL);
    else if (sigint_prev.sa_handler != SIG_DFL && sigint_prev.sa_handler != SIG_IGN)
        sigint_prev.sa_handler(sig);
}

/* Returns the wait's status, or 1 with KeyboardInterrupt (or the signal
 * handler's exception) set. */
static int run_wait_forever(strata_run *run, uint32_t slot, strata_worker *w) {
    static int busy; /* the main thread only, under the GIL */
    int guard = pthread_equal(pthread_self(), main_thread) && !busy && interrupter_ready();
    if (guard) {
        sigint_worker = w;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigint_count = 0;
        sigint_slot = slot;
        if (sigaction(SIGINT, &sa, &sigint_prev) != 0)
            guard = 0;
        else if (!(sigint_prev.sa_flags & SA_SIGINFO) &&
                 (sigint_prev.sa_handler == SIG_DFL || sigint_prev.sa_handler == SIG_IGN)) {
            sigaction(SIGINT, &sigint_prev, NULL); /* not Python's: nothing to do in front */
            guard = 0;
        }
    }
    busy |= guard;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = strata_run_wait(run, STRATA_WAIT_FOREVER);
    Py_END_ALLOW_THREADS;
    if (guard) {
        sigaction(SIGINT, &sigint_prev, NULL);
        busy = 0;
        if (sigint_count) {
            while (sem_wait(&interrupter_done) != 0) {
            }                             /* the interrupter is done with w */
            spy_worker_abort_clear(slot); /* this run took the abort; later ones may run */
        }
        sigint_worker = NULL;
    }
    if (PyErr_CheckSignals() < 0)
        return 1;
    return rc;
}

/* Blocks until the run is finished, whatever signals arrive (the run's
 * memory must outlive it). The caller holds the Worker (spy_worker_hold). */
static void run_finish(strata_run *run) {
    Py_BEGIN_ALLOW_THREADS strata_run_wait(run, STRATA_WAIT_FOREVER);
    Py_END_ALLOW_THREADS
}

static void run_dealloc(SpyRun *self) {
    /* A run inherited through a fork is the parent's: only forgotten here. */
    if (self->run && self->gen == spy_fork_generation) {
        SpyWorker *w = (SpyWorker *)self->worker;
        if (!strata_run_done(self->run) && spy_worker_hold(w)) {
            run_finish(self->run);
            spy_worker_leave(w);
        }
        strata_run_release(self->run);
    }
    Py_XDECREF(self->keep);
    Py_XDECREF(self->worker);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The run's error text, with the exception of a child's orchestration
 * function where the library has none (new reference), or NULL. */
static PyObject *run_error_text(SpyRun *self) {
    const char *e = strata_run_error(self->run);
    if (!e || !*e)
        return NULL;
    PyObject *t = spy_children_run_error((SpyWorker *)self->worker, e);
    return t ? t : PyUnicode_DecodeUTF8(e, (Py_ssize_t)strlen(e), "replace");
}

static PyObject *run_raise(SpyRun *self, int rc) {
    PyObject *t = run_error_text(self);
    const char *e = t ? PyUnicode_AsUTF8(t) : NULL;
    PyObject *r = spy_raise(rc, e && *e ? e : NULL);
    Py_XDECREF(t);
    return r;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* timeout (seconds, None: forever) -> a CLOCK_MONOTONIC deadline in ns,
 * UINT64_MAX for none: inf and a timeout past the clock's range wait
 * forever; nan and a negative one are refused. 0 or -1 with ValueError. */
static int deadline_of(PyObject *timeout, uint64_t *deadline) {
    *deadline = UINT64_MAX;
    if (timeout == Py_None)
        return 0;
    double s = PyFloat_AsDouble(timeout);
    if (s == -1.0 && PyErr_Occurred())
        return -1;
    if (isnan(s) || s < 0) {
        PyErr_Format(PyExc_ValueError,
                     "strata.Run.wait: timeout must be None or >= 0 seconds, not %R", timeout);
        return -1;
    }
    uint64_t now = now_ns();
    double ns = s * 1e9;
    /* Compared as doubles: a conversion of a value out of uint64_t's range
     * to uint64_t is undefined. */
    if (ns >= (double)(UINT64_MAX - now))
        return 0;
    *deadline = now + (uint64_t)ns;
    return 0;
}

static PyObject *run_wait(SpyRun *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", names, &timeout))
        return NULL;
    uint64_t deadline;
    if (deadline_of(timeout, &deadline) < 0)
        return NULL;
    SpyWorker *w = (SpyWorker *)self->worker;
    if (self->gen != spy_fork_generation)
        return PyErr_Format(spy_error_class(STRATA_ESTATE),
                            "strata.Run.wait: this run belongs to process %ld and was inherited "
                            "through a fork",
                            w->owner_pid);
    int rc;
    if (strata_run_done(self->run)) {
        rc = strata_run_status(self->run);
    } else if (!spy_worker_hold(w)) {
        /* destroyed: its close waited for every admitted run */
        rc = strata_run_status(self->run);
    } else {
        if (deadline == UINT64_MAX)
            rc = run_wait_forever(self->run, w->slot,
                                  spy_worker_owned(w) && !w->child ? w->w : NULL);
        else
            rc = run_wait_slices(self->run, deadline);
        spy_worker_leave(w);
    }
    if (rc == 1)
        return NULL; /* the signal's exception */
    if (rc == STRATA_ETIMEDOUT && !strata_run_done(self->run))
        return PyErr_Format(spy_error_class(STRATA_ETIMEDOUT),
                            "strata.Run.wait: run %llu not finished after %R s",
                            (unsigned long long)strata_run_id(self->run), timeout);
    Py_CLEAR(self->keep);
    if (rc != STRATA_OK)
        return run_raise(self, rc);
    Py_RETURN_NONE;
}

static PyObject *run_done(SpyRun *self, PyObject *u) {
    int d = strata_run_done(self->run);
    if (d)
        Py_CLEAR(self->keep);
    return PyBool_FromLong(d);
}

static PyObject *run_stats(SpyRun *self, PyObject *u) {
    strata_run_statistics st;
    int rc = strata_run_stats(self->run, &st);
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    return Py_BuildValue("{sOsKsKsKsKsKsK}", "timed", st.timed ? Py_True : Py_False, "tasks_run",
                         (unsigned long long)st.tasks_run, "tasks_failed",
                         (unsigned long long)st.tasks_failed, "tasks_not_run",
                         (unsigned long long)st.tasks_not_run, "overhead_mean_ns",
                         (unsigned long long)st.overhead_mean_ns, "overhead_max_ns",
                         (unsigned long long)st.overhead_max_ns, "critical_path_ns",
                         (unsigned long long)st.critical_path_ns);
}

static PyObject *run_error(SpyRun *self, PyObject *u) {
    PyObject *t = run_error_text(self);
    if (!t && !PyErr_Occurred())
        Py_RETURN_NONE;
    return t;
}

static PyObject *run_get_status(SpyRun *self, void *u) {
    return PyLong_FromLong(strata_run_status(self->run));
}
static PyObject *run_get_id(SpyRun *self, void *u) {
    return PyLong_FromUnsignedLongLong(strata_run_id(self->run));
}

static PyMethodDef run_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))run_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(timeout=None): until finished; raises the run's error (strata.Timeout on timeout)."},
    {"done", (PyCFunction)run_done, METH_NOARGS, "True once finished (completed or failed)."},
    {"error", (PyCFunction)run_error, METH_NOARGS, "The run's first error text, or None."},
    {"stats", (PyCFunction)run_stats, METH_NOARGS,
     "stats(): strata_run_stats as a dict (complete once the run is done)."},
    {NULL},
};

static PyGetSetDef run_getset[] = {
    {"status", (getter)run_get_status, NULL, "0 while running or completed, else the status", NULL},
    {"id", (getter)run_get_id, NULL, "the run id", NULL},
    {NULL},
};

PyTypeObject SpyRun_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.Run",
    .tp_basicsize = sizeof(SpyRun),
    .tp_dealloc = (destructor)run_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = run_methods,
    .tp_getset = run_getset,
    .tp_doc = "A submitted run: wait(), done(), error(), status, id.",
};

/* ---- submit ------------------------------------------------------------- */

typedef struct {
    PyObject *fn;
    SpyOrch *orch;
    PyObject *exc_type, *exc_value, *exc_tb; /* what the function raised */
} submit_ctx;

static int orch_trampoline(strata_orch *o, void *arg) {
    submit_ctx *c = arg;
    PyGILState_STATE g = spy_gil_take();
    c->orch->o = o;
    PyObject *r = PyObject_CallOneArg(c->fn, (PyObject *)c->orch);
    c->orch->o = NULL;
    int rc = STRATA_OK;
    if (!r) {
        PyErr_Fetch(&c->exc_type, &c->exc_value, &c->exc_tb);
        rc = STRATA_ETASK;
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return rc;
}

static PyObject *submit_held(SpyWorker *self, PyObject *fn);

PyObject *spy_worker_submit(SpyWorker *self, PyObject *fn) {
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "strata: submit(orch): %R is not callable", fn);
    if (spy_worker_ensure_init(self) < 0 || spy_worker_enter(self) < 0)
        return NULL;
    PyObject *r = submit_held(self, fn);
    spy_worker_leave(self);
    return r;
}

static PyObject *submit_held(SpyWorker *self, PyObject *fn) {
    SpyOrch *orch = PyObject_New(SpyOrch, &SpyOrch_Type);
    if (!orch)
        return NULL;
    orch->o = NULL;
    orch->hidden = 0;
    Py_INCREF(self);
    orch->worker = self;
    orch->keep = PyList_New(0);
    if (!orch->keep) {
        Py_DECREF(orch);
        return NULL;
    }
    submit_ctx c = {fn, orch, NULL, NULL, NULL};
    strata_run *run = NULL;
    strata_worker *w = self->w;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = strata_worker_submit(w, orch_trampoline, &c, &run);
    Py_END_ALLOW_THREADS;
    if (c.exc_type) { /* the function raised: that is the error, once its run drained */
        if (run) {
            run_finish(run);
            strata_run_release(run);
        }
        Py_DECREF(orch);
        PyErr_Restore(c.exc_type, c.exc_value, c.exc_tb);
        return NULL;
    }
    if (rc != STRATA_OK) {
        Py_DECREF(orch);
        return spy_raise(rc, NULL);
    }
    SpyRun *r = PyObject_New(SpyRun, &SpyRun_Type);
    if (!r) {
        run_finish(run);
        strata_run_release(run);
        Py_DECREF(orch);
        return NULL;
    }
    r->run = run;
    r->gen = spy_fork_generation;
    Py_INCREF(self);
    r->worker = (PyObject *)self;
    r->keep = orch->keep;
    orch->keep = NULL;
    Py_DECREF(orch);
    return (PyObject *)r;
}

PyObject *spy_orch_attach(SpyWorker *worker, strata_orch *o, int hidden_scalar) {
    SpyOrch *orch = PyObject_New(SpyOrch, &SpyOrch_Type);
    if (!orch)
        return NULL;
    orch->o = o;
    orch->hidden = hidden_scalar;
    Py_INCREF(worker);
    orch->worker = worker;
    orch->keep = PyList_New(0);
    if (!orch->keep) {
        orch->o = NULL;
        Py_DECREF(orch);
        return NULL;
    }
    return (PyObject *)orch;
}

PyObject *spy_orch_detach(PyObject *obj) {
    SpyOrch *orch = (SpyOrch *)obj;
    orch->o = NULL;
    PyObject *keep = orch->keep;
    orch->keep = NULL;
    return keep;
}

int spy_orch_init_types(PyObject *module) {
    main_thread = pthread_self(); /* the module is imported on the main thread */
    if (PyType_Ready(&SpyOrch_Type) < 0 || PyType_Ready(&SpyScope_Type) < 0 ||
        PyType_Ready(&SpyRun_Type) < 0)
        return -1;
    Py_INCREF(&SpyOrch_Type);
    Py_INCREF(&SpyRun_Type);
    Py_INCREF(&SpyScope_Type);
    if (PyModule_AddObject(module, "Scope", (PyObject *)&SpyScope_Type) < 0)
        return -1;
    if (PyModule_AddObject(module, "Orch", (PyObject *)&SpyOrch_Type) < 0 ||
        PyModule_AddObject(module, "Run", (PyObject *)&SpyRun_Type) < 0)
        return -1;
    return 0;
}
