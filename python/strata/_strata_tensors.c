/* python/strata/_strata_tensors.c - numpy arrays over strata memory, and
 * strata tensors of numpy arrays.
 *
 * Owns: the Buffer type (a strata_buffer_create buffer, the base object of
 * every array over it: the buffer lives while any array or view of it does),
 * the Tensor type (runtime memory and chip views, which are not numpy
 * arrays), the dtype mapping, and the conversion of an array or view into a
 * strata_tensor (offset, shape and strides in elements), also of a view of
 * a parent task's tensor in a child Worker's run (the same buffer identity).
 * Must never: copy tensor data, or accept an array whose memory is not a
 * strata buffer's (a child could not see it).
 */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL strata_py_ARRAY_API
#include "_strata.h"

#include <numpy/arrayobject.h>

/* ---- dtypes ------------------------------------------------------------- */

/* numpy type numbers by strata dtype; BF16 has no numpy type and is seen as
 * uint16 bits. */
static const int npy_of[STRATA_DTYPE_COUNT] = {
    [STRATA_U8] = NPY_UINT8,    [STRATA_I8] = NPY_INT8,     [STRATA_I16] = NPY_INT16,
    [STRATA_I32] = NPY_INT32,   [STRATA_I64] = NPY_INT64,   [STRATA_F16] = NPY_FLOAT16,
    [STRATA_BF16] = NPY_UINT16, [STRATA_F32] = NPY_FLOAT32, [STRATA_F64] = NPY_FLOAT64,
};

static int dtype_of_descr(PyArray_Descr *d) {
    if (d->byteorder == '>')
        goto bad;
    switch (d->type_num) {
    case NPY_UINT8:
        return STRATA_U8;
    case NPY_INT8:
        return STRATA_I8;
    case NPY_INT16:
        return STRATA_I16;
    case NPY_INT32:
        return STRATA_I32;
    case NPY_INT64:
        return STRATA_I64;
    case NPY_LONGLONG:
        if (sizeof(long long) == 8)
            return STRATA_I64;
        break;
    case NPY_FLOAT16:
        return STRATA_F16;
    case NPY_FLOAT32:
        return STRATA_F32;
    case NPY_FLOAT64:
        return STRATA_F64;
    default:
        break;
    }
bad:
    PyErr_Format(PyExc_TypeError,
                 "strata: dtype %R has no strata dtype (uint8, int8, int16, int32, int64, "
                 "float16, float32, float64)",
                 (PyObject *)d);
    return -1;
}

int spy_dtype_of(PyObject *dtype) {
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(dtype, &d))
        return -1;
    int r = dtype_of_descr(d);
    Py_DECREF(d);
    return r;
}

PyObject *spy_numpy_dtype(int dtype) {
    return (PyObject *)PyArray_DescrFromType(npy_of[dtype]);
}

/* ---- Buffer ------------------------------------------------------------- */

static void buffer_dealloc(SpyBuffer *self) {
    strata_buffer_destroy(self->buf);
    Py_XDECREF(self->worker);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject SpyBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata._strata.Buffer",
    .tp_basicsize = sizeof(SpyBuffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory every child of a Worker sees: the base of Worker.array arrays.",
};

static int shape_of(PyObject *shape, int *rank, npy_intp *dims, int64_t *numel) {
    PyObject *seq = PyLong_Check(shape) ? PyTuple_Pack(1, shape) : PySequence_Tuple(shape);
    if (!seq)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (n < 1 || n > STRATA_MAX_RANK) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "strata: shape must have 1..%d dimensions, not %zd",
                     STRATA_MAX_RANK, n);
        return -1;
    }
    *numel = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (v < 1 || v > ((long long)1 << 40) || *numel > (((long long)1 << 48) / v)) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "strata: bad extent %lld in dimension %zd of the shape",
                         v, i);
            return -1;
        }
        dims[i] = (npy_intp)v;
        *numel *= v;
    }
    *rank = (int)n;
    Py_DECREF(seq);
    return 0;
}

