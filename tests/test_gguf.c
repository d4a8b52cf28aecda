/* gguf/: metadata from real files (against b1892's golden strings), typed
 * getters, the writer (setters, tensors, streaming), and read -> write of
 * every shared model giving back identical bytes. Hostile files: test_gguf_hostile.c. */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <ftw.h>
#include <unistd.h>

#include "cli_test_util.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

/* The one scratch file the tests write (main makes the directory). */
static const char *tmp_path(void) {
    return test_tmp_path("test.gguf");
}

static bool error_contains(const char *needle) {
    return strstr(error_last(), needle) != NULL;
}

/* ---- metadata of the stories models, as b1892's llama_model_meta_* report it ---- */

static void test_golden_metadata(void) {
    cJSON *root = golden_load("golden/models-stories260K.json");
    const cJSON *models = cJSON_GetObjectItem(root, "models");
    CHECK_EQ_INT(cJSON_GetArraySize(models), 4);
    const cJSON *model;
    cJSON_ArrayForEach(model, models) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s", cJSON_GetObjectItem(model, "file")->valuestring);
        struct gguf_reader *r = gguf_open_file(test_require_shared(rel), true);
        CHECK_MSG(r != NULL, "%s: %s", rel, error_last());
        if (!r) continue;
        /* b1892 lists every key except arrays */
        int n_scalar = 0;
        for (int64_t i = 0; i < gguf_n_kv(r); i++) n_scalar += gguf_kv_type(r, i) != GGUF_TYPE_ARRAY;
        CHECK_EQ_INT(n_scalar, cJSON_GetObjectItem(model, "meta_count")->valueint);
        const cJSON *kv;
        int n_checked = 0;
        cJSON_ArrayForEach(kv, cJSON_GetObjectItem(model, "meta")) {
            int64_t i = gguf_find_key(r, kv->string);
            CHECK_MSG(i >= 0, "%s: key %s missing", rel, kv->string);
            char buf[256];
            int n = gguf_kv_to_str(r, i, buf, sizeof buf);
            CHECK_MSG(n == (int)strlen(kv->valuestring) && strcmp(buf, kv->valuestring) == 0,
                      "%s: %s = '%s', b1892 says '%s'", rel, kv->string, buf, kv->valuestring);
            n_checked++;
        }
        CHECK_EQ_INT(n_checked, n_scalar);
        /* n_params from the tensor table (the model-level count b1892 reports) */
        int64_t n_params = 0;
        for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
            const struct gguf_tensor_info *t = gguf_tensor(r, i);
            n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        }
        CHECK_EQ_INT(n_params, cJSON_GetObjectItem(model, "n_params")->valuedouble);
        gguf_close(r);
    }
    cJSON_Delete(root);
}

/* ---- typed getters on a real file --------------------------------------------- */

