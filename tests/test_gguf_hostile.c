/* gguf/ against hostile input: every truncation of a real model, flipped
 * bytes, and hand-made files with each kind of bad field. Each must fail with
 * a message that names the problem, and never crash or read out of bounds
 * (buffers are exact-size heap copies, so AddressSanitizer sees any overrun). */
#include "test_util.h"

#include "core/log.h"
#include "gguf/gguf.h"

/* Calls every query on an opened reader, as a user of the file would. */
static void walk_reader(const struct gguf_reader *r) {
    volatile uint64_t sink = gguf_version(r) + gguf_alignment(r) + gguf_data_offset(r);
    char buf[128];
    for (int64_t i = 0; i < gguf_n_kv(r); i++) {
        const char *key = gguf_key(r, i);
        CHECK(gguf_find_key(r, key) == i);
        gguf_kv_to_str(r, i, buf, sizeof buf);
        enum gguf_type type = gguf_kv_type(r, i);
        union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
                uint64_t u64; int64_t i64; float f32; double f64; bool b; const char *s; } v;
        bool got[12] = {
            gguf_get_u8(r, key, &v.u8), gguf_get_i8(r, key, &v.i8), gguf_get_u16(r, key, &v.u16),
            gguf_get_i16(r, key, &v.i16), gguf_get_u32(r, key, &v.u32), gguf_get_i32(r, key, &v.i32),
            gguf_get_u64(r, key, &v.u64), gguf_get_i64(r, key, &v.i64), gguf_get_f32(r, key, &v.f32),
            gguf_get_f64(r, key, &v.f64), gguf_get_bool(r, key, &v.b), gguf_get_str(r, key, &v.s),
        };
        int n_got = 0;
        for (int k = 0; k < 12; k++) n_got += got[k];
        CHECK(n_got == (type == GGUF_TYPE_ARRAY ? 0 : 1));  /* exactly the stored type answers */
        if (type == GGUF_TYPE_ARRAY) {
            uint64_t n = gguf_arr_n(r, i);
            if (gguf_arr_type(r, i) == GGUF_TYPE_STRING) {
                for (uint64_t j = 0; j < n; j++) sink += strlen(gguf_arr_str(r, i, j)) <= gguf_arr_str_len(r, i, j);
            } else {
                size_t bytes = (size_t)n * gguf_type_size(gguf_arr_type(r, i));
                const uint8_t *p = gguf_arr_data(r, i);
                for (size_t j = 0; j < bytes; j++) sink += p[j];
            }
        }
    }
    for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(r, i);
        CHECK(gguf_find_tensor(r, t->name) == i);
        const uint8_t *p = t->data;
        if (t->size) sink += p[0] + p[t->size - 1];
    }
    (void)sink;
}

/* Opens an exact-size copy of data[0..n); returns true if it opened (and walks it). */
static bool try_open(const uint8_t *data, size_t n) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    error_clear();
    struct gguf_reader *r = gguf_open_buffer(copy, n);
    if (r) {
        walk_reader(r);
        gguf_close(r);
    }
    free(copy);
    return r != NULL;
}

/* ---- truncations and flipped bytes of a real file ------------------------------- */

static bool is_truncation_message(const char *msg) {
    return strstr(msg, "truncated") || strstr(msg, "past the end") || strstr(msg, "not a GGUF file") ||
           strstr(msg, "more than the");
}

static void test_truncations(const uint8_t *file, size_t size, size_t data_offset) {
    int n_tried = 0, n_bad_msg = 0;
    /* every length through the header and the start of the data, then samples */
    for (size_t n = 0; n < size; n += n < data_offset + 256 ? 1 : 997) {
        bool opened = try_open(file, n);
        CHECK_MSG(!opened, "a file truncated to %zu bytes opened", n);
        if (!is_truncation_message(error_last())) {
            if (n_bad_msg++ < 5) fprintf(stderr, "truncated to %zu: unexpected message '%s'\n", n, error_last());
        }
        n_tried++;
    }
    CHECK(!try_open(file, size - 1));
    CHECK(try_open(file, size));
    CHECK_EQ_INT(n_bad_msg, 0);
    printf("truncations: %d lengths rejected\n", n_tried);
}

