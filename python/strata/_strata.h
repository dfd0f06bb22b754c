/* python/strata/_strata.h - what the files of the extension module share.
 *
 * Owns: the object layouts of the module's types (Worker, Buffer, Tensor,
 * Arg, Orch, Run, Callable) and the calls one file of the module makes into
 * another (errors, tensors, callables, the GIL around strata calls, child
 * Workers).
 * Must never: include a strata header other than the public ones
 * (include/strata/): the module is a client of the library.
 */
#ifndef STRATA_PY_MODULE_H
#define STRATA_PY_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <strata/strata.h>

/* ---- errors (_strata_errors.c) ------------------------------------------ */

/* Builds the exception classes into the module; 0 or -1 with an exception. */
int spy_errors_init(PyObject *module);
/* Raises the class of `status` with strata_error_message() (or msg when
 * given); returns NULL so callers may `return spy_raise(...)`. */
PyObject *spy_raise(int status, const char *msg);
/* The class of a status (borrowed). */
PyObject *spy_error_class(int status);

/* ---- tensors (_strata_tensors.c) ----------------------------------------- */

/* A strata_buffer_create buffer; the base object of every array over it. */
typedef struct {
    PyObject_HEAD strata_buffer *buf;
    PyObject *worker; /* the Worker it came from: kept alive while the buffer is */
} SpyBuffer;

/* A tensor that is not a numpy array: runtime memory (Orch.alloc) or a chip
 * buffer's view. */
typedef struct {
    PyObject_HEAD strata_tensor t;
    PyObject *owner; /* what keeps the memory alive (a chip buffer), or NULL */
} SpyTensor;

extern PyTypeObject SpyBuffer_Type;
extern PyTypeObject SpyTensor_Type;

int spy_tensors_init(PyObject *module); /* imports numpy */
/* A numpy array of nbytes of buffer memory, shape and dtype as given. */
PyObject *spy_buffer_array(PyObject *worker, strata_worker *w, PyObject *shape, PyObject *dtype);
/* The strata_tensor of a numpy array over buffer memory, or of a Tensor;
 * *keep is the object that keeps its memory alive (borrowed). 0 or -1 with
 * TypeError / ValueError set. */
int spy_tensor_of(PyObject *obj, strata_tensor *out, PyObject **keep);
/* PyArray_Check (numpy's C API is imported in _strata_tensors.c only). */
int spy_is_array(PyObject *obj);
/* A numpy array over a task's tensor (no copy); writable unless tag is IN. */
PyObject *spy_task_array(const strata_tensor *t, int writable);
/* A parent task's tensor as a child's orchestration function sees it: a
 * numpy array over host memory (its views are tensors of the same buffer),
 * or a Tensor for device memory. */
PyObject *spy_task_tensor_object(const strata_tensor *t, int writable);
/* A Tensor object for t. */
PyObject *spy_tensor_new(const strata_tensor *t, PyObject *owner);
/* 1 if obj is a Tensor without memory (strata.unallocated): OUT gives it
 * runtime memory at the submit. */
int spy_tensor_unallocated(PyObject *obj);
/* Sets a Tensor's view (the write-back of runtime memory). */
void spy_tensor_set(PyObject *obj, const strata_tensor *t);
/* numpy dtype -> strata dtype, -1 with TypeError set. */
int spy_dtype_of(PyObject *dtype);
PyObject *spy_numpy_dtype(int dtype); /* new reference */

/* ---- arguments (_strata_args.c) -------------------------------------------- */

/* strata.IN(t) ... and strata.u64(x) ...: a tagged tensor or a typed scalar. */
typedef struct {
    PyObject_HEAD int kind; /* strata_arg_kind */
    int tag;                /* strata_tag, for a tensor */
    PyObject *value;        /* the tensor object, or the scalar / bytes */
} SpyArg;
extern PyTypeObject SpyArg_Type;
int spy_args_init(PyObject *module);

/* One task's (or a group's) items as the submit calls read them. */
typedef struct {
    strata_arg items[STRATA_MAX_GROUP * 4];
    strata_tensor tensors[STRATA_MAX_GROUP * 4];
    size_t nitems;
    size_t ntensors;
    PyObject *keep; /* list: the objects whose memory the tasks use */
    /* Tensors without memory given as OUT: the submit writes their runtime
     * view into tensors[back_index[i]], spy_items_write_back into back[i]. */
    PyObject *back[STRATA_MAX_GROUP * 4]; /* borrowed SpyTensor */
    size_t back_index[STRATA_MAX_GROUP * 4];
    size_t nback;
} spy_items;

