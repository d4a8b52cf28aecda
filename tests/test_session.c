/*
 * State and session files (b1892 format, version 4): the session file b1892
 * wrote (golden/session-stories260K.json) loads and continues with the same
 * greedy tokens; ours has the same layout and sizes; a save/load round trip
 * is exact; truncated and corrupted files are rejected and leave the context
 * as it was.
 */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "golden_eval.h"

static struct llama_model *g_model;

static struct llama_context *new_ctx(void) {
    return golden_context(g_model, 1, false);
}

static size_t b64_decode(const char *in, uint8_t *out) {
    static const char *tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (; *in; in++) {
        const char *p = strchr(tbl, *in);
        if (!p || *in == '=') continue;
        acc = (acc << 6) | (uint32_t)(p - tbl);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n;
}

static void greedy(struct llama_context *ctx, int pos, int n, llama_token *out) {
    const int n_vocab = llama_n_vocab(g_model);
    for (int i = 0; i < n; i++) {
        out[i] = golden_argmax(llama_get_logits(ctx), n_vocab);
        CHECK(llama_decode(ctx, llama_batch_get_one(&out[i], 1, pos + i, 0)) == 0);
    }
}

static void test_golden_file(const cJSON *golden, const uint8_t *file, size_t size, const char *path) {
    int32_t want_tokens[8], want_greedy[20];
    golden_int_array(cJSON_GetObjectItem(golden, "tokens"), want_tokens, 8);
    golden_int_array(cJSON_GetObjectItem(golden, "greedy20_after_load"), want_greedy, 20);

    struct llama_context *ctx = new_ctx();
    llama_token toks[16];
    size_t n_toks = 0;
    CHECK(llama_load_session_file(ctx, path, toks, 16, &n_toks));
    CHECK_EQ_INT(n_toks, 5);
    CHECK(memcmp(toks, want_tokens, 5 * sizeof(int32_t)) == 0);
    llama_token got[20];
    greedy(ctx, 5, 20, got);
    CHECK_MSG(memcmp(got, want_greedy, sizeof got) == 0, "greedy continuation after loading b1892's session differs");
    llama_free(ctx);

    /* ours, after the same decode: same sizes, same bytes except float rounding */
    ctx = new_ctx();
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 5, 0, 0)) == 0);
    CHECK_EQ_INT(llama_get_state_size(ctx), 753764);
    uint8_t *state = malloc(llama_get_state_size(ctx));
    CHECK_EQ_INT(llama_copy_state_data(ctx, state), 15084);
    const char *ours = "test_session_ours.bin";
    CHECK(llama_save_session_file(ctx, ours, toks, 5));
    size_t our_size = 0;
    uint8_t *ourbytes = (uint8_t *)test_read_file(ours, &our_size);
    CHECK_EQ_INT(our_size, size);
    /* header, tokens and RNG text identical; state blob identical to copy_state_data */
    const size_t header = 96 + 5 * 4;
    CHECK(ourbytes && memcmp(ourbytes, file, header + 8 + 6) == 0);
    CHECK(ourbytes && memcmp(ourbytes + header, state, 15084) == 0);
    /* cell list at the end: 256 cells, 5 used with seq 0 -> identical bytes */
    const size_t cells = 5 * (4 + 8 + 4) + 251 * (4 + 8);
    CHECK(ourbytes && memcmp(ourbytes + size - cells, file + size - cells, cells) == 0);
    free(ourbytes);
    free(state);
    unlink(ours);
    llama_free(ctx);
}

