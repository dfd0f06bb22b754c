/* python/strata/_strata_children.c - child Workers (L4 -> L3) from Python.
 *
 * Owns: Worker.add_child (strata_worker_add_child with a setup trampoline
 * that hands the Python setup a view of the child Worker), the table of
 * the children this process added (what a child's orchestration run is
 * told by: the tag its task carries as its last scalar), the trampoline of
 * orchestration callables (register_orch: one run of a child, built by a
 * Python function over the child's view), the setup exception texts of
 * process-hosted children (a shared page each, read by the parent when its
 * init fails), and the text of an exception in a child's orchestration
 * function (a shared page each, spliced into the parent's run error).
 * Must never: close or destroy a child's C worker (its parent's C worker
 * owns it), use a view made by another process (a child process makes its
 * own in its setup), or hold the GIL outside a call into Python.
 */
#include "_strata.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The tag of a task for a child Worker: this magic in the high bits, the
 * child's record index in the low 24. */
#define TAG_MAGIC 0x5354434800000000ull /* "STCH" */
#define TAG_MASK 0xffffffffff000000ull
#define TAG_INDEX 0x0000000000ffffffull
#define PAGE_BYTES 4096u

/* What a child's orchestration function raised, written where it ran (the
 * child's thread or process), read by the parent when its run's error is
 * raised. The text is written first, then run (release): a reader that sees
 * run sees the text. The child runs one run at a time. */
typedef struct {
    _Atomic uint64_t run; /* the child's run id the text belongs to; 0: none */
    char text[PAGE_BYTES - sizeof(uint64_t)];
} orch_page;

/* One child added by a Worker of this process (or, in a process child,
 * inherited from the parent as it was at the fork). Indexed by the
 * setup's user pointer and by the tag; never reused. Under the GIL. */
typedef struct {
    SpyWorker *parent; /* borrowed: cleared when the parent's C worker goes */
    PyObject *setup;   /* the setup callable (None for none) */
    uint32_t slot;     /* the parent's abort slot: Ctrl-C there fails the child's tasks too */
    int host;          /* strata_host_mode */
    int sub_mode;      /* the child's sub workers' */
    int worker_id;     /* its next-level id in the parent; -1 until added */
    PyObject *view;    /* its view in the process that made it, or NULL */
    unsigned view_gen; /* spy_fork_generation of that process */
    char *error;       /* a thread child's setup exception text (PyMem_Raw) */
    char *page;        /* a process child's: a shared page the child writes */
    orch_page *orch;   /* every child's: its last orchestration exception */
} child_rec;

static child_rec *recs;
static uint32_t nrecs, caprecs;
static PyObject *child_class; /* strata.ChildWorker (the Python layer's) */

static int rec_new(uint32_t *out) {
    if (nrecs > TAG_INDEX) {
        PyErr_SetString(PyExc_RuntimeError, "strata: too many child Workers in one process");
        return -1;
    }
    if (nrecs == caprecs) {
        uint32_t cap = caprecs ? caprecs * 2 : 16;
        child_rec *p = PyMem_RawRealloc(recs, cap * sizeof *p);
        if (!p) {
            PyErr_NoMemory();
            return -1;
        }
        recs = p;
        caprecs = cap;
    }
    memset(&recs[nrecs], 0, sizeof recs[nrecs]);
    recs[nrecs].worker_id = -1;
    *out = nrecs++;
    return 0;
}

/* ---- the view -------------------------------------------------------------- */

static SpyWorker *make_view(child_rec *r, strata_worker *inner) {
    if (!child_class) {
        PyErr_SetString(PyExc_RuntimeError, "strata: the ChildWorker class is not set");
        return NULL;
    }
    PyObject *o = PyObject_CallNoArgs(child_class);
    if (!o)
        return NULL;
    if (!PyObject_TypeCheck(o, &SpyWorker_Type)) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_TypeError, "strata: ChildWorker is not a Worker");
        return NULL;
    }
    SpyWorker *v = (SpyWorker *)o;
    v->callables = PyDict_New();
    if (!v->callables) {
        Py_DECREF(o);
        return NULL;
    }
    v->w = inner;
    v->child = 1;
    v->setup_open = 1;
    v->mode = r->sub_mode;
    v->gen = spy_fork_generation; /* made here: this process's own, whatever it forked from */
    v->owner_pid = (long)getpid();
    v->slot = r->slot;
    return v;
}