/* Appends the items of one member (a sequence of Python arguments) to *it;
 * a member break first when `member` > 0. 0 or -1 with an exception. */
int spy_items_add(spy_items *it, PyObject *args, int member);
/* The same from an array of n arguments. */
int spy_items_add_array(spy_items *it, PyObject *const *args, Py_ssize_t n, int member);
/* After a submit: the runtime views of OUT tensors given without memory
 * into their Tensor objects. */
void spy_items_write_back(spy_items *it);

/* ---- callables (_strata_callables.c) -------------------------------------------- */

typedef struct {
    PyObject_HEAD PyObject *fn;
    PyObject *name;
    PyObject *worker; /* weak in spirit: a borrowed identity check only */
    strata_callable id;
    int kind; /* 0 sub, 1 chip program, 2 orchestration (a child Worker runs it) */
} SpyCallable;
extern PyTypeObject SpyCallable_Type;

/* Registers fn in the module's table; *index names it in the trampoline's
 * user pointer. pickled: bytes to revive it in a child forked before it was
 * registered (NULL: none needed). 0 or -1 with an exception. */
int spy_callables_add(PyObject *fn, PyObject *pickled, uint32_t worker, uint32_t *index);
/* In a child Worker's process, before its setup registers anything: its
 * registrations go to a table of its own (mapped here, before its own
 * children are forked). 0 or -1 with an exception. */
int spy_callables_child_process(void);
/* A Worker's slot for its abort flag; 0 or -1 with an exception. */
int spy_worker_slot(uint32_t *slot);
/* Fails every task of the Worker in `slot` that starts from now on. */
void spy_worker_abort(uint32_t slot); /* async-signal-safe */
void spy_worker_abort_clear(uint32_t slot);
/* The function of index i in this process (borrowed), reviving one
 * registered after this process child was forked; NULL with an exception. */
PyObject *spy_callables_lookup(uint32_t i);
/* A task scalar as a Python int / float. */
PyObject *spy_scalar_object(uint8_t type, uint64_t bits);
/* The pending exception's text (its last line, then the traceback), cleared;
 * PyMem_RawFree it. NULL if it could not be formatted. */
char *spy_format_exception(void);
/* The sub function trampoline registered with strata_worker_register_sub. */
int spy_sub_trampoline(const strata_task_view *v, void *user);
int spy_callables_init(PyObject *module);
/* Takes the GIL on any thread (a strata thread keeps its thread state). */
PyGILState_STATE spy_gil_take(void);

/* ---- fork (_strata_fork.c) ------------------------------------------------ */

/* Calls f(w) with the fork handlers armed on this thread: a fork inside it
 * (a process child) runs PyOS_BeforeFork / _AfterFork_*. */
int spy_with_fork_hooks(int (*f)(strata_worker *), strata_worker *w);
int spy_fork_init(void);
/* The number of forks between the process that imported the module and
 * this one: an object made under another generation belongs to an
 * ancestor process and is never handed to the library here. */
extern unsigned spy_fork_generation;
/* After a fork the module did not arm (os.fork, multiprocessing): gives
 * this process private copies of the callables' shared tables, so nothing
 * it registers or aborts reaches the parent's process children. */
void spy_callables_after_foreign_fork(void);

/* ---- worker, orchestration, runs (_strata_worker.c, _strata_orch.c) ----- */

typedef struct {
    PyObject_HEAD strata_worker *w; /* NULL once destroyed (closed and no call in progress) */
    int mode;                       /* strata_host_mode of the sub workers */
    int initialized;                /* strata_worker_init done */
    int closed;                     /* close() was called: new calls raise Closed */
    int busy;            /* calls in progress that use w with the GIL released (under the GIL) */
    unsigned gen;        /* spy_fork_generation it was made in: another one disowns it */
    long owner_pid;      /* the process it was made in, for the message of a disowned one */
    uint32_t slot;       /* its abort flag (spy_worker_abort) */
    PyObject *callables; /* dict: function -> Callable */
    strata_worker_statistics *final_stats; /* taken at destroy, for stats() after close */
    uint32_t lanes_at_close[2];            /* sub_workers, next_level before the close */
    int trace_status;                      /* strata_worker_trace_status at destroy */
    char trace_error[256];                 /* its message */
    /* A child Worker's view (Worker.add_child's setup): w is the inner worker,
     * owned by the parent's C worker, never closed or destroyed from here. */
    int child;            /* 1 for a child's view */
    int setup_open;       /* its setup is running: the only time it may be changed */
    PyObject *child_keep; /* what the child's last run uses (replaced by the next run) */
} SpyWorker;
extern PyTypeObject SpyWorker_Type;
extern PyTypeObject SpyOrch_Type;
extern PyTypeObject SpyRun_Type;

