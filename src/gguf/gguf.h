/*
 * GGUF files: a reader over a read-only buffer (usually a file mapping) and a
 * writer.
 *
 * The reader validates the whole header when it opens a file, so a file that
 * opens can be queried without further checks:
 *   - magic "GGUF"; versions 2 and 3 (same layout). Version 1 is refused
 *     ("GGUF version 1 is not supported (too old); re-convert the model"), a
 *     big-endian file (version field that reads byte-swapped) is refused as
 *     such, any other version as unsupported;
 *   - every read stays inside the buffer; counts are capped by what the rest
 *     of the file could hold before anything is allocated for them; sizes and
 *     offsets use overflow-checked arithmetic;
 *   - metadata: known value types, bools 0 or 1, no arrays of arrays, no
 *     duplicate keys, no NUL bytes inside keys; general.alignment, when
 *     present, is a u32 power of two (default 32);
 *   - tensors: unique names without NUL bytes, 0 <= n_dims <= 4 (b1892's
 *     limit), every ne >= 1 with a product that fits int64, a valid element
 *     type, ne[0] a multiple of its block size, data offset a multiple of the
 *     alignment and [offset, offset + size) inside the file's data section.
 * Failures return NULL/false and explain themselves through error_set()
 * (prefixed with the file name for gguf_open_file).
 *
 * Strings handed out by the reader are NUL-terminated copies owned by the
 * reader (GGUF strings are length-prefixed and may contain NUL bytes; the
 * length getters give the real length). Index functions return NULL, 0 or
 * GGUF_TYPE_COUNT for an index out of range. A reader is read-only after
 * open and may be shared between threads.
 */
#ifndef LLAMAC_GGUF_GGUF_H
#define LLAMAC_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

/* "u8", "str", "arr", ... as b1892 names them; "?" for invalid types. */
const char *gguf_type_name(enum gguf_type type);
/* Bytes of one value of a fixed-size type; 0 for strings, arrays and invalid types. */
size_t gguf_type_size(enum gguf_type type);

/* ---- reader ---------------------------------------------------------------- */

struct gguf_reader;

struct gguf_tensor_info {
    const char *name;
    enum ggml_type type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];  /* elements per dimension (>= 1); unused dims are 1 */
    uint64_t offset;            /* relative to the start of the data section */
    size_t size;                /* bytes of data */
    const void *data;           /* points into the reader's buffer */
};

/* Opens a file (mapped when use_mmap, else read into memory). */
struct gguf_reader *gguf_open_file(const char *path, bool use_mmap);
/* Parses a caller-owned buffer that must outlive the reader (fuzzing, tests). */
struct gguf_reader *gguf_open_buffer(const void *data, size_t size);
void gguf_close(struct gguf_reader *r);

uint32_t gguf_version(const struct gguf_reader *r);
size_t gguf_alignment(const struct gguf_reader *r);
size_t gguf_data_offset(const struct gguf_reader *r);   /* file offset of the data section */
const void *gguf_file_data(const struct gguf_reader *r); /* the whole file's bytes */
size_t gguf_file_size(const struct gguf_reader *r);
/* Pins the file's pages in RAM (mapped files); false with a warning if refused. */
bool gguf_lock(struct gguf_reader *r);
/* The same for the pages overlapping [p, p + n) (inside the file's bytes). */
bool gguf_lock_range(struct gguf_reader *r, const void *p, size_t n);
/* Drops the pages of [p, p + n) (inside the file's data) from the process's
 * resident set when the file is mapped and not locked (file_map_release_pages):
 * for tensor data the caller has copied elsewhere. True if released. */
bool gguf_release_pages(const struct gguf_reader *r, const void *p, size_t n);

/* Metadata, in file order. Index functions take 0 <= i < gguf_n_kv(). */
int64_t gguf_n_kv(const struct gguf_reader *r);
int64_t gguf_find_key(const struct gguf_reader *r, const char *key); /* -1 if absent */
const char *gguf_key(const struct gguf_reader *r, int64_t i);
enum gguf_type gguf_kv_type(const struct gguf_reader *r, int64_t i);
/* For arrays: element type and count. */
enum gguf_type gguf_arr_type(const struct gguf_reader *r, int64_t i);
uint64_t gguf_arr_n(const struct gguf_reader *r, int64_t i);
/* Numeric array elements as stored (little-endian, possibly unaligned: memcpy them). */
const void *gguf_arr_data(const struct gguf_reader *r, int64_t i);
/* String array element j (NUL-terminated; length via gguf_arr_str_len). */
const char *gguf_arr_str(const struct gguf_reader *r, int64_t i, uint64_t j);
uint64_t gguf_arr_str_len(const struct gguf_reader *r, int64_t i, uint64_t j);
/* Fixed-size scalar value i (native type, aligned); NULL for strings and arrays. */
const void *gguf_val_data(const struct gguf_reader *r, int64_t i);
/* String value i and its real length (*len may be NULL); NULL if not a string. */
const char *gguf_val_str(const struct gguf_reader *r, int64_t i, uint64_t *len);
/* Scalar value as text, as llama_model_meta_val_str prints it: integers in
 * decimal, floats "%f", bools true/false, strings up to their first NUL;
 * "" for arrays. Returns what snprintf returns (the full length), -1 for a
 * bad index. */
int gguf_kv_to_str(const struct gguf_reader *r, int64_t i, char *buf, size_t size);

/* Typed getters by key. Return false with error_set() when the key is
 * missing or holds another type (no silent reinterpretation). */