static void test_getters_real_file(void) {
    struct gguf_reader *r = gguf_open_file(test_require_shared("models/stories260K.gguf"), false);
    CHECK(r != NULL);
    if (!r) return;
    CHECK_EQ_INT(gguf_version(r), 3);
    CHECK_EQ_INT(gguf_alignment(r), 32);
    CHECK_EQ_INT(gguf_n_kv(r), 19);
    CHECK_EQ_INT(gguf_n_tensors(r), 48);
    CHECK_EQ_INT(gguf_data_offset(r), 14176);
    CHECK_EQ_INT(gguf_file_size(r), 1185376);

    uint32_t u32 = 0;
    CHECK(gguf_get_u32(r, "llama.context_length", &u32) && u32 == 512);
    int32_t i32 = 7;
    CHECK(!gguf_get_i32(r, "llama.context_length", &i32) && i32 == 7);
    CHECK(error_contains("'llama.context_length' has type u32, not i32"));
    uint64_t u64;
    CHECK(!gguf_get_u64(r, "llama.context_length", &u64));
    float f32 = 0;
    CHECK(gguf_get_f32(r, "llama.attention.layer_norm_rms_epsilon", &f32) && f32 == 1e-5f);
    double f64;
    CHECK(!gguf_get_f64(r, "llama.attention.layer_norm_rms_epsilon", &f64) && error_contains("type f32, not f64"));
    const char *s = NULL;
    CHECK(gguf_get_str(r, "general.architecture", &s) && strcmp(s, "llama") == 0);
    CHECK(!gguf_get_str(r, "tokenizer.ggml.tokens", &s) && error_contains("is an array of str, not a str"));
    CHECK(!gguf_get_u32(r, "no.such.key", &u32) && error_contains("'no.such.key' not found"));
    CHECK(!gguf_get_bool(r, "general.name", &(bool){ false }) && error_contains("type str, not bool"));

    int64_t tok = gguf_find_key(r, "tokenizer.ggml.tokens");
    CHECK(tok >= 0 && gguf_kv_type(r, tok) == GGUF_TYPE_ARRAY);
    CHECK(gguf_arr_type(r, tok) == GGUF_TYPE_STRING && gguf_arr_n(r, tok) == 512);
    CHECK_STR_EQ(gguf_arr_str(r, tok, 0), "<unk>");
    CHECK_EQ_INT(gguf_arr_str_len(r, tok, 1), 3);
    CHECK(gguf_arr_data(r, tok) == NULL);
    CHECK(gguf_arr_str(r, tok, 512) == NULL);
    char buf[8] = "x";
    CHECK(gguf_kv_to_str(r, tok, buf, sizeof buf) == 0 && buf[0] == '\0');
    int64_t tt = gguf_find_key(r, "tokenizer.ggml.token_type");
    CHECK(gguf_arr_type(r, tt) == GGUF_TYPE_INT32 && gguf_arr_n(r, tt) == 512);
    int32_t types[4];
    memcpy(types, gguf_arr_data(r, tt), sizeof types);
    CHECK(types[0] == 2 && types[1] == 3 && types[3] == 6);  /* unknown, control, byte */
    CHECK(gguf_kv_type(r, -1) == GGUF_TYPE_COUNT && gguf_key(r, 19) == NULL);

    int64_t ti = gguf_find_tensor(r, "blk.0.ffn_down.weight");
    const struct gguf_tensor_info *t = gguf_tensor(r, ti);
    CHECK(t && t->type == GGML_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 172 && t->ne[1] == 64 && t->ne[2] == 1);
    CHECK(t && t->size == 172 * 64 * 4 && (const uint8_t *)t->data == (const uint8_t *)gguf_file_data(r) + gguf_data_offset(r) + t->offset);
    CHECK(gguf_find_tensor(r, "nope") == -1 && gguf_tensor(r, 48) == NULL);
    gguf_close(r);
}

/* ---- writer: every type, set/replace/remove, read back ------------------------- */

static struct gguf_writer *writer_every_type(void) {
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_set_u8(w, "t.u8", 200));
    CHECK(gguf_set_i8(w, "t.i8", -5));
    CHECK(gguf_set_u16(w, "t.u16", 65535));
    CHECK(gguf_set_i16(w, "t.i16", -32768));
    CHECK(gguf_set_u32(w, "t.u32", 4294967295u));
    CHECK(gguf_set_i32(w, "t.i32", -123456));
    CHECK(gguf_set_u64(w, "t.u64", UINT64_MAX));
    CHECK(gguf_set_i64(w, "t.i64", INT64_MIN));
    CHECK(gguf_set_f32(w, "t.f32", 0.1f));
    CHECK(gguf_set_f64(w, "t.f64", -2.5));
    CHECK(gguf_set_bool(w, "t.bool", true));
    CHECK(gguf_set_str(w, "t.str", "hello \"world\"\n"));
    const int16_t arr[3] = { -1, 2, -3 };
    CHECK(gguf_set_arr_data(w, "t.arr_i16", GGUF_TYPE_INT16, arr, 3));
    const char *strs[3] = { "a", "", "ccc" };
    CHECK(gguf_set_arr_str(w, "t.arr_str", strs, 3));
    const uint8_t bools[2] = { 1, 0 };
    CHECK(gguf_set_arr_data(w, "t.arr_bool", GGUF_TYPE_BOOL, bools, 2));
    CHECK(gguf_set_arr_data(w, "t.arr_empty", GGUF_TYPE_FLOAT32, NULL, 0));
    return w;
}

