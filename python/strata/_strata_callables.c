/* python/strata/_strata_callables.c - Python functions as strata callables.
 *
 * Owns: the module's table of registered functions (the index a
 * trampoline's user pointer carries; one table per depth of child Worker
 * processes), the shared table of their revivable
 * forms for children forked before they were registered, the Callable type
 * Worker.register_sub returns, and the sub function trampoline: the GIL,
 * the task's tensors as numpy arrays over the same memory, its scalars and
 * payload, and a raised exception as the task's error with its traceback.
 * Must never: hold the GIL outside a call into Python, or run a function
 * of one index for another.
 */
#include "_strata.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

/* ---- the GIL on strata's threads ------------------------------------------ */

/* A strata thread (a thread-hosted sub worker, a chip's thread) that has no
 * thread state of its own keeps the one its first PyGILState_Ensure made:
 * one extra Ensure, so later calls only take the GIL instead of making and
 * dropping a thread state per task. When the thread exits, the key's
 * destructor deletes that thread state (the interpreter would keep it
 * forever otherwise: one per thread of every Worker ever closed). A thread
 * Python made (the main thread, a threading.Thread) keeps its own state and
 * is not pinned. */
static pthread_key_t pin_key;
static _Thread_local int checked; /* this thread has a thread state (its own or pinned) */

#if PY_VERSION_HEX >= 0x030D0000
#define spy_finalizing Py_IsFinalizing
#else
#define spy_finalizing _Py_IsFinalizing
#endif

/* The key's value is the thread state itself: the interpreter's own key
 * for it may be cleared before this destructor runs. */
static void unpin(void *state) {
    PyThreadState *ts = state;
    if (!Py_IsInitialized() || spy_finalizing())
        return; /* the interpreter frees every thread state itself */
    PyEval_RestoreThread(ts);
    PyThreadState_Clear(ts);
    PyThreadState_DeleteCurrent(); /* and releases the GIL */
}

PyGILState_STATE spy_gil_take(void) {
    if (!checked && !PyGILState_GetThisThreadState()) {
        PyGILState_STATE g = PyGILState_Ensure(); /* makes the thread's state ... */
        (void)PyGILState_Ensure();                /* ... and keeps it past the Release */
        checked = 1;
        (void)pthread_setspecific(pin_key, PyThreadState_Get());
        return g;
    }
    checked = 1;
    return PyGILState_Ensure();
}

static PyObject *thread_states(PyObject *m, PyObject *unused) {
    long n = 0;
    for (PyThreadState *t = PyInterpreterState_ThreadHead(PyInterpreterState_Get()); t;
         t = PyThreadState_Next(t))
        n++;
    return PyLong_FromLong(n);
}

/* ---- the table ---------------------------------------------------------- */

#define REVIVE_MAX 4096u   /* bytes of one function's revivable form */
#define SHARED_SLOTS 4096u /* functions registered in one process, all Workers */

/* One slot per index, in a MAP_SHARED mapping made at import, so children
 * forked earlier read what the parent writes later. Written once, before
 * the registration that names the index reaches any child. */
typedef struct {
    uint32_t len;
    uint32_t worker; /* the slot of the Worker it is registered with (abort flags) */
    char bytes[REVIVE_MAX - 2 * sizeof(uint32_t)];
} shared_slot;

/* One word per Worker slot, set by Worker._abort (Ctrl-C in the parent):
 * the tasks of that Worker that start afterwards fail at once, in every
 * process, so the run fails and its unstarted tasks are cancelled instead
 * of the close waiting for all of them. In the same shared mapping. */
static _Atomic uint32_t *aborted;
static uint32_t nworkers;

/* One table per process depth of child Workers: a child Worker's process
 * (add_child(host="process")) registers its own functions in a table of
 * its own, mapped before its own children are forked, so its indices never
 * meet those its parent registers later in the parent's table (which it
 * still reads: an orchestration callable the parent registers after init
 * is revived from there). An index is the table's depth << 24 | the slot. */
#define TABLES 8u
#define INDEX_BITS 24
typedef struct {
    shared_slot *shared; /* MAP_SHARED, made by the process that owns the depth */
    /* This process's functions by slot. A child's copy holds those
     * registered before it was forked; later ones are revived from
     * `shared` on first use. */
    PyObject **fns;
    uint32_t nfns, capfns;
} fn_table;
static fn_table tables[TABLES];
static uint32_t depth;   /* the table this process registers in */
static PyObject *revive; /* strata._revive(bytes) -> function (the Python layer's) */

