/*
 * llama_model_quantize and `llamac quantize` against b1892's own outputs.
 *
 * - Every file type of golden/eval-synth-k.json: synth-k-F32.gguf quantized
 *   (with synth-k.imatrix where b1892 needed it) must give b1892's tensor
 *   types, general.file_type, and the shared file byte for byte (metadata and
 *   every tensor's data, k-quants and IQ2 included).
 * - stories260K -> Q8_0 / Q4_0 and synth-moe -> Q8_0: the whole file equals
 *   the shared one.
 * - only_copy, pure, allow_requantize, quantize_output_tensor, nthread, F16
 *   input, the importance-matrix loader and the mix rules on models other
 *   than synth-k, hostile inputs, and the CLI.
 * Under AddressSanitizer a representative subset of the golden types runs
 * unless LLAMAC_TEST_ALL=1.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli_test_util.h"
#include "core/fp16.h"
#include "core/log.h"
#include "golden_eval.h"
#include "gguf/gguf.h"
#include "llama.h"
#include "quant/quant.h"
#include "quantize/quantize.h"

/* synth and upper_type_name return rotating static buffers (as test_tmp_path does): copy what must live long. */

static bool file_exists(const char *path) {
    return access(path, F_OK) == 0;
}

static bool copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *data = test_read_file(from, &n);
    bool ok = data && test_write_file(to, data, n);
    free(data);
    return ok;
}

/* No "*.tmp-*" leftovers of the temp-file-then-rename output in the test directory. */
static int count_temp_files(void) {
    DIR *d = opendir(test_tmp_dir());
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp-") != NULL;
    if (d) closedir(d);
    return n;
}

static llama_model_quantize_params params_for(enum llama_ftype ftype) {
    llama_model_quantize_params p;
    memset(&p, 0, sizeof p);
    p.ftype = ftype;
    p.nthread = 2;
    p.quantize_output_tensor = true;
    return p;
}

static const char *synth(const char *name) {
    static char buf[4][256];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, sizeof buf[0], "models/synth-k/%s", name);
    return test_require_shared(p);
}

/* "Q4_K" for GGML_TYPE_Q4_K: golden files spell types in upper case. */
static const char *upper_type_name(enum ggml_type t) {
    static char buf[4][16];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, sizeof buf[0], "%s", type_name(t));
    for (char *c = p; *c; c++) *c = (char)toupper((unsigned char)*c);
    return p;
}

static uint32_t file_u32(const struct gguf_reader *r, const char *key) {
    uint32_t v = 0xffffffffu;
    if (!gguf_get_u32(r, key, &v)) error_clear();
    return v;
}

/* ---- importance matrix ------------------------------------------------------------ */

static void test_imatrix_load(void) {
    struct quantize_imatrix *im = quantize_imatrix_load(synth("synth-k.imatrix"));
    CHECK_MSG(im != NULL, "%s", error_last());
    if (!im) return;
    CHECK(quantize_imatrix_is_valid(im));
    CHECK_EQ_INT(quantize_imatrix_count(im), 14);
    int64_t n = 0;
    const float *w = quantize_imatrix_find(im, "blk.1.ffn_down.weight", &n);
    CHECK(w != NULL);
    CHECK_EQ_INT(n, 768);
    /* the file holds sums over 6 calls; b1892 divides on load, in float */
    if (w) CHECK(w[0] == 1807.741455078125f / 6.0f);
    w = quantize_imatrix_find(im, "blk.0.attn_q.weight", &n);
    CHECK(w != NULL && n == 256);
    CHECK(quantize_imatrix_find(im, "output.weight", &n) == NULL);
    CHECK(quantize_imatrix_find(im, "token_embd.weight", &n) == NULL);
    quantize_imatrix_exclude(im, "ffn_down");
    CHECK_EQ_INT(quantize_imatrix_count(im), 12);
    const char *keep[] = { "attn_q", "blk.1.ffn_up" };
    quantize_imatrix_keep_only(im, keep, 2);
    CHECK_EQ_INT(quantize_imatrix_count(im), 3);
    CHECK(quantize_imatrix_find(im, "blk.1.ffn_up.weight", NULL) != NULL);
    CHECK(quantize_imatrix_find(im, "blk.0.ffn_up.weight", NULL) == NULL);
    quantize_imatrix_free(im);
    int not_an_imatrix = 42;
    CHECK(!quantize_imatrix_is_valid(&not_an_imatrix));
    CHECK(!quantize_imatrix_is_valid(NULL));
}

/* An imatrix file from parts: n_entries, then (name, ncall, nval, values) entries. */
struct imx_builder {
    uint8_t bytes[4096];
    size_t n;
};

static void imx_put(struct imx_builder *b, const void *p, size_t n) {
    memcpy(b->bytes + b->n, p, n);
    b->n += n;
}

static void imx_i32(struct imx_builder *b, int32_t v) {
    imx_put(b, &v, 4);
}

static void imx_entry(struct imx_builder *b, const char *name, int32_t ncall, int32_t nval, float v) {
    imx_i32(b, (int32_t)strlen(name));
    imx_put(b, name, strlen(name));
    imx_i32(b, ncall);
    imx_i32(b, nval);
    for (int32_t i = 0; i < nval; i++) imx_put(b, &v, 4);
}

static bool imx_loads(const struct imx_builder *b) {
    const char *path = test_tmp_path("x.imatrix");
    CHECK(test_write_file(path, b->bytes, b->n));
    struct quantize_imatrix *im = quantize_imatrix_load(path);
    bool ok = im != NULL;
    if (!ok) CHECK(strstr(error_last(), "x.imatrix") != NULL);
    quantize_imatrix_free(im);
    return ok;
}