static void test_writer_types(void) {
    struct gguf_writer *w = writer_every_type();
    /* argument errors */
    CHECK(!gguf_set_arr_data(w, "bad", GGUF_TYPE_STRING, "x", 1) && error_contains("not a fixed-size type"));
    CHECK(!gguf_set_arr_data(w, "bad", GGUF_TYPE_ARRAY, "x", 1));
    CHECK(!gguf_set_arr_data(w, "bad", GGUF_TYPE_BOOL, (const uint8_t[]){ 2 }, 1) && error_contains("not 0 or 1"));
    CHECK(!gguf_set_str(w, "bad", NULL));
    CHECK(!gguf_set_u32(w, NULL, 1));
    CHECK(!gguf_remove_key(w, "absent") && error_contains("'absent' not found"));
    /* replacing keeps the position; removing closes the gap */
    CHECK(gguf_set_u8(w, "t.u8", 7));
    CHECK(gguf_set_str(w, "t.removed", "x"));
    CHECK(gguf_remove_key(w, "t.removed"));
    CHECK(gguf_write_file(w, tmp_path()));
    gguf_writer_free(w);

    struct gguf_reader *r = gguf_open_file(tmp_path(), true);
    CHECK_MSG(r != NULL, "%s", error_last());
    if (!r) return;
    CHECK_EQ_INT(gguf_version(r), 3);
    CHECK_EQ_INT(gguf_n_kv(r), 16);
    CHECK_EQ_INT(gguf_n_tensors(r), 0);
    CHECK_STR_EQ(gguf_key(r, 0), "t.u8");
    CHECK(gguf_find_key(r, "t.removed") == -1);
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
    uint64_t u64; int64_t i64; float f32; double f64; bool b; const char *s;
    CHECK(gguf_get_u8(r, "t.u8", &u8) && u8 == 7);
    CHECK(gguf_get_i8(r, "t.i8", &i8) && i8 == -5);
    CHECK(gguf_get_u16(r, "t.u16", &u16) && u16 == 65535);
    CHECK(gguf_get_i16(r, "t.i16", &i16) && i16 == -32768);
    CHECK(gguf_get_u32(r, "t.u32", &u32) && u32 == 4294967295u);
    CHECK(gguf_get_i32(r, "t.i32", &i32) && i32 == -123456);
    CHECK(gguf_get_u64(r, "t.u64", &u64) && u64 == UINT64_MAX);
    CHECK(gguf_get_i64(r, "t.i64", &i64) && i64 == INT64_MIN);
    CHECK(gguf_get_f32(r, "t.f32", &f32) && f32 == 0.1f);
    CHECK(gguf_get_f64(r, "t.f64", &f64) && f64 == -2.5);
    CHECK(gguf_get_bool(r, "t.bool", &b) && b);
    CHECK(gguf_get_str(r, "t.str", &s) && strcmp(s, "hello \"world\"\n") == 0);
    /* a wrong type is an error, never a reinterpretation of the bytes */
    CHECK(!gguf_get_i8(r, "t.u8", &i8) && error_contains("type u8, not i8"));
    CHECK(!gguf_get_u32(r, "t.i32", &u32) && error_contains("type i32, not u32"));
    CHECK(!gguf_get_i64(r, "t.u64", &i64));
    CHECK(!gguf_get_f64(r, "t.f32", &f64));
    CHECK(!gguf_get_u8(r, "t.bool", &u8));
    CHECK(!gguf_get_i16(r, "t.arr_i16", &i16) && error_contains("array of i16"));

    const char *expect[][2] = {
        { "t.u8", "7" }, { "t.i8", "-5" }, { "t.u16", "65535" }, { "t.i16", "-32768" },
        { "t.u32", "4294967295" }, { "t.i32", "-123456" }, { "t.u64", "18446744073709551615" },
        { "t.i64", "-9223372036854775808" }, { "t.f32", "0.100000" }, { "t.f64", "-2.500000" },
        { "t.bool", "true" }, { "t.str", "hello \"world\"\n" }, { "t.arr_i16", "" },
    };
    for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
        char buf[64];
        gguf_kv_to_str(r, gguf_find_key(r, expect[k][0]), buf, sizeof buf);
        CHECK_MSG(strcmp(buf, expect[k][1]) == 0, "%s: '%s' != '%s'", expect[k][0], buf, expect[k][1]);
    }
    char small[4];
    CHECK(gguf_kv_to_str(r, gguf_find_key(r, "t.u32"), small, sizeof small) == 10 && strcmp(small, "429") == 0);
    CHECK(gguf_kv_to_str(r, 99, small, sizeof small) == -1);

    int64_t a = gguf_find_key(r, "t.arr_i16");
    int16_t back[3];
    CHECK(gguf_arr_type(r, a) == GGUF_TYPE_INT16 && gguf_arr_n(r, a) == 3);
    memcpy(back, gguf_arr_data(r, a), sizeof back);
    CHECK(back[0] == -1 && back[1] == 2 && back[2] == -3);
    int64_t as = gguf_find_key(r, "t.arr_str");
    CHECK(gguf_arr_n(r, as) == 3 && strcmp(gguf_arr_str(r, as, 2), "ccc") == 0 && gguf_arr_str_len(r, as, 1) == 0);
    CHECK(gguf_arr_n(r, gguf_find_key(r, "t.arr_empty")) == 0);
    uint64_t len;
    CHECK(gguf_val_str(r, gguf_find_key(r, "t.str"), &len) && len == 14);
    CHECK(gguf_val_data(r, gguf_find_key(r, "t.str")) == NULL);
    CHECK(*(const int32_t *)gguf_val_data(r, gguf_find_key(r, "t.i32")) == -123456);
    gguf_close(r);
}

