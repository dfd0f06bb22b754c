/* strata/types.h - the plain data that both the public API and the device
 * backend ABI are made of: tensor views and their buffer identity, task
 * arguments, the per-call config, and the shape of a chip program.
 *
 * Owns: strata_dtype, strata_tag, strata_mem_kind, strata_buffer_id,
 * strata_tensor (and the inline strata_tensor_data), strata_task_args (the
 * builder), strata_task_view (what task bodies and chip programs read, and
 * the inline strata_args_view that makes one), strata_call_config, the
 * program signature (strata_program_fn; its context is laid out in
 * backend.h) and the limits these layouts are sized by.
 * Must never: declare a libstrata function or include another strata header.
 * A backend sees these layouts without linking libstrata, so they are part
 * of the versioned backend ABI: changing any of them bumps
 * STRATA_BACKEND_ABI_VERSION (backend.h), and tests/abi/test_abi_layout.c
 * pins them for the current version.
 */
#ifndef STRATA_TYPES_H
#define STRATA_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_MAX_RANK 5          /* dimensions of one tensor view */
#define STRATA_MAX_TENSORS 64      /* tensor arguments of one task (or group member) */
#define STRATA_MAX_SCALARS 16      /* scalar arguments of one task (or group member) */
#define STRATA_MAX_PAYLOAD 256     /* bytes of the opaque payload of one task (or group member) */
#define STRATA_PROGRAM_NAME_MAX 64 /* bytes of a program or kernel name, NUL included */
#define STRATA_KERNEL_MAX_ARGS 32  /* u64 words one kernel launch receives */

typedef enum strata_dtype {
    STRATA_U8 = 0,
    STRATA_I8,
    STRATA_I16,
    STRATA_I32,
    STRATA_I64,
    STRATA_F16,
    STRATA_BF16,
    STRATA_F32,
    STRATA_F64,
    STRATA_DTYPE_COUNT
} strata_dtype;

/* How a task uses a tensor; dependencies are inferred from it (see docs/guide.md):
 *   IN            waits for the last writer of overlapping bytes
 *   OUT           waits for the last writer and every reader since; becomes the writer.
 *                 An OUT tensor without memory (data == NULL) gets runtime memory.
 *   INOUT         like OUT, and reads the previous contents
 *   OUT_EXISTING  like OUT on memory the caller already owns (never allocated)
 *   NO_DEP        no dependency tracking at all */
typedef enum strata_tag {
    STRATA_IN = 0,
    STRATA_OUT,
    STRATA_INOUT,
    STRATA_OUT_EXISTING,
    STRATA_NO_DEP
} strata_tag;

/* Where a buffer's memory lives. Host memory is visible to every child of the
 * worker; device memory belongs to one chip (owner_worker). */
typedef enum strata_mem_kind { STRATA_MEM_HOST = 0, STRATA_MEM_DEVICE = 1 } strata_mem_kind;

/* The stable identity dependencies are keyed on. Two tensors alias only if
 * their identities are equal; raw addresses are never compared. */
typedef struct strata_buffer_id {
    uint64_t id;         /* unique within one worker, never reused (0 = none) */
    uint32_t generation; /* bumped when the same id is re-bound */
    int32_t owner;       /* -1 for host memory, else the owning next-level worker id */
} strata_buffer_id;

/* A view of a buffer. Filled by strata_tensor_view()/strata_tensor_contiguous()
 * or by strata_orch_alloc(); treat the fields as read-only. It is all there is
 * to a tensor: the runtime keeps what it knows about runtime memory (which task
 * owns it) itself, found by the identity. */
typedef struct strata_tensor {
    void *base;             /* start of the buffer (the view starts at base + offset) */
    uint64_t buffer_bytes;  /* size of the whole buffer */
    uint64_t offset;        /* byte offset of element [0,...,0] */
    strata_buffer_id ident; /* identity of the buffer */
    uint8_t dtype;          /* strata_dtype */
    uint8_t rank;           /* 1..STRATA_MAX_RANK (0 only for an unset tensor) */
    uint8_t mem;            /* strata_mem_kind */
    uint8_t pad_[5];        /* padding, zero: named so a tensor has no uninitialised bytes */
    int64_t shape[STRATA_MAX_RANK];
    int64_t strides[STRATA_MAX_RANK]; /* in elements, each > 0 */
} strata_tensor;

/* Address of element [0,...,0]. */
static inline void *strata_tensor_data(const strata_tensor *t) {
    return t->base ? (void *)((char *)t->base + t->offset) : (void *)0;
}

/* What a scalar argument was passed as. Every scalar is stored as a u64 bit
 * pattern (an i64 as two's complement, an f64 as its IEEE bits, an f32 as its
 * IEEE bits in the low 32); the type lets a body's typed read
 * (strata_args_i64, ..., tensor.h) refuse a mismatch. */
