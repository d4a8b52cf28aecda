/*
 * GGUF writer: metadata values are kept encoded (the exact bytes that follow
 * a key's type field), so writing is concatenation and a writer made from a
 * reader reproduces the file. Tensor data goes out through a stream, which
 * gguf_write_file() also uses, so the big-file path is the tested path.
 */
#define _POSIX_C_SOURCE 200809L  /* strdup */
#include "gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/log.h"
#include "quant/quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF writer assumes a little-endian host"
#endif

#define GGUF_WRITER_VERSION 3
#define GGUF_ALIGNMENT_KEY "general.alignment"

struct writer_kv {
    char *key;
    enum gguf_type type;
    uint8_t *val;      /* encoded value, as in the file after the type field */
    size_t val_size;
};

struct writer_tensor {
    char *name;
    enum ggml_type type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    size_t size;
    const void *data;  /* NULL: declared by gguf_add_tensor_info (streamed) */
};

struct gguf_writer {
    uint32_t version;
    struct writer_kv *kv;
    size_t n_kv, kv_cap;
    struct writer_tensor *tensors;
    size_t n_tensors, tensor_cap;
};

/* ---- a growable byte buffer; an allocation failure sticks until checked ---- */

struct bytes {
    uint8_t *p;
    size_t n, cap;
    bool failed;
};

static void bytes_put(struct bytes *b, const void *src, size_t n) {
    if (b->failed || n == 0) return;
    size_t need;
    if (!ck_add_size(b->n, n, &need)) {
        b->failed = true;
        return;
    }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < need) {
            if (!ck_mul_size(cap, 2, &cap)) {
                b->failed = true;
                return;
            }
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n = need;
}

static void bytes_u32(struct bytes *b, uint32_t v) { bytes_put(b, &v, sizeof v); }
static void bytes_u64(struct bytes *b, uint64_t v) { bytes_put(b, &v, sizeof v); }

static void bytes_str(struct bytes *b, const char *s, uint64_t len) {
    bytes_u64(b, len);
    bytes_put(b, s, (size_t)len);
}

/* ---- writer and metadata --------------------------------------------------- */

struct gguf_writer *gguf_writer_new(void) {
    struct gguf_writer *w = calloc(1, sizeof *w);
    if (!w) {
        error_set("out of memory creating a GGUF writer");
        return NULL;
    }
    w->version = GGUF_WRITER_VERSION;
    return w;
}

void gguf_writer_free(struct gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    free(w->kv);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

static int64_t writer_find_key(const struct gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) return (int64_t)i;
    }
    return -1;
}

/* Appends key = encoded value; takes the value's buffer in every case. */
static bool writer_append(struct gguf_writer *w, const char *key, enum gguf_type type, struct bytes *val) {
    char *key_copy = NULL;
    if (!val->failed && w->n_kv == w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap * 2 : 32;
        struct writer_kv *kv = realloc(w->kv, cap * sizeof *kv);
        if (kv) {
            w->kv = kv;
            w->kv_cap = cap;
        }
    }
    if (val->failed || w->n_kv == w->kv_cap || !(key_copy = strdup(key))) {
        free(val->p);
        error_set("out of memory setting GGUF key '%s'", key);
        return false;
    }
    w->kv[w->n_kv++] = (struct writer_kv){ .key = key_copy, .type = type, .val = val->p, .val_size = val->n };
    return true;
}

/* Sets key = encoded value, replacing an existing value in place. */
static bool writer_set(struct gguf_writer *w, const char *key, enum gguf_type type, struct bytes *val) {
    if (!key) {
        free(val->p);
        error_set("GGUF key is NULL");
        return false;
    }
    int64_t i = writer_find_key(w, key);
    if (i < 0) return writer_append(w, key, type, val);
    if (val->failed) {
        free(val->p);
        error_set("out of memory setting GGUF key '%s'", key);
        return false;
    }
    free(w->kv[i].val);
    w->kv[i].type = type;
    w->kv[i].val = val->p;
    w->kv[i].val_size = val->n;
    return true;
}