PyObject *spy_buffer_array(PyObject *worker, strata_worker *w, PyObject *shape, PyObject *dtype) {
    int dt = spy_dtype_of(dtype);
    if (dt < 0)
        return NULL;
    int rank;
    npy_intp dims[STRATA_MAX_RANK];
    int64_t numel;
    if (shape_of(shape, &rank, dims, &numel) < 0)
        return NULL;
    size_t nbytes = (size_t)numel * strata_dtype_size((strata_dtype)dt);
    SpyBuffer *b = PyObject_New(SpyBuffer, &SpyBuffer_Type);
    if (!b)
        return NULL;
    b->buf = NULL;
    b->worker = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = strata_buffer_create(w, nbytes, &b->buf);
    Py_END_ALLOW_THREADS if (rc != STRATA_OK) {
        Py_DECREF(b);
        return spy_raise(rc, NULL);
    }
    Py_INCREF(worker);
    b->worker = worker;
    PyArray_Descr *d = PyArray_DescrFromType(npy_of[dt]);
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, d, rank, dims, NULL,
                                         strata_buffer_data(b->buf), NPY_ARRAY_CARRAY, NULL);
    if (!arr) {
        Py_DECREF(b);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)b) < 0) { /* steals b */
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* ---- Tensor ------------------------------------------------------------- */

static void tensor_dealloc(SpyTensor *self) {
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tensor_shape(SpyTensor *self, void *unused) {
    PyObject *t = PyTuple_New(self->t.rank);
    for (int i = 0; t && i < self->t.rank; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->t.shape[i]));
    return t;
}

static PyObject *tensor_dtype(SpyTensor *self, void *unused) {
    return spy_numpy_dtype(self->t.dtype);
}

static PyObject *tensor_nbytes(SpyTensor *self, void *unused) {
    return PyLong_FromLongLong(strata_tensor_numel(&self->t) *
                               (long long)strata_dtype_size((strata_dtype)self->t.dtype));
}

static PyObject *tensor_device(SpyTensor *self, void *unused) {
    return PyBool_FromLong(self->t.mem == STRATA_MEM_DEVICE);
}

static PyObject *tensor_ptr(SpyTensor *self, void *unused) {
    return PyLong_FromUnsignedLongLong((uint64_t)(uintptr_t)strata_tensor_data(&self->t));
}

static PyObject *tensor_repr(SpyTensor *self) {
    PyObject *shape = tensor_shape(self, NULL);
    PyObject *dt = tensor_dtype(self, NULL);
    PyObject *r = shape && dt ? PyUnicode_FromFormat("strata.Tensor(shape=%R, dtype=%R%s)", shape,
                                                     dt, self->t.mem ? ", device" : "")
                              : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(dt);
    return r;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_shape, NULL, "extent of each dimension", NULL},
    {"dtype", (getter)tensor_dtype, NULL, "numpy dtype of the elements", NULL},
    {"nbytes", (getter)tensor_nbytes, NULL, "bytes the view spans (elements x size)", NULL},
    {"device", (getter)tensor_device, NULL, "True for chip device memory", NULL},
    {"ptr", (getter)tensor_ptr, NULL, "address of element [0, ...] (a kernel argument word)", NULL},
    {NULL},
};

PyTypeObject SpyTensor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.Tensor",
    .tp_basicsize = sizeof(SpyTensor),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_getset = tensor_getset,
    .tp_repr = (reprfunc)tensor_repr,
    .tp_doc = "A strata tensor that is not a numpy array: runtime memory (Orch.alloc) or a "
              "chip buffer's view (Worker.chip_tensor).",
};

int spy_tensor_unallocated(PyObject *obj) {
    return Py_IS_TYPE(obj, &SpyTensor_Type) && ((SpyTensor *)obj)->t.base == NULL;
}

void spy_tensor_set(PyObject *obj, const strata_tensor *t) {
    ((SpyTensor *)obj)->t = *t;
}

/* strata.unallocated(shape, dtype=float): a Tensor without memory (only its
 * dtype and row-major shape), for an OUT argument to give runtime memory. */
static PyObject *make_unallocated(PyObject *m, PyObject *args, PyObject *kw) {
    static char *names[] = {"shape", "dtype", NULL};
    PyObject *shape, *dtype = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:unallocated", names, &shape, &dtype))
        return NULL;
    int dt = spy_dtype_of(dtype ? dtype : (PyObject *)&PyFloat_Type);
    if (dt < 0)
        return NULL;
    int rank;
    npy_intp dims[STRATA_MAX_RANK];
    int64_t numel;
    if (shape_of(shape, &rank, dims, &numel) < 0)
        return NULL;
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = (uint8_t)dt;
    t.rank = (uint8_t)rank;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t.shape[i] = dims[i];
        t.strides[i] = stride;
        stride *= dims[i];
    }
    return spy_tensor_new(&t, NULL);
}