static void test_imatrix_hostile(void) {
    struct imx_builder b = { .n = 0 };
    CHECK(!imx_loads(&b));                      /* empty */
    imx_i32(&b, 0);
    CHECK(!imx_loads(&b));                      /* no entries */
    b.n = 0;
    imx_i32(&b, 2);
    imx_entry(&b, "a.weight", 2, 4, 3.0f);
    CHECK(!imx_loads(&b));                      /* second entry missing */
    b.n = 0;
    imx_i32(&b, 1);
    imx_i32(&b, 0x7fffffff);                    /* name longer than the file */
    CHECK(!imx_loads(&b));
    b.n = 0;
    imx_i32(&b, 1);
    imx_i32(&b, -3);
    CHECK(!imx_loads(&b));
    b.n = 0;
    imx_i32(&b, 1);
    imx_entry(&b, "a.weight", 1, 4, 1.0f);
    b.n -= 4;                                   /* truncated values */
    CHECK(!imx_loads(&b));
    b.n = 0;
    imx_i32(&b, 1);
    imx_i32(&b, 3);
    imx_put(&b, "a\0b", 3);                     /* NUL inside a name */
    imx_i32(&b, 1);
    imx_i32(&b, 1);
    imx_put(&b, &(float){ 1.0f }, 4);
    CHECK(!imx_loads(&b));
    b.n = 0;
    imx_i32(&b, 1);
    imx_i32(&b, 8);
    imx_put(&b, "a.weight", 8);
    imx_i32(&b, 1);
    imx_i32(&b, 0x40000000);                    /* 4 GiB of values claimed, 8 bytes present */
    imx_put(&b, (float[2]){ 1.0f, 2.0f }, 8);
    CHECK(!imx_loads(&b));
    b.n -= 12;
    imx_i32(&b, 0);                             /* no values */
    CHECK(!imx_loads(&b));
    /* a repeated name keeps the last entry; ncall <= 0 leaves the values; trailing bytes are ignored */
    b.n = 0;
    imx_i32(&b, 3);
    imx_entry(&b, "a.weight", 2, 2, 3.0f);
    imx_entry(&b, "b.weight", 0, 1, 5.0f);
    imx_entry(&b, "a.weight", 4, 3, 2.0f);
    imx_i32(&b, 12345);
    const char *path = test_tmp_path("ok.imatrix");
    CHECK(test_write_file(path, b.bytes, b.n));
    struct quantize_imatrix *im = quantize_imatrix_load(path);
    CHECK_MSG(im != NULL, "%s", error_last());
    if (im) {
        int64_t n = 0;
        const float *w = quantize_imatrix_find(im, "a.weight", &n);
        CHECK(w && n == 3 && w[2] == 0.5f);
        w = quantize_imatrix_find(im, "b.weight", &n);
        CHECK(w && n == 1 && w[0] == 5.0f);
        CHECK_EQ_INT(quantize_imatrix_count(im), 2);
    }
    quantize_imatrix_free(im);
    CHECK(quantize_imatrix_load(test_tmp_path("absent.imatrix")) == NULL);
}

/* ---- the mix on models other than synth-k -------------------------------------------- */

static enum ggml_type mix_one(struct quantize_mix_state *s, enum llama_ftype ftype, const char *name, int64_t ne0) {
    enum ggml_type base;
    CHECK(quantize_ftype_base_type(ftype, &base));
    return quantize_mix_type(s, base, name, ne0);
}

/* A LLaMA with n_layer layers; names as the converters write them. */
static void mix_model(struct quantize_mix_state *s, enum llama_ftype ftype, const struct quantize_model_info *m) {
    static char names[256][40];
    const char *ptrs[256];
    size_t n = 0;
    for (uint32_t l = 0; l < m->n_layer && n + 2 <= 256; l++) {
        snprintf(names[n], sizeof names[0], "blk.%u.attn_v.weight", l);
        ptrs[n] = names[n];
        n++;
        snprintf(names[n], sizeof names[0], "blk.%u.ffn_down.weight", l);
        ptrs[n] = names[n];
        n++;
    }
    quantize_mix_init(s, m, ftype, ptrs, n);
}

