/*
 * What the CPU we run on can do, read once from CPUID (x86-64) or fixed at
 * build time (aarch64). Kernels are picked from this at run time, so one
 * binary runs on any x86-64. Setting LLAMAC_SIMD=scalar in the environment
 * disables every SIMD path (tests use it to run the reference kernels);
 * LLAMAC_SIMD=avx2 hides every set after AVX2 + FMA + F16C (AVX-512,
 * AVX-VNNI, GFNI, AMX), so that a machine with them runs the AVX2 kernels.
 * LLAMAC_MATMUL=fast selects the fast matrix-product mode for Q4_0, Q8_0,
 * Q4_K and Q6_K weights (backend/cpu/cpu_packed.h; results within float tolerance of
 * b1892's, not bit for bit); it must be set before the first call, since
 * weights are packed for one mode. LLAMAC_SIMD=scalar overrides it.
 * LLAMAC_AMX=0 keeps the fast mode off Intel's AMX tiles (its AVX-512
 * kernels then take every product).
 */
#ifndef LLAMAC_CORE_CPU_FEATURES_H
#define LLAMAC_CORE_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

struct cpu_features {
    bool sse3, ssse3, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vbmi, avx512vnni, avx512bf16, gfni;
    bool avx_vnni;
    bool amx_int8;      /* AMX tiles with int8 products, enabled by the OS (the process still asks
                         * for their state: cpu_packed_x86.c); cleared by LLAMAC_AMX=0 */
    bool neon, arm_fma, arm_dotprod;
    bool force_scalar;  /* LLAMAC_SIMD=scalar */
    bool fast_matmul;   /* LLAMAC_MATMUL=fast (never with force_scalar) */
};

const struct cpu_features *cpu_features_get(void);

/* Number of physical cores (falls back to logical CPUs when unknown). */
int cpu_physical_cores(void);

/* Logical CPUs this process may run on (read once). More threads than this
 * take turns, so work split up front waits for a descheduled thread. */
int cpu_usable_cpus(void);

/* Bytes of one core's level-2 cache (read once; 1 MiB when unknown). Work is
 * cut into chunks that fit in it. */
size_t cpu_l2_cache_bytes(void);

#endif