static PyMethodDef tensor_functions[] = {
    {"unallocated", (PyCFunction)(void (*)(void))make_unallocated, METH_VARARGS | METH_KEYWORDS,
     "unallocated(shape, dtype=float): a Tensor without memory; given as strata.OUT(t) to a "
     "submit, it gets runtime memory of the run (t then names it)."},
    {NULL},
};

PyObject *spy_tensor_new(const strata_tensor *t, PyObject *owner) {
    SpyTensor *o = PyObject_New(SpyTensor, &SpyTensor_Type);
    if (!o)
        return NULL;
    o->t = *t;
    Py_XINCREF(owner);
    o->owner = owner;
    return (PyObject *)o;
}

/* ---- arrays into tensors ------------------------------------------------- */

/* The Buffer under an array: numpy collapses a view's base to the first
 * object that is not an array without its own data, so the walk is short. */
static SpyBuffer *buffer_under(PyArrayObject *a) {
    PyObject *base = PyArray_BASE(a);
    while (base && PyArray_Check(base))
        base = PyArray_BASE((PyArrayObject *)base);
    return base && Py_IS_TYPE(base, &SpyBuffer_Type) ? (SpyBuffer *)base : NULL;
}

/* The Tensor under an array of a parent task's tensor (Orch.task_args), or NULL. */
static SpyTensor *task_tensor_under(PyArrayObject *a) {
    PyObject *base = PyArray_BASE(a);
    while (base && PyArray_Check(base))
        base = PyArray_BASE((PyArrayObject *)base);
    return base && Py_IS_TYPE(base, &SpyTensor_Type) && ((SpyTensor *)base)->t.base
               ? (SpyTensor *)base
               : NULL;
}

/* A view of a parent task's tensor: the same buffer (base, size, identity),
 * its own offset, shape and strides; every element inside the buffer. */
static int task_view_tensor(PyArrayObject *a, SpyTensor *under, int dt, int rank,
                            const int64_t *shape, const int64_t *strides, strata_tensor *out) {
    const strata_tensor *t = &under->t;
    ptrdiff_t off = PyArray_BYTES(a) - (const char *)t->base;
    int64_t item = (int64_t)strata_dtype_size((strata_dtype)dt);
    int64_t last = 0;
    for (int i = 0; i < rank; i++)
        last += (shape[i] - 1) * strides[i];
    if (off < 0 || off % item != 0 ||
        (uint64_t)off + (uint64_t)((last + 1) * item) > t->buffer_bytes) {
        PyErr_SetString(PyExc_ValueError,
                        "strata: the view does not lie inside its task tensor's buffer");
        return -1;
    }
    *out = *t;
    out->offset = (uint64_t)off;
    out->dtype = (uint8_t)dt;
    out->rank = (uint8_t)rank;
    for (int i = 0; i < STRATA_MAX_RANK; i++) {
        out->shape[i] = i < rank ? shape[i] : 0;
        out->strides[i] = i < rank ? strides[i] : 0;
    }
    return 0;
}