typedef enum strata_scalar_type {
    STRATA_SCALAR_U64 = 0, /* strata_args_add_scalar / _add_u64 / STRATA_U64 */
    STRATA_SCALAR_I64,
    STRATA_SCALAR_F64,
    STRATA_SCALAR_F32,
    STRATA_SCALAR_TYPE_COUNT
} strata_scalar_type;

/* The builder of one task's arguments: up to STRATA_MAX_TENSORS tagged
 * tensors, STRATA_MAX_SCALARS typed scalars and one opaque payload of up to
 * STRATA_MAX_PAYLOAD bytes. A value type (about 8.5 KiB, see
 * docs/architecture.md "Task arguments"): init on the stack (which writes
 * only the 16-byte header), fill, pass to a submit call (which copies the
 * used part). Adding past a limit fails and marks the args invalid, so the
 * later submit fails too instead of dropping arguments. The calls that build
 * them are in tensor.h; the one-call submit form (args.h) needs no builder.
 * Task bodies and chip programs never see one: they get a strata_task_view.
 * The payload sits last, so a task without one is a prefix of the struct. */
typedef struct strata_task_args {
    uint32_t ntensors;
    uint32_t nscalars;
    int32_t invalid;                          /* nonzero once an add failed */
    uint32_t payload_bytes;                   /* used bytes of payload[] */
    uint8_t tags[STRATA_MAX_TENSORS];         /* strata_tag */
    uint8_t scalar_types[STRATA_MAX_SCALARS]; /* strata_scalar_type */
    uint64_t scalars[STRATA_MAX_SCALARS];
    strata_tensor tensors[STRATA_MAX_TENSORS];
    uint8_t payload[STRATA_MAX_PAYLOAD];
} strata_task_args;

/* A task's arguments as its body (or chip program) reads them: the counts and
 * pointers to the arguments strata stored, which hold exactly ntensors tags
 * and tensors, nscalars scalars and their types, and payload_bytes bytes of
 * payload (only the used part is stored; payload is NULL when there is none).
 * A small
 * value type: a body may copy it by assignment and keep the copy while it
 * runs; what it points at is valid until the body (or program) returns, and
 * the tensors' memory is the task's to read and write. Read it through the
 * fields or the strata_args_data / _tensor / _scalar calls and the typed
 * scalar and payload reads (strata_args_i64, ..., _payload; tensor.h). */
typedef struct strata_task_view {
    uint32_t ntensors;
    uint32_t nscalars;
    const uint8_t *tags;          /* ntensors entries, strata_tag */
    const uint64_t *scalars;      /* nscalars entries */
    const strata_tensor *tensors; /* ntensors entries */
    const uint8_t *scalar_types;  /* nscalars entries, strata_scalar_type */
    const void *payload;          /* payload_bytes bytes, or NULL */
    uint32_t payload_bytes;
    /* The index of the worker running this body, for per-worker scratch: a
     * sub worker's index (0 .. sub_workers - 1, in a process child too), or
     * sub_workers for a thread that runs a task while it waits for its run
     * (help_while_waiting; one such thread at a time). Never shared by two
     * bodies running at once; strata_worker_sub_slots() is the count. A chip
     * program, and an orchestration function's strata_orch_task_args, get 0. */
    uint32_t worker;
} strata_task_view;

/* The view of the arguments in *a (no copy: valid while *a is). This is how
 * strata builds the view a body receives, a few stores per task. */
static inline strata_task_view strata_args_view(const strata_task_args *a) {
    strata_task_view v;
    v.ntensors = a->ntensors;
    v.nscalars = a->nscalars;
    v.tags = a->tags;
    v.scalars = a->scalars;
    v.tensors = a->tensors;
    v.scalar_types = a->scalar_types;
    v.payload = a->payload_bytes ? (const void *)a->payload : (const void *)0;
    v.payload_bytes = a->payload_bytes;
    v.worker = 0;
    return v;
}

/* Optional per-call settings for next-level tasks and chip runs (NULL = defaults). */
typedef struct strata_call_config {
    uint32_t block_dim; /* blocks a chip program's kernels run over (0 = program default) */
    uint32_t flags;     /* STRATA_CALL_* bits; others must be 0 */
} strata_call_config;

/* strata_call_config.flags bit: the run collects device-wide diagnostics. Such a
 * run never overlaps another run's preparation on a chip (depth one around it). */
#define STRATA_CALL_DIAGNOSTICS 0x1u

/* What a chip program gets from the backend that prepares its run; laid out
 * in backend.h, used through strata_program_launch / strata_program_fail
 * (chip.h) by programs. */
typedef struct strata_program_ctx strata_program_ctx;

/* A chip program: enqueues the kernel launches of one run while the backend
 * prepares it. Returns 0, or non-zero to fail the prepare. args is valid
 * until it returns. */
typedef int (*strata_program_fn)(strata_program_ctx *ctx, const strata_task_view *args, void *user);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_TYPES_H */
