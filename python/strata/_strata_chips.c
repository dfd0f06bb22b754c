/* python/strata/_strata_chips.c - sim chips of a Worker from Python.
 *
 * Owns: Worker.add_chip (the chip config and the sim knobs by keyword),
 * chip programs written in Python (the strata_program_fn trampoline and
 * the ProgramCtx it hands them: launch, fail), and device memory (the
 * ChipBuffer type, chip_malloc / chip_tensor / chip_copy_to / _from /
 * chip_free).
 * Must never: let a ProgramCtx be used after its program returned, or copy
 * between device memory and an array that is not contiguous.
 */
#include "_strata.h"

#include <strata/sim.h>
#include <string.h>

/* ---- ProgramCtx ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD strata_program_ctx *ctx; /* NULL once the program returned */
} SpyProgramCtx;

static void pctx_dealloc(SpyProgramCtx *self) {
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int pctx_live(SpyProgramCtx *self) {
    if (!self->ctx) {
        PyErr_SetString(spy_error_class(STRATA_ESTATE),
                        "strata.ProgramCtx: used after its program returned");
        return -1;
    }
    return 0;
}

/* A kernel argument word: an int (as u64 bits), or a tensor's address. */
static int word_of(PyObject *o, uint64_t *w) {
    if (Py_IS_TYPE(o, &SpyTensor_Type)) {
        *w = (uint64_t)(uintptr_t)strata_tensor_data(&((SpyTensor *)o)->t);
        return 0;
    }
    if (PyLong_Check(o)) {
        *w = PyLong_AsUnsignedLongLongMask(o);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "ProgramCtx.launch: a kernel argument is an int or a strata.Tensor, not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

static PyObject *pctx_launch(SpyProgramCtx *self, PyObject *const *args, Py_ssize_t n) {
    if (pctx_live(self) < 0)
        return NULL;
    if (n < 2)
        return PyErr_Format(PyExc_TypeError, "ProgramCtx.launch(kernel, blocks, *words)");
    const char *kernel = PyUnicode_AsUTF8(args[0]);
    if (!kernel)
        return NULL;
    unsigned long blocks = PyLong_AsUnsignedLong(args[1]);
    if (PyErr_Occurred())
        return NULL;
    if (n - 2 > STRATA_KERNEL_MAX_ARGS)
        return PyErr_Format(PyExc_ValueError, "ProgramCtx.launch: %zd words (at most %d)", n - 2,
                            STRATA_KERNEL_MAX_ARGS);
    uint64_t words[STRATA_KERNEL_MAX_ARGS];
    for (Py_ssize_t i = 2; i < n; i++)
        if (word_of(args[i], &words[i - 2]) < 0)
            return NULL;
    int rc = strata_program_launch(self->ctx, kernel, (uint32_t)blocks, words, (uint32_t)(n - 2));
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *pctx_fail(SpyProgramCtx *self, PyObject *msg) {
    if (pctx_live(self) < 0)
        return NULL;
    const char *s = PyUnicode_AsUTF8(msg);
    if (!s)
        return NULL;
    strata_program_fail(self->ctx, "%s", s);
    Py_RETURN_NONE;
}

static PyMethodDef pctx_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))pctx_launch, METH_FASTCALL,
     "launch(kernel, blocks, *words): enqueue a kernel (0 blocks = the call's block_dim); a "
     "word is an int or a tensor (its device address)."},
    {"fail", (PyCFunction)pctx_fail, METH_O, "fail(message): why the program fails."},
    {NULL},
};

static PyTypeObject SpyProgramCtx_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.ProgramCtx",
    .tp_basicsize = sizeof(SpyProgramCtx),
    .tp_dealloc = (destructor)pctx_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = pctx_methods,
    .tp_doc = "What a chip program gets: launch(kernel, blocks, *words), fail(message).",
};

/* The program's arguments: the context, the task's tensors (strata.Tensor:
 * device or host views, their .ptr the address a kernel takes), its
 * scalars, its payload. */
static PyObject *program_args(SpyProgramCtx *c, const strata_task_view *v) {
    Py_ssize_t n = 1 + (Py_ssize_t)v->ntensors + v->nscalars + (v->payload ? 1 : 0);
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    Py_INCREF(c);
    PyTuple_SET_ITEM(t, 0, (PyObject *)c);
    Py_ssize_t k = 1;
    for (uint32_t i = 0; i < v->ntensors; i++) {
        PyObject *x = spy_tensor_new(&v->tensors[i], NULL);
        if (!x)
            goto fail;
        PyTuple_SET_ITEM(t, k++, x);
    }
    for (uint32_t i = 0; i < v->nscalars; i++) {
        PyObject *s = spy_scalar_object(v->scalar_types[i], v->scalars[i]);
        if (!s)
            goto fail;
        PyTuple_SET_ITEM(t, k++, s);
    }
    if (v->payload) {
        PyObject *b = PyBytes_FromStringAndSize(v->payload, v->payload_bytes);
        if (!b)
            goto fail;
        PyTuple_SET_ITEM(t, k++, b);
    }
    return t;
fail:
    Py_DECREF(t);
    return NULL;
}

