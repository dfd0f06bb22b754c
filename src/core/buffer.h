/* core/buffer.h - internal calls on strata_buffer.
 *
 * Owns: marking a buffer as device memory of one next-level worker.
 * Must never: be used on a buffer whose tensors were already handed out.
 */
#ifndef STRATA_CORE_BUFFER_H
#define STRATA_CORE_BUFFER_H

#include "strata/tensor.h"

/* From now on the buffer's views are device memory owned by next-level worker
 * `owner` (mem = STRATA_MEM_DEVICE, ident.owner = owner): the engine refuses
 * them on any other worker and on sub workers. */
void st_buffer_mark_device(strata_buffer *b, int owner);

/* Free a device buffer (its owner calls this; strata_buffer_destroy refuses
 * device buffers, which belong to their chip until strata_worker_chip_free). */
void st_buffer_destroy_device(strata_buffer *b);

#endif
