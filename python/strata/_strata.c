/* python/strata/_strata.c - the extension module strata._strata.
 *
 * Owns: the module's init: the version check against the C library it is
 * linked with (a mismatch refuses to import), numpy, the fork handlers,
 * and each file's types and functions.
 * Must never: hold state of its own beyond what the files it assembles own.
 */
#include "_strata.h"

#define SPY_VERSION_NUMBER                                                                         \
    ((STRATA_VERSION_MAJOR << 16) | (STRATA_VERSION_MINOR << 8) | STRATA_VERSION_PATCH)

static int check_version(PyObject *module) {
    unsigned lib = strata_version();
    if (lib != (unsigned)SPY_VERSION_NUMBER) {
        PyErr_Format(PyExc_ImportError,
                     "strata: this module was built against libstrata %d.%d.%d but the library "
                     "it loaded is %u.%u.%u: rebuild the module with the library",
                     STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR, STRATA_VERSION_PATCH, lib >> 16,
                     (lib >> 8) & 0xffu, lib & 0xffu);
        return -1;
    }
    PyObject *v = PyUnicode_FromFormat("%u.%u.%u", lib >> 16, (lib >> 8) & 0xffu, lib & 0xffu);
    return v ? PyModule_AddObject(module, "__version__", v) : -1;
}

static PyObject *status_name(PyObject *m, PyObject *arg) {
    long s = PyLong_AsLong(arg);
    if (s == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(strata_status_name((int)s));
}

static PyMethodDef module_methods[] = {
    {"status_name", status_name, METH_O, "status_name(status): \"STRATA_EINVAL\", ..."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "strata._strata",
    .m_doc = "The C side of strata: Worker, Orch, Run, Tensor, Arg, Callable and the errors.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__strata(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (check_version(m) < 0 || spy_errors_init(m) < 0 || spy_tensors_init(m) < 0 ||
        spy_args_init(m) < 0 || spy_callables_init(m) < 0 || spy_worker_init_types(m) < 0 ||
        spy_orch_init_types(m) < 0 || spy_chips_init(m) < 0 || spy_children_init(m) < 0 ||
        spy_fork_init() < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAX_TENSORS", STRATA_MAX_TENSORS);
    PyModule_AddIntConstant(m, "MAX_SCALARS", STRATA_MAX_SCALARS);
    PyModule_AddIntConstant(m, "MAX_PAYLOAD", STRATA_MAX_PAYLOAD);
    PyModule_AddIntConstant(m, "MAX_GROUP", STRATA_MAX_GROUP);
    return m;
}