#define GGUF_SETTER(suffix, ctype, gtype)                                        \
    bool gguf_set_##suffix(struct gguf_writer *w, const char *key, ctype v) {    \
        struct bytes b = { 0 };                                                  \
        bytes_put(&b, &v, sizeof v);                                             \
        return writer_set(w, key, gtype, &b);                                    \
    }

GGUF_SETTER(u8, uint8_t, GGUF_TYPE_UINT8)
GGUF_SETTER(i8, int8_t, GGUF_TYPE_INT8)
GGUF_SETTER(u16, uint16_t, GGUF_TYPE_UINT16)
GGUF_SETTER(i16, int16_t, GGUF_TYPE_INT16)
GGUF_SETTER(u32, uint32_t, GGUF_TYPE_UINT32)
GGUF_SETTER(i32, int32_t, GGUF_TYPE_INT32)
GGUF_SETTER(u64, uint64_t, GGUF_TYPE_UINT64)
GGUF_SETTER(i64, int64_t, GGUF_TYPE_INT64)
GGUF_SETTER(f32, float, GGUF_TYPE_FLOAT32)
GGUF_SETTER(f64, double, GGUF_TYPE_FLOAT64)

bool gguf_set_bool(struct gguf_writer *w, const char *key, bool v) {
    struct bytes b = { 0 };
    uint8_t byte = v ? 1 : 0;
    bytes_put(&b, &byte, 1);
    return writer_set(w, key, GGUF_TYPE_BOOL, &b);
}

bool gguf_set_str(struct gguf_writer *w, const char *key, const char *v) {
    if (!v) {
        error_set("GGUF string value for key '%s' is NULL", key ? key : "(null)");
        return false;
    }
    struct bytes b = { 0 };
    bytes_str(&b, v, strlen(v));
    return writer_set(w, key, GGUF_TYPE_STRING, &b);
}

static bool encode_arr_data(struct bytes *b, const char *key, enum gguf_type type, const void *data, uint64_t n) {
    size_t elem = gguf_type_size(type), total;
    if (elem == 0) {
        error_set("GGUF array '%s': element type %s is not a fixed-size type", key ? key : "(null)", gguf_type_name(type));
        return false;
    }
    if (n > SIZE_MAX || !ck_mul_size((size_t)n, elem, &total) || (total && !data)) {
        error_set("GGUF array '%s': bad data (%" PRIu64 " elements)", key ? key : "(null)", n);
        return false;
    }
    if (type == GGUF_TYPE_BOOL) {
        for (size_t j = 0; j < total; j++) {
            if (((const uint8_t *)data)[j] > 1) {
                error_set("GGUF array '%s': bool element %zu is not 0 or 1", key ? key : "(null)", j);
                return false;
            }
        }
    }
    bytes_u32(b, (uint32_t)type);
    bytes_u64(b, n);
    bytes_put(b, data, total);
    return true;
}

bool gguf_set_arr_data(struct gguf_writer *w, const char *key, enum gguf_type type, const void *data, uint64_t n) {
    struct bytes b = { 0 };
    if (!encode_arr_data(&b, key, type, data, n)) {
        free(b.p);
        return false;
    }
    return writer_set(w, key, GGUF_TYPE_ARRAY, &b);
}

bool gguf_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    struct bytes b = { 0 };
    bytes_u32(&b, GGUF_TYPE_STRING);
    bytes_u64(&b, n);
    for (uint64_t j = 0; j < n; j++) {
        if (!strs || !strs[j]) {
            free(b.p);
            error_set("GGUF string array '%s': element %" PRIu64 " is NULL", key ? key : "(null)", j);
            return false;
        }
        bytes_str(&b, strs[j], strlen(strs[j]));
    }
    return writer_set(w, key, GGUF_TYPE_ARRAY, &b);
}