/* ---- writer: tensors, alignment, streaming ------------------------------------- */

static void fill_pattern(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 31 + seed);
}

static void test_writer_tensors(void) {
    uint8_t a[4 * 3 * 4], q[34 * 2 * 5];  /* f32 [4,3]; q8_0 [64,5] */
    fill_pattern(a, sizeof a, 1);
    fill_pattern(q, sizeof q, 2);
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_set_u32(w, "general.alignment", 64));
    CHECK(gguf_add_tensor(w, "a", GGML_TYPE_F32, 2, (const int64_t[]){ 4, 3 }, a, sizeof a));
    CHECK(gguf_add_tensor(w, "q", GGML_TYPE_Q8_0, 2, (const int64_t[]){ 64, 5 }, q, sizeof q));
    /* argument errors */
    CHECK(!gguf_add_tensor(w, "a", GGML_TYPE_F32, 1, (const int64_t[]){ 4 }, a, 16) && error_contains("added twice"));
    CHECK(!gguf_add_tensor(w, "b", GGML_TYPE_F32, 1, (const int64_t[]){ 4 }, a, 12) && error_contains("need 16"));
    CHECK(!gguf_add_tensor(w, "b", GGML_TYPE_Q8_0, 1, (const int64_t[]){ 48 }, q, 34) && error_contains("block size"));
    CHECK(!gguf_add_tensor(w, "b", (enum ggml_type)4, 1, (const int64_t[]){ 4 }, a, 16) && error_contains("invalid element type"));
    CHECK(!gguf_add_tensor(w, "b", GGML_TYPE_F32, 5, (const int64_t[]){ 1, 1, 1, 1, 1 }, a, 4) && error_contains("dimensions"));
    CHECK(!gguf_add_tensor(w, "b", GGML_TYPE_F32, 1, (const int64_t[]){ 0 }, a, 0) && error_contains("has 0 elements"));
    CHECK(gguf_write_file(w, tmp_path()));

    struct gguf_reader *r = gguf_open_file(tmp_path(), true);
    CHECK_MSG(r != NULL, "%s", error_last());
    if (r) {
        CHECK_EQ_INT(gguf_alignment(r), 64);
        CHECK_EQ_INT(gguf_data_offset(r) % 64, 0);
        CHECK_EQ_INT(gguf_n_tensors(r), 2);
        const struct gguf_tensor_info *ta = gguf_tensor(r, 0), *tq = gguf_tensor(r, 1);
        CHECK(ta->offset == 0 && ta->size == sizeof a && memcmp(ta->data, a, sizeof a) == 0);
        CHECK(tq->offset == 64 && tq->size == sizeof q && memcmp(tq->data, q, sizeof q) == 0);
        CHECK(tq->type == GGML_TYPE_Q8_0 && tq->ne[0] == 64 && tq->ne[1] == 5);
        /* the last tensor is padded too */
        CHECK_EQ_INT(gguf_file_size(r), gguf_data_offset(r) + 64 + 384);
        gguf_close(r);
    }

    /* an invalid alignment key is refused at write time */
    CHECK(gguf_set_u32(w, "general.alignment", 48));
    CHECK(!gguf_write_file(w, tmp_path()) && error_contains("power of two"));
    CHECK(gguf_set_u64(w, "general.alignment", 32));
    CHECK(!gguf_write_file(w, tmp_path()) && error_contains("u32"));
    gguf_writer_free(w);
}

