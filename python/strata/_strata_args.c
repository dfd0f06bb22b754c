/* python/strata/_strata_args.c - a task's arguments from Python values.
 *
 * Owns: the Arg type behind strata.IN(t) ... strata.NO_DEP(t) and
 * strata.u64(x) ... strata.payload(b), and the translation of one call's
 * Python arguments into strata_arg items (bare int -> i64, float -> f64,
 * bytes -> payload), refusing bad ones with TypeError / ValueError before
 * anything is submitted.
 * Must never: submit, or let a tensor pass where a scalar goes (or the
 * other way round).
 */
#include "_strata.h"

#include <string.h>

static void arg_dealloc(SpyArg *self) {
    Py_XDECREF(self->value);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const char *kind_name(int kind, int tag) {
    static const char *tags[] = {"IN", "OUT", "INOUT", "OUT_EXISTING", "NO_DEP"};
    switch (kind) {
    case STRATA_ARG_TENSOR:
        return tag >= 0 && tag < 5 ? tags[tag] : "tensor";
    case STRATA_ARG_U64:
        return "u64";
    case STRATA_ARG_I64:
        return "i64";
    case STRATA_ARG_F64:
        return "f64";
    case STRATA_ARG_F32:
        return "f32";
    case STRATA_ARG_BYTES:
        return "payload";
    }
    return "arg";
}

static PyObject *arg_repr(SpyArg *self) {
    return PyUnicode_FromFormat("strata.%s(%R)", kind_name(self->kind, self->tag), self->value);
}

static PyObject *arg_get_value(SpyArg *self, void *unused) {
    Py_INCREF(self->value);
    return self->value;
}
static PyObject *arg_get_tag(SpyArg *self, void *unused) {
    if (self->kind != STRATA_ARG_TENSOR)
        Py_RETURN_NONE;
    return PyLong_FromLong(self->tag);
}

static PyGetSetDef arg_getset[] = {
    {"value", (getter)arg_get_value, NULL, "the tensor or the scalar", NULL},
    {"tag", (getter)arg_get_tag, NULL, "the strata_tag of a tensor (None for a scalar)", NULL},
    {NULL},
};

PyTypeObject SpyArg_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strata.Arg",
    .tp_basicsize = sizeof(SpyArg),
    .tp_dealloc = (destructor)arg_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = (reprfunc)arg_repr,
    .tp_getset = arg_getset,
    .tp_doc = "A tagged tensor (strata.IN(t), ...) or a typed scalar (strata.u64(x), ...).",
};

static PyObject *arg_new(int kind, int tag, PyObject *value) {
    SpyArg *a = PyObject_New(SpyArg, &SpyArg_Type);
    if (!a)
        return NULL;
    a->kind = kind;
    a->tag = tag;
    Py_INCREF(value);
    a->value = value;
    return (PyObject *)a;
}

/* A numpy array is told by its type first: asking it for
 * __array_interface__ builds that dict (a few µs per task argument). */
static int is_tensor(PyObject *o) {
    return Py_IS_TYPE(o, &SpyTensor_Type) || spy_is_array(o) ||
           PyObject_HasAttrString(o, "__array_interface__");
}

/* ---- the constructors --------------------------------------------------- */

#define TAG_FN(NAME, TAG)                                                                          \
    static PyObject *make_##NAME(PyObject *m, PyObject *t) {                                       \
        if (!is_tensor(t))                                                                         \
            return PyErr_Format(PyExc_TypeError,                                                   \
                                "strata." #NAME "(t): t must be a numpy array from Worker.array "  \
                                "or a strata.Tensor, not %.100s",                                  \
                                Py_TYPE(t)->tp_name);                                              \
        return arg_new(STRATA_ARG_TENSOR, TAG, t);                                                 \
    }
TAG_FN(IN, STRATA_IN)
TAG_FN(OUT, STRATA_OUT)
TAG_FN(INOUT, STRATA_INOUT)
TAG_FN(OUT_EXISTING, STRATA_OUT_EXISTING)
TAG_FN(NO_DEP, STRATA_NO_DEP)

static PyObject *make_int(PyObject *x, int kind, const char *name) {
    if (!PyIndex_Check(x))
        return PyErr_Format(PyExc_TypeError, "strata.%s(x): x must be an integer, not %.100s", name,
                            Py_TYPE(x)->tp_name);
    PyObject *v = PyNumber_Index(x);
    if (!v)
        return NULL;
    int overflow = 0;
    if (kind == STRATA_ARG_U64) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        overflow = u == (unsigned long long)-1 && PyErr_Occurred();
    } else {
        long long s = PyLong_AsLongLong(v);
        overflow = s == -1 && PyErr_Occurred();
    }
    if (overflow) {
        Py_DECREF(v);
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "strata.%s(%R): out of range", name, x);
    }
    PyObject *a = arg_new(kind, 0, v);
    Py_DECREF(v);
    return a;
}

