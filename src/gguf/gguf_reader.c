/*
 * GGUF reader: parses and validates a whole file header over a read-only
 * buffer, so that every query afterwards is safe without further checks.
 *
 * Layout (v2 and v3, little-endian): "GGUF", u32 version, u64 n_tensors,
 * u64 n_kv, n_kv × (string key, u32 type, value), n_tensors × (string name,
 * u32 n_dims, n_dims × i64 ne, u32 type, u64 offset), padding to the
 * alignment, tensor data. A string is a u64 length and that many bytes.
 *
 * Everything read from the file is checked before use: reads go through a
 * cursor that never passes the end, counts are capped by what the rest of the
 * file could hold before anything is allocated for them, and sizes and
 * offsets use overflow-checked arithmetic.
 */
#include "gguf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/file_map.h"
#include "core/log.h"
#include "quant/quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

/* Smallest possible encodings, used to cap counts before allocating. */
#define GGUF_MIN_KV_BYTES 13      /* key length (8) + type (4) + a 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 24  /* name length (8) + n_dims (4) + type (4) + offset (8) */
#define GGUF_ALIGNMENT_KEY "general.alignment"

struct gguf_kv {
    char *key;
    enum gguf_type type;
    union {                      /* fixed-size scalars, as stored */
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64; float f32; double f64; bool b;
    } val;
    char *str;                   /* GGUF_TYPE_STRING: owned, NUL-terminated */
    uint64_t str_len;
    enum gguf_type arr_type;     /* GGUF_TYPE_ARRAY */
    uint64_t arr_n;
    const void *arr_data;        /* numeric arrays: points into the buffer */
    char **arr_strs;             /* string arrays: pointers into arr_pool */
    uint64_t *arr_str_lens;
    char *arr_pool;
};

/* Open-addressing hash from names to entry indices (duplicate checks, lookups). */
struct name_slot {
    const char *name;  /* NULL: empty slot */
    int64_t idx;
};

struct name_index {
    struct name_slot *slots;
    size_t cap;  /* a power of two, or 0 */
    size_t count;
};

struct gguf_reader {
    struct file_map fm;  /* owned mapping (gguf_open_file), else zeroed */
    const uint8_t *data;
    size_t size;
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    int64_t n_kv, kv_cap;
    struct gguf_kv *kv;
    int64_t n_tensors, tensor_cap;
    struct gguf_tensor_info *tensors;
    struct name_index key_index;
    struct name_index tensor_index;
};

/* ---- name index ------------------------------------------------------------ */

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;  /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

static int64_t name_index_find(const struct name_index *ix, const char *name) {
    if (ix->cap == 0 || !name) return -1;
    size_t mask = ix->cap - 1;
    for (size_t h = (size_t)name_hash(name) & mask; ix->slots[h].name; h = (h + 1) & mask) {
        if (strcmp(ix->slots[h].name, name) == 0) return ix->slots[h].idx;
    }
    return -1;
}

static void name_index_place(struct name_slot *slots, size_t cap, const char *name, int64_t idx) {
    size_t mask = cap - 1;
    size_t h = (size_t)name_hash(name) & mask;
    while (slots[h].name) h = (h + 1) & mask;
    slots[h].name = name;
    slots[h].idx = idx;
}

/* Adds `name` (which must stay valid) unless present. *dup is the index of an
 * equal name already there, else -1. False on allocation failure. */
static bool name_index_insert(struct name_index *ix, const char *name, int64_t idx, int64_t *dup) {
    *dup = name_index_find(ix, name);
    if (*dup >= 0) return true;
    if ((ix->count + 1) * 2 > ix->cap) {
        size_t cap = ix->cap ? ix->cap * 2 : 16;
        struct name_slot *slots = calloc(cap, sizeof *slots);
        if (!slots) return false;
        for (size_t i = 0; i < ix->cap; i++) {
            if (ix->slots[i].name) name_index_place(slots, cap, ix->slots[i].name, ix->slots[i].idx);
        }
        free(ix->slots);
        ix->slots = slots;
        ix->cap = cap;
    }
    name_index_place(ix->slots, ix->cap, name, idx);
    ix->count++;
    return true;
}