static void test_mix_rules(void) {
    struct quantize_mix_state s;
    /* 32-layer LLaMA-7B: Q4_K_M puts Q6_K on attn_v/ffn_down of layers 0-3, 28-31 and 6, 9, ... 27 */
    const struct quantize_model_info m7b = { .n_layer = 32, .n_gqa = 1 };
    mix_model(&s, LLAMA_FTYPE_MOSTLY_Q4_K_M, &m7b);
    CHECK_EQ_INT(s.n_attention_wv, 32);
    CHECK_EQ_INT(s.n_ffn_down, 32);
    static const int q6_layers[] = { 0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31 };
    int k = 0;
    for (int l = 0; l < 32; l++) {
        const bool more = k < 16 && q6_layers[k] == l;
        k += more;
        CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q4_K_M, "blk.x.attn_v.weight", 4096),
                     more ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K);
        CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q4_K_M, "blk.x.ffn_down.weight", 11008),
                     more ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K);
    }
    /* rows of 4160 do not fit 256-element blocks: b1892's fallback table */
    CHECK_EQ_INT(s.n_fallback, 0);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q4_K_M, "blk.0.attn_q.weight", 4160), GGML_TYPE_Q5_0);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q4_K_M, "output.weight", 4160), GGML_TYPE_Q8_0);
    CHECK_EQ_INT(s.n_fallback, 1);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q4_K_M, "output.weight", 4096), GGML_TYPE_Q6_K);

    /* Q3_K_M: the first two attn_v Q5_K, then Q4_K; ffn_down of the first 1/16 Q5_K */
    mix_model(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, &m7b);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.0.attn_v.weight", 4096), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.1.attn_v.weight", 4096), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.2.attn_v.weight", 4096), GGML_TYPE_Q4_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.0.ffn_down.weight", 11008), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.1.ffn_down.weight", 11008), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.2.ffn_down.weight", 11008), GGML_TYPE_Q4_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.2.attn_qkv.weight", 4096), GGML_TYPE_Q4_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_M, "blk.2.ffn_up.weight", 4096), GGML_TYPE_Q3_K);

    /* LLaMA-2-70B (80 layers, 8 KV groups): Q2_K attn_v -> Q4_K -> Q5_K for 70B */
    const struct quantize_model_info m70b = { .n_layer = 80, .n_gqa = 8, .is_70b = true };
    mix_model(&s, LLAMA_FTYPE_MOSTLY_Q2_K, &m70b);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q2_K, "blk.0.attn_v.weight", 8192), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q2_K, "blk.0.attn_output.weight", 8192), GGML_TYPE_Q3_K);
    mix_model(&s, LLAMA_FTYPE_MOSTLY_Q2_K_S, &m70b);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q2_K_S, "blk.0.attn_v.weight", 8192), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q2_K_S, "blk.0.ffn_down.weight", 28672), GGML_TYPE_Q4_K);
    for (int l = 1; l < 10; l++) mix_one(&s, LLAMA_FTYPE_MOSTLY_Q2_K_S, "blk.x.ffn_down.weight", 28672);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q2_K_S, "blk.10.ffn_down.weight", 28672), GGML_TYPE_Q2_K);
    mix_model(&s, LLAMA_FTYPE_MOSTLY_IQ2_XS, &m70b);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_IQ2_XS, "blk.0.attn_v.weight", 8192), GGML_TYPE_Q4_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_IQ2_XS, "blk.0.ffn_down.weight", 28672), GGML_TYPE_Q2_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_IQ2_XS, "blk.0.attn_q.weight", 8192), GGML_TYPE_IQ2_XS);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_IQ2_XS, "token_embd.weight", 8192), GGML_TYPE_Q2_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_IQ2_XS, "output.weight", 8192), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_IQ2_XS, "blk.0.attn_q.weight", 8200), GGML_TYPE_Q4_0);

    /* Mixtral-8x7B: attn_v and attn_k Q8_0, attn_output Q5_K; experts count as ffn_down */
    const struct quantize_model_info m8x7b = { .n_layer = 32, .n_gqa = 4, .n_expert = 8 };
    mix_model(&s, LLAMA_FTYPE_MOSTLY_Q3_K_S, &m8x7b);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_S, "blk.0.attn_v.weight", 4096), GGML_TYPE_Q8_0);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_S, "blk.0.attn_k.weight", 4096), GGML_TYPE_Q8_0);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_S, "blk.0.attn_output.weight", 4096), GGML_TYPE_Q5_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_S, "blk.0.ffn_down.3.weight", 14336), GGML_TYPE_Q3_K);
    CHECK_EQ_INT(s.i_ffn_down, 1);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q5_K_S, "blk.0.attn_output.weight", 4096), GGML_TYPE_Q5_K);

    /* Falcon: output always Q8_0; Q3_K_L ffn_down Q4_K */
    const struct quantize_model_info falcon = { .n_layer = 32, .n_gqa = 71, .is_falcon = true };
    mix_model(&s, LLAMA_FTYPE_MOSTLY_Q3_K_L, &falcon);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_L, "output.weight", 4544 * 2), GGML_TYPE_Q8_0);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_L, "blk.0.ffn_down.weight", 18176), GGML_TYPE_Q4_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q3_K_L, "blk.0.attn_output.weight", 4608), GGML_TYPE_Q4_K);

    /* legacy types and F16 keep their type except output.weight */
    mix_model(&s, LLAMA_FTYPE_MOSTLY_Q5_1, &m7b);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q5_1, "blk.0.attn_v.weight", 4096), GGML_TYPE_Q5_1);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_F16, "output.weight", 4096), GGML_TYPE_Q6_K);
    CHECK_EQ_INT(mix_one(&s, LLAMA_FTYPE_MOSTLY_Q8_0, "output.weight", 4096), GGML_TYPE_Q8_0);

    enum ggml_type t;
    CHECK(!quantize_ftype_base_type(LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16, &t));
    CHECK(!quantize_ftype_base_type(LLAMA_FTYPE_GUESSED, &t));
    CHECK(!quantize_ftype_base_type((enum llama_ftype)99, &t));
}

/* ---- comparing files ------------------------------------------------------------------- */

struct compare_result {
    int n_tensors, n_identical;
};

/* Compares `got` with b1892's `want`: metadata, tensor names/types/shapes, and data. */
static struct compare_result compare_with_reference(const char *got, const char *want, const char *label) {
    struct compare_result res = { 0, 0 };
    struct gguf_reader *a = gguf_open_file(got, true), *b = gguf_open_file(want, true);
    CHECK_MSG(a && b, "%s: %s", label, error_last());
    if (!a || !b) goto done;
    CHECK_EQ_INT(gguf_n_kv(a), gguf_n_kv(b));
    for (int64_t i = 0; i < gguf_n_kv(a) && i < gguf_n_kv(b); i++) {
        char va[256], vb[256];
        gguf_kv_to_str(a, i, va, sizeof va);
        gguf_kv_to_str(b, i, vb, sizeof vb);
        CHECK_MSG(strcmp(gguf_key(a, i), gguf_key(b, i)) == 0 && strcmp(va, vb) == 0, "%s: key %lld: %s=%s vs %s=%s",
                  label, (long long)i, gguf_key(a, i), va, gguf_key(b, i), vb);
    }
    CHECK_EQ_INT(gguf_n_tensors(a), gguf_n_tensors(b));
    for (int64_t i = 0; i < gguf_n_tensors(a) && i < gguf_n_tensors(b); i++) {
        const struct gguf_tensor_info *ta = gguf_tensor(a, i), *tb = gguf_tensor(b, i);
        CHECK_MSG(strcmp(ta->name, tb->name) == 0 && ta->type == tb->type && ta->n_dims == tb->n_dims &&
                  memcmp(ta->ne, tb->ne, sizeof ta->ne) == 0,
                  "%s: tensor %lld: %s %s vs %s %s", label, (long long)i, ta->name, type_name(ta->type), tb->name,
                  type_name(tb->type));
        res.n_tensors++;
        const bool same = ta->size == tb->size && memcmp(ta->data, tb->data, ta->size) == 0;
        res.n_identical += same;
        CHECK_MSG(same, "%s: %s (%s) differs from b1892's", label, ta->name, type_name(tb->type));
    }
done:
    gguf_close(a);
    gguf_close(b);
    return res;
}

