/*
 * Vocabularies read from GGUF files:
 *  - ggml-vocab-llama.gguf (32000 SPM tokens): every case of
 *    golden/tokenizer-llama32k.json, the 26 vectors of b1892's
 *    test-tokenizer-0-llama (without and with BOS), the round trips of
 *    test-tokenizer-1-llama over every token and a sample of code points;
 *  - stories260K.gguf: the same table and cases as the golden file;
 *  - hand-written files with wrong key types, lengths and missing keys.
 */
#include "vocab_test_util.h"

#include "core/log.h"
#include "gguf/gguf.h"

#include <unistd.h>

static struct vocab *load(const char *rel) {
    const char *path = test_require_shared(rel);
    struct gguf_reader *r = gguf_open_file(path, true);
    CHECK(r != NULL);
    if (!r) {
        return NULL;
    }
    struct vocab *v = vocab_load_gguf(r);
    CHECK_MSG(v != NULL, "%s: %s", rel, error_last());
    gguf_close(r);
    return v;
}

static int json_int(const cJSON *obj, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(obj, key)->valueint;
}

static void check_header(const struct vocab *v, const cJSON *golden) {
    CHECK_EQ_INT(vocab_n_tokens(v), json_int(golden, "n_vocab"));
    CHECK_EQ_INT(vocab_type(v), json_int(golden, "vocab_type"));
    CHECK_EQ_INT(vocab_bos(v), json_int(golden, "bos"));
    CHECK_EQ_INT(vocab_eos(v), json_int(golden, "eos"));
    CHECK_EQ_INT(vocab_nl(v), json_int(golden, "nl"));
    CHECK_EQ_INT(vocab_add_bos(v), json_int(golden, "add_bos_token"));
    CHECK_EQ_INT(vocab_add_eos(v), json_int(golden, "add_eos_token"));
}

static void test_llama32k(void) {
    cJSON *golden = golden_load("golden/tokenizer-llama32k.json");
    struct vocab *v = load("models/ggml-vocab-llama.gguf");
    if (!v) {
        cJSON_Delete(golden);
        return;
    }
    check_header(v, golden);
    int n = check_golden_cases(v, cJSON_GetObjectItemCaseSensitive(golden, "cases"));
    CHECK_EQ_INT(n, 86);

    /* b1892's test-tokenizer-0-llama: add_bos false, then [BOS] + the same */
    int vectors = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(golden, "test_tokenizer_0_llama")) {
        size_t len = 0;
        char *text = golden_bytes(cJSON_GetObjectItemCaseSensitive(t, "text"), &len);
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(t, "expected_no_bos");
        for (int bos = 0; bos <= 1 && text; bos++) {
            int32_t n_ids;
            int32_t *ids = tokenize_all(v, text, len, bos, false, &n_ids);
            bool same = n_ids == cJSON_GetArraySize(want) + bos && (!bos || ids[0] == vocab_bos(v));
            for (int i = 0; same && i < cJSON_GetArraySize(want); i++) {
                same = ids[i + bos] == cJSON_GetArrayItem(want, i)->valueint;
            }
            CHECK_MSG(same, "test-tokenizer-0-llama '%s' (add_bos %d)", text, bos);
            free(ids);
        }
        free(text);
        vectors++;
    }
    CHECK_EQ_INT(vectors, 26);

    int32_t n_special;
    vocab_special_tokens(v, &n_special);
    printf("llama32k: %d golden cases, %d tokenizer-0 vectors, %d special tokens\n", n, vectors, n_special);

    /* test-tokenizer-1-llama */
    CHECK_EQ_INT(check_token_round_trip(v), 0);
    CHECK_EQ_INT(check_codepoint_round_trip(v, 1), 0);
    vocab_free(v);
    cJSON_Delete(golden);
}

static void test_stories(void) {
    cJSON *golden = golden_load("golden/tokenizer-stories260K.json");
    struct vocab *v = load("models/stories260K.gguf");
    if (!v) {
        cJSON_Delete(golden);
        return;
    }
    check_header(v, golden);
    int mismatches = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(golden, "vocab")) {
        int id = cJSON_GetArrayItem(row, 0)->valueint;
        const char *text = cJSON_GetArrayItem(row, 1)->valuestring;
        mismatches += strcmp(vocab_token_text(v, id), text) != 0 ||
                      vocab_token_score(v, id) != (float)cJSON_GetArrayItem(row, 2)->valuedouble;
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(check_golden_cases(v, cJSON_GetObjectItemCaseSensitive(golden, "cases")), 86);
    vocab_free(v);
    cJSON_Delete(golden);
}