static void test_writer_stream(void) {
    enum { ROWS = 7 };
    uint8_t data[ROWS * 34 * 2];  /* q8_0 [64, 7] */
    fill_pattern(data, sizeof data, 3);
    const float bias[3] = { 1, 2, 3 };
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_set_str(w, "general.architecture", "test"));
    CHECK(gguf_add_tensor_info(w, "w", GGML_TYPE_Q8_0, 2, (const int64_t[]){ 64, ROWS }));
    CHECK(gguf_add_tensor_info(w, "b", GGML_TYPE_F32, 1, (const int64_t[]){ 3 }));
    CHECK(!gguf_write_file(w, tmp_path()) && error_contains("has no data"));

    struct gguf_stream *s = gguf_stream_open(w, tmp_path());
    CHECK(s != NULL);
    for (int row = 0; row < ROWS; row++) CHECK(gguf_stream_write(s, data + row * 68, 68));  /* row by row */
    CHECK(!gguf_stream_write(s, bias, sizeof bias + 4) && error_contains("needs 12 more"));
    CHECK(gguf_stream_write(s, bias, sizeof bias));
    CHECK(!gguf_stream_write(s, bias, 4) && error_contains("already been written"));
    CHECK(gguf_stream_close(s));

    struct gguf_reader *r = gguf_open_file(tmp_path(), true);
    CHECK_MSG(r != NULL, "%s", error_last());
    if (r) {
        const struct gguf_tensor_info *tw = gguf_tensor(r, 0), *tb = gguf_tensor(r, 1);
        CHECK(tw->size == sizeof data && memcmp(tw->data, data, sizeof data) == 0);
        CHECK(tb->offset == 480 && memcmp(tb->data, bias, sizeof bias) == 0);
        gguf_close(r);
    }

    /* closing early abandons the file */
    s = gguf_stream_open(w, tmp_path());
    CHECK(s && gguf_stream_write(s, data, 68));
    CHECK(!gguf_stream_close(s) && error_contains("closed after 0 of 2 tensors"));
    CHECK(access(tmp_path(), F_OK) != 0);
    CHECK(gguf_stream_open(w, "/nonexistent-dir/x.gguf") == NULL && error_contains("cannot create"));
    gguf_writer_free(w);
}