/* ---- cursor ---------------------------------------------------------------- */

struct parser {
    const uint8_t *data;
    size_t size;
    size_t pos;          /* never beyond size */
    const char *source;  /* file name for messages, or NULL for a buffer */
};

static size_t parser_left(const struct parser *ps) { return ps->size - ps->pos; }

static bool parse_fail(const struct parser *ps, const char *fmt, ...) LC_PRINTF(2, 3);
static bool parse_fail(const struct parser *ps, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->source) {
        error_set("%s: %s", ps->source, msg);
    } else {
        error_set("%s", msg);
    }
    return false;
}

static bool parse_fail_truncated(const struct parser *ps, const char *what_fmt, va_list ap) {
    char what[300];
    vsnprintf(what, sizeof what, what_fmt, ap);
    return parse_fail(ps, "file is truncated: %s at offset %zu runs past the end of the file (%zu bytes)",
                      what, ps->pos, ps->size);
}

/* Reads n bytes; on a short file fails with "what" (a printf format) in the message. */
static bool parse_bytes(struct parser *ps, void *dst, size_t n, const char *what_fmt, ...) LC_PRINTF(4, 5);
static bool parse_bytes(struct parser *ps, void *dst, size_t n, const char *what_fmt, ...) {
    if (n > parser_left(ps)) {
        va_list ap;
        va_start(ap, what_fmt);
        parse_fail_truncated(ps, what_fmt, ap);
        va_end(ap);
        return false;
    }
    memcpy(dst, ps->data + ps->pos, n);
    ps->pos += n;
    return true;
}

/* Reads a length-prefixed string in place: *s points into the buffer. */
static bool parse_string(struct parser *ps, const uint8_t **s, uint64_t *n, const char *what_fmt, ...) LC_PRINTF(4, 5);
static bool parse_string(struct parser *ps, const uint8_t **s, uint64_t *n, const char *what_fmt, ...) {
    char what[300];
    va_list ap;
    if (parser_left(ps) < sizeof *n) {
        va_start(ap, what_fmt);
        vsnprintf(what, sizeof what, what_fmt, ap);
        va_end(ap);
        return parse_fail(ps, "file is truncated: the length of %s at offset %zu runs past the end of the file (%zu bytes)",
                          what, ps->pos, ps->size);
    }
    memcpy(n, ps->data + ps->pos, sizeof *n);
    if (*n > parser_left(ps) - sizeof *n) {
        va_start(ap, what_fmt);
        vsnprintf(what, sizeof what, what_fmt, ap);
        va_end(ap);
        return parse_fail(ps, "%s: string length %" PRIu64 " at offset %zu runs past the end of the file (%zu bytes left)",
                          what, *n, ps->pos, parser_left(ps) - sizeof *n);
    }
    ps->pos += sizeof *n;
    *s = ps->data + ps->pos;
    ps->pos += (size_t)*n;
    return true;
}

static char *copy_string(const uint8_t *s, uint64_t n) {
    char *out = malloc((size_t)n + 1);  /* n <= file size, so n + 1 cannot wrap */
    if (!out) return NULL;
    if (n) memcpy(out, s, (size_t)n);
    out[n] = '\0';
    return out;
}

static bool parse_oom(const struct parser *ps, const char *what) {
    return parse_fail(ps, "out of memory reading %s", what);
}

/* ---- metadata ------------------------------------------------------------ */

static void kv_free(struct gguf_kv *kv) {
    free(kv->key);
    free(kv->str);
    free(kv->arr_strs);
    free(kv->arr_str_lens);
    free(kv->arr_pool);
}