/* ---- hand-written files ----------------------------------------------------- */

static char g_tmp[64];

enum defect {
    DEFECT_NONE,
    DEFECT_NO_MODEL,
    DEFECT_MODEL_NOT_STRING,
    DEFECT_NO_TOKENS,
    DEFECT_TOKENS_NOT_STRINGS,
    DEFECT_SCORES_SHORT,
    DEFECT_SCORES_I32,
    DEFECT_TYPES_F32,
    DEFECT_BOS_STRING,
    DEFECT_ADD_BOS_U8,
    DEFECT_GPT2_NO_MERGES,
    DEFECT_UNKNOWN_MODEL,
    DEFECT_BAD_BOS_ID,
};

static struct gguf_writer *spm_writer(enum defect defect) {
    static const char *const tokens[] = { "<unk>", "<s>", "</s>", "<0x0A>", "a", "\xE2\x96\x81" "a" };
    static const float scores[] = { 0, 0, 0, 0, -1, -2 };
    static const int32_t types[] = { 2, 3, 3, 6, 1, 1 };
    struct gguf_writer *w = gguf_writer_new();
    CHECK(w != NULL);
    gguf_set_str(w, "general.architecture", "llama");
    if (defect == DEFECT_MODEL_NOT_STRING) {
        gguf_set_u32(w, "tokenizer.ggml.model", 1);
    } else if (defect != DEFECT_NO_MODEL) {
        gguf_set_str(w, "tokenizer.ggml.model",
                     defect == DEFECT_GPT2_NO_MERGES ? "gpt2" : defect == DEFECT_UNKNOWN_MODEL ? "t5" : "llama");
    }
    if (defect == DEFECT_TOKENS_NOT_STRINGS) {
        gguf_set_arr_data(w, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, types, 6);
    } else if (defect != DEFECT_NO_TOKENS) {
        gguf_set_arr_str(w, "tokenizer.ggml.tokens", tokens, 6);
    }
    if (defect == DEFECT_SCORES_I32) {
        gguf_set_arr_data(w, "tokenizer.ggml.scores", GGUF_TYPE_INT32, types, 6);
    } else {
        gguf_set_arr_data(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, defect == DEFECT_SCORES_SHORT ? 5 : 6);
    }
    if (defect == DEFECT_TYPES_F32) {
        gguf_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_FLOAT32, scores, 6);
    } else {
        gguf_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 6);
    }
    if (defect == DEFECT_BOS_STRING) {
        gguf_set_str(w, "tokenizer.ggml.bos_token_id", "1");
    } else {
        gguf_set_u32(w, "tokenizer.ggml.bos_token_id", defect == DEFECT_BAD_BOS_ID ? 99 : 1);
    }
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 4);
    if (defect == DEFECT_ADD_BOS_U8) {
        gguf_set_u8(w, "tokenizer.ggml.add_bos_token", 1);
    } else {
        gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    }
    return w;
}

static struct vocab *load_written(enum defect defect) {
    struct gguf_writer *w = spm_writer(defect);
    CHECK(gguf_write_file(w, g_tmp));
    gguf_writer_free(w);
    struct gguf_reader *r = gguf_open_file(g_tmp, false);
    CHECK(r != NULL);
    struct vocab *v = r ? vocab_load_gguf(r) : NULL;
    gguf_close(r);
    return v;
}