/* The view of a child whose setup failed, or whose worker is gone: every
 * call on it raises Closed. */
static void view_close(SpyWorker *v) {
    v->setup_open = 0;
    v->closed = 1;
    v->w = NULL;
    Py_CLEAR(v->child_keep);
}

/* ---- setup ------------------------------------------------------------------ */

static void keep_error(child_rec *r, const char *text) {
    if (r->page) { /* a process child: the parent reads it when its init fails */
        snprintf(r->page, PAGE_BYTES, "%s", text);
        return;
    }
    PyMem_RawFree(r->error);
    size_t n = strlen(text) + 1;
    r->error = PyMem_RawMalloc(n);
    if (r->error)
        memcpy(r->error, text, n);
}

/* Runs where the child lives (this thread for a thread child; the child's
 * process, before its init, for a process child). */
static int child_setup(strata_worker *inner, void *user) {
    uint32_t i = (uint32_t)(uintptr_t)user;
    PyGILState_STATE g = spy_gil_take();
    int rc = STRATA_OK;
    child_rec *r = &recs[i];
    /* In the child's own process: its registrations take indices of its own. */
    SpyWorker *v = r->host == STRATA_HOST_PROCESS && spy_callables_child_process() < 0
                       ? NULL
                       : make_view(r, inner);
    PyObject *res = NULL;
    if (v)
        res = r->setup == Py_None ? (Py_INCREF(Py_None), Py_None)
                                  : PyObject_CallOneArg(r->setup, (PyObject *)v);
    r = &recs[i]; /* the setup may have added children of its own: recs may have moved */
    if (!res) {
        char *text = spy_format_exception();
        keep_error(r, text ? text : "a Python exception (no text)");
        PyMem_RawFree(text);
        rc = STRATA_ETASK;
        if (v) {
            view_close(v);
            Py_DECREF(v);
        }
    } else {
        Py_DECREF(res);
        v->setup_open = 0;
        r->view = (PyObject *)v;
        r->view_gen = spy_fork_generation;
    }
    PyGILState_Release(g);
    return rc;
}

/* ---- add_child --------------------------------------------------------------- */

/* "... setup failed: (no message)" with the exception text in place of the
 * placeholder (or after the message). New reference. */
static PyObject *with_text(const char *msg, const char *text) {
    static const char none[] = "(no message)";
    size_t n = strlen(msg), k = sizeof none - 1;
    int placeholder = n >= k && strcmp(msg + n - k, none) == 0;
    PyObject *head = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)(placeholder ? n - k : n), "replace");
    PyObject *r = head ? PyUnicode_FromFormat(placeholder ? "%U%s" : "%U: %s", head, text) : NULL;
    Py_XDECREF(head);
    return r;
}