/* Appends a zeroed entry (growing by doubling, so memory follows what was parsed). */
static struct gguf_kv *reader_push_kv(struct gguf_reader *r) {
    if (r->n_kv == r->kv_cap) {
        int64_t cap = r->kv_cap ? r->kv_cap * 2 : 32;
        struct gguf_kv *kv = realloc(r->kv, (size_t)cap * sizeof *kv);
        if (!kv) return NULL;
        r->kv = kv;
        r->kv_cap = cap;
    }
    struct gguf_kv *kv = &r->kv[r->n_kv++];
    memset(kv, 0, sizeof *kv);
    return kv;
}

static bool parse_string_array(struct parser *ps, struct gguf_kv *kv) {
    /* Pass 1 checks every length and sums them, so one pool holds the copies. */
    size_t start = ps->pos;
    uint64_t total = 0;
    for (uint64_t j = 0; j < kv->arr_n; j++) {
        const uint8_t *s;
        uint64_t n;
        if (!parse_string(ps, &s, &n, "element %" PRIu64 " of array '%s'", j, kv->key)) return false;
        total += n;  /* bounded by the file size */
    }
    size_t pool_size;
    if (!ck_add_size((size_t)total, (size_t)kv->arr_n, &pool_size)) {
        return parse_fail(ps, "array '%s' is too large", kv->key);
    }
    kv->arr_pool = malloc(pool_size ? pool_size : 1);
    kv->arr_strs = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof *kv->arr_strs);
    kv->arr_str_lens = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof *kv->arr_str_lens);
    if (!kv->arr_pool || !kv->arr_strs || !kv->arr_str_lens) return parse_oom(ps, kv->key);
    ps->pos = start;
    char *dst = kv->arr_pool;
    for (uint64_t j = 0; j < kv->arr_n; j++) {
        const uint8_t *s;
        uint64_t n;
        parse_string(ps, &s, &n, "element %" PRIu64, j);  /* checked in pass 1 */
        if (n) memcpy(dst, s, (size_t)n);
        dst[n] = '\0';
        kv->arr_strs[j] = dst;
        kv->arr_str_lens[j] = n;
        dst += n + 1;
    }
    return true;
}

static bool check_bools(const struct parser *ps, const struct gguf_kv *kv, const uint8_t *p, uint64_t n) {
    for (uint64_t j = 0; j < n; j++) {
        if (p[j] > 1) {
            return parse_fail(ps, "key '%s': bool value %u at offset %zu (must be 0 or 1)",
                              kv->key, p[j], (size_t)(p + j - ps->data));
        }
    }
    return true;
}

static bool parse_array(struct parser *ps, struct gguf_kv *kv) {
    uint32_t arr_type;
    if (!parse_bytes(ps, &arr_type, sizeof arr_type, "the element type of array '%s'", kv->key)) return false;
    if (arr_type == GGUF_TYPE_ARRAY) {
        return parse_fail(ps, "key '%s' is an array of arrays, which GGUF readers do not support", kv->key);
    }
    if (arr_type >= GGUF_TYPE_COUNT) {
        return parse_fail(ps, "array '%s' has invalid element type %" PRIu32, kv->key, arr_type);
    }
    kv->arr_type = (enum gguf_type)arr_type;
    if (!parse_bytes(ps, &kv->arr_n, sizeof kv->arr_n, "the length of array '%s'", kv->key)) return false;

    size_t elem_size = arr_type == GGUF_TYPE_STRING ? sizeof(uint64_t) : gguf_type_size(kv->arr_type);
    if (kv->arr_n > parser_left(ps) / elem_size) {
        return parse_fail(ps, "array '%s' claims %" PRIu64 " elements of type %s, more than the %zu bytes left in the file can hold",
                          kv->key, kv->arr_n, gguf_type_name(kv->arr_type), parser_left(ps));
    }
    if (arr_type == GGUF_TYPE_STRING) return parse_string_array(ps, kv);

    const uint8_t *p = ps->data + ps->pos;
    if (arr_type == GGUF_TYPE_BOOL && !check_bools(ps, kv, p, kv->arr_n)) return false;
    kv->arr_data = p;
    ps->pos += (size_t)kv->arr_n * elem_size;
    return true;
}