int spy_worker_slot(uint32_t *slot) {
    if (nworkers >= SHARED_SLOTS) {
        PyErr_Format(PyExc_RuntimeError, "strata: more than %u Workers in one process",
                     SHARED_SLOTS);
        return -1;
    }
    *slot = nworkers++;
    return 0;
}

void spy_worker_abort(uint32_t slot) {
    atomic_store(&aborted[slot], 1); /* lock-free: called from a signal handler too */
}

void spy_worker_abort_clear(uint32_t slot) {
    atomic_store(&aborted[slot], 0);
}

static shared_slot *map_table(void) {
    void *p = mmap(NULL, (size_t)SHARED_SLOTS * sizeof(shared_slot), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int spy_callables_child_process(void) {
    if (depth + 1 >= TABLES) {
        PyErr_Format(PyExc_RuntimeError, "strata: child Worker processes nested deeper than %u",
                     TABLES - 1);
        return -1;
    }
    shared_slot *p = map_table();
    if (!p) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    depth++;
    tables[depth].shared = p;
    tables[depth].fns = NULL; /* nothing of this depth was inherited */
    tables[depth].nfns = tables[depth].capfns = 0;
    return 0;
}

static int grow(fn_table *t, uint32_t need) {
    if (need < t->capfns)
        return 0;
    uint32_t cap = t->capfns ? t->capfns : 64;
    while (cap <= need)
        cap *= 2;
    PyObject **p = PyMem_RawRealloc(t->fns, cap * sizeof *p);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    memset(p + t->capfns, 0, (cap - t->capfns) * sizeof *p);
    t->fns = p;
    t->capfns = cap;
    return 0;
}

int spy_callables_add(PyObject *fn, PyObject *pickled, uint32_t worker, uint32_t *index) {
    fn_table *t = &tables[depth];
    if (t->nfns >= SHARED_SLOTS) {
        PyErr_Format(PyExc_ValueError, "strata: more than %u functions registered", SHARED_SLOTS);
        return -1;
    }
    if (pickled) {
        if (!PyBytes_Check(pickled) ||
            (size_t)PyBytes_GET_SIZE(pickled) > sizeof t->shared[0].bytes) {
            PyErr_Format(PyExc_ValueError,
                         "strata: %R is too large to send to a running process child (%zu "
                         "bytes at most): register it before the Worker starts",
                         fn, sizeof t->shared[0].bytes);
            return -1;
        }
    }
    if (grow(t, t->nfns) < 0)
        return -1;
    uint32_t i = t->nfns++;
    t->shared[i].worker = worker;
    if (pickled) {
        memcpy(t->shared[i].bytes, PyBytes_AS_STRING(pickled), (size_t)PyBytes_GET_SIZE(pickled));
        atomic_thread_fence(memory_order_release);
        t->shared[i].len = (uint32_t)PyBytes_GET_SIZE(pickled);
    }
    Py_INCREF(fn);
    t->fns[i] = fn;
    *index = depth << INDEX_BITS | i;
    return 0;
}

static shared_slot *slot_of(uint32_t index) {
    uint32_t d = index >> INDEX_BITS, i = index & ((1u << INDEX_BITS) - 1);
    return d < TABLES && tables[d].shared && i < SHARED_SLOTS ? &tables[d].shared[i] : NULL;
}

/* The function of an index in this process (borrowed), reviving one
 * registered after this child was forked. */
PyObject *spy_callables_lookup(uint32_t index) {
    uint32_t d = index >> INDEX_BITS, i = index & ((1u << INDEX_BITS) - 1);
    fn_table *t = d < TABLES ? &tables[d] : NULL;
    if (t && i < t->capfns && t->fns[i])
        return t->fns[i];
    shared_slot *sl = slot_of(index);
    if (!sl || sl->len == 0 || !revive) {
        PyErr_Format(PyExc_RuntimeError,
                     "strata: function %u was registered after this process child started "
                     "and cannot be revived here",
                     index);
        return NULL;
    }
    atomic_thread_fence(memory_order_acquire);
    PyObject *b = PyBytes_FromStringAndSize(sl->bytes, sl->len);
    PyObject *fn = b ? PyObject_CallOneArg(revive, b) : NULL;
    Py_XDECREF(b);
    if (!fn)
        return NULL;
    if (grow(t, i) < 0) {
        Py_DECREF(fn);
        return NULL;
    }
    t->fns[i] = fn;
    return fn;
}

/* ---- the trampoline ----------------------------------------------------- */

PyObject *spy_scalar_object(uint8_t type, uint64_t bits) {
    switch (type) {
    case STRATA_SCALAR_I64:
        return PyLong_FromLongLong((long long)bits);
    case STRATA_SCALAR_F64: {
        double d;
        memcpy(&d, &bits, sizeof d);
        return PyFloat_FromDouble(d);
    }
    case STRATA_SCALAR_F32: {
        float f;
        uint32_t lo = (uint32_t)bits;
        memcpy(&f, &lo, sizeof f);
        return PyFloat_FromDouble(f);
    }
    default:
        return PyLong_FromUnsignedLongLong(bits);
    }
}

/* The task's arguments as the function receives them: its tensors in order
 * (numpy arrays over the task's memory), then its scalars, then its
 * payload (bytes), if any; into argv (new references), their number, or -1
 * with an exception (none left to release). */
#define CALL_ARGS_MAX (STRATA_MAX_TENSORS + STRATA_MAX_SCALARS + 1)
static Py_ssize_t call_args(const strata_task_view *v, PyObject **argv) {
    Py_ssize_t k = 0;
    if ((size_t)v->ntensors + v->nscalars + 1 > CALL_ARGS_MAX) {
        PyErr_SetString(PyExc_ValueError, "strata: a task with too many arguments");
        return -1;
    }
    for (uint32_t i = 0; i < v->ntensors; i++) {
        if (!(argv[k] = spy_task_array(&v->tensors[i], v->tags[i] != STRATA_IN)))
            goto fail;
        k++;
    }
    for (uint32_t i = 0; i < v->nscalars; i++) {
        if (!(argv[k] = spy_scalar_object(v->scalar_types[i], v->scalars[i])))
            goto fail;
        k++;
    }
    if (v->payload) {
        if (!(argv[k] = PyBytes_FromStringAndSize(v->payload, v->payload_bytes)))
            goto fail;
        k++;
    }
    return k;
fail:
    while (k > 0)
        Py_DECREF(argv[--k]);
    return -1;
}

/* The pending exception as text: its last line first (a long traceback is
 * cut at the end of the run's message, so the exception itself must lead),
 * then the whole traceback. Clears it; the text is PyMem_RawMalloc'ed (NULL
 * if it could not be formatted). */
char *spy_format_exception(void) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb && value)
        PyException_SetTraceback(value, tb);
    PyObject *text = NULL;
    PyObject *mod = PyImport_ImportModule("traceback");
    if (mod) {
        PyObject *v = value ? value : Py_None;
        PyObject *lines = PyObject_CallMethod(mod, "format_exception", "O", v);
        PyObject *only = PyObject_CallMethod(mod, "format_exception_only", "O", v);
        PyObject *sep = PyUnicode_FromString("");
        if (lines && only && sep) {
            PyObject *a = PyUnicode_Join(sep, only);
            PyObject *b = PyUnicode_Join(sep, lines);
            if (a && b)
                text = PyUnicode_FromFormat("%U%U", a, b);
            Py_XDECREF(a);
            Py_XDECREF(b);
        }
        Py_XDECREF(lines);
        Py_XDECREF(only);
        Py_XDECREF(sep);
        Py_DECREF(mod);
    }
    char *out = NULL;
    const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
    if (s) {
        size_t n = strlen(s) + 1;
        out = PyMem_RawMalloc(n);
        if (out)
            memcpy(out, s, n);
    }
    PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return out;
}

