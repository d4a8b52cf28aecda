/*
 * probe_peak: peak arithmetic throughput of the SIMD instructions our
 * kernels are built from, on one thread and on N threads at once.
 *
 *   fp32 FMA   vfmadd231ps (AVX-512 zmm, AVX2+FMA ymm)       GFLOP/s
 *   bf16 dot   vdpbf16ps   (AVX512_BF16 zmm)                 GFLOP/s
 *   int8 dot   vpdpbusd    (AVX512_VNNI zmm, AVX-VNNI ymm),
 *              vpmaddubsw+vpmaddwd+vpaddd (AVX2 ymm)         GOP/s
 *
 * A multiply-add counts as 2 operations: one zmm vfmadd231ps is 32 flops,
 * one zmm vdpbf16ps 64, one zmm vpdpbusd 128. Every kernel keeps enough
 * independent accumulator chains in flight to cover the instruction's
 * latency on every port that can run it, so the figure is the throughput
 * limit, not the latency limit. Operands stay in registers: no memory
 * traffic. These are the denominators of the prompt-processing targets.
 *
 * Instructions are chosen at run time (cpu_features_get()); kernels the CPU
 * lacks are listed as unsupported, so the binary runs on any x86-64.
 *
 *   probe_peak [-t THREADS] [-r REPS] [--ms MILLISECONDS] [--json]
 */
#include "probe_util.h"

#include <stdint.h>

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* A kernel runs `iters` (>= 1) iterations of a fixed unrolled body. */
typedef void (*peak_kernel_fn)(uint64_t iters);

#if defined(__x86_64__)

/*
 * Each kernel is one asm block with the registers spelled out: compilers
 * shuffle arrays of vector accumulators through extra moves and even the
 * stack, which would measure their register allocation, not the unit.
 * The zmm kernels run 16 chains (covering latency 4-6 at two instructions
 * per cycle), the ymm kernels 12 (there are only 16 ymm registers).
 */
#define PEAK_R16(m) m(0) m(1) m(2) m(3) m(4) m(5) m(6) m(7) m(8) m(9) m(10) m(11) m(12) m(13) m(14) m(15)
#define PEAK_R12(m) m(0) m(1) m(2) m(3) m(4) m(5) m(6) m(7) m(8) m(9) m(10) m(11)
#define PEAK_CLOBBER_LOW "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", \
    "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"

#define PEAK_ZERO_Z(k) "vpxord %%zmm" #k ", %%zmm" #k ", %%zmm" #k "\n\t"
#define PEAK_ZERO_Y(k) "vpxor %%ymm" #k ", %%ymm" #k ", %%ymm" #k "\n\t"

#define PEAK_FMA_Z(k) "vfmadd231ps %%zmm17, %%zmm16, %%zmm" #k "\n\t"
__attribute__((target("avx512f")))
static void peak_fp32_fma_avx512(uint64_t iters) {
    const float a = 0.5f, b = 1.0f; /* acc -> 0.5 acc + 1 stays near 2: no denormals */
    __asm__ volatile(
        "vbroadcastss %[a], %%zmm16\n\t"
        "vbroadcastss %[b], %%zmm17\n\t"
        PEAK_R16(PEAK_ZERO_Z)
        "1:\n\t"
        PEAK_R16(PEAK_FMA_Z)
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : [n] "+r"(iters)
        : [a] "m"(a), [b] "m"(b)
        : PEAK_CLOBBER_LOW, "xmm16", "xmm17", "cc");
}

#define PEAK_FMA_Y(k) "vfmadd231ps %%ymm13, %%ymm12, %%ymm" #k "\n\t"
__attribute__((target("avx2,fma")))
static void peak_fp32_fma_avx2(uint64_t iters) {
    const float a = 0.5f, b = 1.0f;
    __asm__ volatile(
        "vbroadcastss %[a], %%ymm12\n\t"
        "vbroadcastss %[b], %%ymm13\n\t"
        PEAK_R12(PEAK_ZERO_Y)
        "1:\n\t"
        PEAK_R12(PEAK_FMA_Y)
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : [n] "+r"(iters)
        : [a] "m"(a), [b] "m"(b)
        : PEAK_CLOBBER_LOW, "cc");
}