static bool parse_value(struct parser *ps, struct gguf_kv *kv) {
    switch (kv->type) {
    case GGUF_TYPE_STRING: {
        const uint8_t *s;
        if (!parse_string(ps, &s, &kv->str_len, "the value of key '%s'", kv->key)) return false;
        kv->str = copy_string(s, kv->str_len);
        return kv->str ? true : parse_oom(ps, kv->key);
    }
    case GGUF_TYPE_ARRAY:
        return parse_array(ps, kv);
    default: {
        const uint8_t *p = ps->data + ps->pos;
        if (!parse_bytes(ps, &kv->val, gguf_type_size(kv->type), "the value of key '%s'", kv->key)) return false;
        return kv->type != GGUF_TYPE_BOOL || check_bools(ps, kv, p, 1);
    }
    }
}

static bool parse_metadata(struct parser *ps, struct gguf_reader *r, uint64_t n_kv) {
    for (uint64_t i = 0; i < n_kv; i++) {
        const uint8_t *key;
        uint64_t key_len;
        if (!parse_string(ps, &key, &key_len, "key %" PRIu64, i)) return false;
        if (memchr(key, '\0', (size_t)key_len)) {
            return parse_fail(ps, "key %" PRIu64 " at offset %zu contains a NUL byte", i, ps->pos - (size_t)key_len);
        }
        struct gguf_kv *kv = reader_push_kv(r);
        if (!kv || !(kv->key = copy_string(key, key_len))) return parse_oom(ps, "the metadata");
        int64_t dup;
        if (!name_index_insert(&r->key_index, kv->key, (int64_t)i, &dup)) return parse_oom(ps, "the metadata");
        if (dup >= 0) {
            return parse_fail(ps, "duplicate key '%s' (entries %" PRId64 " and %" PRIu64 ")", kv->key, dup, i);
        }
        uint32_t type;
        if (!parse_bytes(ps, &type, sizeof type, "the type of key '%s'", kv->key)) return false;
        if (type >= GGUF_TYPE_COUNT) {
            return parse_fail(ps, "key '%s' has invalid type %" PRIu32, kv->key, type);
        }
        kv->type = (enum gguf_type)type;
        if (!parse_value(ps, kv)) return false;
    }
    return true;
}

static bool parse_alignment(const struct parser *ps, struct gguf_reader *r) {
    r->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = name_index_find(&r->key_index, GGUF_ALIGNMENT_KEY);
    if (i < 0) return true;
    const struct gguf_kv *kv = &r->kv[i];
    if (kv->type != GGUF_TYPE_UINT32) {
        return parse_fail(ps, "%s has type %s (must be u32)", GGUF_ALIGNMENT_KEY, gguf_type_name(kv->type));
    }
    if (!is_pow2(kv->val.u32)) {
        return parse_fail(ps, "%s = %" PRIu32 " is not a power of two", GGUF_ALIGNMENT_KEY, kv->val.u32);
    }
    r->alignment = kv->val.u32;
    return true;
}

/* ---- tensor infos ---------------------------------------------------------- */

static struct gguf_tensor_info *reader_push_tensor(struct gguf_reader *r) {
    if (r->n_tensors == r->tensor_cap) {
        int64_t cap = r->tensor_cap ? r->tensor_cap * 2 : 64;
        struct gguf_tensor_info *t = realloc(r->tensors, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        r->tensors = t;
        r->tensor_cap = cap;
    }
    struct gguf_tensor_info *t = &r->tensors[r->n_tensors++];
    memset(t, 0, sizeof *t);
    return t;
}

static bool parse_tensor_shape(struct parser *ps, struct gguf_tensor_info *t) {
    if (!parse_bytes(ps, &t->n_dims, sizeof t->n_dims, "the n_dims of tensor '%s'", t->name)) return false;
    if (t->n_dims > GGUF_MAX_DIMS) {
        return parse_fail(ps, "tensor '%s' has %" PRIu32 " dimensions (at most %d are allowed)",
                          t->name, t->n_dims, GGUF_MAX_DIMS);
    }
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        if (!parse_bytes(ps, &t->ne[d], sizeof t->ne[d], "dimension %" PRIu32 " of tensor '%s'", d, t->name)) return false;
        if (t->ne[d] < 1) {
            return parse_fail(ps, "tensor '%s' dimension %" PRIu32 " has %" PRId64 " elements (must be at least 1)",
                              t->name, d, t->ne[d]);
        }
        if (!ck_mul_i64(n_elements, t->ne[d], &n_elements)) {
            return parse_fail(ps, "tensor '%s' has too many elements (the product of its dimensions overflows)", t->name);
        }
    }
    return true;
}