bool gguf_get_u8(const struct gguf_reader *r, const char *key, uint8_t *out);
bool gguf_get_i8(const struct gguf_reader *r, const char *key, int8_t *out);
bool gguf_get_u16(const struct gguf_reader *r, const char *key, uint16_t *out);
bool gguf_get_i16(const struct gguf_reader *r, const char *key, int16_t *out);
bool gguf_get_u32(const struct gguf_reader *r, const char *key, uint32_t *out);
bool gguf_get_i32(const struct gguf_reader *r, const char *key, int32_t *out);
bool gguf_get_u64(const struct gguf_reader *r, const char *key, uint64_t *out);
bool gguf_get_i64(const struct gguf_reader *r, const char *key, int64_t *out);
bool gguf_get_f32(const struct gguf_reader *r, const char *key, float *out);
bool gguf_get_f64(const struct gguf_reader *r, const char *key, double *out);
bool gguf_get_bool(const struct gguf_reader *r, const char *key, bool *out);
bool gguf_get_str(const struct gguf_reader *r, const char *key, const char **out);

/* Tensors, in file order. */
int64_t gguf_n_tensors(const struct gguf_reader *r);
const struct gguf_tensor_info *gguf_tensor(const struct gguf_reader *r, int64_t i);
int64_t gguf_find_tensor(const struct gguf_reader *r, const char *name); /* -1 if absent */

/* ---- writer ---------------------------------------------------------------- */
/* Builds a file: metadata and tensor infos are written in the order they are
 * added; tensor data follows in the same order, each tensor at the next
 * multiple of the alignment (general.alignment, default 32), zero-padded.
 * The padding before the data section is written only when there are tensors
 * (as gguf-py does for vocabulary-only files), so
 *     w = gguf_writer_from_reader(r); gguf_add_tensor(w, ...) for every tensor
 *     of r in order; gguf_write_file(w, path)
 * reproduces a file written by b1892 or gguf-py byte for byte.
 * New writers write version 3; gguf_writer_from_reader keeps r's version. */

struct gguf_writer;

struct gguf_writer *gguf_writer_new(void);
/* A writer pre-filled with every key/value of `r` (tensors not included). */
struct gguf_writer *gguf_writer_from_reader(const struct gguf_reader *r);
void gguf_writer_free(struct gguf_writer *w);

/* Setters replace the value of an existing key in place (keeping its
 * position) or append a new key. False (error_set) on a bad argument or
 * allocation failure. */
bool gguf_set_u8(struct gguf_writer *w, const char *key, uint8_t v);
bool gguf_set_i8(struct gguf_writer *w, const char *key, int8_t v);
bool gguf_set_u16(struct gguf_writer *w, const char *key, uint16_t v);
bool gguf_set_i16(struct gguf_writer *w, const char *key, int16_t v);
bool gguf_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
bool gguf_set_i32(struct gguf_writer *w, const char *key, int32_t v);
bool gguf_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
bool gguf_set_i64(struct gguf_writer *w, const char *key, int64_t v);
bool gguf_set_f32(struct gguf_writer *w, const char *key, float v);
bool gguf_set_f64(struct gguf_writer *w, const char *key, double v);
bool gguf_set_bool(struct gguf_writer *w, const char *key, bool v);
bool gguf_set_str(struct gguf_writer *w, const char *key, const char *v);
/* Numeric array: `n` elements of `type` (not string, not array), copied. */
bool gguf_set_arr_data(struct gguf_writer *w, const char *key, enum gguf_type type, const void *data, uint64_t n);
bool gguf_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* False (error_set) when the key is absent. */
bool gguf_remove_key(struct gguf_writer *w, const char *key);

/* Adds a tensor; `data` (size bytes, = row size × rows) is referenced, not
 * copied, and must stay valid until the file is written. Checks the name
 * (unique), n_dims <= 4, ne >= 1, the type, and that ne[0] is a multiple of
 * the type's block size and `size` matches the shape. */
bool gguf_add_tensor(struct gguf_writer *w, const char *name, enum ggml_type type,
                     uint32_t n_dims, const int64_t *ne, const void *data, size_t size);

/* Writes the whole file (every tensor must have data: gguf_add_tensor).
 * On failure the partial file is removed. */
bool gguf_write_file(const struct gguf_writer *w, const char *path);

/* Streaming, for outputs too large to hold in memory (the quantize tool):
 *   1. declare every tensor with gguf_add_tensor_info() (shape and type; the
 *      size follows from them), in the order the data will come;
 *   2. s = gguf_stream_open(w, path) writes the header, the metadata and the
 *      tensor infos with their final offsets;
 *   3. gguf_stream_write(s, bytes, n) appends tensor data in tensor order; a
 *      call may carry part of a tensor but never crosses into the next one;
 *      the padding after each tensor is written when it is complete;
 *   4. gguf_stream_close(s) flushes and closes; it returns false (and
 *      removes the file) if a write failed or not every tensor was written,
 *      so closing early is how a caller abandons the file.
 * `w` must not change while the stream is open. gguf_write_file() is these
 * steps with the data given to gguf_add_tensor(). */
bool gguf_add_tensor_info(struct gguf_writer *w, const char *name, enum ggml_type type,
                          uint32_t n_dims, const int64_t *ne);

struct gguf_stream;

struct gguf_stream *gguf_stream_open(const struct gguf_writer *w, const char *path);
bool gguf_stream_write(struct gguf_stream *s, const void *data, size_t size);
bool gguf_stream_close(struct gguf_stream *s);

#endif