/* ---- golden synth-k -------------------------------------------------------------------- */

static bool in_asan_subset(const char *file) {
    static const char *const subset[] = {
        "synth-k-Q8_0.gguf", "synth-k-Q4_0.gguf", "synth-k-F16.gguf", "synth-k-Q4_K_M.gguf",
        "synth-k-Q3_K_M.gguf", "synth-k-Q2_K_S.gguf", "synth-k-Q5_1-pure.gguf", "synth-k-Q6_K.gguf",
    };
    for (size_t i = 0; i < sizeof subset / sizeof subset[0]; i++) {
        if (strcmp(file, subset[i]) == 0) return true;
    }
    return false;
}

static void test_golden_synth_k(void) {
    cJSON *root = golden_load("golden/eval-synth-k.json");
    struct quantize_imatrix *im = quantize_imatrix_load(synth("synth-k.imatrix"));
    CHECK(im != NULL);
    const bool subset = TEST_UNDER_ASAN && !test_run_all();
    char src[256];
    snprintf(src, sizeof src, "%s", synth("synth-k-F32.gguf"));
    int n_files = 0, n_whole_identical = 0;
    const cJSON *model;
    cJSON_ArrayForEach(model, cJSON_GetObjectItem(root, "models")) {
        const char *file = cJSON_GetObjectItem(model, "file")->valuestring;
        const char *recipe = cJSON_GetObjectItem(model, "recipe")->valuestring;
        const int ftype = cJSON_GetObjectItem(model, "general.file_type")->valueint;
        if (strstr(recipe, "quantize") == NULL) continue; /* the F32 source itself */
        if (subset && !in_asan_subset(file)) continue;
        llama_model_quantize_params p = params_for((enum llama_ftype)ftype);
        p.pure = strstr(recipe, "--pure") != NULL;
        p.imatrix = strstr(recipe, "--imatrix") ? im : NULL;
        char out[256];
        snprintf(out, sizeof out, "%s", test_tmp_path(file));
        const uint32_t rc = llama_model_quantize(src, out, &p);
        CHECK_MSG(rc == 0, "%s: %s", file, error_last());
        if (rc != 0) continue;
        n_files++;

        /* b1892's per-tensor types, file type and quantization version */
        struct gguf_reader *r = gguf_open_file(out, true);
        CHECK_MSG(r != NULL, "%s: %s", file, error_last());
        if (!r) continue;
        const cJSON *types = cJSON_GetObjectItem(model, "tensor_types");
        CHECK_EQ_INT(gguf_n_tensors(r), cJSON_GetArraySize(types));
        for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
            const struct gguf_tensor_info *t = gguf_tensor(r, i);
            const cJSON *want = cJSON_GetObjectItem(types, t->name);
            CHECK_MSG(want && strcmp(want->valuestring, upper_type_name(t->type)) == 0, "%s: %s is %s, b1892: %s",
                      file, t->name, upper_type_name(t->type), want ? want->valuestring : "absent");
        }
        CHECK_EQ_INT(file_u32(r, "general.file_type"), ftype);
        CHECK_EQ_INT(file_u32(r, "general.quantization_version"), 2);
        gguf_close(r);

        char want_rel[128];
        snprintf(want_rel, sizeof want_rel, "models/synth-k/%s", file);
        const struct compare_result c = compare_with_reference(out, test_require_shared(want_rel), file);
        const bool whole = test_files_equal(out, test_require_shared(want_rel));
        CHECK_MSG(whole, "%s: the file differs from b1892's", file);
        n_whole_identical += whole;
        printf("  %-24s %2d/%2d tensors byte-identical to b1892%s\n", file, c.n_identical, c.n_tensors,
               whole ? " (whole file)" : "");
        remove(out);
    }
    printf("  %d of %d quantized files identical to b1892's byte for byte\n", n_whole_identical, n_files);
    CHECK(n_files >= (subset ? 8 : 26));
    quantize_imatrix_free(im);
    cJSON_Delete(root);
}

/* ---- whole files: stories260K and synth-moe --------------------------------------------- */