#define PEAK_BF16_Z(k) "vdpbf16ps %%zmm17, %%zmm16, %%zmm" #k "\n\t"
__attribute__((target("avx512f,avx512bf16")))
static void peak_bf16_dot_avx512(uint64_t iters) {
    const uint32_t halves = 0x3F003F00u; /* two bf16 0.5 */
    __asm__ volatile(
        "vpbroadcastd %[h], %%zmm16\n\t"
        "vpbroadcastd %[h], %%zmm17\n\t"
        PEAK_R16(PEAK_ZERO_Z)
        "1:\n\t"
        PEAK_R16(PEAK_BF16_Z)
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : [n] "+r"(iters)
        : [h] "m"(halves)
        : PEAK_CLOBBER_LOW, "xmm16", "xmm17", "cc");
}

#define PEAK_VNNI_Z(k) "vpdpbusd %%zmm17, %%zmm16, %%zmm" #k "\n\t"
__attribute__((target("avx512f,avx512vnni")))
static void peak_int8_dot_avx512vnni(uint64_t iters) {
    const uint32_t u8s = 0x03030303u, s8s = 0xFBFBFBFBu; /* 3 and -5 */
    __asm__ volatile(
        "vpbroadcastd %[u], %%zmm16\n\t"
        "vpbroadcastd %[s], %%zmm17\n\t"
        PEAK_R16(PEAK_ZERO_Z)
        "1:\n\t"
        PEAK_R16(PEAK_VNNI_Z)
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : [n] "+r"(iters)
        : [u] "m"(u8s), [s] "m"(s8s)
        : PEAK_CLOBBER_LOW, "xmm16", "xmm17", "cc");
}

/* {vex}: the AVX-VNNI encoding, which runs on CPUs without AVX512_VNNI. */
#define PEAK_VNNI_Y(k) "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm" #k "\n\t"
__attribute__((target("avx2,avxvnni")))
static void peak_int8_dot_avxvnni(uint64_t iters) {
    const uint32_t u8s = 0x03030303u, s8s = 0xFBFBFBFBu;
    __asm__ volatile(
        "vpbroadcastd %[u], %%ymm12\n\t"
        "vpbroadcastd %[s], %%ymm13\n\t"
        PEAK_R12(PEAK_ZERO_Y)
        "1:\n\t"
        PEAK_R12(PEAK_VNNI_Y)
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : [n] "+r"(iters)
        : [u] "m"(u8s), [s] "m"(s8s)
        : PEAK_CLOBBER_LOW, "cc");
}

/* Without VNNI an int8 dot takes three instructions: u8 x s8 products summed
 * in pairs to i16, i16 pairs summed to i32, added to the accumulator. Six
 * chains (x in ymm0-5, accumulators in ymm6-11) run through vpmaddubsw, whose
 * input is the previous step's output, so nothing is loop-invariant. */
#define PEAK_AVX2_INT8(x, acc)                                  \
    "vpmaddubsw %%ymm14, %%ymm" #x ", %%ymm" #x "\n\t"           \
    "vpmaddwd %%ymm15, %%ymm" #x ", %%ymm12\n\t"                 \
    "vpaddd %%ymm12, %%ymm" #acc ", %%ymm" #acc "\n\t"
__attribute__((target("avx2")))
static void peak_int8_dot_avx2(uint64_t iters) {
    const uint32_t ones8 = 0x01010101u, ones16 = 0x00010001u;
    __asm__ volatile(
        "vpbroadcastd %[o8], %%ymm14\n\t"
        "vpbroadcastd %[o16], %%ymm15\n\t"
        PEAK_R12(PEAK_ZERO_Y)
        "1:\n\t"
        PEAK_AVX2_INT8(0, 6) PEAK_AVX2_INT8(1, 7) PEAK_AVX2_INT8(2, 8)
        PEAK_AVX2_INT8(3, 9) PEAK_AVX2_INT8(4, 10) PEAK_AVX2_INT8(5, 11)
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : [n] "+r"(iters)
        : [o8] "m"(ones8), [o16] "m"(ones16)
        : PEAK_CLOBBER_LOW, "cc");
}