bool gguf_remove_key(struct gguf_writer *w, const char *key) {
    int64_t i = key ? writer_find_key(w, key) : -1;
    if (i < 0) {
        error_set("GGUF key '%s' not found", key ? key : "(null)");
        return false;
    }
    free(w->kv[i].key);
    free(w->kv[i].val);
    memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - (size_t)i - 1) * sizeof *w->kv);
    w->n_kv--;
    return true;
}

/* Encodes value i of r exactly as the file holds it (strings keep their real length). */
static bool encode_reader_value(struct bytes *b, const struct gguf_reader *r, int64_t i) {
    enum gguf_type type = gguf_kv_type(r, i);
    if (type == GGUF_TYPE_STRING) {
        uint64_t len;
        const char *s = gguf_val_str(r, i, &len);
        bytes_str(b, s, len);
    } else if (type != GGUF_TYPE_ARRAY) {
        bytes_put(b, gguf_val_data(r, i), gguf_type_size(type));
    } else if (gguf_arr_type(r, i) != GGUF_TYPE_STRING) {
        return encode_arr_data(b, gguf_key(r, i), gguf_arr_type(r, i), gguf_arr_data(r, i), gguf_arr_n(r, i));
    } else {
        uint64_t n = gguf_arr_n(r, i);
        bytes_u32(b, GGUF_TYPE_STRING);
        bytes_u64(b, n);
        for (uint64_t j = 0; j < n; j++) bytes_str(b, gguf_arr_str(r, i, j), gguf_arr_str_len(r, i, j));
    }
    return true;
}

struct gguf_writer *gguf_writer_from_reader(const struct gguf_reader *r) {
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return NULL;
    w->version = gguf_version(r);
    for (int64_t i = 0; i < gguf_n_kv(r); i++) {
        struct bytes b = { 0 };
        /* the reader guarantees unique keys, so append without searching */
        if (!encode_reader_value(&b, r, i) || !writer_append(w, gguf_key(r, i), gguf_kv_type(r, i), &b)) {
            gguf_writer_free(w);
            return NULL;
        }
    }
    return w;
}

/* ---- tensors --------------------------------------------------------------- */

static bool writer_push_tensor(struct gguf_writer *w, const char *name, enum ggml_type type, uint32_t n_dims,
                               const int64_t *ne, const void *data, const size_t *size) {
    if (!name) {
        error_set("GGUF tensor name is NULL");
        return false;
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (strcmp(w->tensors[i].name, name) == 0) {
            error_set("GGUF tensor '%s' added twice", name);
            return false;
        }
    }
    if (n_dims > GGUF_MAX_DIMS || (n_dims > 0 && !ne)) {
        error_set("GGUF tensor '%s': %" PRIu32 " dimensions (at most %d)", name, n_dims, GGUF_MAX_DIMS);
        return false;
    }
    struct writer_tensor t = { .type = type, .n_dims = n_dims, .data = data };
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 1) {
            error_set("GGUF tensor '%s': dimension %" PRIu32 " has %" PRId64 " elements", name, d, t.ne[d]);
            return false;
        }
    }
    if (!type_is_valid((int)type)) {
        error_set("GGUF tensor '%s': invalid element type %d", name, (int)type);
        return false;
    }
    if (!type_row_size(type, t.ne[0], &t.size) || !ck_mul_size(t.size, (size_t)t.ne[1], &t.size) ||
        !ck_mul_size(t.size, (size_t)t.ne[2], &t.size) || !ck_mul_size(t.size, (size_t)t.ne[3], &t.size)) {
        error_set("GGUF tensor '%s': row length %" PRId64 " is not a multiple of the %s block size, or the size overflows",
                  name, t.ne[0], type_name(type));
        return false;
    }
    if (size && (*size != t.size || !data)) {
        error_set("GGUF tensor '%s': %zu bytes of data given, its shape and type need %zu", name, *size, t.size);
        return false;
    }
    if (w->n_tensors == w->tensor_cap) {
        size_t cap = w->tensor_cap ? w->tensor_cap * 2 : 64;
        struct writer_tensor *ts = realloc(w->tensors, cap * sizeof *ts);
        if (!ts) {
            error_set("out of memory adding GGUF tensor '%s'", name);
            return false;
        }
        w->tensors = ts;
        w->tensor_cap = cap;
    }
    if (!(t.name = strdup(name))) {
        error_set("out of memory adding GGUF tensor '%s'", name);
        return false;
    }
    w->tensors[w->n_tensors++] = t;
    return true;
}

