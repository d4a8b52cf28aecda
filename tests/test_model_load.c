/*
 * Model loading through llama.h: what b1892 reports for the stories260K files
 * (golden/models-stories260K.json), metadata overrides, the progress callback
 * and cancelling, mmap vs read, and broken files.
 */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "golden_eval.h"
#include "model/model.h"

static void test_golden_queries(void) {
    cJSON *golden = golden_load("golden/models-stories260K.json");
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(golden, "models")) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s", cJSON_GetObjectItem(m, "file")->valuestring);
        struct llama_model *model = golden_load_model(rel);
        CHECK(model != NULL);
        if (!model) continue;
        char buf[256];
        llama_model_desc(model, buf, sizeof buf);
        CHECK_STR_EQ(buf, cJSON_GetObjectItem(m, "desc")->valuestring);
        CHECK_EQ_INT(llama_model_size(model), (long long)cJSON_GetObjectItem(m, "size")->valuedouble);
        CHECK_EQ_INT(llama_model_n_params(model), (long long)cJSON_GetObjectItem(m, "n_params")->valuedouble);
        CHECK_EQ_INT(llama_n_vocab(model), (int)cJSON_GetObjectItem(m, "n_vocab")->valuedouble);
        CHECK_EQ_INT(llama_n_ctx_train(model), (int)cJSON_GetObjectItem(m, "n_ctx_train")->valuedouble);
        CHECK_EQ_INT(llama_n_embd(model), (int)cJSON_GetObjectItem(m, "n_embd")->valuedouble);
        CHECK_EQ_INT(llama_vocab_type(model), (int)cJSON_GetObjectItem(m, "vocab_type")->valuedouble);
        CHECK(llama_rope_freq_scale_train(model) == (float)cJSON_GetObjectItem(m, "rope_freq_scale_train")->valuedouble);
        const cJSON *meta = cJSON_GetObjectItem(m, "meta");
        CHECK_EQ_INT(llama_model_meta_count(model), (int)cJSON_GetObjectItem(m, "meta_count")->valuedouble);
        CHECK_EQ_INT(llama_model_meta_count(model), cJSON_GetArraySize(meta));
        for (int i = 0; i < llama_model_meta_count(model); i++) {
            char key[256], val[256];
            CHECK(llama_model_meta_key_by_index(model, i, key, sizeof key) > 0);
            CHECK(llama_model_meta_val_str_by_index(model, i, val, sizeof val) >= 0);
            const cJSON *want = cJSON_GetObjectItem(meta, key);
            CHECK_MSG(want && strcmp(val, want->valuestring) == 0, "%s: %s = '%s'", rel, key, val);
            char by_key[256];
            llama_model_meta_val_str(model, key, by_key, sizeof by_key);
            CHECK_STR_EQ(by_key, val);
        }
        CHECK_EQ_INT(llama_model_meta_val_str(model, "no.such.key", buf, sizeof buf), -1);
        CHECK_EQ_INT(llama_model_meta_key_by_index(model, 999, buf, sizeof buf), -1);
        CHECK(llama_get_model_tensor(model, "output_norm.weight") != NULL);
        CHECK(llama_get_model_tensor(model, "nope") == NULL);
        llama_free_model(model);
    }
    cJSON_Delete(golden);
}

static void test_overrides(void) {
    const char *path = test_require_shared("models/stories260K.gguf");
    struct llama_model_kv_override ov[2];
    memset(ov, 0, sizeof ov);
    snprintf(ov[0].key, sizeof ov[0].key, "llama.context_length");
    ov[0].tag = LLAMA_KV_OVERRIDE_INT;
    ov[0].int_value = 1024;
    struct llama_model_params mp = llama_model_default_params();
    mp.kv_overrides = ov;
    struct llama_model *model = llama_load_model_from_file(path, mp);
    CHECK(model && llama_n_ctx_train(model) == 1024);
    llama_free_model(model);
    ov[0].tag = LLAMA_KV_OVERRIDE_FLOAT; /* wrong type for an integer key */
    CHECK(llama_load_model_from_file(path, mp) == NULL);
}

struct progress {
    int calls;
    float last;
    bool monotone;
    int cancel_after;
};