static void test_flipped_bytes(uint8_t *copy, size_t size, size_t header_size) {
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    int n_opened = 0, n_failed = 0, n_silent = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t pos[4];
        uint8_t old[4];
        int n_flips = 1 + (int)(test_rand_u64(&rng) % 4);
        for (int k = 0; k < n_flips; k++) {
            /* mostly the header, where the structure is */
            pos[k] = (size_t)(test_rand_u64(&rng) % (iter % 8 ? header_size : size));
            old[k] = copy[pos[k]];
            uint64_t x = test_rand_u64(&rng);
            copy[pos[k]] = x & 1 ? (uint8_t)(x >> 8) : (uint8_t)(copy[pos[k]] ^ (1u << ((x >> 8) % 8)));
        }
        error_clear();
        struct gguf_reader *r = gguf_open_buffer(copy, size);
        if (r) {
            walk_reader(r);
            gguf_close(r);
            n_opened++;
        } else {
            n_failed++;
            n_silent += error_last()[0] == '\0';
        }
        for (int k = n_flips - 1; k >= 0; k--) copy[pos[k]] = old[k];
    }
    CHECK_EQ_INT(n_silent, 0);
    CHECK(n_failed > 100);  /* the flips do reach the structure */
    printf("flipped bytes: %d opened (then fully walked), %d rejected\n", n_opened, n_failed);
}

/* ---- hand-made files ---------------------------------------------------------- */

struct raw {
    uint8_t p[4096];
    size_t n;
};