bool gguf_add_tensor(struct gguf_writer *w, const char *name, enum ggml_type type,
                     uint32_t n_dims, const int64_t *ne, const void *data, size_t size) {
    return writer_push_tensor(w, name, type, n_dims, ne, data, &size);
}

bool gguf_add_tensor_info(struct gguf_writer *w, const char *name, enum ggml_type type,
                          uint32_t n_dims, const int64_t *ne) {
    return writer_push_tensor(w, name, type, n_dims, ne, NULL, NULL);
}

/* ---- writing ----------------------------------------------------------------- */

static bool writer_alignment(const struct gguf_writer *w, size_t *out) {
    *out = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = writer_find_key(w, GGUF_ALIGNMENT_KEY);
    if (i < 0) return true;
    uint32_t v = 0;
    if (w->kv[i].type == GGUF_TYPE_UINT32) memcpy(&v, w->kv[i].val, sizeof v);
    if (!is_pow2(v)) {
        error_set("%s must be a u32 power of two", GGUF_ALIGNMENT_KEY);
        return false;
    }
    *out = v;
    return true;
}

/* Everything before the tensor data: header, metadata, tensor infos, padding. */
static bool writer_encode_header(const struct gguf_writer *w, size_t alignment, struct bytes *b) {
    bytes_put(b, GGUF_MAGIC, 4);
    bytes_u32(b, w->version);
    bytes_u64(b, w->n_tensors);
    bytes_u64(b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        bytes_str(b, w->kv[i].key, strlen(w->kv[i].key));
        bytes_u32(b, (uint32_t)w->kv[i].type);
        bytes_put(b, w->kv[i].val, w->kv[i].val_size);
    }
    size_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct writer_tensor *t = &w->tensors[i];
        bytes_str(b, t->name, strlen(t->name));
        bytes_u32(b, t->n_dims);
        bytes_put(b, t->ne, t->n_dims * sizeof t->ne[0]);
        bytes_u32(b, (uint32_t)t->type);
        bytes_u64(b, offset);
        if (!ck_add_size(offset, t->size, &offset) || !ck_align_up(offset, alignment, &offset)) {
            error_set("GGUF data section too large");
            return false;
        }
    }
    if (w->n_tensors > 0) {
        static const uint8_t zeros[64];
        size_t padded;
        if (!ck_align_up(b->n, alignment, &padded)) b->failed = true;
        while (!b->failed && b->n < padded) {
            size_t n = padded - b->n < sizeof zeros ? padded - b->n : sizeof zeros;
            bytes_put(b, zeros, n);
        }
    }
    if (b->failed) {
        error_set("out of memory encoding a GGUF header");
        return false;
    }
    return true;
}

struct gguf_stream {
    FILE *f;
    char *path;
    size_t alignment;
    size_t n_tensors;
    size_t *sizes;       /* bytes of each tensor, in order */
    size_t cur;          /* tensor being written */
    size_t cur_written;  /* bytes of it written so far */
    bool failed;
};

static void stream_free(struct gguf_stream *s, bool remove_file) {
    if (s->f) fclose(s->f);
    if (remove_file && s->path) remove(s->path);
    free(s->path);
    free(s->sizes);
    free(s);
}