#endif /* __x86_64__ */

enum peak_class { PEAK_FP32_FMA, PEAK_BF16_DOT, PEAK_INT8_DOT, PEAK_CLASS_COUNT };
static const char *const peak_class_names[PEAK_CLASS_COUNT] = { "fp32_fma", "bf16_dot", "int8_dot" };

struct peak_kernel {
    const char *name;        /* JSON key */
    const char *label;       /* what the human-readable table shows */
    enum peak_class cls;
    double ops_per_iter;     /* multiply-add = 2 ops */
    peak_kernel_fn run;      /* NULL where not compiled (non-x86) */
    bool (*supported)(const struct cpu_features *f);
};

static bool has_avx512f(const struct cpu_features *f) { return f->avx512f; }
static bool has_avx2_fma(const struct cpu_features *f) { return f->avx2 && f->fma; }
static bool has_avx512bf16(const struct cpu_features *f) { return f->avx512f && f->avx512bf16; }
static bool has_avx512vnni(const struct cpu_features *f) { return f->avx512f && f->avx512vnni; }
static bool has_avxvnni(const struct cpu_features *f) { return f->avx2 && f->avx_vnni; }
static bool has_avx2(const struct cpu_features *f) { return f->avx2; }

#if defined(__x86_64__)
#define PEAK_FN(f) f
#else
#define PEAK_FN(f) NULL
#endif

static const struct peak_kernel peak_kernels[] = {
    { "fp32_fma_avx512", "fp32 FMA    AVX-512  vfmadd231ps zmm", PEAK_FP32_FMA, 16 * 32.0,
      PEAK_FN(peak_fp32_fma_avx512), has_avx512f },
    { "fp32_fma_avx2", "fp32 FMA    AVX2     vfmadd231ps ymm", PEAK_FP32_FMA, 12 * 16.0,
      PEAK_FN(peak_fp32_fma_avx2), has_avx2_fma },
    { "bf16_dot_avx512bf16", "bf16 dot    AVX512   vdpbf16ps zmm", PEAK_BF16_DOT, 16 * 64.0,
      PEAK_FN(peak_bf16_dot_avx512), has_avx512bf16 },
    { "int8_dot_avx512vnni", "int8 dot    AVX512   vpdpbusd zmm", PEAK_INT8_DOT, 16 * 128.0,
      PEAK_FN(peak_int8_dot_avx512vnni), has_avx512vnni },
    { "int8_dot_avxvnni", "int8 dot    AVX-VNNI vpdpbusd ymm", PEAK_INT8_DOT, 12 * 64.0,
      PEAK_FN(peak_int8_dot_avxvnni), has_avxvnni },
    { "int8_dot_avx2", "int8 dot    AVX2     maddubs+madd ymm", PEAK_INT8_DOT, 6 * 64.0,
      PEAK_FN(peak_int8_dot_avx2), has_avx2 },
};
#define PEAK_KERNEL_COUNT (sizeof peak_kernels / sizeof peak_kernels[0])

struct peak_job {
    peak_kernel_fn run;
    uint64_t iters;
};

static void peak_work(void *arg, int i, int n) {
    const struct peak_job *job = arg;
    job->run(job->iters);
}

/* Best of `reps` runs of `iters` iterations on n threads, in ops per second. */
static double peak_measure(peak_kernel_fn run, uint64_t iters, double ops_per_iter, int n, int reps) {
    struct peak_job job = { run, iters };
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = probe_team_run(n, peak_work, &job);
        if (t < best) best = t;
    }
    return ops_per_iter * (double)iters * n / best;
}