static PyObject *make_real(PyObject *x, int kind, const char *name) {
    if (is_tensor(x) || !(PyFloat_Check(x) || PyLong_Check(x) || PyNumber_Check(x)))
        return PyErr_Format(PyExc_TypeError, "strata.%s(x): x must be a number, not %.100s", name,
                            Py_TYPE(x)->tp_name);
    double d = PyFloat_AsDouble(x);
    if (d == -1.0 && PyErr_Occurred())
        return NULL;
    PyObject *v = PyFloat_FromDouble(d);
    if (!v)
        return NULL;
    PyObject *a = arg_new(kind, 0, v);
    Py_DECREF(v);
    return a;
}

static PyObject *make_u64(PyObject *m, PyObject *x) {
    return make_int(x, STRATA_ARG_U64, "u64");
}
static PyObject *make_i64(PyObject *m, PyObject *x) {
    return make_int(x, STRATA_ARG_I64, "i64");
}
static PyObject *make_f64(PyObject *m, PyObject *x) {
    return make_real(x, STRATA_ARG_F64, "f64");
}
static PyObject *make_f32(PyObject *m, PyObject *x) {
    return make_real(x, STRATA_ARG_F32, "f32");
}

static PyObject *make_payload(PyObject *m, PyObject *b) {
    if (!PyBytes_Check(b))
        return PyErr_Format(PyExc_TypeError, "strata.payload(b): b must be bytes, not %.100s",
                            Py_TYPE(b)->tp_name);
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    if (n < 1 || n > STRATA_MAX_PAYLOAD)
        return PyErr_Format(PyExc_ValueError,
                            "strata.payload(b): %zd bytes (a payload is 1..%d bytes)", n,
                            STRATA_MAX_PAYLOAD);
    return arg_new(STRATA_ARG_BYTES, 0, b);
}

static PyMethodDef arg_methods[] = {
    {"IN", make_IN, METH_O, "IN(t): t is read by the task."},
    {"OUT", make_OUT, METH_O, "OUT(t): t is written by the task."},
    {"INOUT", make_INOUT, METH_O, "INOUT(t): t is read and written by the task."},
    {"OUT_EXISTING", make_OUT_EXISTING, METH_O,
     "OUT_EXISTING(t): written, memory the caller owns."},
    {"NO_DEP", make_NO_DEP, METH_O, "NO_DEP(t): no dependency tracking on t."},
    {"u64", make_u64, METH_O, "u64(x): an unsigned 64-bit scalar."},
    {"i64", make_i64, METH_O, "i64(x): a signed 64-bit scalar."},
    {"f64", make_f64, METH_O, "f64(x): a double scalar."},
    {"f32", make_f32, METH_O, "f32(x): a float scalar."},
    {"payload", make_payload, METH_O, "payload(b): the task's opaque bytes (1..256)."},
    {NULL},
};