PyObject *spy_worker_add_child(SpyWorker *self, PyObject *args, PyObject *kwin) {
    if (PyTuple_GET_SIZE(args) != 0)
        return PyErr_Format(PyExc_TypeError, "add_child takes keyword arguments only");
    if (spy_worker_enter(self) < 0)
        return NULL;
    spy_worker_leave(self); /* the GIL stays held: only open and owned matter */
    PyObject *kw = kwin ? PyDict_Copy(kwin) : PyDict_New();
    if (!kw)
        return NULL;
    PyObject *result = NULL, *path = NULL, *empty = NULL;
    strata_child_config cc;
    strata_child_config_init(&cc);
    PyObject *host = PyDict_GetItemString(kw, "host");
    PyObject *setup = PyDict_GetItemString(kw, "setup");
    PyObject *name = PyDict_GetItemString(kw, "name");
    Py_XINCREF(host);
    Py_XINCREF(setup);
    Py_XINCREF(name);
    PyDict_DelItemString(kw, "host");
    PyDict_DelItemString(kw, "setup");
    PyDict_DelItemString(kw, "name");
    PyErr_Clear(); /* a key that was not there */
    if (host && host != Py_None) {
        const char *h = PyUnicode_Check(host) ? PyUnicode_AsUTF8(host) : NULL;
        if (!h || (strcmp(h, "thread") && strcmp(h, "process"))) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "strata: add_child: host must be \"thread\" or \"process\", not %R", host);
            goto out;
        }
        cc.host = strcmp(h, "process") == 0 ? STRATA_HOST_PROCESS : STRATA_HOST_THREAD;
    }
    if (setup && setup != Py_None && !PyCallable_Check(setup)) {
        PyErr_Format(PyExc_TypeError, "strata: add_child: setup %R is not callable", setup);
        goto out;
    }
    if (name && name != Py_None && !(cc.name = PyUnicode_AsUTF8(name)))
        goto out;
    empty = PyTuple_New(0);
    if (!empty || spy_worker_config_parse(empty, kw, "add_child", &cc.worker, &path) < 0)
        goto out;
    uint32_t i;
    if (rec_new(&i) < 0)
        goto out;
    child_rec *r = &recs[i];
    r->parent = self;
    r->setup = setup && setup != Py_None ? setup : Py_None;
    Py_INCREF(r->setup);
    r->slot = self->slot;
    r->host = cc.host;
    r->sub_mode = cc.worker.sub_mode;
    if (cc.host == STRATA_HOST_PROCESS) {
        void *p = mmap(NULL, PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            PyErr_SetFromErrno(PyExc_OSError);
            r->parent = NULL;
            goto out;
        }
        r->page = p;
        r->page[0] = '\0';
    }
    void *op = mmap(NULL, PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (op == MAP_FAILED) {
        PyErr_SetFromErrno(PyExc_OSError);
        if (r->page)
            munmap(r->page, PAGE_BYTES);
        r->page = NULL;
        r->parent = NULL;
        goto out;
    }
    r->orch = op;
    cc.setup = child_setup;
    cc.setup_user = (void *)(uintptr_t)i;
    int id = -1;
    int rc = strata_worker_add_child(self->w, &cc, &id); /* a thread child's setup runs here */
    r = &recs[i];
    if (rc != STRATA_OK) {
        const char *msg = strata_error_message();
        PyObject *m = r->error ? with_text(msg, r->error) : PyUnicode_FromString(msg);
        if (m) {
            spy_raise(rc, PyUnicode_AsUTF8(m));
            Py_DECREF(m);
        }
        PyMem_RawFree(r->error);
        r->error = NULL;
        if (r->page)
            munmap(r->page, PAGE_BYTES);
        r->page = NULL;
        munmap(r->orch, PAGE_BYTES);
        r->orch = NULL;
        r->parent = NULL;
        Py_CLEAR(r->setup);
        goto out;
    }
    r->worker_id = id;
    result = PyLong_FromLong(id);
out:
    Py_XDECREF(path);
    Py_XDECREF(empty);
    Py_XDECREF(host);
    Py_XDECREF(setup);
    Py_XDECREF(name);
    Py_DECREF(kw);
    return result;
}

int spy_child_tag(SpyWorker *self, int worker_id, uint64_t *tag) {
    for (uint32_t i = 0; i < nrecs; i++) {
        if (recs[i].parent == self && recs[i].worker_id == worker_id && worker_id >= 0) {
            *tag = TAG_MAGIC | i;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "strata: worker %d is not a child Worker of this Worker (add_child): an "
                 "orchestration callable runs on a child Worker only",
                 worker_id);
    return -1;
}

int spy_child_tag_of(const strata_task_view *v, uint32_t *rec) {
    if (!v || v->nscalars == 0)
        return 0;
    uint32_t k = v->nscalars - 1;
    uint64_t x = v->scalars[k];
    if (v->scalar_types[k] != STRATA_SCALAR_U64 || (x & TAG_MASK) != TAG_MAGIC)
        return 0;
    *rec = (uint32_t)(x & TAG_INDEX);
    return 1;
}

PyObject *spy_children_init_error(SpyWorker *parent, const char *msg) {
    PyObject *m = PyUnicode_FromString(msg);
    for (uint32_t i = 0; m && i < nrecs; i++) {
        child_rec *r = &recs[i];
        if (r->parent != parent || !r->page || !r->page[0])
            continue;
        PyObject *n = with_text(PyUnicode_AsUTF8(m), r->page);
        r->page[0] = '\0'; /* a retried init starts clean */
        Py_SETREF(m, n);
    }
    return m;
}

void spy_children_forget(SpyWorker *parent) {
    for (uint32_t i = 0; i < nrecs; i++) {
        child_rec *r = &recs[i];
        if (r->parent != parent)
            continue;
        r->parent = NULL;
        PyObject *v = r->view;
        r->view = NULL;
        if (v) {
            view_close((SpyWorker *)v);
            spy_children_forget((SpyWorker *)v); /* its own children went with it */
            Py_DECREF(v);
        }
        Py_CLEAR(r->setup);
        PyMem_RawFree(r->error);
        r->error = NULL;
        if (r->page)
            munmap(r->page, PAGE_BYTES);
        r->page = NULL;
        if (r->orch)
            munmap(r->orch, PAGE_BYTES);
        r->orch = NULL;
    }
}

PyObject *spy_children_run_error(SpyWorker *parent, const char *msg) {
    static const char none[] = "): (no message)";
    for (uint32_t i = 0; msg && i < nrecs; i++) {
        child_rec *r = &recs[i];
        if (r->parent != parent || !r->orch || r->worker_id < 0)
            continue;
        uint64_t run = atomic_load_explicit(&r->orch->run, memory_order_acquire);
        if (!run)
            continue;
        /* "... L4 worker <id> (<name>): task ... failed: run <run>: orchestration
         * function failed (<status>): (no message)" */
        char who[32], what[64];
        snprintf(who, sizeof who, "worker %d (", r->worker_id);
        snprintf(what, sizeof what, ": run %llu: orchestration function failed (",
                 (unsigned long long)run);
        const char *a = strstr(msg, who);
        const char *b = a ? strstr(a, what) : NULL;
        const char *c = b ? strstr(b, none) : NULL;
        if (!c)
            continue;
        size_t head = (size_t)(c - msg) + 3; /* through "): " */
        PyObject *h = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)head, "replace");
        PyObject *t =
            h ? PyUnicode_FromFormat("%U%s%s", h, r->orch->text, c + sizeof none - 1) : NULL;
        Py_XDECREF(h);
        return t;
    }
    return NULL;
}