int spy_program_trampoline(strata_program_ctx *ctx, const strata_task_view *v, void *user) {
    PyGILState_STATE g = spy_gil_take();
    int rc = 0;
    PyObject *fn = spy_callables_lookup((uint32_t)(uintptr_t)user);
    SpyProgramCtx *c = fn ? PyObject_New(SpyProgramCtx, &SpyProgramCtx_Type) : NULL;
    PyObject *args = NULL, *r = NULL;
    if (c) {
        c->ctx = ctx;
        args = program_args(c, v);
        r = args ? PyObject_Call(fn, args, NULL) : NULL;
        c->ctx = NULL;
    }
    if (!r) {
        char *text = spy_format_exception();
        strata_program_fail(ctx, "%s", text ? text : "a Python exception");
        PyMem_RawFree(text);
        rc = 1;
    }
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(c);
    PyGILState_Release(g);
    return rc;
}

/* ---- ChipBuffer ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD strata_buffer *buf; /* NULL once freed */
    SpyWorker *worker;
    int chip;
} SpyChipBuffer;

static void cbuf_dealloc(SpyChipBuffer *self) {
    /* Not freed here: device memory lives until chip_free or the worker's
     * destroy (a task may still use it). */
    Py_XDECREF(self->worker);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *cbuf_nbytes(SpyChipBuffer *self, void *u) {
    return PyLong_FromSize_t(self->buf ? strata_buffer_size(self->buf) : 0);
}
static PyObject *cbuf_chip(SpyChipBuffer *self, void *u) {
    return PyLong_FromLong(self->chip);
}

static PyGetSetDef cbuf_getset[] = {
    {"nbytes", (getter)cbuf_nbytes, NULL, "size in bytes (0 once freed)", NULL},
    {"chip", (getter)cbuf_chip, NULL, "the chip's worker id", NULL},
    {NULL},
};

static PyTypeObject SpyChipBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.ChipBuffer",
    .tp_basicsize = sizeof(SpyChipBuffer),
    .tp_dealloc = (destructor)cbuf_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_getset = cbuf_getset,
    .tp_doc = "Device memory of one chip (Worker.chip_malloc).",
};