static bool parse_tensor_type(struct parser *ps, struct gguf_tensor_info *t) {
    uint32_t type;
    if (!parse_bytes(ps, &type, sizeof type, "the type of tensor '%s'", t->name)) return false;
    const struct type_traits *tt = type < GGML_TYPE_COUNT ? type_traits_get((enum ggml_type)type) : NULL;
    if (!tt) {
        return parse_fail(ps, "tensor '%s' has invalid element type %" PRIu32, t->name, type);
    }
    t->type = (enum ggml_type)type;
    if (t->ne[0] % tt->blck_size != 0) {
        return parse_fail(ps, "tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %" PRId64,
                          t->name, t->ne[0], tt->name, tt->blck_size);
    }
    size_t size;
    if (!type_row_size(t->type, t->ne[0], &size) || !ck_mul_size(size, (size_t)t->ne[1], &size) ||
        !ck_mul_size(size, (size_t)t->ne[2], &size) || !ck_mul_size(size, (size_t)t->ne[3], &size)) {
        return parse_fail(ps, "tensor '%s' is too large (its byte size overflows)", t->name);
    }
    t->size = size;
    return true;
}

static bool parse_tensor_infos(struct parser *ps, struct gguf_reader *r, uint64_t n_tensors) {
    for (uint64_t i = 0; i < n_tensors; i++) {
        const uint8_t *name;
        uint64_t name_len;
        if (!parse_string(ps, &name, &name_len, "the name of tensor %" PRIu64, i)) return false;
        if (memchr(name, '\0', (size_t)name_len)) {
            return parse_fail(ps, "the name of tensor %" PRIu64 " at offset %zu contains a NUL byte",
                              i, ps->pos - (size_t)name_len);
        }
        struct gguf_tensor_info *t = reader_push_tensor(r);
        char *owned = t ? copy_string(name, name_len) : NULL;
        if (!owned) return parse_oom(ps, "the tensor infos");
        t->name = owned;
        int64_t dup;
        if (!name_index_insert(&r->tensor_index, t->name, (int64_t)i, &dup)) return parse_oom(ps, "the tensor infos");
        if (dup >= 0) {
            return parse_fail(ps, "duplicate tensor name '%s' (tensors %" PRId64 " and %" PRIu64 ")", t->name, dup, i);
        }
        if (!parse_tensor_shape(ps, t) || !parse_tensor_type(ps, t)) return false;
        if (!parse_bytes(ps, &t->offset, sizeof t->offset, "the data offset of tensor '%s'", t->name)) return false;
    }
    return true;
}

/* Places every tensor's data: aligned, and inside the file. */
static bool check_tensor_data(const struct parser *ps, struct gguf_reader *r) {
    if (!ck_align_up(ps->pos, r->alignment, &r->data_offset)) {
        return parse_fail(ps, "the data section offset overflows");
    }
    for (int64_t i = 0; i < r->n_tensors; i++) {
        struct gguf_tensor_info *t = &r->tensors[i];
        if (t->offset % r->alignment != 0) {
            return parse_fail(ps, "tensor '%s' data offset %" PRIu64 " is not a multiple of the alignment %zu",
                              t->name, t->offset, r->alignment);
        }
        uint64_t begin, end;
        if (!ck_add_u64(r->data_offset, t->offset, &begin) || !ck_add_u64(begin, t->size, &end) || end > ps->size) {
            return parse_fail(ps, "tensor '%s' data (%zu bytes at offset %" PRIu64 " of the data section, which starts at %zu) "
                              "runs past the end of the file (%zu bytes)",
                              t->name, t->size, t->offset, r->data_offset, ps->size);
        }
        t->data = ps->data + begin;
    }
    return true;
}