/* ---- a child's run ------------------------------------------------------------- */

int spy_child_orch_trampoline(strata_orch *o, void *user) {
    uint32_t index = (uint32_t)(uintptr_t)user;
    PyGILState_STATE g = spy_gil_take();
    const strata_task_view *v = strata_orch_task_args(o);
    uint32_t ri;
    SpyWorker *view = NULL;
    if (spy_child_tag_of(v, &ri) && ri < nrecs && recs[ri].view &&
        recs[ri].view_gen == spy_fork_generation)
        view = (SpyWorker *)recs[ri].view;
    int rc = STRATA_OK;
    if (!view) {
        /* No child view of this process named by the task: a run submitted
         * to this worker by other means than a Python parent's Orch. */
        PySys_WriteStderr("strata: an orchestration callable ran without its child Worker's tag "
                          "(submit it with Orch.submit_next_level to a child Worker)\n");
        rc = STRATA_ETASK;
    } else {
        Py_INCREF(view);
        PyObject *fn = spy_callables_lookup(index);
        PyObject *orch = fn ? spy_orch_attach(view, o, 1) : NULL;
        PyObject *r = orch ? PyObject_CallOneArg(fn, orch) : NULL;
        if (orch) /* what the run's tasks use: kept until the child's next run (one at a time) */
            Py_XSETREF(view->child_keep, spy_orch_detach(orch));
        if (!r) {
            /* The run fails; its message cannot carry Python's text (the
             * library takes it from its own calls): the text goes to the
             * child's page, and the parent's run error gets it there. */
            char *text = spy_format_exception();
            orch_page *pg = recs[ri].orch;
            if (pg) {
                snprintf(pg->text, sizeof pg->text, "%s", text ? text : "a Python exception");
                atomic_store_explicit(&pg->run, strata_orch_run_id(o), memory_order_release);
            }
            PyMem_RawFree(text);
            rc = STRATA_ETASK;
        }
        Py_XDECREF(r);
        Py_XDECREF(orch);
        Py_DECREF(view);
    }
    PyGILState_Release(g);
    return rc;
}

/* ---- module ---------------------------------------------------------------------- */

static PyObject *set_child_class(PyObject *m, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &SpyWorker_Type))
        return PyErr_Format(PyExc_TypeError, "strata: _set_child_class: a Worker subclass");
    Py_INCREF(cls);
    Py_XSETREF(child_class, cls);
    Py_RETURN_NONE;
}

static PyMethodDef children_methods[] = {
    {"_set_child_class", set_child_class, METH_O, "the class of child Workers' views"},
    {NULL},
};

int spy_children_init(PyObject *module) {
    return PyModule_AddFunctions(module, children_methods);
}