PyObject *spy_task_tensor_object(const strata_tensor *t, int writable) {
    if (t->mem != STRATA_MEM_HOST)
        return spy_tensor_new(t, NULL); /* device memory: a Tensor, as a chip program sees it */
    PyObject *owner = spy_tensor_new(t, NULL);
    PyObject *a = owner ? spy_task_array(t, writable) : NULL;
    if (!a) {
        Py_XDECREF(owner);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)a, owner) < 0) { /* steals owner */
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

static int array_tensor(PyArrayObject *a, strata_tensor *out, PyObject **keep) {
    SpyBuffer *b = buffer_under(a);
    SpyTensor *under = b ? NULL : task_tensor_under(a);
    if (!b && !under) {
        PyErr_SetString(PyExc_ValueError,
                        "strata: a tensor argument must be an array from Worker.array (or a "
                        "view of one): other memory is not visible to the sub workers");
        return -1;
    }
    int dt = dtype_of_descr(PyArray_DESCR(a));
    if (dt < 0)
        return -1;
    int nd = PyArray_NDIM(a);
    if (nd > STRATA_MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "strata: an array of %d dimensions (at most %d)", nd,
                     STRATA_MAX_RANK);
        return -1;
    }
    npy_intp size = PyArray_SIZE(a);
    if (size == 0) {
        PyErr_SetString(PyExc_ValueError, "strata: an empty array is not a tensor");
        return -1;
    }
    const char *base = b ? strata_buffer_data(b->buf) : (const char *)under->t.base;
    const char *data = PyArray_BYTES(a);
    npy_intp item = PyArray_ITEMSIZE(a);
    ptrdiff_t off = data - base;
    if (off < 0 || off % item != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "strata: the view does not start on an element of its buffer");
        return -1;
    }
    int64_t shape[STRATA_MAX_RANK], strides[STRATA_MAX_RANK];
    int rank = nd ? nd : 1;
    int64_t next = 1; /* the contiguous stride of the dimension being filled */
    if (nd == 0) {
        shape[0] = 1;
        strides[0] = 1;
    }
    for (int i = nd - 1; i >= 0; i--) {
        npy_intp s = PyArray_STRIDE(a, i);
        shape[i] = PyArray_DIM(a, i);
        if (shape[i] == 1) { /* numpy leaves any stride on a dimension of one */
            strides[i] = next;
        } else if (s <= 0 || s % item != 0) {
            PyErr_Format(PyExc_ValueError,
                         "strata: dimension %d of the view has stride %zd bytes: strides must "
                         "be positive multiples of the element size (%zd)",
                         i, (Py_ssize_t)s, (Py_ssize_t)item);
            return -1;
        } else {
            strides[i] = s / item;
        }
        next = strides[i] * shape[i];
    }
    if (under) {
        if (task_view_tensor(a, under, dt, rank, shape, strides, out) < 0)
            return -1;
        *keep = (PyObject *)under;
        return 0;
    }
    int rc = strata_tensor_view(b->buf, (uint64_t)off, (strata_dtype)dt, rank, shape, strides, out);
    if (rc != STRATA_OK) {
        spy_raise(rc, NULL);
        return -1;
    }
    *keep = (PyObject *)b;
    return 0;
}

int spy_is_array(PyObject *obj) {
    return PyArray_Check(obj);
}

int spy_tensor_of(PyObject *obj, strata_tensor *out, PyObject **keep) {
    if (PyArray_Check(obj))
        return array_tensor((PyArrayObject *)obj, out, keep);
    if (Py_IS_TYPE(obj, &SpyTensor_Type)) {
        *out = ((SpyTensor *)obj)->t;
        *keep = obj;
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "strata: a tensor must be a numpy array from Worker.array or a strata.Tensor, "
                 "not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/* ---- tensors into arrays (in a task) ------------------------------------- */

PyObject *spy_task_array(const strata_tensor *t, int writable) {
    npy_intp dims[STRATA_MAX_RANK], strides[STRATA_MAX_RANK];
    size_t item = strata_dtype_size((strata_dtype)t->dtype);
    if (t->dtype >= STRATA_DTYPE_COUNT || t->rank < 1 || t->rank > STRATA_MAX_RANK) {
        PyErr_SetString(PyExc_ValueError, "strata: a task tensor with a bad dtype or rank");
        return NULL;
    }
    for (int i = 0; i < t->rank; i++) {
        dims[i] = (npy_intp)t->shape[i];
        strides[i] = (npy_intp)(t->strides[i] * (int64_t)item);
    }
    PyArray_Descr *d = PyArray_DescrFromType(npy_of[t->dtype]);
    int flags = NPY_ARRAY_ALIGNED | (writable ? NPY_ARRAY_WRITEABLE : 0);
    return PyArray_NewFromDescr(&PyArray_Type, d, t->rank, dims, strides, strata_tensor_data(t),
                                flags, NULL);
}

int spy_tensors_init(PyObject *module) {
    import_array1(-1);
    if (PyType_Ready(&SpyBuffer_Type) < 0 || PyType_Ready(&SpyTensor_Type) < 0)
        return -1;
    Py_INCREF(&SpyTensor_Type);
    if (PyModule_AddObject(module, "Tensor", (PyObject *)&SpyTensor_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, tensor_functions);
}