static bool parse_header(struct parser *ps, struct gguf_reader *r, uint64_t *n_tensors, uint64_t *n_kv) {
    char magic[4];
    if (ps->size < sizeof magic) {
        return parse_fail(ps, "not a GGUF file (only %zu bytes)", ps->size);
    }
    parse_bytes(ps, magic, sizeof magic, "the magic");
    if (memcmp(magic, GGUF_MAGIC, sizeof magic) != 0) {
        char shown[4 * 4 + 1];
        size_t k = 0;
        for (int i = 0; i < 4; i++) {
            uint8_t c = (uint8_t)magic[i];
            k += (size_t)snprintf(shown + k, sizeof shown - k, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
        }
        return parse_fail(ps, "not a GGUF file (magic '%s', expected 'GGUF')", shown);
    }
    if (!parse_bytes(ps, &r->version, sizeof r->version, "the version")) return false;
    if (r->version == 1) {
        return parse_fail(ps, "GGUF version 1 is not supported (too old); re-convert the model");
    }
    if (r->version != 0 && (r->version & 0xffff) == 0) {
        return parse_fail(ps, "the file is big-endian (version field 0x%08" PRIx32 " is %" PRIu32 " byte-swapped); "
                          "only little-endian GGUF files are supported", r->version, __builtin_bswap32(r->version));
    }
    if (r->version != 2 && r->version != 3) {
        return parse_fail(ps, "unsupported GGUF version %" PRIu32 " (versions 2 and 3 are supported)", r->version);
    }
    if (!parse_bytes(ps, n_tensors, sizeof *n_tensors, "the tensor count")) return false;
    if (!parse_bytes(ps, n_kv, sizeof *n_kv, "the metadata count")) return false;
    if (*n_kv > parser_left(ps) / GGUF_MIN_KV_BYTES) {
        return parse_fail(ps, "the header claims %" PRIu64 " metadata entries, more than the %zu bytes left in the file can hold",
                          *n_kv, parser_left(ps));
    }
    if (*n_tensors > parser_left(ps) / GGUF_MIN_TENSOR_BYTES) {
        return parse_fail(ps, "the header claims %" PRIu64 " tensors, more than the %zu bytes left in the file can hold",
                          *n_tensors, parser_left(ps));
    }
    return true;
}

static struct gguf_reader *reader_parse(struct gguf_reader *r, const char *source) {
    struct parser ps = { .data = r->data, .size = r->size, .pos = 0, .source = source };
    uint64_t n_tensors, n_kv;
    if (!parse_header(&ps, r, &n_tensors, &n_kv) || !parse_metadata(&ps, r, n_kv) || !parse_alignment(&ps, r) ||
        !parse_tensor_infos(&ps, r, n_tensors) || !check_tensor_data(&ps, r)) {
        gguf_close(r);
        return NULL;
    }
    return r;
}

/* ---- opening and closing ----------------------------------------------------- */

struct gguf_reader *gguf_open_buffer(const void *data, size_t size) {
    struct gguf_reader *r = calloc(1, sizeof *r);
    if (!r) {
        error_set("out of memory opening a GGUF buffer");
        return NULL;
    }
    r->data = data;
    r->size = data ? size : 0;
    return reader_parse(r, NULL);
}

struct gguf_reader *gguf_open_file(const char *path, bool use_mmap) {
    struct gguf_reader *r = calloc(1, sizeof *r);
    if (!r) {
        error_set("out of memory opening '%s'", path ? path : "(null)");
        return NULL;
    }
    if (!file_map_open(&r->fm, path, use_mmap)) {
        free(r);
        return NULL;
    }
    r->data = r->fm.data;
    r->size = r->fm.size;
    return reader_parse(r, path);
}

void gguf_close(struct gguf_reader *r) {
    if (!r) return;
    for (int64_t i = 0; i < r->n_kv; i++) kv_free(&r->kv[i]);
    free(r->kv);
    for (int64_t i = 0; i < r->n_tensors; i++) free((char *)r->tensors[i].name);
    free(r->tensors);
    free(r->key_index.slots);
    free(r->tensor_index.slots);
    file_map_close(&r->fm);
    free(r);
}

uint32_t gguf_version(const struct gguf_reader *r) { return r->version; }
size_t gguf_alignment(const struct gguf_reader *r) { return r->alignment; }
size_t gguf_data_offset(const struct gguf_reader *r) { return r->data_offset; }
const void *gguf_file_data(const struct gguf_reader *r) { return r->data; }
size_t gguf_file_size(const struct gguf_reader *r) { return r->size; }

bool gguf_lock(struct gguf_reader *r) {
    return gguf_lock_range(r, r->fm.data, r->fm.size);
}

bool gguf_lock_range(struct gguf_reader *r, const void *p, size_t n) {
    if (!r->fm.data) {
        LOG_WARN("warning: a GGUF buffer opened by the caller cannot be locked by the reader\n");
        return false;
    }
    return file_map_lock_range(&r->fm, p, n);
}

bool gguf_release_pages(const struct gguf_reader *r, const void *p, size_t n) {
    return file_map_release_pages(&r->fm, p, n);
}

/* ---- metadata queries ------------------------------------------------------ */

static const struct gguf_kv *kv_at(const struct gguf_reader *r, int64_t i) {
    return i >= 0 && i < r->n_kv ? &r->kv[i] : NULL;
}

int64_t gguf_n_kv(const struct gguf_reader *r) { return r->n_kv; }

int64_t gguf_find_key(const struct gguf_reader *r, const char *key) {
    return name_index_find(&r->key_index, key);
}

const char *gguf_key(const struct gguf_reader *r, int64_t i) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv ? kv->key : NULL;
}

