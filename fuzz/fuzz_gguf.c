/* libFuzzer target: the GGUF reader on arbitrary bytes. A buffer that opens
 * must be safe to query, so every key, value and tensor is walked with every
 * getter. Seeds: fuzz/corpus/gguf/ (tiny files made by the writer, see
 * tests/test_gguf.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "gguf/gguf.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level; (void)text; (void)user_data;
}

static volatile uint64_t g_sink;

static void walk_kv(const struct gguf_reader *r, int64_t i) {
    const char *key = gguf_key(r, i);
    char buf[64];
    g_sink += (uint64_t)gguf_kv_to_str(r, i, buf, sizeof buf) + (uint64_t)gguf_find_key(r, key);
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; float f32; double f64; bool b; const char *s; } v;
    int n_ok = gguf_get_u8(r, key, &v.u8) + gguf_get_i8(r, key, &v.i8) + gguf_get_u16(r, key, &v.u16) +
               gguf_get_i16(r, key, &v.i16) + gguf_get_u32(r, key, &v.u32) + gguf_get_i32(r, key, &v.i32) +
               gguf_get_u64(r, key, &v.u64) + gguf_get_i64(r, key, &v.i64) + gguf_get_f32(r, key, &v.f32) +
               gguf_get_f64(r, key, &v.f64) + gguf_get_bool(r, key, &v.b) + gguf_get_str(r, key, &v.s);
    enum gguf_type type = gguf_kv_type(r, i);
    if (n_ok != (type == GGUF_TYPE_ARRAY ? 0 : 1)) abort();  /* exactly the stored type answers */
    uint64_t len = 0;
    const char *s = gguf_val_str(r, i, &len);
    if (s) g_sink += strlen(s) <= len;
    const uint8_t *scalar = gguf_val_data(r, i);
    for (size_t k = 0; scalar && k < gguf_type_size(type); k++) g_sink += scalar[k];
    if (type != GGUF_TYPE_ARRAY) return;
    enum gguf_type arr_type = gguf_arr_type(r, i);
    uint64_t n = gguf_arr_n(r, i);
    if (arr_type == GGUF_TYPE_STRING) {
        for (uint64_t j = 0; j < n; j++) g_sink += strlen(gguf_arr_str(r, i, j)) <= gguf_arr_str_len(r, i, j);
    } else {
        const uint8_t *p = gguf_arr_data(r, i);
        for (uint64_t k = 0; k < n * gguf_type_size(arr_type); k++) g_sink += p[k];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    log_set_callback(quiet_log, NULL);
    struct gguf_reader *r = gguf_open_buffer(data, size);
    if (!r) {
        if (error_last()[0] == '\0') abort();  /* every failure explains itself */
        return 0;
    }
    g_sink += gguf_version(r) + gguf_alignment(r) + gguf_data_offset(r) + gguf_file_size(r);
    for (int64_t i = 0; i < gguf_n_kv(r); i++) walk_kv(r, i);
    for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(r, i);
        if (gguf_find_tensor(r, t->name) != i) abort();
        const uint8_t *p = t->data;
        for (size_t k = 0; k < t->size; k++) g_sink += p[k];
    }
    gguf_close(r);
    error_clear();
    return 0;
}
