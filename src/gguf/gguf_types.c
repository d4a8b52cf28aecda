/* The GGUF metadata value types: names and sizes, shared by reader and writer. */
#include "gguf.h"

static const struct {
    const char *name;
    size_t size;
} g_gguf_types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8]   = { "u8",   1 },
    [GGUF_TYPE_INT8]    = { "i8",   1 },
    [GGUF_TYPE_UINT16]  = { "u16",  2 },
    [GGUF_TYPE_INT16]   = { "i16",  2 },
    [GGUF_TYPE_UINT32]  = { "u32",  4 },
    [GGUF_TYPE_INT32]   = { "i32",  4 },
    [GGUF_TYPE_FLOAT32] = { "f32",  4 },
    [GGUF_TYPE_BOOL]    = { "bool", 1 },
    [GGUF_TYPE_STRING]  = { "str",  0 },
    [GGUF_TYPE_ARRAY]   = { "arr",  0 },
    [GGUF_TYPE_UINT64]  = { "u64",  8 },
    [GGUF_TYPE_INT64]   = { "i64",  8 },
    [GGUF_TYPE_FLOAT64] = { "f64",  8 },
};

const char *gguf_type_name(enum gguf_type type) {
    return (unsigned)type < GGUF_TYPE_COUNT ? g_gguf_types[type].name : "?";
}

size_t gguf_type_size(enum gguf_type type) {
    return (unsigned)type < GGUF_TYPE_COUNT ? g_gguf_types[type].size : 0;
}
