/*
 * A tiny test harness: CHECK macros that count failures and keep going,
 * the way tests find the shared model files and golden data, and scratch
 * files.
 *
 * Shared data: $LLAMAC_SHARED, else ../shared beside the source tree.
 * Where it is absent a test calls test_skip() (exit 77, which ctest shows as
 * skipped); with LLAMAC_REQUIRE_SHARED=1 (CI) a skip is a failure instead.
 */
#ifndef LLAMAC_TEST_UTIL_H
#define LLAMAC_TEST_UTIL_H

#include <cjson/cJSON.h>
#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Under AddressSanitizer the slowest tests run a subset unless test_run_all(). */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#ifndef TEST_UNDER_ASAN
#define TEST_UNDER_ASAN 0
#endif

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

/* An environment variable used as a flag: set, not empty and not "0". */
static inline bool test_env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* LLAMAC_TEST_ALL=1: run what a test leaves out by default to stay fast. */
static inline bool test_run_all(void) {
    return test_env_flag("LLAMAC_TEST_ALL");
}

static inline void test_skip(const char *why) {
    if (test_env_flag("LLAMAC_REQUIRE_SHARED")) {
        fprintf(stderr, "FAIL (shared data required): %s\n", why);
        exit(1);
    }
    printf("SKIP: %s\n", why);
    exit(77);
}

/* Skips (exit 77) a test of something this machine or build does not have
 * (an instruction set): a skip even where shared data is required. */
static inline void test_skip_unsupported(const char *why) {
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

/* A JSON file under the shared data directory (golden/...), parsed; skips
 * the test when it is absent, exits with a failure when it does not parse. */
static inline cJSON *golden_load(const char *rel) {
    const char *path = test_require_shared(rel);
    char *text = test_read_file(path, NULL);
    cJSON *json = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!json) {
        fprintf(stderr, "cannot parse %s\n", path);
        exit(1);
    }
    return json;
}

/* Writes n bytes to path (created or truncated); false on any failure. */
static inline bool test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    const bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* Whether both files can be read and hold the same bytes. */
static inline bool test_files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *da = test_read_file(a, &na), *db = test_read_file(b, &nb);
    const bool same = da && db && na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return same;
}

/*
 * A scratch directory for a test's files: test_tmp_dir_create("test_x")
 * makes /tmp/test_x-XXXXXX (the test exits when it cannot), test_tmp_path()
 * names a file in it (rotating static buffers: copy what must live long),
 * test_tmp_dir_remove() deletes it with everything in it.
 */
static inline char *test_tmp_dir(void) {
    static char dir[256];
    return dir;
}

static inline const char *test_tmp_dir_create(const char *prefix) {
    char *dir = test_tmp_dir();
    snprintf(dir, 256, "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    return dir;
}

static inline const char *test_tmp_path(const char *name) {
    static char buf[8][512];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", test_tmp_dir(), name);
    return p;
}

static inline int test_tmp_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void test_tmp_dir_remove(void) {
    if (test_tmp_dir()[0]) nftw(test_tmp_dir(), test_tmp_remove_entry, 8, FTW_DEPTH | FTW_PHYS);
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