enum gguf_type gguf_kv_type(const struct gguf_reader *r, int64_t i) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv ? kv->type : GGUF_TYPE_COUNT;
}

enum gguf_type gguf_arr_type(const struct gguf_reader *r, int64_t i) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_type : GGUF_TYPE_COUNT;
}

uint64_t gguf_arr_n(const struct gguf_reader *r, int64_t i) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_n : 0;
}

const void *gguf_arr_data(const struct gguf_reader *r, int64_t i) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_data : NULL;
}

const char *gguf_arr_str(const struct gguf_reader *r, int64_t i, uint64_t j) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv && kv->arr_strs && j < kv->arr_n ? kv->arr_strs[j] : NULL;
}

uint64_t gguf_arr_str_len(const struct gguf_reader *r, int64_t i, uint64_t j) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv && kv->arr_strs && j < kv->arr_n ? kv->arr_str_lens[j] : 0;
}

const void *gguf_val_data(const struct gguf_reader *r, int64_t i) {
    const struct gguf_kv *kv = kv_at(r, i);
    return kv && gguf_type_size(kv->type) ? &kv->val : NULL;
}

const char *gguf_val_str(const struct gguf_reader *r, int64_t i, uint64_t *len) {
    const struct gguf_kv *kv = kv_at(r, i);
    if (!kv || kv->type != GGUF_TYPE_STRING) return NULL;
    if (len) *len = kv->str_len;
    return kv->str;
}