static void raw_put(struct raw *b, const void *src, size_t n) {
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void raw_u32(struct raw *b, uint32_t v) { raw_put(b, &v, 4); }
static void raw_u64(struct raw *b, uint64_t v) { raw_put(b, &v, 8); }
static void raw_str(struct raw *b, const char *s) {
    raw_u64(b, strlen(s));
    raw_put(b, s, strlen(s));
}
static void raw_header(struct raw *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    raw_put(b, "GGUF", 4);
    raw_u32(b, version);
    raw_u64(b, n_tensors);
    raw_u64(b, n_kv);
}
static void raw_kv_u32(struct raw *b, const char *key, uint32_t v) {
    raw_str(b, key);
    raw_u32(b, GGUF_TYPE_UINT32);
    raw_u32(b, v);
}
static void raw_tensor(struct raw *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t offset) {
    raw_str(b, name);
    raw_u32(b, n_dims);
    raw_put(b, ne, (n_dims <= 5 ? n_dims : 0) * sizeof *ne);  /* absurd counts: no dims follow */
    raw_u32(b, type);
    raw_u64(b, offset);
}
/* Pads to `align` and appends n bytes of tensor data. */
static void raw_data(struct raw *b, size_t align, size_t n) {
    while (b->n % align) b->p[b->n++] = 0;
    memset(b->p + b->n, 0x11, n);
    b->n += n;
}

/* Expects the file to be refused with a message containing `needle`. */
#define EXPECT_REJECT(b, needle)                                                          \
    do {                                                                                  \
        bool opened_ = try_open((b)->p, (b)->n);                                          \
        CHECK_MSG(!opened_ && strstr(error_last(), needle), "expected '%s', got %s '%s'", \
                  needle, opened_ ? "success" : "error", error_last());                   \
    } while (0)

static const int64_t NE4[1] = { 4 };

/* A valid file: one key, one f32 [4] tensor. */
static void raw_valid(struct raw *b) {
    raw_header(b, 3, 1, 1);
    raw_kv_u32(b, "a", 1);
    raw_tensor(b, "t", 1, NE4, 0, 0);
    raw_data(b, 32, 16);
}

static void test_header_errors(void) {
    struct raw b;
    raw_valid(&b);
    CHECK(try_open(b.p, b.n));
    raw_header(&b, 2, 0, 0);
    CHECK(try_open(b.p, b.n));  /* version 2 reads like 3 */

    CHECK(!try_open(b.p, 0) && strstr(error_last(), "not a GGUF file (only 0 bytes)"));
    raw_valid(&b);
    memcpy(b.p, "GGML", 4);
    EXPECT_REJECT(&b, "not a GGUF file (magic 'GGML'");
    raw_valid(&b);
    memcpy(b.p + 4, "\x01\0\0\0", 4);
    EXPECT_REJECT(&b, "GGUF version 1 is not supported (too old); re-convert the model");
    memcpy(b.p + 4, "\0\0\0\x03", 4);
    EXPECT_REJECT(&b, "the file is big-endian");
    memcpy(b.p + 4, "\0\0\0\x02", 4);
    EXPECT_REJECT(&b, "big-endian");
    memcpy(b.p + 4, "\x04\0\0\0", 4);
    EXPECT_REJECT(&b, "unsupported GGUF version 4");
    memcpy(b.p + 4, "\0\0\0\0", 4);
    EXPECT_REJECT(&b, "unsupported GGUF version 0");

    raw_header(&b, 3, 0, UINT64_MAX);
    EXPECT_REJECT(&b, "claims 18446744073709551615 metadata entries");
    raw_header(&b, 3, UINT64_MAX / 2, 0);
    raw_u64(&b, 0);
    EXPECT_REJECT(&b, "claims 9223372036854775807 tensors");
    raw_header(&b, 3, 0, 1);
    raw_kv_u32(&b, "a", 1);
    b.n -= 2;
    EXPECT_REJECT(&b, "truncated: the value of key 'a'");
}

static void test_metadata_errors(void) {
    struct raw b;
    /* a key whose length runs past the end */
    raw_header(&b, 3, 0, 1);
    raw_u64(&b, UINT64_MAX);
    raw_put(&b, "abcdefghijklmnop", 16);
    EXPECT_REJECT(&b, "key 0: string length 18446744073709551615");
    /* a string value longer than the file */
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "s");
    raw_u32(&b, GGUF_TYPE_STRING);
    raw_u64(&b, 1000);
    raw_put(&b, "abc", 3);
    EXPECT_REJECT(&b, "the value of key 's': string length 1000");
    /* invalid value type */
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "k");
    raw_u32(&b, 13);
    raw_u32(&b, 0);
    EXPECT_REJECT(&b, "key 'k' has invalid type 13");
    /* bool must be 0 or 1, as a value and in arrays */
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "b");
    raw_u32(&b, GGUF_TYPE_BOOL);
    raw_put(&b, "\x02", 1);
    EXPECT_REJECT(&b, "key 'b': bool value 2");
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "b");
    raw_u32(&b, GGUF_TYPE_ARRAY);
    raw_u32(&b, GGUF_TYPE_BOOL);
    raw_u64(&b, 3);
    raw_put(&b, "\x01\x00\xff", 3);
    EXPECT_REJECT(&b, "key 'b': bool value 255");
    /* arrays: huge counts, nested arrays, bad element types */
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "arr");
    raw_u32(&b, GGUF_TYPE_ARRAY);
    raw_u32(&b, GGUF_TYPE_UINT64);
    raw_u64(&b, UINT64_MAX / 4);
    raw_u64(&b, 1);
    EXPECT_REJECT(&b, "array 'arr' claims 4611686018427387903 elements of type u64");
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "arr");
    raw_u32(&b, GGUF_TYPE_ARRAY);
    raw_u32(&b, GGUF_TYPE_STRING);
    raw_u64(&b, 1000000);
    raw_str(&b, "x");
    EXPECT_REJECT(&b, "array 'arr' claims 1000000 elements of type str");
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "arr");
    raw_u32(&b, GGUF_TYPE_ARRAY);
    raw_u32(&b, GGUF_TYPE_STRING);
    raw_u64(&b, 2);
    raw_str(&b, "x");
    raw_u64(&b, 100);
    raw_put(&b, "yyyyyyyyyy", 10);
    EXPECT_REJECT(&b, "element 1 of array 'arr': string length 100");
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "arr");
    raw_u32(&b, GGUF_TYPE_ARRAY);
    raw_u32(&b, GGUF_TYPE_ARRAY);
    raw_u64(&b, 1);
    raw_u32(&b, GGUF_TYPE_UINT8);
    raw_u64(&b, 1);
    raw_put(&b, "\x05", 1);
    EXPECT_REJECT(&b, "key 'arr' is an array of arrays");
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "arr");
    raw_u32(&b, GGUF_TYPE_ARRAY);
    raw_u32(&b, 99);
    raw_u64(&b, 0);
    EXPECT_REJECT(&b, "array 'arr' has invalid element type 99");
    /* duplicate keys, keys with NUL bytes */
    raw_header(&b, 3, 0, 3);
    raw_kv_u32(&b, "a", 1);
    raw_kv_u32(&b, "b", 2);
    raw_kv_u32(&b, "a", 3);
    EXPECT_REJECT(&b, "duplicate key 'a' (entries 0 and 2)");
    raw_header(&b, 3, 0, 1);
    raw_u64(&b, 3);
    raw_put(&b, "a\0b", 3);
    raw_u32(&b, GGUF_TYPE_UINT8);
    raw_put(&b, "\x01", 1);
    EXPECT_REJECT(&b, "key 0 at offset 32 contains a NUL byte");
    /* general.alignment: a u32 power of two */
    uint32_t bad_alignments[] = { 0, 48, 3, 0x80000001u };
    for (size_t k = 0; k < sizeof bad_alignments / sizeof bad_alignments[0]; k++) {
        raw_header(&b, 3, 0, 1);
        raw_kv_u32(&b, "general.alignment", bad_alignments[k]);
        EXPECT_REJECT(&b, "is not a power of two");
    }
    raw_header(&b, 3, 0, 1);
    raw_str(&b, "general.alignment");
    raw_u32(&b, GGUF_TYPE_UINT64);
    raw_u64(&b, 32);
    EXPECT_REJECT(&b, "general.alignment has type u64 (must be u32)");
}