static void test_whole_files(void) {
    static const struct { const char *in, *want; enum llama_ftype ftype; } cases[] = {
        /* ffn_down (rows of 172) stays F32, output.weight (rows of 64) Q8_0 */
        { "models/stories260K.gguf", "models/stories260K-Q8_0.gguf", LLAMA_FTYPE_MOSTLY_Q8_0 },
        { "models/stories260K.gguf", "models/stories260K-Q4_0.gguf", LLAMA_FTYPE_MOSTLY_Q4_0 },
        /* the MoE router ffn_gate_inp stays F32 */
        { "models/synth-moe/synth-moe-F32.gguf", "models/synth-moe/synth-moe-Q8_0.gguf", LLAMA_FTYPE_MOSTLY_Q8_0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *out = test_tmp_path("whole.gguf");
        llama_model_quantize_params p = params_for(cases[i].ftype);
        CHECK_MSG(llama_model_quantize(test_require_shared(cases[i].in), out, &p) == 0, "%s", error_last());
        CHECK_MSG(test_files_equal(out, test_require_shared(cases[i].want)), "%s differs", cases[i].want);
        remove(out);
    }
    /* F16 keeps 172-wide rows (block size 1); the 64-wide output becomes Q8_0 (b1892's stories260K-F16) */
    const char *out = test_tmp_path("st-f16.gguf");
    llama_model_quantize_params p = params_for(LLAMA_FTYPE_MOSTLY_F16);
    CHECK(llama_model_quantize(test_require_shared("models/stories260K.gguf"), out, &p) == 0);
    struct compare_result c = compare_with_reference(out, test_require_shared("models/stories260K-F16.gguf"), "F16");
    CHECK_EQ_INT(c.n_identical, 48);
    remove(out);
}

/* ---- options ------------------------------------------------------------------------------ */

/* Quantizes `in` with p into out; true on success. */
static bool quantize(const char *in, const char *out, llama_model_quantize_params p) {
    return llama_model_quantize(in, out, &p) == 0;
}

static void test_only_copy(void) {
    /* a quantized model copies to the same bytes (its file type and version are already set) */
    const char *out = test_tmp_path("copy.gguf");
    llama_model_quantize_params p = params_for(LLAMA_FTYPE_ALL_F32); /* what `quantize ... COPY` passes */
    p.only_copy = true;
    CHECK(quantize(synth("synth-k-Q4_K_M.gguf"), out, p));
    CHECK(test_files_equal(out, synth("synth-k-Q4_K_M.gguf")));
    /* F32 input: data unchanged, general.file_type kept (0), quantization version added */
    CHECK(quantize(synth("synth-k-F32.gguf"), out, p));
    struct gguf_reader *a = gguf_open_file(out, true), *b = gguf_open_file(synth("synth-k-F32.gguf"), true);
    CHECK(a && b);
    if (a && b) {
        CHECK_EQ_INT(gguf_n_kv(a), gguf_n_kv(b) + 1);
        CHECK_EQ_INT(file_u32(a, "general.file_type"), 0);
        CHECK_EQ_INT(file_u32(a, "general.quantization_version"), 2);
        for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
            CHECK(gguf_tensor(a, i)->size == gguf_tensor(b, i)->size &&
                  memcmp(gguf_tensor(a, i)->data, gguf_tensor(b, i)->data, gguf_tensor(a, i)->size) == 0);
        }
    }
    gguf_close(a);
    gguf_close(b);
    /* no general.file_type in the input: b1892's guess (all F32) marked as guessed */
    CHECK(quantize(test_require_shared("models/stories260K.gguf"), out, p));
    a = gguf_open_file(out, true);
    CHECK(a && file_u32(a, "general.file_type") == (LLAMA_FTYPE_ALL_F32 | LLAMA_FTYPE_GUESSED));
    gguf_close(a);
    remove(out);
}

static void test_leave_output_tensor(void) {
    const char *out = test_tmp_path("leave.gguf");
    llama_model_quantize_params p = params_for(LLAMA_FTYPE_MOSTLY_Q4_0);
    p.quantize_output_tensor = false;
    CHECK(quantize(synth("synth-k-F32.gguf"), out, p));
    struct gguf_reader *r = gguf_open_file(out, true), *src = gguf_open_file(synth("synth-k-F32.gguf"), true),
                       *want = gguf_open_file(synth("synth-k-Q4_0.gguf"), true);
    CHECK(r && src && want);
    if (r && src && want) {
        for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
            const struct gguf_tensor_info *t = gguf_tensor(r, i);
            /* output.weight as the input has it, everything else as b1892's Q4_0 file */
            const struct gguf_tensor_info *ref =
                gguf_tensor(strcmp(t->name, "output.weight") == 0 ? src : want, i);
            CHECK_MSG(t->type == ref->type && t->size == ref->size && memcmp(t->data, ref->data, t->size) == 0,
                      "%s", t->name);
        }
    }
    gguf_close(r);
    gguf_close(src);
    gguf_close(want);
    remove(out);
}

/* `in` quantized tensor by tensor in the test: dequantize/convert to F32, then quant_quantize_chunk. */
static void check_against_reference(const char *out, const char *in) {
    struct gguf_reader *r = gguf_open_file(out, true), *src = gguf_open_file(in, true);
    CHECK(r && src);
    for (int64_t i = 0; r && src && i < gguf_n_tensors(r); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(r, i), *s = gguf_tensor(src, i);
        if (t->type == s->type) {
            CHECK(t->size == s->size && memcmp(t->data, s->data, t->size) == 0);
            continue;
        }
        const int64_t n = t->ne[0] * t->ne[1];
        float *f = malloc((size_t)n * sizeof *f);
        uint8_t *q = malloc(t->size);
        if (s->type == GGML_TYPE_F32) {
            memcpy(f, s->data, (size_t)n * sizeof *f); /* may be unaligned */
        } else if (s->type == GGML_TYPE_F16) {
            for (int64_t j = 0; j < n; j++) {
                fp16_t h;
                memcpy(&h, (const uint8_t *)s->data + 2 * j, 2);
                f[j] = fp16_to_fp32(h);
            }
        } else {
            type_traits_get(s->type)->to_float(s->data, f, n);
        }
        CHECK(quant_quantize_chunk(t->type, f, q, 0, t->ne[1], t->ne[0], NULL, NULL) == t->size);
        CHECK_MSG(memcmp(q, t->data, t->size) == 0, "%s", t->name);
        free(f);
        free(q);
    }
    gguf_close(r);
    gguf_close(src);
}