int spy_sub_trampoline(const strata_task_view *v, void *user) {
    uint32_t i = (uint32_t)(uintptr_t)user;
    shared_slot *sl = slot_of(i);
    if (sl && atomic_load_explicit(&aborted[sl->worker], memory_order_relaxed)) {
        strata_task_set_error("KeyboardInterrupt: the Worker was interrupted");
        return 1;
    }
    PyGILState_STATE g = spy_gil_take();
    int rc = 0;
    PyObject *fn = spy_callables_lookup(i);
    PyObject *argv[CALL_ARGS_MAX];
    Py_ssize_t n = fn ? call_args(v, argv) : -1;
    /* vectorcall: no tuple per task */
    PyObject *r = n >= 0 ? PyObject_Vectorcall(fn, argv, (size_t)n, NULL) : NULL;
    for (Py_ssize_t k = 0; k < n; k++)
        Py_DECREF(argv[k]);
    if (!r) {
        char *text = spy_format_exception();
        strata_task_set_error("%s", text ? text : "a Python exception (no text)");
        PyMem_RawFree(text);
        rc = 1;
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return rc;
}

/* ---- Callable ------------------------------------------------------------ */

static void callable_dealloc(SpyCallable *self) {
    Py_XDECREF(self->fn);
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *callable_call(SpyCallable *self, PyObject *args, PyObject *kw) {
    return PyObject_Call(self->fn, args, kw);
}

static PyObject *callable_repr(SpyCallable *self) {
    return PyUnicode_FromFormat("strata.Callable(%R, id=%d)", self->name, (int)self->id);
}

static PyObject *callable_get_fn(SpyCallable *self, void *u) {
    Py_INCREF(self->fn);
    return self->fn;
}
static PyObject *callable_get_name(SpyCallable *self, void *u) {
    Py_INCREF(self->name);
    return self->name;
}
static PyObject *callable_get_id(SpyCallable *self, void *u) {
    return PyLong_FromLong(self->id);
}

static PyGetSetDef callable_getset[] = {
    {"fn", (getter)callable_get_fn, NULL, "the registered Python function", NULL},
    {"__wrapped__", (getter)callable_get_fn, NULL, "the registered Python function", NULL},
    {"name", (getter)callable_get_name, NULL, "the name it is registered under", NULL},
    {"id", (getter)callable_get_id, NULL, "the strata_callable id", NULL},
    {NULL},
};

PyTypeObject SpyCallable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.Callable",
    .tp_basicsize = sizeof(SpyCallable),
    .tp_dealloc = (destructor)callable_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = (ternaryfunc)callable_call,
    .tp_repr = (reprfunc)callable_repr,
    .tp_getset = callable_getset,
    .tp_doc = "A function registered with a Worker (calling it calls the function).",
};

static PyObject *set_reviver(PyObject *m, PyObject *fn) {
    Py_XDECREF(revive);
    Py_INCREF(fn);
    revive = fn;
    Py_RETURN_NONE;
}

static PyMethodDef callable_methods[] = {
    {"_set_reviver", set_reviver, METH_O, "the function that revives a sent function"},
    {"_thread_states", thread_states, METH_NOARGS,
     "the number of thread states of the interpreter (a test of their release)"},
    {NULL},
};

void spy_callables_after_foreign_fork(void) {
    /* Runs in a fork handler: mmap, memcpy and munmap only. On failure the
     * tables stay shared, as before: the child keeps working. */
    size_t sb = (size_t)SHARED_SLOTS * sizeof(shared_slot);
    size_t ab = (size_t)SHARED_SLOTS * sizeof *aborted;
    void *a2 = mmap(NULL, ab, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (a2 == MAP_FAILED)
        return;
    memcpy(a2, (void *)aborted, (size_t)nworkers * sizeof *aborted);
    munmap((void *)aborted, ab);
    aborted = a2;
    for (uint32_t d = 0; d <= depth; d++) {
        void *s2 = mmap(NULL, sb, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (s2 == MAP_FAILED)
            return;
        memcpy(s2, tables[d].shared, (size_t)tables[d].nfns * sizeof(shared_slot));
        munmap(tables[d].shared, sb);
        tables[d].shared = s2;
    }
}

int spy_callables_init(PyObject *module) {
    if (pthread_key_create(&pin_key, unpin) != 0) {
        PyErr_SetString(PyExc_ImportError, "strata: pthread_key_create failed");
        return -1;
    }
    tables[0].shared = map_table();
    if (!tables[0].shared) {
        PyErr_SetFromErrno(PyExc_ImportError);
        return -1;
    }
    void *p = mmap(NULL, (size_t)SHARED_SLOTS * sizeof *aborted, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        PyErr_SetFromErrno(PyExc_ImportError);
        return -1;
    }
    aborted = p;
    if (PyType_Ready(&SpyCallable_Type) < 0)
        return -1;
    Py_INCREF(&SpyCallable_Type);
    if (PyModule_AddObject(module, "Callable", (PyObject *)&SpyCallable_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, callable_methods);
}