static void test_tensor_errors(void) {
    struct raw b;
    /* n_dims 5 */
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 5, (const int64_t[]){ 1, 1, 1, 1, 1 }, 0, 0);
    raw_data(&b, 32, 4);
    EXPECT_REJECT(&b, "tensor 't' has 5 dimensions (at most 4 are allowed)");
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 0xffffffffu, NE4, 0, 0);
    EXPECT_REJECT(&b, "has 4294967295 dimensions");
    /* zero, negative and overflowing shapes */
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 2, (const int64_t[]){ 4, 0 }, 0, 0);
    EXPECT_REJECT(&b, "tensor 't' dimension 1 has 0 elements");
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 1, (const int64_t[]){ -4 }, 0, 0);
    EXPECT_REJECT(&b, "dimension 0 has -4 elements");
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 3, (const int64_t[]){ 1 << 30, 1 << 30, 1 << 30 }, 0, 0);
    EXPECT_REJECT(&b, "product of its dimensions overflows");
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 2, (const int64_t[]){ INT64_MAX / 2 + 1 - ((INT64_MAX / 2 + 1) % 32), 1 }, 0, 0);
    EXPECT_REJECT(&b, "its byte size overflows");
    /* element types: removed numbers, past the end, huge */
    uint32_t bad_types[] = { 4, 5, 21, 0xffffffffu };
    for (size_t k = 0; k < sizeof bad_types / sizeof bad_types[0]; k++) {
        raw_header(&b, 3, 1, 0);
        raw_tensor(&b, "t", 1, NE4, bad_types[k], 0);
        raw_data(&b, 32, 16);
        EXPECT_REJECT(&b, "tensor 't' has invalid element type");
    }
    /* a row that is not a whole number of blocks */
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 2, (const int64_t[]){ 48, 2 }, 8, 0);
    raw_data(&b, 32, 68);
    EXPECT_REJECT(&b, "row length 48 is not a multiple of the q8_0 block size 32");
    /* data offsets: past the end, wrapping around, misaligned */
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 1, NE4, 0, 32);
    raw_data(&b, 32, 16);
    EXPECT_REJECT(&b, "tensor 't' data (16 bytes at offset 32 of the data section");
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 1, NE4, 0, UINT64_MAX - 31);
    raw_data(&b, 32, 16);
    EXPECT_REJECT(&b, "runs past the end of the file");
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 1, NE4, 0, 4);
    raw_data(&b, 32, 32);
    EXPECT_REJECT(&b, "tensor 't' data offset 4 is not a multiple of the alignment 32");
    raw_header(&b, 3, 1, 1);
    raw_kv_u32(&b, "general.alignment", 64);
    raw_tensor(&b, "t", 1, NE4, 0, 32);
    raw_data(&b, 64, 64);
    EXPECT_REJECT(&b, "not a multiple of the alignment 64");
    /* data that would fit only if the data section were not aligned */
    raw_header(&b, 3, 1, 0);
    raw_tensor(&b, "t", 1, NE4, 0, 0);
    raw_put(&b, "\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11", 16);
    EXPECT_REJECT(&b, "runs past the end of the file");
    /* duplicate tensor names, names with NUL bytes */
    raw_header(&b, 3, 2, 0);
    raw_tensor(&b, "t", 1, NE4, 0, 0);
    raw_tensor(&b, "t", 1, NE4, 0, 32);
    raw_data(&b, 32, 64);
    EXPECT_REJECT(&b, "duplicate tensor name 't' (tensors 0 and 1)");
    raw_header(&b, 3, 1, 0);
    raw_u64(&b, 2);
    raw_put(&b, "t\0", 2);
    raw_u32(&b, 1);
    raw_put(&b, NE4, 8);
    raw_u32(&b, 0);
    raw_u64(&b, 0);
    raw_data(&b, 32, 16);
    EXPECT_REJECT(&b, "the name of tensor 0 at offset 32 contains a NUL byte");
    /* two tensors may share data (b1892 does not forbid it); the reader accepts it */
    raw_header(&b, 3, 2, 0);
    raw_tensor(&b, "t", 1, NE4, 0, 0);
    raw_tensor(&b, "u", 1, NE4, 0, 0);
    raw_data(&b, 32, 16);
    CHECK(try_open(b.p, b.n));
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level; (void)text; (void)user_data;
}

int main(void) {
    log_set_callback(quiet_log, NULL);  /* thousands of expected errors */
    test_header_errors();
    test_metadata_errors();
    test_tensor_errors();
    const char *path = test_shared_path("models/stories260K-Q8_0.gguf");
    if (!path && g_test_failures == 0) test_skip("shared model stories260K-Q8_0.gguf not found (set LLAMAC_SHARED)");
    size_t size = 0;
    uint8_t *file = path ? (uint8_t *)test_read_file(path, &size) : NULL;
    CHECK(file != NULL);
    if (file) {
        struct gguf_reader *r = gguf_open_buffer(file, size);
        CHECK(r != NULL);
        size_t data_offset = r ? gguf_data_offset(r) : 0;
        gguf_close(r);
        test_truncations(file, size, data_offset);
        uint8_t *copy = malloc(size);
        memcpy(copy, file, size);
        test_flipped_bytes(copy, size, data_offset);
        free(copy);
        free(file);
    }
    return test_finish("test_gguf_hostile");
}