static void test_requantize(void) {
    const char *out = test_tmp_path("requant.gguf");
    llama_model_quantize_params p = params_for(LLAMA_FTYPE_MOSTLY_Q4_0);
    /* refused without allow_requantize: no file, and an existing one is left alone */
    CHECK(test_write_file(out, "keep", 4));
    error_clear();
    CHECK(!quantize(synth("synth-k-Q8_0.gguf"), out, p));
    CHECK(strstr(error_last(), "requantizing from type q8_0 is disabled") != NULL);
    size_t n;
    char *kept = test_read_file(out, &n);
    CHECK(kept && n == 4 && memcmp(kept, "keep", 4) == 0);
    free(kept);
    /* allowed: Q8_0 dequantized, then Q4_0 (output.weight Q6_K) */
    p.allow_requantize = true;
    CHECK_MSG(quantize(synth("synth-k-Q8_0.gguf"), out, p), "%s", error_last());
    check_against_reference(out, synth("synth-k-Q8_0.gguf"));
    /* F16 input needs no permission; its Q6_K output.weight is already the target type: copied */
    p.allow_requantize = false;
    CHECK_MSG(quantize(synth("synth-k-F16.gguf"), out, p), "%s", error_last());
    check_against_reference(out, synth("synth-k-F16.gguf"));
    /* ... but Q8_0 wants output.weight in Q8_0, which is a requantization of its Q6_K */
    p.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    CHECK(!quantize(synth("synth-k-F16.gguf"), out, p));
    CHECK(strstr(error_last(), "output.weight") != NULL);
    remove(out);
}

static void test_threads(void) {
    /* rows are quantized independently: any thread count gives the same file */
    char a[256], b[256], c[256], self[256];
    snprintf(a, sizeof a, "%s", test_tmp_path("t1.gguf"));
    snprintf(b, sizeof b, "%s", test_tmp_path("t5.gguf"));
    snprintf(c, sizeof c, "%s", test_tmp_path("t0.gguf"));
    snprintf(self, sizeof self, "%s", test_tmp_path("self.gguf"));
    llama_model_quantize_params p = params_for(LLAMA_FTYPE_MOSTLY_Q4_K_M);
    p.nthread = 1;
    CHECK(quantize(synth("synth-k-F32.gguf"), a, p));
    p.nthread = 5;
    CHECK(quantize(synth("synth-k-F32.gguf"), b, p));
    p.nthread = 0; /* one per CPU */
    CHECK(quantize(synth("synth-k-F32.gguf"), c, p));
    CHECK(test_files_equal(a, b));
    CHECK(test_files_equal(a, c));
    /* quantizing a file onto itself works (the result is renamed over it at the end) */
    CHECK(copy_file(synth("synth-k-F32.gguf"), self));
    p.nthread = 2;
    CHECK(quantize(self, self, p));
    CHECK(test_files_equal(self, a));
    remove(a);
    remove(b);
    remove(c);
    remove(self);
}

/* ---- a hand-made model: odd shapes, unaligned data, long names ---------------------------- */

/* Writes a tiny LLaMA-named model with general.alignment 1 (so F32 data is unaligned). */
static bool write_odd_model(const char *path, bool with_i32) {
    static float f32[4][256];
    static fp16_t f16[2][96];
    static int32_t i32[64];
    uint64_t seed = 7;
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < 256; i++) f32[t][i] = test_rand_uniform(&seed, -1.0f, 1.0f);
    }
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < 96; i++) f16[t][i] = fp32_to_fp16(test_rand_uniform(&seed, -1.0f, 1.0f));
    }
    static char long_name[700];
    memset(long_name, 'n', 600);
    strcpy(long_name + 600, ".weight");
    struct gguf_writer *w = gguf_writer_new();
    bool ok = w && gguf_set_str(w, "general.architecture", "llama") && gguf_set_u32(w, "general.alignment", 1) &&
              gguf_set_u32(w, "llama.block_count", 1) && gguf_set_u32(w, "llama.attention.head_count", 2);
    ok = ok && gguf_add_tensor(w, "odd.weight", GGML_TYPE_F16, 2, (int64_t[]){ 3, 1 }, f16[0], 6);
    ok = ok && gguf_add_tensor(w, "blk.0.attn_q.weight", GGML_TYPE_F32, 2, (int64_t[]){ 64, 4 }, f32[0], 1024);
    ok = ok && gguf_add_tensor(w, "blk.0.ffn_up.weight", GGML_TYPE_F16, 2, (int64_t[]){ 48, 2 }, f16[1], 192);
    ok = ok && gguf_add_tensor(w, long_name, GGML_TYPE_F32, 2, (int64_t[]){ 32, 2 }, f32[1], 256);
    ok = ok && gguf_add_tensor(w, "cube.weight", GGML_TYPE_F32, 3, (int64_t[]){ 32, 2, 2 }, f32[2], 512);
    ok = ok && gguf_add_tensor(w, "blk.0.ffn_gate_inp.weight", GGML_TYPE_F32, 2, (int64_t[]){ 32, 2 }, f32[3], 256);
    if (with_i32) ok = ok && gguf_add_tensor(w, "ints.weight", GGML_TYPE_I32, 2, (int64_t[]){ 32, 2 }, i32, 256);
    ok = ok && gguf_write_file(w, path);
    gguf_writer_free(w);
    return ok;
}