int spy_worker_init_types(PyObject *module);
/* Before a call that uses self->w with the GIL released: 0 with the C
 * worker held until spy_worker_leave, or -1 with strata.Closed (closed) or
 * StateError (inherited through a fork) set. */
int spy_worker_enter(SpyWorker *self);
/* The same for a run's wait: holds the C worker while it exists, closed or
 * not (close waits for the run). 1 held, 0 destroyed (the run is done). */
int spy_worker_hold(SpyWorker *self);
/* Ends a call; the last one to leave a closed Worker destroys the C worker. */
void spy_worker_leave(SpyWorker *self);
/* 1 when the Worker was made by this process (not inherited by a fork). */
int spy_worker_owned(const SpyWorker *self);
int spy_orch_init_types(PyObject *module);
/* The worker configuration keywords of Worker(...) into *cfg (left as given
 * where absent); *path keeps the trace path's bytes alive (Py_XDECREF it
 * after the config is used). 0 or -1 with an exception. */
int spy_worker_config_parse(PyObject *args, PyObject *kw, const char *fname,
                            strata_worker_config *cfg, PyObject **path);
/* A run of orch(o) over an existing strata_orch: the Orch object given to a
 * Python orchestration function (worker: the Worker whose callables it
 * names). New reference; its o is cleared by spy_orch_detach. */
PyObject *spy_orch_attach(SpyWorker *worker, strata_orch *o, int hidden_scalar);
/* Ends the call: the Orch is invalid from here; returns its keep list (new
 * reference). */
PyObject *spy_orch_detach(PyObject *orch);

/* ---- child Workers (_strata_children.c) ----------------------------------- */

int spy_children_init(PyObject *module);
PyObject *spy_worker_add_child(SpyWorker *self, PyObject *args, PyObject *kw);
/* The orchestration trampoline registered with strata_worker_register_orch:
 * one run of a child Worker, built by a Python function. */
int spy_child_orch_trampoline(strata_orch *o, void *user);
/* Submit of an orchestration callable to next-level worker `worker_id` of
 * self: the hidden last scalar that names the child (-1 with ValueError when
 * worker_id is not a child Worker of self). */
int spy_child_tag(SpyWorker *self, int worker_id, uint64_t *tag);
/* 1 if a task view's last scalar is a child tag (the scalar is not the user's). */
int spy_child_tag_of(const strata_task_view *v, uint32_t *rec);
/* After the parent's strata_worker_init failed: its process children's setup
 * exception texts appended to msg (new reference, or NULL with an exception). */
PyObject *spy_children_init_error(SpyWorker *parent, const char *msg);
/* A run error of parent that says a child's orchestration function failed
 * "(no message)": the same with the Python exception's text there (new
 * reference), or NULL (no exception set) when it names none. */
PyObject *spy_children_run_error(SpyWorker *parent, const char *msg);
/* When the parent's C worker is destroyed: its children's views are closed. */
void spy_children_forget(SpyWorker *parent);
/* Starts the worker if it is not yet; 0 or -1 with an exception. */
int spy_worker_ensure_init(SpyWorker *self);
/* Worker.submit: the Run of orch(o). */
PyObject *spy_worker_submit(SpyWorker *self, PyObject *orch);
/* The callable id of fn for worker self (a Callable or a registered
 * function); -1 with TypeError / ValueError set. */
int spy_callable_id(SpyWorker *self, PyObject *fn, int kind, strata_callable *out);
/* The same, and the kind it has (kind 1 finds chip programs and
 * orchestration callables: both are next-level callables). */
int spy_callable_find(SpyWorker *self, PyObject *fn, int kind, strata_callable *out,
                      int *found_kind);

/* ---- chips (_strata_chips.c) --------------------------------------------- */

int spy_chips_init(PyObject *module);
int spy_program_trampoline(strata_program_ctx *ctx, const strata_task_view *v, void *user);
int spy_worker_register_program(SpyWorker *self, const char *name, uint32_t index,
                                strata_callable *id);
PyObject *spy_worker_add_chip(SpyWorker *self, PyObject *args, PyObject *kw);
PyObject *spy_worker_chip_malloc(SpyWorker *self, PyObject *args);
PyObject *spy_worker_chip_free(SpyWorker *self, PyObject *args);
PyObject *spy_worker_chip_tensor(SpyWorker *self, PyObject *args, PyObject *kw);
PyObject *spy_worker_chip_copy_to(SpyWorker *self, PyObject *args);
PyObject *spy_worker_chip_copy_from(SpyWorker *self, PyObject *args);

#endif /* STRATA_PY_MODULE_H */
