/* tests/unit/test_wire_args.c - a task's arguments as frame bytes
 * (ipc/wire_args.h).
 *
 * Owns: the round trip of 0..64 tensors with 0..16 typed scalars and 0, 1
 * or 256 payload bytes, the exact-fit rule at a buffer's capacity, and every
 * rejection of the decoder (truncated, oversized, counts past the limits,
 * tag, scalar type, dtype, rank, shape, stride, mem kind) and of the encoder
 * (invalid args, too small a buffer).
 * Must never: hand the decoder bytes outside the buffer it names (each case
 * decodes a copy of exactly `len` bytes, so ASan sees any over-read).
 */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "ipc/mailbox.h"
#include "ipc/wire_args.h"

static strata_tensor tensor_n(uint32_t i) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.base = (void *)(uintptr_t)(0x10000u + 0x1000u * i);
    t.buffer_bytes = 4096;
    t.offset = 8u * i;
    t.ident = (strata_buffer_id){.id = 100u + i, .generation = i, .owner = -1};
    t.dtype = (uint8_t)(i % STRATA_DTYPE_COUNT);
    t.rank = (uint8_t)(1 + i % STRATA_MAX_RANK);
    t.mem = (uint8_t)(i % 2);
    for (uint32_t d = 0; d < t.rank; d++) {
        t.shape[d] = 1 + (int64_t)(i + d);
        t.strides[d] = 1 + (int64_t)d;
    }
    return t;
}

static strata_task_args make_args_p(uint32_t nt, uint32_t ns, uint32_t np) {
    strata_task_args a;
    memset(&a, 0, sizeof a);
    a.ntensors = nt;
    a.nscalars = ns;
    a.payload_bytes = np;
    for (uint32_t i = 0; i < np; i++)
        a.payload[i] = (uint8_t)(i * 7 + 1);
    for (uint32_t i = 0; i < nt; i++) {
        a.tags[i] = (uint8_t)(i % (STRATA_NO_DEP + 1));
        a.tensors[i] = tensor_n(i);
    }
    for (uint32_t i = 0; i < ns; i++)
        a.scalars[i] = 0x0123456789abcdefull ^ (i * 0x1111ull);
    for (uint32_t i = 0; i < ns; i++)
        a.scalar_types[i] = (uint8_t)(i % STRATA_SCALAR_TYPE_COUNT);
    return a;
}

static strata_task_args make_args(uint32_t nt, uint32_t ns) {
    return make_args_p(nt, ns, 0);
}

/* Decode exactly bytes[0, len) from a heap copy of that size. */
static int decode_copy(const uint8_t *bytes, size_t len, strata_task_args *out) {
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, bytes, len);
    st_clear_error();
    int rc = st_wire_args_decode(copy, len, out, "sub 1");
    free(copy);
    return rc;
}

static void arguments_round_trip_for_every_count(void **state) {
    (void)state;
    uint8_t buf[ST_MBOX_ARGS_CAP];
    static const uint32_t payloads[] = {0, 1, STRATA_MAX_PAYLOAD};
    for (uint32_t nt = 0; nt <= STRATA_MAX_TENSORS; nt++)
        for (uint32_t ns = 0; ns <= STRATA_MAX_SCALARS; ns++)
            for (unsigned p = 0; p < 3; p++) {
                uint32_t np = payloads[p];
                strata_task_args a = make_args_p(nt, ns, np);
                size_t used = 0;
                assert_ok(st_wire_args_encode(&a, buf, sizeof buf, &used));
                assert_int_equal(used, st_wire_args_size(&a));
                strata_task_args b;
                memset(&b, 0xa5, sizeof b);
                assert_ok(decode_copy(buf, used, &b));
                assert_int_equal(b.ntensors, nt);
                assert_int_equal(b.nscalars, ns);
                assert_int_equal(b.invalid, 0);
                if (nt) {
                    assert_memory_equal(b.tags, a.tags, nt);
                    assert_memory_equal(b.tensors, a.tensors, nt * sizeof(strata_tensor));
                }
                if (ns) {
                    assert_memory_equal(b.scalars, a.scalars, ns * sizeof(uint64_t));
                    assert_memory_equal(b.scalar_types, a.scalar_types, ns);
                }
                assert_int_equal(b.payload_bytes, np);
                if (np)
                    assert_memory_equal(b.payload, a.payload, np);
            }
}