static bool on_progress(float p, void *data) {
    struct progress *pr = data;
    if (p < pr->last) pr->monotone = false;
    pr->last = p;
    return ++pr->calls != pr->cancel_after;
}

static void test_progress_and_mmap(void) {
    const char *path = test_require_shared("models/stories260K-Q8_0.gguf");
    struct progress pr = { 0, 0.0f, true, -1 };
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = on_progress;
    mp.progress_callback_user_data = &pr;
    struct llama_model *model = llama_load_model_from_file(path, mp);
    CHECK(model != NULL);
    CHECK(pr.calls > 10 && pr.monotone && pr.last == 1.0f);
    pr = (struct progress){ 0, 0.0f, true, 5 };
    CHECK(llama_load_model_from_file(path, mp) == NULL); /* cancelled cleanly */
    CHECK_EQ_INT(pr.calls, 5);

    /* use_mmap = false reads the file: same logits */
    struct llama_model_params rp = llama_model_default_params();
    rp.use_mmap = false;
    rp.use_mlock = true; /* may be refused by the system: a warning, not an error */
    struct llama_model *read_model = llama_load_model_from_file(path, rp);
    CHECK(read_model != NULL);
    struct llama_context *a = golden_context(model, 1, false), *b = golden_context(read_model, 1, false);
    llama_token toks[8] = { 1, 403, 407, 261, 378 };
    CHECK(llama_decode(a, llama_batch_get_one(toks, 5, 0, 0)) == 0);
    CHECK(llama_decode(b, llama_batch_get_one(toks, 5, 0, 0)) == 0);
    CHECK(memcmp(llama_get_logits(a), llama_get_logits(b), 512 * sizeof(float)) == 0);
    llama_free(a);
    llama_free(b);

    /* use_mlock with the file mapped: the weights are packed as without it
     * (the copies locked instead of the file's pages), same logits */
    struct llama_model_params lp = llama_model_default_params();
    lp.use_mlock = true;
    struct llama_model *locked = llama_load_model_from_file(path, lp);
    CHECK(locked != NULL);
    if (locked) {
        const struct tensor *wq = locked->layers[0].wq;
        CHECK_MSG((wq->extra != NULL) == (cpu_repack_size(wq) > 0), "locked model: '%s' packed %d, packable %d",
                  wq->name, wq->extra != NULL, cpu_repack_size(wq) > 0);
        CHECK((wq->extra != NULL) == (model->layers[0].wq->extra != NULL));
        struct llama_context *c = golden_context(locked, 1, false);
        a = golden_context(model, 1, false);
        CHECK(llama_decode(a, llama_batch_get_one(toks, 5, 0, 0)) == 0);
        CHECK(llama_decode(c, llama_batch_get_one(toks, 5, 0, 0)) == 0);
        CHECK(memcmp(llama_get_logits(a), llama_get_logits(c), 512 * sizeof(float)) == 0);
        llama_free(a);
        llama_free(c);
        llama_free_model(locked);
    }
    llama_free_model(read_model);
    llama_free_model(model);
}

static void test_broken_files(void) {
    size_t size = 0;
    char *bytes = test_read_file(test_require_shared("models/stories260K-Q4_0.gguf"), &size);
    const char *path = "test_model_load_bad.gguf";
    int rejected = 0, tried = 0;
    for (size_t len = 0; len < size; len += len < 4096 ? 61 : 7919) {
        CHECK(test_write_file(path, bytes, len));
        tried++;
        struct llama_model *m = llama_load_model_from_file(path, llama_model_default_params());
        if (!m) rejected++;
        llama_free_model(m);
    }
    CHECK_EQ_INT(rejected, tried);
    CHECK(llama_load_model_from_file("/nonexistent/model.gguf", llama_model_default_params()) == NULL);
    /* a vocabulary-only file has no weights: only vocab_only loads it */
    CHECK(golden_load_model("models/ggml-vocab-llama.gguf") == NULL);
    unlink(path);
    free(bytes);
}

int main(void) {
    llama_backend_init(false);
    test_golden_queries();
    test_overrides();
    test_progress_and_mmap();
    test_broken_files();
    llama_backend_free();
    return test_finish("test_model_load");
}