static SpyChipBuffer *cbuf_check(SpyWorker *w, PyObject *o, int chip) {
    if (!Py_IS_TYPE(o, &SpyChipBuffer_Type)) {
        PyErr_Format(PyExc_TypeError, "strata: a chip buffer (Worker.chip_malloc), not %.100s",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    SpyChipBuffer *b = (SpyChipBuffer *)o;
    if (!b->buf || b->worker != w) {
        PyErr_SetString(PyExc_ValueError, b->buf ? "strata: a chip buffer of another Worker"
                                                 : "strata: the chip buffer was freed");
        return NULL;
    }
    if (chip >= 0 && b->chip != chip) {
        PyErr_Format(PyExc_ValueError, "strata: the buffer belongs to chip %d, not %d", b->chip,
                     chip);
        return NULL;
    }
    return b;
}

/* ---- the Worker's chip calls ---------------------------------------------- */

static int kw_u64(PyObject *kw, const char *name, uint64_t *out) {
    PyObject *v = kw ? PyDict_GetItemString(kw, name) : NULL;
    if (!v)
        return 0;
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (PyErr_Occurred())
        return -1;
    *out = x;
    if (PyDict_DelItemString(kw, name) < 0)
        return -1;
    return 1;
}

PyObject *spy_worker_add_chip(SpyWorker *self, PyObject *args, PyObject *kwin) {
    if (PyTuple_GET_SIZE(args) != 0)
        return PyErr_Format(PyExc_TypeError, "add_chip takes keyword arguments only");
    if (spy_worker_enter(self) < 0)
        return NULL;
    spy_worker_leave(self); /* with the GIL held from here: only open and owned matter */
    PyObject *kw = kwin ? PyDict_Copy(kwin) : PyDict_New();
    if (!kw)
        return NULL;
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    strata_sim_injection inj;
    memset(&inj, 0, sizeof inj);
    int use_inj = 0;
    PyObject *result = NULL;
    PyObject *v;
    const char *backend = "sim";
    if ((v = PyDict_GetItemString(kw, "backend"))) {
        if (!(backend = PyUnicode_AsUTF8(v)))
            goto out;
        cfg.backend = backend;
    }
    if (!cfg.backend)
        cfg.backend = "sim";
    PyDict_DelItemString(kw, "backend");
    PyErr_Clear();
    if ((v = PyDict_GetItemString(kw, "host"))) {
        const char *h = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        if (!h || (strcmp(h, "thread") && strcmp(h, "process"))) {
            PyErr_Format(PyExc_ValueError, "add_chip: host must be \"thread\" or \"process\"");
            goto out;
        }
        cfg.host = strcmp(h, "process") == 0 ? STRATA_HOST_PROCESS : STRATA_HOST_THREAD;
        PyDict_DelItemString(kw, "host");
    }
    if ((v = PyDict_GetItemString(kw, "kernel_module"))) {
        if (v != Py_None && !(cfg.kernel_module = PyUnicode_AsUTF8(v)))
            goto out;
    }
    uint64_t x;
    int r;
    if ((r = kw_u64(kw, "device_id", &x)) < 0)
        goto out;
    if (r)
        cfg.device_id = (int)x;
    if ((r = kw_u64(kw, "sim_cores", &x)) < 0)
        goto out;
    if (r)
        cfg.sim_cores = (uint32_t)x;
    if ((r = kw_u64(kw, "pipeline_depth", &x)) < 0)
        goto out;
    if (r)
        cfg.pipeline_depth = (uint32_t)x;
    static const char *knobs[] = {"prepare_delay_ns", "kernel_delay_ns", "fault",
                                  "fault_code",       "fault_run",       "fault_block",
                                  "refuse_overlap"};
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        if ((r = kw_u64(kw, knobs[i], &x)) < 0)
            goto out;
        if (!r)
            continue;
        use_inj = 1;
        switch (i) {
        case 0:
            inj.prepare_delay_ns = x;
            break;
        case 1:
            inj.kernel_delay_ns = x;
            break;
        case 2:
            inj.fault = (strata_sim_fault)x;
            break;
        case 3:
            inj.fault_code = (int32_t)x;
            break;
        case 4:
            inj.fault_run = (uint32_t)x;
            break;
        case 5:
            inj.fault_block = (uint32_t)x;
            break;
        case 6:
            inj.refuse_overlap = (int)x;
            break;
        }
    }
    if ((v = PyDict_GetItemString(kw, "fault_kernel"))) {
        const char *s = PyUnicode_AsUTF8(v);
        if (!s)
            goto out;
        snprintf(inj.fault_kernel, sizeof inj.fault_kernel, "%s", s);
        use_inj = 1;
    }
    PyObject *k;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &k, &v)) {
        if (PyUnicode_CompareWithASCIIString(k, "kernel_module") &&
            PyUnicode_CompareWithASCIIString(k, "fault_kernel")) {
            PyErr_Format(PyExc_TypeError, "add_chip: unexpected keyword argument %R", k);
            goto out;
        }
    }
    if (use_inj)
        cfg.sim = &inj;
    int id = -1;
    int rc = strata_worker_add_chip(self->w, &cfg, &id);
    if (rc != STRATA_OK) {
        spy_raise(rc, NULL);
        goto out;
    }
    result = PyLong_FromLong(id);
out:
    Py_DECREF(kw);
    return result;
}

int spy_worker_register_program(SpyWorker *self, const char *name, uint32_t index,
                                strata_callable *id) {
    strata_chip_program_desc d = {name, spy_program_trampoline, (void *)(uintptr_t)index};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = strata_worker_register_chip_program(self->w, &d, id);
    Py_END_ALLOW_THREADS return rc;
}