static void test_odd_model(void) {
    char in[256], out[256];
    snprintf(in, sizeof in, "%s", test_tmp_path("odd.gguf"));
    snprintf(out, sizeof out, "%s", test_tmp_path("odd-q8.gguf"));
    CHECK_MSG(write_odd_model(in, false), "%s", error_last());
    llama_model_quantize_params p = params_for(LLAMA_FTYPE_MOSTLY_Q8_0);
    p.nthread = 3;
    CHECK_MSG(quantize(in, out, p), "%s", error_last());
    struct gguf_reader *r = gguf_open_file(out, true), *src = gguf_open_file(in, true);
    CHECK(r && src);
    if (r && src) {
        static const struct { enum ggml_type type; uint32_t n_dims; } want[] = {
            { GGML_TYPE_F16, 1 },  /* [3, 1]: one dimension for ggml, so not quantized (and written as 1-D) */
            { GGML_TYPE_Q8_0, 2 }, /* unaligned F32 input */
            { GGML_TYPE_F16, 2 },  /* rows of 48 do not fit Q8_0 blocks: kept */
            { GGML_TYPE_Q8_0, 2 }, /* a 607-character name */
            { GGML_TYPE_F32, 3 },  /* only 2-D tensors are quantized */
            { GGML_TYPE_F32, 2 },  /* MoE routers never */
        };
        CHECK_EQ_INT(gguf_n_tensors(r), 6);
        CHECK_EQ_INT(gguf_alignment(r), 1);
        for (int64_t i = 0; i < gguf_n_tensors(r) && i < 6; i++) {
            const struct gguf_tensor_info *t = gguf_tensor(r, i);
            CHECK_MSG(t->type == want[i].type && t->n_dims == want[i].n_dims, "%s: %s, %u dims", t->name,
                      type_name(t->type), t->n_dims);
        }
        check_against_reference(out, in);
    }
    gguf_close(r);
    gguf_close(src);
    /* a 2-D integer weight cannot be converted */
    CHECK(write_odd_model(in, true));
    remove(out);
    error_clear();
    CHECK(!quantize(in, out, p));
    CHECK(strstr(error_last(), "ints.weight: cannot dequantize/convert tensor type i32") != NULL);
    CHECK(!file_exists(out));
}

/* ---- hostile inputs and bad arguments ------------------------------------------------------ */

/* Expect failure with `part` in the message and no output file. */
static void check_fails(const char *in, const char *out, llama_model_quantize_params p, const char *part) {
    remove(out);
    error_clear();
    CHECK_MSG(llama_model_quantize(in, out, &p) != 0, "expected a failure mentioning '%s'", part);
    CHECK_MSG(strstr(error_last(), part) != NULL, "'%s' not in '%s'", part, error_last());
    CHECK(!file_exists(out));
}

/* synth-k-F32 with one metadata change (set_str value, or the key removed when value is NULL). */
static void write_variant(const char *path, const char *key, const char *value) {
    struct gguf_reader *r = gguf_open_file(synth("synth-k-F32.gguf"), true);
    struct gguf_writer *w = r ? gguf_writer_from_reader(r) : NULL;
    CHECK(w != NULL);
    if (!w) return;
    CHECK(value ? gguf_set_str(w, key, value) : gguf_remove_key(w, key));
    for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(r, i);
        CHECK(gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size));
    }
    CHECK(gguf_write_file(w, path));
    gguf_writer_free(w);
    gguf_close(r);
}

static void test_hostile(void) {
    char in[256], out[256];
    snprintf(in, sizeof in, "%s", synth("synth-k-F32.gguf"));
    snprintf(out, sizeof out, "%s", test_tmp_path("bad.gguf"));
    llama_model_quantize_params p = params_for(LLAMA_FTYPE_MOSTLY_Q4_0);

    check_fails(test_tmp_path("absent.gguf"), out, p, "absent.gguf");
    /* truncated and garbage inputs */
    size_t n;
    char *bytes = test_read_file(in, &n);
    CHECK(bytes && test_write_file(test_tmp_path("trunc.gguf"), bytes, 5000));
    check_fails(test_tmp_path("trunc.gguf"), out, p, "trunc.gguf");
    memset(bytes, 0x5a, 4096);
    CHECK(test_write_file(test_tmp_path("garbage.gguf"), bytes, 4096));
    check_fails(test_tmp_path("garbage.gguf"), out, p, "garbage.gguf");
    free(bytes);
    /* metadata b1892's loader needs */
    write_variant(test_tmp_path("arch.gguf"), "general.architecture", "no-such-arch");
    check_fails(test_tmp_path("arch.gguf"), out, p, "unknown model architecture");
    write_variant(test_tmp_path("layers.gguf"), "llama.block_count", NULL);
    check_fails(test_tmp_path("layers.gguf"), out, p, "llama.block_count");
    write_variant(test_tmp_path("heads.gguf"), "llama.attention.head_count", "four");
    check_fails(test_tmp_path("heads.gguf"), out, p, "llama.attention.head_count");

    /* unwritable output */
    check_fails(in, "/nonexistent-dir/out.gguf", p, "/nonexistent-dir/out.gguf");
    /* file types llama_model_quantize cannot produce */
    static const int bad_ftypes[] = { LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16, 5, 6, 22, 99, LLAMA_FTYPE_GUESSED, -1 };
    for (size_t i = 0; i < sizeof bad_ftypes / sizeof bad_ftypes[0]; i++) {
        check_fails(in, out, params_for((enum llama_ftype)bad_ftypes[i]), "invalid output file type");
    }
    /* very low-bit types without importance weights (b1892 refuses) */
    check_fails(in, out, params_for(LLAMA_FTYPE_MOSTLY_IQ2_XXS), "missing importance matrix");
    check_fails(in, out, params_for(LLAMA_FTYPE_MOSTLY_IQ2_XS), "missing importance matrix");
    check_fails(in, out, params_for(LLAMA_FTYPE_MOSTLY_Q2_K_S), "missing importance matrix");
    struct quantize_imatrix *im = quantize_imatrix_load(synth("synth-k.imatrix"));
    quantize_imatrix_exclude(im, "blk.1.ffn_up");
    p = params_for(LLAMA_FTYPE_MOSTLY_IQ2_XXS);
    p.imatrix = im;
    check_fails(in, out, p, "blk.1.ffn_up.weight");
    quantize_imatrix_free(im);
    /* an imatrix pointer that is not one */
    int junk[16] = { 0 };
    p.imatrix = junk;
    check_fails(in, out, p, "imatrix");
    /* NULL arguments */
    p = params_for(LLAMA_FTYPE_MOSTLY_Q4_0);
    CHECK(llama_model_quantize(NULL, out, &p) != 0);
    CHECK(llama_model_quantize(in, NULL, &p) != 0);
    CHECK(llama_model_quantize(in, out, NULL) != 0);
    CHECK(!file_exists(out));
    CHECK_EQ_INT(count_temp_files(), 0);
}

