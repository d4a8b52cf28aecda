/*
 * The x86-64 SIMD variants of the row functions (quant_simd.h), compiled with
 * per-function target attributes (no -m flags: the binary runs on any
 * x86-64, type_traits.c picks by CPUID). One source, quant_x86_tmpl.h,
 * instantiated per tier; the tiers differ only in how byte products reach
 * the 32-bit lanes.
 */
#include "quant_simd.h"

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "iq2_tables.h"
#include "quant_impl.h"

#define QX_TARGET "avx2,fma,f16c"
#define QX(name) qx_##name##_avx2
#define QX_DPBUSD 0
#include "quant_x86_tmpl.h"
#undef QX_TARGET
#undef QX
#undef QX_DPBUSD

#define QX_TARGET "avx2,fma,f16c,avxvnni"
#define QX(name) qx_##name##_avxvnni
#define QX_DPBUSD 1
#include "quant_x86_tmpl.h"
#undef QX_TARGET
#undef QX
#undef QX_DPBUSD

#define QX_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define QX(name) qx_##name##_avx512vnni
#define QX_DPBUSD 2
#include "quant_x86_tmpl.h"
#undef QX_TARGET
#undef QX
#undef QX_DPBUSD

bool quant_x86_isa_supported(enum quant_isa isa) {
    const struct cpu_features *f = cpu_features_get();
    const bool avx2 = f->avx2 && f->fma && f->f16c;
    switch (isa) {
        case QUANT_ISA_AVX2: return avx2;
        case QUANT_ISA_AVX_VNNI: return avx2 && f->avx_vnni;
        case QUANT_ISA_AVX512_VNNI: return avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni;
        default: return false;
    }
}

struct quant_kernels quant_x86_isa_kernels(enum quant_isa isa, enum ggml_type type) {
    const struct quant_kernels none = { 0 };
    if ((int)type < 0 || type >= GGML_TYPE_COUNT) return none;
    switch (isa) {
        case QUANT_ISA_AVX2: return qx_table_avx2[type];
        case QUANT_ISA_AVX_VNNI: return qx_table_avxvnni[type];
        case QUANT_ISA_AVX512_VNNI: return qx_table_avx512vnni[type];
        default: return none;
    }
}

#else

bool quant_x86_isa_supported(enum quant_isa isa) {
    (void)isa;
    return false;
}

struct quant_kernels quant_x86_isa_kernels(enum quant_isa isa, enum ggml_type type) {
    (void)isa;
    (void)type;
    return (struct quant_kernels){ 0 };
}

#endif