PyObject *spy_worker_chip_malloc(SpyWorker *self, PyObject *args) {
    int chip;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "in:chip_malloc", &chip, &n))
        return NULL;
    if (spy_worker_ensure_init(self) < 0) /* a process chip's memory exists once it runs */
        return NULL;
    if (n <= 0)
        return PyErr_Format(PyExc_ValueError, "chip_malloc: nbytes must be > 0, not %zd", n);
    strata_buffer *b = NULL;
    int rc;
    if (spy_worker_enter(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS rc = strata_worker_chip_malloc(self->w, chip, (size_t)n, &b);
    Py_END_ALLOW_THREADS if (rc != STRATA_OK) {
        spy_worker_leave(self);
        return spy_raise(rc, NULL);
    }
    SpyChipBuffer *o = PyObject_New(SpyChipBuffer, &SpyChipBuffer_Type);
    if (!o) {
        strata_worker_chip_free(self->w, b);
        spy_worker_leave(self);
        return NULL;
    }
    spy_worker_leave(self);
    o->buf = b;
    Py_INCREF(self);
    o->worker = self;
    o->chip = chip;
    return (PyObject *)o;
}

PyObject *spy_worker_chip_free(SpyWorker *self, PyObject *args) {
    int chip;
    PyObject *bo;
    if (!PyArg_ParseTuple(args, "iO:chip_free", &chip, &bo))
        return NULL;
    SpyChipBuffer *b = cbuf_check(self, bo, chip);
    if (!b || spy_worker_enter(self) < 0)
        return NULL;
    int rc;
    strata_buffer *buf = b->buf;
    Py_BEGIN_ALLOW_THREADS rc = strata_worker_chip_free(self->w, buf);
    Py_END_ALLOW_THREADS spy_worker_leave(self);
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    b->buf = NULL;
    Py_RETURN_NONE;
}

PyObject *spy_worker_chip_tensor(SpyWorker *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"buffer", "shape", "dtype", "offset", NULL};
    PyObject *bo, *shape, *dtype = NULL;
    unsigned long long offset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OK:chip_tensor", names, &bo, &shape, &dtype,
                                     &offset))
        return NULL;
    SpyChipBuffer *b = cbuf_check(self, bo, -1);
    if (!b)
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
        return PyErr_Format(PyExc_ValueError, "chip_tensor: shape must have 1..%d dimensions",
                            STRATA_MAX_RANK);
    }
    for (Py_ssize_t i = 0; i < rank; i++)
        dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
    Py_DECREF(seq);
    if (PyErr_Occurred() || spy_worker_enter(self) < 0)
        return NULL;
    spy_worker_leave(self); /* the GIL stays held: only open and owned matter */
    strata_tensor t;
    int rc = strata_worker_chip_tensor(self->w, b->buf, offset, (strata_dtype)dt, (int)rank, dims,
                                       NULL, &t);
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    return spy_tensor_new(&t, (PyObject *)b);
}

/* chip_copy_to(chip, dev, array, offset=0) / chip_copy_from(chip, array, dev, offset=0) */
static PyObject *chip_copy(SpyWorker *self, PyObject *args, int to_device) {
    int chip;
    PyObject *a1, *a2;
    unsigned long long offset = 0;
    if (!PyArg_ParseTuple(args, to_device ? "iOO|K:chip_copy_to" : "iOO|K:chip_copy_from", &chip,
                          &a1, &a2, &offset))
        return NULL;
    PyObject *dev = to_device ? a1 : a2, *host = to_device ? a2 : a1;
    SpyChipBuffer *b = cbuf_check(self, dev, chip);
    if (!b)
        return NULL;
    Py_buffer view;
    int flags = PyBUF_C_CONTIGUOUS | (to_device ? 0 : PyBUF_WRITABLE);
    if (PyObject_GetBuffer(host, &view, flags) < 0) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError,
                            "strata: chip_copy_%s: the host array must be a C-contiguous%s "
                            "buffer (numpy array)",
                            to_device ? "to" : "from", to_device ? "" : ", writable");
    }
    if (spy_worker_enter(self) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int rc;
    strata_buffer *buf = b->buf;
    Py_BEGIN_ALLOW_THREADS rc =
        to_device ? strata_worker_chip_copy_to(self->w, buf, offset, view.buf, (size_t)view.len)
                  : strata_worker_chip_copy_from(self->w, buf, offset, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    spy_worker_leave(self);
    if (rc != STRATA_OK)
        return spy_raise(rc, NULL);
    Py_RETURN_NONE;
}

PyObject *spy_worker_chip_copy_to(SpyWorker *self, PyObject *args) {
    return chip_copy(self, args, 1);
}
PyObject *spy_worker_chip_copy_from(SpyWorker *self, PyObject *args) {
    return chip_copy(self, args, 0);
}

int spy_chips_init(PyObject *module) {
    if (PyType_Ready(&SpyProgramCtx_Type) < 0 || PyType_Ready(&SpyChipBuffer_Type) < 0)
        return -1;
    Py_INCREF(&SpyProgramCtx_Type);
    Py_INCREF(&SpyChipBuffer_Type);
    if (PyModule_AddObject(module, "ProgramCtx", (PyObject *)&SpyProgramCtx_Type) < 0 ||
        PyModule_AddObject(module, "ChipBuffer", (PyObject *)&SpyChipBuffer_Type) < 0)
        return -1;
#ifdef STRATA_SIM_TEST_KERNELS_PATH
    PyModule_AddStringConstant(module, "SIM_TEST_KERNELS", STRATA_SIM_TEST_KERNELS_PATH);
#endif
    return 0;
}