static bool stream_put(struct gguf_stream *s, const void *data, size_t n) {
    if (n && fwrite(data, 1, n, s->f) != n) {
        s->failed = true;
        error_set("cannot write '%s'", s->path);
        return false;
    }
    return true;
}

static bool stream_pad(struct gguf_stream *s, size_t size) {
    static const uint8_t zeros[4096];
    size_t padded;
    if (!ck_align_up(size, s->alignment, &padded)) {
        s->failed = true;
        error_set("'%s': tensor padding overflows", s->path);
        return false;
    }
    for (size_t left = padded - size; left > 0;) {
        size_t n = left < sizeof zeros ? left : sizeof zeros;
        if (!stream_put(s, zeros, n)) return false;
        left -= n;
    }
    return true;
}

struct gguf_stream *gguf_stream_open(const struct gguf_writer *w, const char *path) {
    if (!path) {
        error_set("no output file name given");
        return NULL;
    }
    struct gguf_stream *s = calloc(1, sizeof *s);
    struct bytes header = { 0 };
    if (!s || !(s->path = strdup(path)) ||
        !(s->sizes = malloc((w->n_tensors ? w->n_tensors : 1) * sizeof *s->sizes))) {
        error_set("out of memory writing '%s'", path);
        if (s) stream_free(s, false);
        return NULL;
    }
    s->n_tensors = w->n_tensors;
    for (size_t i = 0; i < w->n_tensors; i++) s->sizes[i] = w->tensors[i].size;
    if (!writer_alignment(w, &s->alignment) || !writer_encode_header(w, s->alignment, &header)) {
        free(header.p);
        stream_free(s, false);
        return NULL;
    }
    s->f = fopen(path, "wb");
    if (!s->f) {
        error_set("cannot create '%s'", path);
        free(header.p);
        stream_free(s, false);
        return NULL;
    }
    bool ok = stream_put(s, header.p, header.n);
    free(header.p);
    if (!ok) {
        stream_free(s, true);
        return NULL;
    }
    return s;
}

bool gguf_stream_write(struct gguf_stream *s, const void *data, size_t size) {
    if (s->failed) {
        error_set("'%s': an earlier write failed", s->path);
        return false;
    }
    if (s->cur >= s->n_tensors) {
        error_set("'%s': every tensor has already been written", s->path);
        return false;
    }
    size_t left = s->sizes[s->cur] - s->cur_written;
    if (size > left || (size && !data)) {
        error_set("'%s': %zu bytes given for tensor %zu, which needs %zu more", s->path, size, s->cur, left);
        return false;
    }
    if (!stream_put(s, data, size)) return false;
    s->cur_written += size;
    if (s->cur_written == s->sizes[s->cur]) {
        if (!stream_pad(s, s->sizes[s->cur])) return false;
        s->cur++;
        s->cur_written = 0;
    }
    return true;
}

bool gguf_stream_close(struct gguf_stream *s) {
    if (!s) return false;
    bool ok = !s->failed;
    if (ok && s->cur < s->n_tensors) {
        error_set("'%s': closed after %zu of %zu tensors; the file was removed", s->path, s->cur, s->n_tensors);
        ok = false;
    }
    if (fclose(s->f) != 0 && ok) {
        error_set("cannot write '%s'", s->path);
        ok = false;
    }
    s->f = NULL;
    stream_free(s, !ok);
    return ok;
}

bool gguf_write_file(const struct gguf_writer *w, const char *path) {
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (!w->tensors[i].data) {
            error_set("GGUF tensor '%s' has no data (declared with gguf_add_tensor_info: use gguf_stream_write)",
                      w->tensors[i].name);
            return false;
        }
    }
    struct gguf_stream *s = gguf_stream_open(w, path);
    if (!s) return false;
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (!gguf_stream_write(s, w->tensors[i].data, w->tensors[i].size)) break;
    }
    return gguf_stream_close(s);
}
