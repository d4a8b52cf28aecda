/*
 * A tiny test harness: CHECK macros that count failures and keep going,
 * and the way tests find the shared model files.
 *
 * Shared data: $LLAMAC_SHARED, else ../shared beside the source tree.
 * Where it is absent a test calls test_skip() (exit 77, which ctest shows as
 * skipped); with LLAMAC_REQUIRE_SHARED=1 (CI) a skip is a failure instead.
 */
#ifndef LLAMAC_TEST_UTIL_H
#define LLAMAC_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int g_test_failures;
static int g_test_checks;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        g_test_checks++;                                                              \
        if (!(cond)) {                                                                \
            g_test_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        g_test_checks++;                                                              \
        if (!(cond)) {                                                                \
            g_test_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                            \
    do {                                                                              \
        long long va_ = (long long)(a), vb_ = (long long)(b);                         \
        CHECK_MSG(va_ == vb_, "%s = %lld, %s = %lld", #a, va_, #b, vb_);              \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                         \
    do {                                                                              \
        double va_ = (double)(a), vb_ = (double)(b);                                  \
        CHECK_MSG(fabs(va_ - vb_) <= (tol), "%s = %.9g, %s = %.9g, tol %g",           \
                  #a, va_, #b, vb_, (double)(tol));                                   \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                            \
    do {                                                                              \
        const char *sa_ = (a), *sb_ = (b);                                            \
        CHECK_MSG(sa_ && sb_ && strcmp(sa_, sb_) == 0, "'%s' != '%s'",                \
                  sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                        \
    } while (0)

static inline int test_finish(const char *name) {
    if (g_test_failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, g_test_failures, g_test_checks);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, g_test_checks);
    return 0;
}

static inline void test_skip(const char *why) {
    const char *req = getenv("LLAMAC_REQUIRE_SHARED");
    if (req && *req && strcmp(req, "0") != 0) {
        fprintf(stderr, "FAIL (shared data required): %s\n", why);
        exit(1);
    }
    printf("SKIP: %s\n", why);
    exit(77);
}

/* Path of a file under the shared data directory, or NULL when it is absent. */
static inline const char *test_shared_path(const char *rel) {
    static char buf[8][4096];
    static int slot;
    const char *root = getenv("LLAMAC_SHARED");
#ifdef LLAMAC_DEFAULT_SHARED
    if (!root || !*root) root = LLAMAC_DEFAULT_SHARED;
#endif
    if (!root || !*root) return NULL;
    char *out = buf[slot++ % 8];
    snprintf(out, sizeof buf[0], "%s/%s", root, rel);
    struct stat st;
    return stat(out, &st) == 0 ? out : NULL;
}

/* Like test_shared_path but skips the test (see above) when the file is absent. */
static inline const char *test_require_shared(const char *rel) {
    const char *p = test_shared_path(rel);
    if (!p) {
        char why[600];
        snprintf(why, sizeof why, "shared file '%s' not found (set LLAMAC_SHARED)", rel);
        test_skip(why);
    }
    return p;
}

/* Reads a whole file into a malloc'ed NUL-terminated buffer; NULL on failure. */
static inline char *test_read_file(const char *path, size_t *size_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = (char *)malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = '\0'; if (size_out) *size_out = (size_t)n; }
    return buf;
}

/* Deterministic pseudo-random numbers for tests (xorshift64*). */
static inline uint64_t test_rand_u64(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static inline float test_rand_uniform(uint64_t *state, float lo, float hi) {
    return lo + (hi - lo) * (float)((test_rand_u64(state) >> 40) / (double)(1 << 24));
}

#endif
