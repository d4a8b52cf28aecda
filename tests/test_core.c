/* core/: checked arithmetic, half-precision conversion, file mapping, logging. */
#include "test_util.h"

#include <stdio.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/cpu_features.h"
#include "core/file_map.h"
#include "core/fp16.h"
#include "core/log.h"

static void test_checked(void) {
    size_t s;
    CHECK(ck_mul_size(1u << 20, 1u << 20, &s) && s == (size_t)1 << 40);
    CHECK(!ck_mul_size(SIZE_MAX / 2 + 1, 2, &s));
    CHECK(!ck_add_size(SIZE_MAX, 1, &s));
    CHECK(ck_align_up(33, 32, &s) && s == 64);
    CHECK(ck_align_up(64, 32, &s) && s == 64);
    CHECK(!ck_align_up(SIZE_MAX - 3, 32, &s));
    int64_t i;
    CHECK(!ck_mul_i64(INT64_MAX / 2 + 1, 2, &i));
    CHECK(is_pow2(32) && !is_pow2(0) && !is_pow2(48));
}

static void test_fp16(void) {
    /* Every half value converts to float and back unchanged (NaNs stay NaN). */
    int mismatches = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_fp32((fp16_t)h);
        fp16_t back = fp32_to_fp16(f);
        bool is_nan = ((h & 0x7C00) == 0x7C00) && (h & 0x03FF);
        if (is_nan ? !isnan(f) : back != h) mismatches++;
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(fp16_to_fp32(0x3C00) == 1.0f);
    CHECK(fp16_to_fp32(0xC000) == -2.0f);
    CHECK(fp32_to_fp16(65504.0f) == 0x7BFF);
    CHECK(fp32_to_fp16(1e6f) == 0x7C00);            /* overflow -> inf */
    CHECK(fp32_to_fp16(1.0f + 1.0f / 2048) == 0x3C00); /* tie -> even */
    CHECK(fp32_to_fp16(1.0f + 3.0f / 2048) == 0x3C02); /* tie -> even (up) */
    CHECK(fp32_to_fp16(5.960464477539063e-08f) == 0x0001); /* smallest subnormal */
}

static int g_log_calls;
static void count_log(enum ggml_log_level level, const char *text, void *user) {
    (void)level; (void)text; (void)user;
    g_log_calls++;
}

static void test_file_map_and_errors(void) {
    log_set_callback(count_log, NULL);
    struct file_map fm;
    CHECK(!file_map_open(&fm, "/nonexistent/file", true));
    CHECK(strstr(error_last(), "/nonexistent/file") != NULL);
    CHECK(g_log_calls == 1);
    CHECK(!file_map_open(&fm, "/", true)); /* a directory is not a regular file */

    char path[] = "/tmp/llamac_test_core_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "hello", 5) == 5);
    close(fd);
    for (int use_mmap = 0; use_mmap <= 1; use_mmap++) {
        CHECK(file_map_open(&fm, path, use_mmap));
        CHECK(fm.size == 5 && memcmp(fm.data, "hello", 5) == 0);
        CHECK(fm.mapped == (bool)use_mmap);
        file_map_close(&fm);
    }
    unlink(path);
    log_set_callback(NULL, NULL);
}

int main(void) {
    test_checked();
    test_fp16();
    test_file_map_and_errors();
    CHECK(cpu_features_get() != NULL);
    CHECK(cpu_physical_cores() >= 1);
    return test_finish("test_core");
}