/* ---- read -> write of every shared model gives identical bytes ------------------ */

static int g_round_trips;

static int round_trip_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)ftw;
    size_t len = strlen(path);
    if (flag != FTW_F || len < 5 || strcmp(path + len - 5, ".gguf") != 0) return 0;
    struct gguf_reader *r = gguf_open_file(path, true);
    CHECK_MSG(r != NULL, "%s: %s", path, error_last());
    if (!r) return 0;
    struct gguf_writer *w = gguf_writer_from_reader(r);
    CHECK(w != NULL);
    for (int64_t i = 0; w && i < gguf_n_tensors(r); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(r, i);
        CHECK(gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size));
    }
    CHECK_MSG(w && gguf_write_file(w, tmp_path()), "%s: %s", path, error_last());
    bool same = test_files_equal(path, tmp_path());
    CHECK_MSG(same, "%s: rewritten file differs", path);
    g_round_trips += same;
    gguf_writer_free(w);
    gguf_close(r);
    return 0;
}

static void test_round_trip_all_models(void) {
    const char *models = test_require_shared("models");
    CHECK(nftw(models, round_trip_one, 8, FTW_PHYS) == 0);
    CHECK_MSG(g_round_trips >= 30, "only %d files came back identical", g_round_trips);
    printf("round trip: %d files identical\n", g_round_trips);
}

/* ---- the fuzzer's seed corpus: tiny valid files made by this writer ------------- */

#define CORPUS_DIR LLAMAC_SOURCE_DIR "/fuzz/corpus/gguf"

static struct gguf_writer *corpus_writer(int which) {
    static const float f[8] = { 1, -2, 3.5f, 0, 0.25f, -1, 2, 8 };
    static uint8_t q[34];
    struct gguf_writer *w = gguf_writer_new();
    switch (which) {
    case 0: /* metadata only */
        gguf_set_str(w, "general.architecture", "llama");
        gguf_set_u32(w, "llama.context_length", 16);
        gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
        gguf_set_bool(w, "flag", true);
        break;
    case 1: /* one f32 tensor */
        gguf_set_u64(w, "n", 2);
        gguf_add_tensor(w, "t", GGML_TYPE_F32, 2, (const int64_t[]){ 4, 2 }, f, sizeof f);
        break;
    case 2: /* arrays, a quantized tensor, non-default alignment */
        gguf_set_u32(w, "general.alignment", 16);
        gguf_set_arr_str(w, "tokens", (const char *const[]){ "<s>", "a", "" }, 3);
        gguf_set_arr_data(w, "scores", GGUF_TYPE_FLOAT32, f, 3);
        gguf_set_arr_data(w, "flags", GGUF_TYPE_BOOL, (const uint8_t[]){ 0, 1 }, 2);
        gguf_add_tensor(w, "q", GGML_TYPE_Q8_0, 1, (const int64_t[]){ 32 }, q, sizeof q);
        gguf_add_tensor(w, "b", GGML_TYPE_I8, 3, (const int64_t[]){ 2, 2, 2 }, f, 8);
        break;
    default: /* every scalar type */
        gguf_set_i8(w, "i8", -1);
        gguf_set_u16(w, "u16", 2);
        gguf_set_i16(w, "i16", -3);
        gguf_set_i32(w, "i32", -4);
        gguf_set_i64(w, "i64", -5);
        gguf_set_f64(w, "f64", 6.5);
        gguf_set_u8(w, "u8", 7);
        break;
    }
    return w;
}

enum { N_CORPUS = 4 };

