/*
 * probe_membw: read memory bandwidth of this machine.
 *
 * Each of N pinned threads streams through its own slice of one buffer much
 * larger than the last-level cache (default: 1 GiB or 4 x L3, whichever is
 * larger), adding the words up so the loads cannot be dropped. The best of
 * several passes is reported in GB/s (10^9 bytes per second). This is the
 * denominator of the token-generation target: a matrix-vector kernel that
 * streams weights cannot read them faster than this.
 *
 *   probe_membw [-t THREADS] [-s MIB] [-r PASSES] [--json]
 */
#include "probe_util.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MEMBW_ALIGN ((size_t)2 << 20) /* huge-page sized slices */

/* Where the sums end up, so the compiler must perform the loads. */
static volatile uint64_t membw_sink;

typedef uint64_t (*membw_read_fn)(const uint8_t *p, size_t n);

/* Sums n bytes (a multiple of 256) as 64-bit words; four independent
 * accumulators keep the adds off the critical path. */
static uint64_t membw_read_scalar(const uint8_t *p, size_t n) {
    const uint64_t *w = (const uint64_t *)p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        s0 += w[i];
        s1 += w[i + 1];
        s2 += w[i + 2];
        s3 += w[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

#if defined(__x86_64__)
__attribute__((target("avx2")))
static uint64_t membw_read_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

__attribute__((target("avx512f")))
static uint64_t membw_read_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 256) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(s);
}
#endif

struct membw_job {
    uint8_t *buf;
    size_t size;
    membw_read_fn read;
    uint64_t sums[256]; /* one per thread, so the reads have a visible effect */
    bool fill;          /* first pass: each thread touches its own slice */
};

static void membw_slice(const struct membw_job *job, int i, int n, size_t *begin, size_t *len) {
    size_t per = job->size / (size_t)n / 256 * 256;
    *begin = per * (size_t)i;
    *len = i == n - 1 ? job->size - *begin : per;
}

static void membw_work(void *arg, int i, int n) {
    struct membw_job *job = arg;
    size_t begin, len;
    membw_slice(job, i, n, &begin, &len);
    if (job->fill) {
        memset(job->buf + begin, 0x5a + i, len);
        return;
    }
    job->sums[i] += job->read(job->buf + begin, len);
}

static size_t membw_default_size(void) {
    size_t size = (size_t)1 << 30;
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0 && (size_t)l3 * 4 > size) size = (size_t)l3 * 4;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && size > (size_t)pages * (size_t)page / 2) size = (size_t)pages * (size_t)page / 2;
    return size;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: probe_membw [-t THREADS] [-s MIB] [-r PASSES] [--json]\n"
            "  -t  threads (default: physical cores)\n"
            "  -s  buffer size in MiB (default: max(1024, 4 x L3))\n"
            "  -r  passes over the buffer; the best is reported (default 5)\n"
            "  --json  one JSON object instead of text\n");
}

int main(int argc, char **argv) {
    int n_threads = cpu_physical_cores();
    size_t size = membw_default_size();
    int passes = 5;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) n_threads = (int)probe_parse_count(argv[0], "-t", argv[++i], 256);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) size = (size_t)probe_parse_count(argv[0], "-s", argv[++i], 1 << 20) << 20;
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) passes = (int)probe_parse_count(argv[0], "-r", argv[++i], 1000);
        else if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    size = (size + MEMBW_ALIGN - 1) / MEMBW_ALIGN * MEMBW_ALIGN;

    struct membw_job job = { .size = size, .read = membw_read_scalar };
    const char *kernel = "scalar";
#if defined(__x86_64__)
    const struct cpu_features *cpu = cpu_features_get();
    if (cpu->avx512f) { job.read = membw_read_avx512; kernel = "avx512"; }
    else if (cpu->avx2) { job.read = membw_read_avx2; kernel = "avx2"; }
#endif
    job.buf = aligned_alloc(MEMBW_ALIGN, size);
    if (!job.buf) {
        fprintf(stderr, "probe_membw: cannot allocate %zu MiB\n", size >> 20);
        return 1;
    }
    madvise(job.buf, size, MADV_HUGEPAGE); /* fewer TLB misses; advisory only */

    job.fill = true;
    probe_team_run(n_threads, membw_work, &job);
    job.fill = false;
    double best = 1e30, total = 0;
    for (int r = 0; r < passes; r++) {
        double t = probe_team_run(n_threads, membw_work, &job);
        total += t;
        if (t < best) best = t;
    }
    for (int i = 0; i < n_threads; i++) membw_sink += job.sums[i];
    free(job.buf);

    double best_gbps = (double)size / best / 1e9;
    double mean_gbps = (double)size * passes / total / 1e9;
    if (json) {
        printf("{\"probe\": \"membw\", \"threads\": %d, \"buffer_bytes\": %zu, \"passes\": %d, "
               "\"kernel\": \"%s\", \"best_gbps\": %.2f, \"mean_gbps\": %.2f}\n",
               n_threads, size, passes, kernel, best_gbps, mean_gbps);
    } else {
        printf("read bandwidth: %d thread%s, %zu MiB buffer, %s loads, %d passes\n",
               n_threads, n_threads == 1 ? "" : "s", size >> 20, kernel, passes);
        printf("  best %.2f GB/s, mean %.2f GB/s\n", best_gbps, mean_gbps);
    }
    return 0;
}
