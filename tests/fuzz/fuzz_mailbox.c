/* tests/fuzz/fuzz_mailbox.c - the mailbox's frame checks and the argument
 * decoder on arbitrary bytes.
 *
 * Owns: LLVMFuzzerTestOneInput for the ipc layer: the input becomes a task
 * frame (its first 128 bytes the head: state, status, identity, trailer,
 * lease, digest; the next 576 the tail: error text, control words, sticky
 * shutdown word; the rest the payload), which st_mbox_check_frame,
 * st_mbox_check_identity (against a fixed identity and against the frame's
 * own) and st_mbox_get_error read, and the whole input and the payload are
 * each handed to st_wire_args_decode.
 * What it checks besides the sanitizers: a check either passes or fails with
 * EENDPOINT / ESTALE and a message; an identity check passes only if the
 * frame check passes; the error text comes back NUL-terminated; decoded
 * arguments keep every limit (counts, tags, scalar types, payload size),
 * re-encode to the same length, and decode again to the same arguments.
 * Must never: keep state from one input to the next, or allocate beyond one
 * exact-size copy of the payload (so ASan sees an over-read).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/mailbox.h"
#include "ipc/wire_args.h"
#include "strata/status.h"
#include "util/error.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

static st_mbox_frame frame; /* 64 KiB: static, reset per input */

static void check_args(const strata_task_args *a) {
    CHECK(a->ntensors <= STRATA_MAX_TENSORS && a->nscalars <= STRATA_MAX_SCALARS);
    CHECK(a->payload_bytes <= STRATA_MAX_PAYLOAD);
    CHECK(a->invalid == 0);
    for (uint32_t i = 0; i < a->nscalars; i++)
        CHECK(a->scalar_types[i] < STRATA_SCALAR_TYPE_COUNT);
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *t = &a->tensors[i];
        CHECK(a->tags[i] <= STRATA_NO_DEP);
        CHECK(t->dtype < STRATA_DTYPE_COUNT && t->mem <= STRATA_MEM_DEVICE);
        CHECK(t->rank >= 1 && t->rank <= STRATA_MAX_RANK);
        for (uint32_t d = 0; d < t->rank; d++)
            CHECK(t->shape[d] > 0 && t->strides[d] > 0);
    }
}

static void decode(const uint8_t *bytes, size_t len) {
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return;
    memcpy(copy, bytes, len);
    static strata_task_args a, b;
    static uint8_t again[ST_MBOX_ARGS_CAP];
    int rc = st_wire_args_decode(copy, len, &a, "fuzz");
    if (rc == STRATA_OK) {
        check_args(&a);
        size_t used = 0;
        CHECK(st_wire_args_encode(&a, again, sizeof again, &used) == STRATA_OK);
        CHECK(used == len && used == st_wire_args_size(&a));
        CHECK(st_wire_args_decode(again, used, &b, "fuzz") == STRATA_OK);
        CHECK(b.ntensors == a.ntensors && b.nscalars == a.nscalars);
        CHECK(memcmp(b.tags, a.tags, a.ntensors) == 0);
        CHECK(memcmp(b.tensors, a.tensors, a.ntensors * sizeof(strata_tensor)) == 0);
        CHECK(memcmp(b.scalars, a.scalars, a.nscalars * sizeof(uint64_t)) == 0);
        CHECK(memcmp(b.scalar_types, a.scalar_types, a.nscalars) == 0);
        CHECK(b.payload_bytes == a.payload_bytes &&
              memcmp(b.payload, a.payload, a.payload_bytes) == 0);
    } else {
        CHECK(rc == STRATA_EINVAL && strata_error_message()[0] != '\0');
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    memset(&frame, 0, sizeof frame);
    size_t head = size < ST_MBOX_HEAD_BYTES ? size : ST_MBOX_HEAD_BYTES;
    memcpy(&frame, data, head);
    size_t tail = size - head < ST_MBOX_TAIL_BYTES ? size - head : ST_MBOX_TAIL_BYTES;
    memcpy(frame.error, data + head, tail);
    const uint8_t *payload = data + head + tail;
    size_t plen = size - head - tail;
    if (plen > ST_MBOX_ARGS_CAP)
        plen = ST_MBOX_ARGS_CAP;
    memcpy(frame.payload, payload, plen);

    st_clear_error();
    int rc = st_mbox_check_frame(&frame, "fuzz");
    CHECK(rc == STRATA_OK || (rc == STRATA_EENDPOINT && strata_error_message()[0] != '\0'));
    static const st_mbox_trailer fixed = {.protocol = ST_MBOX_PROTOCOL,
                                          .run_id = 1,
                                          .lease_slot = 0,
                                          .generation = 1,
                                          .dispatch_id = 1};
    st_mbox_trailer own = frame.trailer;
    int a = st_mbox_check_identity(&frame, &fixed, "fuzz");
    int b = st_mbox_check_identity(&frame, &own, "fuzz");
    CHECK(a == STRATA_OK || a == STRATA_EENDPOINT || a == STRATA_ESTALE);
    CHECK(b == (rc == STRATA_OK ? STRATA_OK : rc)); /* its own identity is never stale */
    CHECK(a == STRATA_OK ? rc == STRATA_OK : 1);

    char text[ST_MBOX_ERR_BYTES], small[7];
    st_mbox_get_error(&frame, text, sizeof text);
    CHECK(strlen(text) < sizeof text);
    st_mbox_get_error(&frame, small, sizeof small);
    CHECK(strlen(small) < sizeof small && strncmp(small, text, strlen(small)) == 0);

    decode(data, size);
    decode(payload, plen);
    return 0;
}