int spy_args_init(PyObject *module) {
    if (PyType_Ready(&SpyArg_Type) < 0)
        return -1;
    Py_INCREF(&SpyArg_Type);
    if (PyModule_AddObject(module, "Arg", (PyObject *)&SpyArg_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, arg_methods);
}

/* ---- items -------------------------------------------------------------- */

static int room(spy_items *it, size_t items) {
    if (it->nitems + items > sizeof it->items / sizeof it->items[0]) {
        PyErr_SetString(PyExc_ValueError, "strata: too many arguments in one submit");
        return -1;
    }
    return 0;
}

static int add_tensor(spy_items *it, PyObject *obj, int tag, Py_ssize_t pos) {
    if (it->ntensors >= sizeof it->tensors / sizeof it->tensors[0]) {
        PyErr_Format(PyExc_ValueError, "strata: argument %zd: too many tensors in one submit", pos);
        return -1;
    }
    strata_tensor *t = &it->tensors[it->ntensors];
    PyObject *keep = NULL;
    if (spy_tensor_of(obj, t, &keep) < 0)
        return -1;
    if (spy_tensor_unallocated(obj)) {
        if (tag != STRATA_OUT) {
            PyErr_Format(PyExc_ValueError,
                         "strata: argument %zd: a tensor without memory (strata.unallocated) "
                         "is given memory by an OUT argument only",
                         pos);
            return -1;
        }
        it->back[it->nback] = obj;
        it->back_index[it->nback++] = it->ntensors;
    }
    /* Tasks of a run mostly reuse a few buffers: one list entry per run of
     * equal keepers is enough to keep each alive. */
    Py_ssize_t n = PyList_GET_SIZE(it->keep);
    if ((n == 0 || PyList_GET_ITEM(it->keep, n - 1) != keep) && PyList_Append(it->keep, keep) < 0)
        return -1;
    it->ntensors++;
    strata_arg *a = &it->items[it->nitems++];
    memset(a, 0, sizeof *a);
    a->kind = STRATA_ARG_TENSOR;
    a->tag = (uint8_t)tag;
    a->v.tensor = t;
    return 0;
}

static int add_scalar(spy_items *it, int kind, PyObject *v) {
    strata_arg *a = &it->items[it->nitems];
    memset(a, 0, sizeof *a);
    a->kind = (uint8_t)kind;
    switch (kind) {
    case STRATA_ARG_U64:
        a->v.u64 = PyLong_AsUnsignedLongLong(v);
        break;
    case STRATA_ARG_I64:
        a->v.i64 = PyLong_AsLongLong(v);
        break;
    case STRATA_ARG_F64:
        a->v.f64 = PyFloat_AsDouble(v);
        break;
    case STRATA_ARG_F32:
        a->v.f32 = (float)PyFloat_AsDouble(v);
        break;
    case STRATA_ARG_BYTES:
        a->v.bytes = PyBytes_AS_STRING(v);
        a->nbytes = (uint32_t)PyBytes_GET_SIZE(v);
        if (PyList_Append(it->keep, v) < 0)
            return -1;
        break;
    }
    if (PyErr_Occurred())
        return -1;
    it->nitems++;
    return 0;
}

static int add_one(spy_items *it, PyObject *o, Py_ssize_t pos) {
    if (Py_IS_TYPE(o, &SpyArg_Type)) {
        SpyArg *a = (SpyArg *)o;
        if (a->kind == STRATA_ARG_TENSOR)
            return add_tensor(it, a->value, a->tag, pos);
        return add_scalar(it, a->kind, a->value);
    }
    if (PyBool_Check(o) || PyLong_Check(o)) {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError,
                         "strata: argument %zd: %R does not fit an i64 (use strata.u64)", pos, o);
            return -1;
        }
        strata_arg *a = &it->items[it->nitems++];
        memset(a, 0, sizeof *a);
        a->kind = STRATA_ARG_I64;
        a->v.i64 = v;
        return 0;
    }
    if (PyFloat_Check(o)) {
        strata_arg *a = &it->items[it->nitems++];
        memset(a, 0, sizeof *a);
        a->kind = STRATA_ARG_F64;
        a->v.f64 = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (PyBytes_Check(o)) {
        Py_ssize_t n = PyBytes_GET_SIZE(o);
        if (n < 1 || n > STRATA_MAX_PAYLOAD) {
            PyErr_Format(PyExc_ValueError, "strata: argument %zd: a payload of %zd bytes (1..%d)",
                         pos, n, STRATA_MAX_PAYLOAD);
            return -1;
        }
        return add_scalar(it, STRATA_ARG_BYTES, o);
    }
    if (is_tensor(o)) {
        PyErr_Format(PyExc_TypeError,
                     "strata: argument %zd: a tensor needs a tag: strata.IN(t), strata.OUT(t), "
                     "strata.INOUT(t), strata.OUT_EXISTING(t) or strata.NO_DEP(t)",
                     pos);
        return -1;
    }
    PyErr_Format(PyExc_TypeError,
                 "strata: argument %zd: %.100s is not a task argument (a tagged tensor, an int, "
                 "a float, bytes, or strata.u64/i64/f64/f32/payload)",
                 pos, Py_TYPE(o)->tp_name);
    return -1;
}

int spy_items_add_array(spy_items *it, PyObject *const *args, Py_ssize_t n, int member) {
    int rc = room(it, (size_t)n + (member > 0));
    if (rc == 0 && member > 0) {
        memset(&it->items[it->nitems], 0, sizeof it->items[0]);
        it->items[it->nitems++].kind = STRATA_ARG_NEXT_MEMBER;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
        rc = add_one(it, args[i], i);
    return rc;
}

void spy_items_write_back(spy_items *it) {
    for (size_t i = 0; i < it->nback; i++)
        spy_tensor_set(it->back[i], &it->tensors[it->back_index[i]]);
    it->nback = 0;
}

int spy_items_add(spy_items *it, PyObject *args, int member) {
    PyObject *seq = PySequence_Fast(args, "strata: a group member's arguments must be a sequence");
    if (!seq)
        return -1;
    int rc =
        spy_items_add_array(it, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq), member);
    Py_DECREF(seq);
    return rc;
}