static void test_written_files(void) {
    struct vocab *v = load_written(DEFECT_NONE);
    CHECK(v != NULL);
    if (v) {
        CHECK_EQ_INT(vocab_n_tokens(v), 6);
        CHECK_EQ_INT(vocab_bos(v), 1);
        CHECK_EQ_INT(vocab_eos(v), 2);
        CHECK_EQ_INT(vocab_pad(v), 4);
        CHECK_EQ_INT(vocab_nl(v), 3);
        CHECK_EQ_INT(vocab_add_bos(v), 1);
        CHECK_EQ_INT(vocab_add_eos(v), -1);
        CHECK(vocab_token_score(v, 5) == -2.0f);
        CHECK_EQ_INT(vocab_token_type(v, 3), LLAMA_TOKEN_TYPE_BYTE);
        int32_t ids[4];
        CHECK_EQ_INT(vocab_tokenize(v, "a", 1, true, false, ids, 4), 2);
        CHECK(ids[0] == 1 && ids[1] == 5);
    }
    vocab_free(v);

    /* an unknown tokenizer name falls back to SPM with a warning, as in b1892 */
    v = load_written(DEFECT_UNKNOWN_MODEL);
    CHECK(v != NULL && vocab_type(v) == LLAMA_VOCAB_TYPE_SPM);
    vocab_free(v);
    /* an out-of-range id keeps the default */
    v = load_written(DEFECT_BAD_BOS_ID);
    CHECK(v != NULL && vocab_bos(v) == 1);
    vocab_free(v);

    static const struct {
        enum defect defect;
        const char *expect;
    } bad[] = {
        { DEFECT_NO_MODEL, "tokenizer.ggml.model" },
        { DEFECT_MODEL_NOT_STRING, "tokenizer.ggml.model" },
        { DEFECT_NO_TOKENS, "tokenizer.ggml.tokens" },
        { DEFECT_TOKENS_NOT_STRINGS, "tokenizer.ggml.tokens" },
        { DEFECT_SCORES_SHORT, "tokenizer.ggml.scores" },
        { DEFECT_SCORES_I32, "tokenizer.ggml.scores" },
        { DEFECT_TYPES_F32, "tokenizer.ggml.token_type" },
        { DEFECT_BOS_STRING, "bos_token_id" },
        { DEFECT_ADD_BOS_U8, "add_bos_token" },
        { DEFECT_GPT2_NO_MERGES, "tokenizer.ggml.merges" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        v = load_written(bad[k].defect);
        CHECK_MSG(v == NULL, "defect %d accepted", (int)bad[k].defect);
        CHECK_MSG(strstr(error_last(), bad[k].expect) != NULL, "defect %d: '%s'", (int)bad[k].defect,
                  error_last());
        vocab_free(v);
    }
}

/* ---- the fuzzer's seed corpus ----------------------------------------------- */

#define CORPUS_DIR LLAMAC_SOURCE_DIR "/fuzz/corpus/vocab_gguf"

/* GPT-2 style: a few byte tokens (a, b, c, space as U+0120, newline as U+010A,
 * 0xC4 as U+00C4: b1892 finds the newline token by tokenizing the text U+010A,
 * whose first byte is 0xC4), two merges, <|endoftext|>. */
static struct gguf_writer *bpe_writer(void) {
    static const char *const tokens[] = { "a", "b", "c", "\xC4\xA0", "\xC4\x8A", "ab", "\xC4\xA0" "a", "<|endoftext|>",
                                          "\xC3\x84" };
    static const int32_t types[] = { 1, 1, 1, 1, 1, 1, 1, 3, 1 };
    static const char *const merges[] = { "a b", "\xC4\xA0 a" };
    struct gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tokens, 9);
    gguf_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 9);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, 2);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 7);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 7);
    return w;
}

static bool files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *da = test_read_file(a, &na), *db = test_read_file(b, &nb);
    bool same = da && db && na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return same;
}

static void test_fuzz_corpus(void) {
    const char *out_dir = getenv("LLAMAC_WRITE_FUZZ_CORPUS"); /* regenerate: set to the corpus dir */
    for (int k = 0; k < 2; k++) {
        struct gguf_writer *w = k == 0 ? spm_writer(DEFECT_NONE) : bpe_writer();
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%s.gguf", out_dir ? out_dir : CORPUS_DIR, k == 0 ? "spm" : "bpe");
        if (out_dir) {
            CHECK(gguf_write_file(w, path));
        }
        CHECK(gguf_write_file(w, g_tmp));
        CHECK_MSG(files_equal(path, g_tmp), "%s is stale (regenerate with LLAMAC_WRITE_FUZZ_CORPUS)", path);
        gguf_writer_free(w);
        struct gguf_reader *r = gguf_open_file(path, false);
        struct vocab *v = r ? vocab_load_gguf(r) : NULL;
        CHECK_MSG(v != NULL, "%s: %s", path, error_last());
        if (v && k == 1) {
            int32_t ids[8];
            CHECK_EQ_INT(vocab_tokenize(v, "ab a\n", 5, false, false, ids, 8), 3);
            CHECK(ids[0] == 5 && ids[1] == 6 && ids[2] == 4);
            CHECK_EQ_INT(vocab_nl(v), 8);
        }
        vocab_free(v);
        gguf_close(r);
    }
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_vocab_gguf_XXXXXX");
    int fd = mkstemp(g_tmp);
    CHECK(fd >= 0);
    close(fd);
    test_llama32k();
    test_stories();
    test_written_files();
    test_fuzz_corpus();
    unlink(g_tmp);
    return test_finish("test_vocab_gguf");
}