static void the_largest_arguments_fit_a_frame_exactly_at_their_size(void **state) {
    (void)state;
    strata_task_args a = make_args_p(STRATA_MAX_TENSORS, STRATA_MAX_SCALARS, STRATA_MAX_PAYLOAD);
    size_t need = st_wire_args_size(&a);
    assert_true(need > 0 && need <= ST_MBOX_ARGS_CAP);
    uint8_t *buf = malloc(need); /* exactly need bytes: ASan catches a write past them */
    assert_non_null(buf);
    size_t used = 0;
    assert_ok(st_wire_args_encode(&a, buf, need, &used));
    assert_int_equal(used, need);
    strata_task_args b;
    assert_ok(decode_copy(buf, need, &b));
    assert_memory_equal(b.tensors, a.tensors, sizeof a.tensors);
    assert_memory_equal(b.payload, a.payload, sizeof a.payload);
    assert_fails(STRATA_ECAPACITY, "do not fit", st_wire_args_encode(&a, buf, need - 1, &used));
    free(buf);
}

static void the_encoder_refuses_invalid_arguments(void **state) {
    (void)state;
    uint8_t buf[4096];
    size_t used;
    strata_task_args a = make_args(1, 1);
    a.invalid = 1;
    assert_int_equal(st_wire_args_size(&a), 0);
    assert_fails(STRATA_EINVAL, "invalid", st_wire_args_encode(&a, buf, sizeof buf, &used));
    a = make_args(1, 1);
    a.ntensors = STRATA_MAX_TENSORS + 1;
    assert_int_equal(st_wire_args_size(&a), 0);
    assert_fails(STRATA_EINVAL, "limits", st_wire_args_encode(&a, buf, sizeof buf, &used));
    a = make_args(1, 1);
    a.nscalars = STRATA_MAX_SCALARS + 1;
    assert_fails(STRATA_EINVAL, "limits", st_wire_args_encode(&a, buf, sizeof buf, &used));
    a = make_args(1, 1);
    a.payload_bytes = STRATA_MAX_PAYLOAD + 1;
    assert_int_equal(st_wire_args_size(&a), 0);
    assert_fails(STRATA_EINVAL, "limits", st_wire_args_encode(&a, buf, sizeof buf, &used));
}

/* An encoding of 3 tensors and 2 scalars to corrupt. */
static size_t good_bytes(uint8_t *buf, size_t cap) {
    strata_task_args a = make_args(3, 2);
    size_t used = 0;
    assert_ok(st_wire_args_encode(&a, buf, cap, &used));
    return used;
}

/* Header 16 bytes, then 3 tags and 2 scalar types padded to 8. */
#define TENSOR_AT(i) (16u + 8u + (size_t)(i) * sizeof(strata_tensor))

static void patch_u8(uint8_t *buf, size_t off, uint8_t v) {
    buf[off] = v;
}
static void patch_i64(uint8_t *buf, size_t off, int64_t v) {
    memcpy(buf + off, &v, sizeof v);
}
static void patch_u32(uint8_t *buf, size_t off, uint32_t v) {
    memcpy(buf + off, &v, sizeof v);
}

static void the_decoder_refuses_truncated_and_oversized_bytes(void **state) {
    (void)state;
    uint8_t buf[4096], out_of_order[4096];
    size_t len = good_bytes(buf, sizeof buf);
    strata_task_args b;
    assert_ok(decode_copy(buf, len, &b));
    assert_status(STRATA_EINVAL, decode_copy(buf, 0, &b));
    assert_message_mentions("truncated arguments");
    assert_message_mentions("sub 1");
    assert_status(STRATA_EINVAL, decode_copy(buf, 7, &b));
    assert_message_mentions("truncated arguments");
    for (size_t cut = 8; cut < len; cut += 37) {
        assert_status(STRATA_EINVAL, decode_copy(buf, cut, &b));
        assert_message_mentions("truncated arguments");
    }
    assert_status(STRATA_EINVAL, decode_copy(buf, len - 1, &b));
    assert_message_mentions("truncated arguments");
    memcpy(out_of_order, buf, len);
    out_of_order[len] = 0;
    assert_status(STRATA_EINVAL, decode_copy(out_of_order, len + 1, &b));
    assert_message_mentions("oversized arguments");
    assert_status(STRATA_EINVAL, decode_copy(out_of_order, len + 8, &b));
    assert_message_mentions("oversized arguments");
}