int gguf_kv_to_str(const struct gguf_reader *r, int64_t i, char *buf, size_t size) {
    const struct gguf_kv *kv = kv_at(r, i);
    if (!kv) return -1;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:   return snprintf(buf, size, "%" PRIu8, kv->val.u8);
    case GGUF_TYPE_INT8:    return snprintf(buf, size, "%" PRId8, kv->val.i8);
    case GGUF_TYPE_UINT16:  return snprintf(buf, size, "%" PRIu16, kv->val.u16);
    case GGUF_TYPE_INT16:   return snprintf(buf, size, "%" PRId16, kv->val.i16);
    case GGUF_TYPE_UINT32:  return snprintf(buf, size, "%" PRIu32, kv->val.u32);
    case GGUF_TYPE_INT32:   return snprintf(buf, size, "%" PRId32, kv->val.i32);
    case GGUF_TYPE_UINT64:  return snprintf(buf, size, "%" PRIu64, kv->val.u64);
    case GGUF_TYPE_INT64:   return snprintf(buf, size, "%" PRId64, kv->val.i64);
    case GGUF_TYPE_FLOAT32: return snprintf(buf, size, "%f", (double)kv->val.f32);  /* std::to_string */
    case GGUF_TYPE_FLOAT64: return snprintf(buf, size, "%f", kv->val.f64);
    case GGUF_TYPE_BOOL:    return snprintf(buf, size, "%s", kv->val.b ? "true" : "false");
    case GGUF_TYPE_STRING:  return snprintf(buf, size, "%s", kv->str);
    default:                return snprintf(buf, size, "%s", "");
    }
}

/* Finds `key` holding `type`; otherwise explains why not. */
static const struct gguf_kv *kv_typed(const struct gguf_reader *r, const char *key, enum gguf_type type) {
    int64_t i = gguf_find_key(r, key);
    if (i < 0) {
        error_set("GGUF key '%s' not found", key ? key : "(null)");
        return NULL;
    }
    const struct gguf_kv *kv = &r->kv[i];
    if (kv->type != type) {
        if (kv->type == GGUF_TYPE_ARRAY) {
            error_set("GGUF key '%s' is an array of %s, not a %s", key, gguf_type_name(kv->arr_type), gguf_type_name(type));
        } else {
            error_set("GGUF key '%s' has type %s, not %s", key, gguf_type_name(kv->type), gguf_type_name(type));
        }
        return NULL;
    }
    return kv;
}

#define GGUF_GETTER(suffix, ctype, gtype, field)                                       \
    bool gguf_get_##suffix(const struct gguf_reader *r, const char *key, ctype *out) { \
        const struct gguf_kv *kv = kv_typed(r, key, gtype);                            \
        if (!kv) return false;                                                         \
        *out = kv->val.field;                                                          \
        return true;                                                                   \
    }

GGUF_GETTER(u8, uint8_t, GGUF_TYPE_UINT8, u8)
GGUF_GETTER(i8, int8_t, GGUF_TYPE_INT8, i8)
GGUF_GETTER(u16, uint16_t, GGUF_TYPE_UINT16, u16)
GGUF_GETTER(i16, int16_t, GGUF_TYPE_INT16, i16)
GGUF_GETTER(u32, uint32_t, GGUF_TYPE_UINT32, u32)
GGUF_GETTER(i32, int32_t, GGUF_TYPE_INT32, i32)
GGUF_GETTER(u64, uint64_t, GGUF_TYPE_UINT64, u64)
GGUF_GETTER(i64, int64_t, GGUF_TYPE_INT64, i64)
GGUF_GETTER(f32, float, GGUF_TYPE_FLOAT32, f32)
GGUF_GETTER(f64, double, GGUF_TYPE_FLOAT64, f64)
GGUF_GETTER(bool, bool, GGUF_TYPE_BOOL, b)

bool gguf_get_str(const struct gguf_reader *r, const char *key, const char **out) {
    const struct gguf_kv *kv = kv_typed(r, key, GGUF_TYPE_STRING);
    if (!kv) return false;
    *out = kv->str;
    return true;
}

/* ---- tensor queries --------------------------------------------------------- */

int64_t gguf_n_tensors(const struct gguf_reader *r) { return r->n_tensors; }

const struct gguf_tensor_info *gguf_tensor(const struct gguf_reader *r, int64_t i) {
    return i >= 0 && i < r->n_tensors ? &r->tensors[i] : NULL;
}

int64_t gguf_find_tensor(const struct gguf_reader *r, const char *name) {
    return name_index_find(&r->tensor_index, name);
}