static void test_round_trip_and_corruption(void) {
    struct llama_context *ctx = new_ctx();
    llama_token toks[64];
    int n = llama_tokenize(g_model, "Lily had a red ball", 19, toks, 64, true, false);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    const char *path = "test_session_rt.bin";
    CHECK(llama_save_session_file(ctx, path, toks, (size_t)n));
    llama_token cont_a[10];
    greedy(ctx, n, 10, cont_a);

    struct llama_context *ctx2 = new_ctx();
    llama_token back[64];
    size_t n_back = 0;
    CHECK(llama_load_session_file(ctx2, path, back, 64, &n_back));
    CHECK_EQ_INT(n_back, n);
    llama_token cont_b[10];
    greedy(ctx2, n, 10, cont_b);
    CHECK(memcmp(cont_a, cont_b, sizeof cont_a) == 0);

    /* state blob round trip through memory */
    uint8_t *blob = malloc(llama_get_state_size(ctx2));
    size_t blob_n = llama_copy_state_data(ctx2, blob);
    struct llama_context *ctx3 = new_ctx();
    CHECK_EQ_INT(llama_set_state_data(ctx3, blob), blob_n);
    CHECK(memcmp(llama_get_logits(ctx3), llama_get_logits(ctx2), 512 * sizeof(float)) == 0);
    free(blob);

    /* a capacity too small for the tokens is an error */
    CHECK(!llama_load_session_file(ctx2, path, back, 2, &n_back));

    /* every truncation and many corruptions: an error, and the target context unchanged */
    size_t size = 0;
    uint8_t *bytes = (uint8_t *)test_read_file(path, &size);
    float before[512];
    memcpy(before, llama_get_logits(ctx3), sizeof before);
    const char *bad = "test_session_bad.bin";
    int rejected = 0, tried = 0;
    for (size_t len = 0; len < size; len += len < 200 ? 1 : 97) {
        CHECK(test_write_file(bad, bytes, len));
        tried++;
        rejected += !llama_load_session_file(ctx3, bad, back, 64, &n_back);
    }
    CHECK_EQ_INT(rejected, tried);
    /* targeted corruptions: magic, version, hparams, token count, rng size and text, logits size, kv size, a cell */
    const size_t offs[] = { 0, 4, 12, 92, 96 + 4 * (size_t)n, 96 + 4 * (size_t)n + 8 };
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        uint8_t *copy = malloc(size);
        memcpy(copy, bytes, size);
        copy[offs[i]] ^= 0x5a;
        copy[offs[i] + 3] ^= 0x40;
        CHECK(test_write_file(bad, copy, size));
        CHECK_MSG(!llama_load_session_file(ctx3, bad, back, 64, &n_back), "corruption at %zu accepted", offs[i]);
        free(copy);
    }
    /* random byte flips: loading may succeed (e.g. a flipped logit) but must never crash */
    uint64_t rng = 42;
    for (int k = 0; k < 200; k++) {
        uint8_t *copy = malloc(size);
        memcpy(copy, bytes, size);
        copy[test_rand_u64(&rng) % size] ^= (uint8_t)(1 + test_rand_u64(&rng) % 255);
        CHECK(test_write_file(bad, copy, size));
        struct llama_context *tmp = new_ctx();
        if (llama_load_session_file(tmp, bad, back, 64, &n_back)) {
            llama_token t = 1;
            llama_decode(tmp, llama_batch_get_one(&t, 1, (llama_pos)n_back, 0));
        }
        llama_free(tmp);
        free(copy);
    }
    CHECK(memcmp(before, llama_get_logits(ctx3), sizeof before) == 0);
    llama_token t = toks[1];
    CHECK(llama_decode(ctx3, llama_batch_get_one(&t, 1, n, 0)) == 0); /* still usable */

    /* a session from another context size is refused */
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    struct llama_context *small = llama_new_context_with_model(g_model, cp);
    CHECK(!llama_load_session_file(small, path, back, 64, &n_back));
    llama_free(small);
    CHECK(!llama_load_session_file(ctx3, "/nonexistent/session.bin", back, 64, &n_back));

    free(bytes);
    unlink(bad);
    unlink(path);
    llama_free(ctx);
    llama_free(ctx2);
    llama_free(ctx3);
}

int main(void) {
    llama_backend_init(false);
    cJSON *golden = golden_load("golden/session-stories260K.json");
    g_model = golden_load_model("models/stories260K.gguf");
    CHECK(g_model != NULL);
    const char *b64 = cJSON_GetObjectItem(golden, "file_base64")->valuestring;
    uint8_t *file = malloc(strlen(b64));
    size_t size = b64_decode(b64, file);
    CHECK_EQ_INT(size, 15200);
    const char *path = "test_session_golden.bin";
    CHECK(test_write_file(path, file, size));
    test_golden_file(golden, file, size, path);
    test_round_trip_and_corruption();
    unlink(path);
    free(file);
    cJSON_Delete(golden);
    llama_free_model(g_model);
    return test_finish("test_session");
}
