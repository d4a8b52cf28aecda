/* `llamac info FILE`: a GGUF file's header, metadata and tensor table. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#define INFO_ARRAY_ITEMS 8   /* array elements shown */
#define INFO_STRING_CHARS 120 /* bytes of a string shown before "..." */

/* Errors reach the user once, as the command's one-line failure. */
static void info_log_sink(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static void print_escaped(const char *s, uint64_t len) {
    uint64_t shown = len < INFO_STRING_CHARS ? len : INFO_STRING_CHARS;
    for (uint64_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    if (shown < len) printf("...(%" PRIu64 " bytes)", len);
}

static void print_number(enum gguf_type type, const void *p) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; float f32; double f64; } v;
    memcpy(&v, p, gguf_type_size(type));  /* array data may be unaligned */
    switch (type) {
    case GGUF_TYPE_UINT8:   printf("%" PRIu8, v.u8); break;
    case GGUF_TYPE_INT8:    printf("%" PRId8, v.i8); break;
    case GGUF_TYPE_UINT16:  printf("%" PRIu16, v.u16); break;
    case GGUF_TYPE_INT16:   printf("%" PRId16, v.i16); break;
    case GGUF_TYPE_UINT32:  printf("%" PRIu32, v.u32); break;
    case GGUF_TYPE_INT32:   printf("%" PRId32, v.i32); break;
    case GGUF_TYPE_UINT64:  printf("%" PRIu64, v.u64); break;
    case GGUF_TYPE_INT64:   printf("%" PRId64, v.i64); break;
    case GGUF_TYPE_FLOAT32: printf("%g", (double)v.f32); break;
    case GGUF_TYPE_FLOAT64: printf("%g", v.f64); break;
    case GGUF_TYPE_BOOL:    fputs(v.u8 ? "true" : "false", stdout); break;
    default: break;
    }
}

static void print_array(const struct gguf_reader *r, int64_t i) {
    enum gguf_type type = gguf_arr_type(r, i);
    uint64_t n = gguf_arr_n(r, i);
    const uint8_t *data = gguf_arr_data(r, i);
    printf("arr[%s] %" PRIu64 " [", gguf_type_name(type), n);
    for (uint64_t j = 0; j < n && j < INFO_ARRAY_ITEMS; j++) {
        if (j) fputs(", ", stdout);
        if (type == GGUF_TYPE_STRING) {
            putchar('"');
            print_escaped(gguf_arr_str(r, i, j), gguf_arr_str_len(r, i, j));
            putchar('"');
        } else {
            print_number(type, data + j * gguf_type_size(type));
        }
    }
    fputs(n > INFO_ARRAY_ITEMS ? ", ...]" : "]", stdout);
}

static void print_metadata(const struct gguf_reader *r) {
    printf("metadata:    %" PRId64 " keys\n", gguf_n_kv(r));
    for (int64_t i = 0; i < gguf_n_kv(r); i++) {
        enum gguf_type type = gguf_kv_type(r, i);
        printf("  %-44s ", gguf_key(r, i));
        if (type == GGUF_TYPE_ARRAY) {
            print_array(r, i);
        } else if (type == GGUF_TYPE_STRING) {
            uint64_t len;
            const char *s = gguf_val_str(r, i, &len);
            printf("%-4s \"", gguf_type_name(type));
            print_escaped(s, len);
            putchar('"');
        } else {
            char buf[64];
            gguf_kv_to_str(r, i, buf, sizeof buf);
            printf("%-4s %s", gguf_type_name(type), buf);
        }
        putchar('\n');
    }
}

static void print_tensors(const struct gguf_reader *r) {
    printf("tensors:     %" PRId64 "\n", gguf_n_tensors(r));
    printf("  %5s  %-32s %-8s %-28s %12s %12s\n", "#", "name", "type", "shape", "offset", "bytes");
    uint64_t n_elements = 0, n_bytes = 0;
    for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(r, i);
        char shape[128];
        size_t k = (size_t)snprintf(shape, sizeof shape, "[");
        int64_t elements = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? ", " : "", t->ne[d]);
        }
        snprintf(shape + k, sizeof shape - k, "]");
        for (int d = 0; d < GGUF_MAX_DIMS; d++) elements *= t->ne[d];  /* the reader checked the product */
        printf("  %5" PRId64 "  %-32s %-8s %-28s %12" PRIu64 " %12zu\n", i, t->name, type_name(t->type), shape,
               t->offset, t->size);
        n_elements += (uint64_t)elements;
        n_bytes += t->size;
    }
    printf("total:       %" PRId64 " tensors, %" PRIu64 " elements, %" PRIu64 " bytes of tensor data\n",
           gguf_n_tensors(r), n_elements, n_bytes);
}

int cmd_info(int argc, char **argv) {
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: llamac info FILE\n\n"
               "Prints a GGUF file's version, alignment, every metadata key (type and value;\n"
               "arrays: element type, count and the first %d elements) and the tensor table\n"
               "(name, type, shape, offset in the data section, bytes).\n", INFO_ARRAY_ITEMS);
        return 0;
    }
    if (argc != 2) return cli_fail("info", "expected one file name (usage: llamac info FILE)");
    log_set_callback(info_log_sink, NULL);
    struct gguf_reader *r = gguf_open_file(argv[1], true);
    log_set_callback(NULL, NULL);
    if (!r) return cli_fail("info", "%s", error_last());
    printf("file:        %s\n", argv[1]);
    printf("version:     %" PRIu32 "\n", gguf_version(r));
    printf("size:        %zu bytes\n", gguf_file_size(r));
    printf("alignment:   %zu\n", gguf_alignment(r));
    printf("data offset: %zu\n", gguf_data_offset(r));
    print_metadata(r);
    print_tensors(r);
    gguf_close(r);
    return 0;
}