/* ---- the CLI ------------------------------------------------------------------------------- */

static void test_cli(void) {
    char in[512], bad_out[512];
    snprintf(in, sizeof in, "%s", synth("synth-k-F32.gguf"));
    snprintf(bad_out, sizeof bad_out, "%s", test_tmp_path("cli-bad.gguf"));
    struct cli_result r = cli_run((const char *[]){ "quantize", in, test_tmp_path("cli.gguf"), "q8_0", "2", NULL },
                                  NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    CHECK(test_files_equal(test_tmp_path("cli.gguf"), synth("synth-k-Q8_0.gguf")));
    /* per-tensor progress and the size summary */
    CHECK(strstr(r.err, "[   1/  21]                    token_embd.weight - [  256,   512,     1,     1], type =    f32, "
                        "quantizing to q8_0 .. size =     0.50 MiB ->     0.13 MiB") != NULL);
    CHECK(strstr(r.err, "[   2/  21]                   output_norm.weight - [  256,     1,     1,     1], type =    f32, "
                        "size =    0.001 MB") != NULL);
    CHECK(strstr(r.err, "model size  =     7.00 MB") != NULL);
    CHECK(strstr(r.err, "quant size  =     1.86 MB") != NULL);
    cli_result_free(&r);
    /* the type by number, OUT left out: ggml-model-TYPE.gguf beside IN; COPY */
    CHECK(copy_file(in, test_tmp_path("in.gguf")));
    r = cli_run((const char *[]){ "quantize", "--pure", test_tmp_path("in.gguf"), "2", NULL }, NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    cli_result_free(&r);
    CHECK(test_files_equal(test_tmp_path("ggml-model-Q4_0.gguf"), synth("synth-k-Q4_0-pure.gguf")));
    r = cli_run((const char *[]){ "quantize", synth("synth-k-Q2_K.gguf"), test_tmp_path("copy.gguf"), "COPY", NULL },
                NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    cli_result_free(&r);
    CHECK(test_files_equal(test_tmp_path("copy.gguf"), synth("synth-k-Q2_K.gguf")));
    /* --leave-output-tensor and --allow-requantize reach the library */
    r = cli_run((const char *[]){ "quantize", "--leave-output-tensor", synth("synth-k-F16.gguf"),
                                  test_tmp_path("leave.gguf"), "Q8_0", NULL },
                NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    cli_result_free(&r);
    r = cli_run((const char *[]){ "quantize", synth("synth-k-F16.gguf"), test_tmp_path("requant.gguf"), "Q8_0", NULL },
                NULL, 300);
    CHECK(r.status != 0);
    CHECK(strstr(r.err, "requantizing from type q6_K is disabled") != NULL);
    cli_result_free(&r);
    r = cli_run((const char *[]){ "quantize", "--allow-requantize", synth("synth-k-F16.gguf"),
                                  test_tmp_path("requant.gguf"), "Q8_0", NULL },
                NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    cli_result_free(&r);
    /* errors: unknown type, low-bit type without --imatrix, unreadable --imatrix, mixed filters */
    const char *const bad[][10] = {
        { "quantize", in, bad_out, "Q7_X", NULL },
        { "quantize", in, bad_out, "IQ2_XS", NULL },
        { "quantize", in, bad_out, "Q2_K_S", NULL },
        { "quantize", "--imatrix", "/nonexistent.imatrix", in, bad_out, "IQ2_XS", NULL },
        { "quantize", "--include-weights", "a", "--exclude-weights", "b", in, bad_out, "Q4_0", NULL },
        { "quantize", in, bad_out, "Q4_0", "many", NULL },
        { "quantize", "--bogus", in, bad_out, "Q4_0", NULL },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = cli_run(bad[i], NULL, 300);
        CHECK_MSG(r.status != 0, "case %zu", i);
        CHECK_MSG(strstr(r.err, "llamac quantize: ") != NULL, "case %zu: %s", i, r.err);
        CHECK(!file_exists(bad_out));
        cli_result_free(&r);
    }
    /* --help lists b1892's types with their numbers */
    r = cli_run((const char *[]){ "quantize", "--help", NULL }, NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    CHECK(strstr(r.out, "  19  or  IQ2_XXS : ") != NULL);
    CHECK(strstr(r.out, "  21  or  Q2_K_S  : ") != NULL);
    CHECK(strstr(r.out, "  12  or  Q3_K    : alias for Q3_K_M") != NULL);
    CHECK(strstr(r.out, "          COPY    : ") != NULL);
    cli_result_free(&r);
}

int main(void) {
    test_tmp_dir_create("test_quantize");
    test_imatrix_load();
    test_imatrix_hostile();
    test_mix_rules();
    test_golden_synth_k();
    test_whole_files();
    test_only_copy();
    test_leave_output_tensor();
    test_requantize();
    test_threads();
    test_odd_model();
    test_hostile();
    test_cli();
    test_tmp_dir_remove();
    return test_finish("test_quantize");
}