/* Iterations for about `ms` milliseconds on one thread (doubling, then scaled). */
static uint64_t peak_calibrate(peak_kernel_fn run, double ms) {
    uint64_t iters = 1 << 12;
    for (;;) {
        double t0 = probe_now_s();
        run(iters);
        double t = probe_now_s() - t0;
        if (t >= 0.02 || iters >= ((uint64_t)1 << 40)) return (uint64_t)((double)iters * (ms / 1000.0) / (t > 0 ? t : 1e-9)) + 1;
        iters *= 2;
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: probe_peak [-t THREADS] [-r REPS] [--ms MILLISECONDS] [--json]\n"
            "  -t    threads for the parallel figure (default: physical cores)\n"
            "  -r    repetitions per figure; the best is reported (default 3)\n"
            "  --ms  length of one repetition (default 100)\n"
            "  --json  one JSON object instead of the table\n");
}

int main(int argc, char **argv) {
    int n_threads = cpu_physical_cores();
    int reps = 3;
    double ms = 100;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) n_threads = (int)probe_parse_count(argv[0], "-t", argv[++i], 1024);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) reps = (int)probe_parse_count(argv[0], "-r", argv[++i], 1000);
        else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) ms = (double)probe_parse_count(argv[0], "--ms", argv[++i], 60000);
        else if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }

    const struct cpu_features *cpu = cpu_features_get();
    double single[PEAK_KERNEL_COUNT] = { 0 }, multi[PEAK_KERNEL_COUNT] = { 0 };
    bool ran[PEAK_KERNEL_COUNT] = { false };
    double best_single[PEAK_CLASS_COUNT] = { 0 }, best_multi[PEAK_CLASS_COUNT] = { 0 };
    for (size_t k = 0; k < PEAK_KERNEL_COUNT; k++) {
        const struct peak_kernel *pk = &peak_kernels[k];
        if (!pk->run || !pk->supported(cpu)) continue;
        uint64_t iters = peak_calibrate(pk->run, ms);
        single[k] = peak_measure(pk->run, iters, pk->ops_per_iter, 1, reps);
        multi[k] = peak_measure(pk->run, iters, pk->ops_per_iter, n_threads, reps);
        ran[k] = true;
        if (single[k] > best_single[pk->cls]) best_single[pk->cls] = single[k];
        if (multi[k] > best_multi[pk->cls]) best_multi[pk->cls] = multi[k];
    }

    if (json) {
        printf("{\"probe\": \"peak\", \"threads\": %d, \"reps\": %d, \"kernels\": [", n_threads, reps);
        for (size_t k = 0; k < PEAK_KERNEL_COUNT; k++) {
            printf("%s\n  {\"name\": \"%s\", \"supported\": %s", k ? "," : "", peak_kernels[k].name, ran[k] ? "true" : "false");
            if (ran[k]) printf(", \"gops_1thread\": %.1f, \"gops_nthreads\": %.1f", single[k] / 1e9, multi[k] / 1e9);
            printf("}");
        }
        printf("],\n \"peak_gops_1thread\": {");
        for (int c = 0; c < PEAK_CLASS_COUNT; c++) printf("%s\"%s\": %.1f", c ? ", " : "", peak_class_names[c], best_single[c] / 1e9);
        printf("},\n \"peak_gops_nthreads\": {");
        for (int c = 0; c < PEAK_CLASS_COUNT; c++) printf("%s\"%s\": %.1f", c ? ", " : "", peak_class_names[c], best_multi[c] / 1e9);
        printf("}}\n");
        return 0;
    }
    printf("peak throughput, best of %d x %.0f ms; GFLOP/s (fp32, bf16) or GOP/s (int8), multiply-add = 2\n", reps, ms);
    char multi_head[32];
    snprintf(multi_head, sizeof multi_head, "%d thread%s", n_threads, n_threads == 1 ? "" : "s");
    printf("%-40s %12s %12s\n", "kernel", "1 thread", multi_head);
    for (size_t k = 0; k < PEAK_KERNEL_COUNT; k++) {
        if (ran[k]) printf("%-40s %12.1f %12.1f\n", peak_kernels[k].label, single[k] / 1e9, multi[k] / 1e9);
        else printf("%-40s %25s\n", peak_kernels[k].label, peak_kernels[k].run ? "(not supported by this CPU)" : "(x86-64 only)");
    }
    return 0;
}
