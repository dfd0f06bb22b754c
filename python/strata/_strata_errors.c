/* python/strata/_strata_errors.c - strata statuses as Python exceptions.
 *
 * Owns: strata.Error and its one subclass per strata_status (with the
 * builtin each one also is: ValueError, TimeoutError, MemoryError), and the
 * raise of a failed strata call with the library's message.
 * Must never: invent a message where the library gave one, or map two
 * statuses to one class.
 */
#include "_strata.h"

#define NSTATUS 14 /* STRATA_OK .. STRATA_ECANCELED, by -status */

static PyObject *classes[NSTATUS];
static PyObject *error_base;

static const struct {
    int status;
    const char *name;
    PyObject **also; /* a builtin it also is, or NULL */
} table[] = {
    {STRATA_EINVAL, "InvalidArgument", &PyExc_ValueError},
    {STRATA_ESTATE, "StateError", NULL},
    {STRATA_ETIMEDOUT, "Timeout", &PyExc_TimeoutError},
    {STRATA_ETASK, "TaskFailed", NULL},
    {STRATA_EENDPOINT, "EndpointError", NULL},
    {STRATA_ECLOSED, "Closed", NULL},
    {STRATA_ESTALE, "Stale", NULL},
    {STRATA_EPOISONED, "Poisoned", NULL},
    {STRATA_ECAPACITY, "CapacityError", NULL},
    {STRATA_EABI, "ABIError", NULL},
    {STRATA_EDEVICE, "DeviceError", NULL},
    {STRATA_ENOMEM, "NoMemory", &PyExc_MemoryError},
    {STRATA_ECANCELED, "Cancelled", NULL},
};

static int add_class(PyObject *module, const char *name, PyObject *bases, int status,
                     PyObject **out) {
    char qual[64];
    snprintf(qual, sizeof qual, "strata.%s", name);
    PyObject *dict = Py_BuildValue("{s:i}", "status", status);
    if (!dict)
        return -1;
    *out = PyErr_NewException(qual, bases, dict);
    Py_DECREF(dict);
    if (!*out)
        return -1;
    Py_INCREF(*out);
    return PyModule_AddObject(module, name, *out) < 0 ? -1 : 0;
}

int spy_errors_init(PyObject *module) {
    if (add_class(module, "Error", PyExc_Exception, 0, &error_base) < 0)
        return -1;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        PyObject *bases = table[i].also ? PyTuple_Pack(2, error_base, *table[i].also)
                                        : PyTuple_Pack(1, error_base);
        if (!bases)
            return -1;
        int rc =
            add_class(module, table[i].name, bases, table[i].status, &classes[-table[i].status]);
        Py_DECREF(bases);
        if (rc < 0)
            return -1;
    }
    return 0;
}

PyObject *spy_error_class(int status) {
    if (status < 0 && -status < NSTATUS && classes[-status])
        return classes[-status];
    return error_base;
}

PyObject *spy_raise(int status, const char *msg) {
    const char *text = msg ? msg : strata_error_message();
    if (!text || !*text)
        text = strata_status_name(status);
    PyErr_SetString(spy_error_class(status), text);
    return NULL;
}
