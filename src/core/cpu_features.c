#define _GNU_SOURCE
#include "cpu_features.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void) {
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void detect(struct cpu_features *f) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    f->sse3 = c & (1u << 0);
    f->ssse3 = c & (1u << 9);
    f->fma = c & (1u << 12);
    f->f16c = c & (1u << 29);
    bool osxsave = c & (1u << 27);
    bool avx_hw = c & (1u << 28);
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool os_avx = (xcr0 & 0x6) == 0x6;
    bool os_avx512 = (xcr0 & 0xE6) == 0xE6;
    f->avx = avx_hw && os_avx;
    if (!f->avx) { f->fma = f->f16c = false; }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = f->avx && (b & (1u << 5));
        if (os_avx512) {
            f->avx512f = b & (1u << 16);
            f->avx512dq = b & (1u << 17);
            f->avx512bw = b & (1u << 30);
            f->avx512vl = b & (1u << 31);
            f->avx512vbmi = c & (1u << 1);
            f->gfni = c & (1u << 8); /* used with 512-bit operands only */
            f->avx512vnni = c & (1u << 11);
        }
        /* AMX-TILE and AMX-INT8, with the tile configuration and data states enabled in XCR0 */
        f->amx_int8 = (d & (1u << 24)) && (d & (1u << 25)) && (xcr0 & 0x60000) == 0x60000;
        __cpuid_count(7, 1, a, b, c, d);
        f->avx_vnni = f->avx2 && (a & (1u << 4));
        f->avx512bf16 = os_avx512 && (a & (1u << 5));
    }
}
#else
static void detect(struct cpu_features *f) {
#if defined(__ARM_NEON)
    f->neon = true;
#endif
#if defined(__ARM_FEATURE_FMA)
    f->arm_fma = true;
#endif
#if defined(__ARM_FEATURE_DOTPROD)
    f->arm_dotprod = true;
#endif
}
#endif

static struct cpu_features g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_features(void) {
    detect(&g_features);
    const char *env = getenv("LLAMAC_SIMD");
    if (env && strcmp(env, "scalar") == 0) {
        memset(&g_features, 0, sizeof g_features);
        g_features.force_scalar = true;
        return;
    }
    if (env && strcmp(env, "avx2") == 0) {
        /* as a CPU with AVX2, FMA and F16C but none of the later sets (tests run those kernels anywhere) */
        struct cpu_features *f = &g_features;
        f->avx512f = f->avx512bw = f->avx512vl = f->avx512dq = f->avx512vbmi = f->avx512vnni = false;
        f->avx512bf16 = f->gfni = f->avx_vnni = f->amx_int8 = false;
    }
    const char *matmul = getenv("LLAMAC_MATMUL");
    g_features.fast_matmul = matmul && strcmp(matmul, "fast") == 0;
    const char *amx = getenv("LLAMAC_AMX");
    if (amx && strcmp(amx, "0") == 0) g_features.amx_int8 = false;
}

const struct cpu_features *cpu_features_get(void) {
    pthread_once(&g_once, init_features);
    return &g_features;
}

int cpu_physical_cores(void) {
    /* Count distinct (physical id, core id) pairs in /proc/cpuinfo. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    long logical = sysconf(_SC_NPROCESSORS_ONLN);
    if (logical < 1) logical = 1;
    if (!f) return (int)logical;
    char line[256];
    int phys = -1, n = 0;
    int seen[1024][2];
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
        else if (sscanf(line, "core id : %d", &v) == 1) {
            bool dup = false;
            for (int i = 0; i < n; i++) {
                if (seen[i][0] == phys && seen[i][1] == v) { dup = true; break; }
            }
            if (!dup && n < 1024) { seen[n][0] = phys; seen[n][1] = v; n++; }
        }
    }
    fclose(f);
    return n > 0 ? n : (int)logical;
}

static size_t g_l2_bytes;
static pthread_once_t g_l2_once = PTHREAD_ONCE_INIT;

/* sysconf where the C library knows it, else sysfs ("2048K"), else 1 MiB. */
static void init_l2(void) {
    long v = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    if (v <= 0) {
        FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index2/size", "r");
        char unit = 0;
        if (f) {
            if (fscanf(f, "%ld%c", &v, &unit) < 1) v = -1;
            fclose(f);
        }
        if (v > 0 && (unit == 'K' || unit == 'k')) v *= 1024;
        else if (v > 0 && (unit == 'M' || unit == 'm')) v *= 1024 * 1024;
    }
    g_l2_bytes = v > 0 ? (size_t)v : (size_t)1 << 20;
}

size_t cpu_l2_cache_bytes(void) {
    pthread_once(&g_l2_once, init_l2);
    return g_l2_bytes;
}

static int g_usable_cpus;
static pthread_once_t g_usable_once = PTHREAD_ONCE_INIT;

/* The process's affinity mask (what taskset or a container allows), else
 * the online CPUs. */
static void init_usable_cpus(void) {
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    g_usable_cpus = n < 1 ? 1 : n;
}

int cpu_usable_cpus(void) {
    pthread_once(&g_usable_once, init_usable_cpus);
    return g_usable_cpus;
}