static void the_decoder_refuses_counts_past_the_limits(void **state) {
    (void)state;
    uint8_t buf[ST_MBOX_ARGS_CAP];
    memset(buf, 0, sizeof buf);
    strata_task_args b;
    patch_u32(buf, 0, STRATA_MAX_TENSORS + 1);
    assert_status(STRATA_EINVAL, decode_copy(buf, sizeof buf, &b));
    assert_message_mentions("65 tensors");
    patch_u32(buf, 0, 0);
    patch_u32(buf, 4, STRATA_MAX_SCALARS + 1);
    assert_status(STRATA_EINVAL, decode_copy(buf, sizeof buf, &b));
    assert_message_mentions("17 scalars");
    patch_u32(buf, 4, 0);
    patch_u32(buf, 8, STRATA_MAX_PAYLOAD + 1);
    assert_status(STRATA_EINVAL, decode_copy(buf, sizeof buf, &b));
    assert_message_mentions("257 payload bytes");
    patch_u32(buf, 8, 0);
    patch_u32(buf, 12, 1); /* the zero word */
    assert_status(STRATA_EINVAL, decode_copy(buf, sizeof buf, &b));
    assert_message_mentions("word 1");
    patch_u32(buf, 12, 0);
    patch_u32(buf, 0, UINT32_MAX); /* would wrap a careless size computation */
    patch_u32(buf, 4, UINT32_MAX);
    assert_status(STRATA_EINVAL, decode_copy(buf, sizeof buf, &b));
    assert_message_mentions("limits");
}

typedef struct corruption {
    size_t off;
    int kind; /* 8: u8, 64: i64 */
    int64_t value;
    const char *needle;
} corruption;

static void the_decoder_refuses_each_bad_field(void **state) {
    (void)state;
    const size_t t1 = TENSOR_AT(1);
    const size_t dtype = offsetof(strata_tensor, dtype), rank = offsetof(strata_tensor, rank),
                 mem = offsetof(strata_tensor, mem), shape = offsetof(strata_tensor, shape),
                 strides = offsetof(strata_tensor, strides);
    /* tensor 1 of make_args has rank 2 */
    const corruption cases[] = {
        {16 + 2, 8, STRATA_NO_DEP + 1, "tensor 2 has tag 5"},
        {16 + 0, 8, 255, "tensor 0 has tag 255"},
        {16 + 3 + 1, 8, STRATA_SCALAR_TYPE_COUNT, "scalar 1 has type 4"},
        {t1 + dtype, 8, STRATA_DTYPE_COUNT, "tensor 1 has dtype"},
        {t1 + rank, 8, 0, "tensor 1 has rank 0"},
        {t1 + rank, 8, STRATA_MAX_RANK + 1, "tensor 1 has rank 6"},
        {t1 + mem, 8, 2, "tensor 1 has mem kind 2"},
        {t1 + shape + 8, 64, 0, "shape[1] = 0"},
        {t1 + shape, 64, -3, "shape[0] = -3"},
        {t1 + strides + 8, 64, 0, "strides[1] = 0"},
        {t1 + strides, 64, -1, "strides[0] = -1"},
    };
    uint8_t good[4096], buf[4096];
    size_t len = good_bytes(good, sizeof good);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(buf, good, len);
        if (cases[i].kind == 8)
            patch_u8(buf, cases[i].off, (uint8_t)cases[i].value);
        else
            patch_i64(buf, cases[i].off, cases[i].value);
        strata_task_args b;
        st_clear_error();
        int rc = decode_copy(buf, len, &b);
        if (rc != STRATA_EINVAL)
            fail_msg("case %zu (%s) decoded with %d", i, cases[i].needle, rc);
        assert_message_mentions(cases[i].needle);
        assert_message_mentions("sub 1");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(arguments_round_trip_for_every_count),
        cmocka_unit_test(the_largest_arguments_fit_a_frame_exactly_at_their_size),
        cmocka_unit_test(the_encoder_refuses_invalid_arguments),
        cmocka_unit_test(the_decoder_refuses_truncated_and_oversized_bytes),
        cmocka_unit_test(the_decoder_refuses_counts_past_the_limits),
        cmocka_unit_test(the_decoder_refuses_each_bad_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
