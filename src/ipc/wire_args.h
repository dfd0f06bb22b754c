/* ipc/wire_args.h - a task's arguments as bytes in a mailbox frame.
 *
 * Owns: the encoding of a strata_task_args into a frame's payload and its
 * bounds-checked decoding. Layout (little-endian host order; parent and
 * child are the same binary):
 *   u32 ntensors, u32 nscalars, u32 payload_bytes, u32 0,
 *   u8 tags[ntensors] and u8 scalar_types[nscalars] padded together to 8 bytes,
 *   strata_tensor tensors[ntensors], u64 scalars[nscalars], u8 payload[payload_bytes]
 * The largest valid arguments (STRATA_MAX_TENSORS, _SCALARS, _PAYLOAD) take
 * about 8.5 KiB and always fit ST_WIRE_ARGS_MAX, a frame's argument area.
 * Tensors carry their addresses as they are: host memory is shared at the
 * same address in every process of a worker (strata_buffer_create), device
 * memory is meaningful only in the chip's own process.
 * Must never: read or write outside [buf, buf + cap), trust a count, a tag,
 * a dtype, a rank or a shape it decodes, or allocate.
 */
#ifndef STRATA_IPC_WIRE_ARGS_H
#define STRATA_IPC_WIRE_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "strata/types.h"

/* Bytes a frame's argument area holds (ipc/mailbox.h checks ST_MBOX_ARGS_CAP
 * is at least this). */
#define ST_WIRE_ARGS_MAX 16384u

/* Bytes the encoding of a takes (0 if a is invalid: counts past the limits). */
size_t st_wire_args_size(const strata_task_args *a);

/* Encode a into buf (cap bytes). STRATA_OK and *used, or STRATA_ECAPACITY
 * if it does not fit / STRATA_EINVAL for invalid args (message set). */
int st_wire_args_encode(const strata_task_args *a, uint8_t *buf, size_t cap, size_t *used);

/* Decode `len` bytes into *out (every field checked: counts within the
 * limits, the exact length, tags, dtypes, ranks 1..STRATA_MAX_RANK, shapes
 * and strides > 0, mem kinds). STRATA_OK, or STRATA_EINVAL with a message
 * starting with `who` that says what was wrong ("truncated arguments: ...",
 * "oversized arguments: ..."). */
int st_wire_args_decode(const uint8_t *buf, size_t len, strata_task_args *out, const char *who);

#endif