static void test_fuzz_corpus(void) {
    const char *out_dir = getenv("LLAMAC_WRITE_FUZZ_CORPUS");  /* regenerate: set to the corpus dir */
    for (int k = 0; k < N_CORPUS; k++) {
        struct gguf_writer *w = corpus_writer(k);
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%d.gguf", out_dir ? out_dir : CORPUS_DIR, k);
        if (out_dir) CHECK(gguf_write_file(w, path));
        /* the committed seeds are what the writer makes now, and they open */
        CHECK(gguf_write_file(w, tmp_path()));
        CHECK_MSG(test_files_equal(path, tmp_path()), "%s is stale (regenerate with LLAMAC_WRITE_FUZZ_CORPUS)", path);
        struct gguf_reader *r = gguf_open_file(path, false);
        CHECK_MSG(r != NULL, "%s: %s", path, error_last());
        gguf_close(r);
        gguf_writer_free(w);
    }
}

/* ---- llamac info --------------------------------------------------------------- */

static bool has_line(const char *text, const char *prefix, const char *rest) {
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, prefix, strlen(prefix)) != 0) continue;
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        /* compare with runs of spaces collapsed, so column widths may change */
        char squeezed[512];
        size_t k = 0;
        for (const char *c = buf + strlen(prefix); *c && k + 1 < sizeof squeezed; c++) {
            if (*c == ' ' && (k == 0 || squeezed[k - 1] == ' ')) continue;
            squeezed[k++] = *c;
        }
        squeezed[k] = '\0';
        if (strcmp(squeezed, rest) == 0) return true;
    }
    return false;
}

static void test_info_command(void) {
    struct cli_result r = cli_run((const char *[]){ "info", test_require_shared("models/stories260K-Q8_0.gguf"), NULL },
                                  NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    const char *out = r.out;
    CHECK(has_line(out, "version:", "3"));
    CHECK(has_line(out, "alignment:", "32"));
    CHECK(has_line(out, "data offset:", "14240"));
    CHECK(has_line(out, "metadata:", "21 keys"));
    CHECK(has_line(out, "  tokenizer.ggml.tokens", "arr[str] 512 [\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\", \"<0x01>\", \"<0x02>\", \"<0x03>\", \"<0x04>\", ...]"));
    CHECK(has_line(out, "  general.architecture", "str \"llama\""));
    CHECK(has_line(out, "  llama.attention.layer_norm_rms_epsilon", "f32 0.000010"));
    CHECK(has_line(out, "  general.file_type", "u32 7"));
    CHECK(has_line(out, "tensors:", "48"));
    CHECK(has_line(out, "      9", "blk.0.ffn_down.weight f32 [172, 64] 94912 44032"));
    CHECK(has_line(out, "     47", "blk.4.ffn_norm.weight f32 [64] 474752 256"));
    CHECK(has_line(out, "total:", "48 tensors, 292800 elements, 474848 bytes of tensor data"));

    cli_result_free(&r);

    /* a bad file: one line, status 1 */
    CHECK(test_write_file(tmp_path(), "GGUF\x01\0\0\0", 8));
    r = cli_run((const char *[]){ "info", tmp_path(), NULL }, NULL, 300);
    CHECK_EQ_INT(r.status, 1);
    char expect[600];
    snprintf(expect, sizeof expect, "llamac info: %s: GGUF version 1 is not supported (too old); re-convert the model\n", tmp_path());
    CHECK_STR_EQ(r.err, expect);
    CHECK_STR_EQ(r.out, "");
    cli_result_free(&r);
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level; (void)text; (void)user_data;
}

int main(void) {
    log_set_callback(quiet_log, NULL);  /* expected errors are checked through error_last() */
    test_tmp_dir_create("test_gguf");
    test_writer_types();
    test_writer_tensors();
    test_writer_stream();
    test_fuzz_corpus();
    if (g_test_failures == 0 && !test_shared_path("models")) {
        test_tmp_dir_remove();
        test_skip("shared models not found (set LLAMAC_SHARED)");
    }
    test_getters_real_file();
    test_golden_metadata();
    test_round_trip_all_models();
    test_info_command();
    test_tmp_dir_remove();
    return test_finish("test_gguf");
}
