// llama.h from C++11: a program written against llama.cpp b1892's API
// (only b1892 names) builds and generates the reference's greedy text.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static const char *shared_file(const char *rel) {
    static std::string path;
    const char *root = std::getenv("LLAMAC_SHARED");
    path = std::string(root && *root ? root : LLAMAC_DEFAULT_SHARED) + "/" + rel;
    return path.c_str();
}

int main() {
    static_assert(sizeof(llama_token_data) == 12, "llama_token_data layout");
    static_assert(LLAMA_SESSION_VERSION == 4, "session version");
    static_assert(LLAMA_FILE_MAGIC_GGSN == 0x6767736eu, "magic");
    llama_backend_init(false);
    llama_model_params mp = llama_model_default_params();
    FILE *probe = std::fopen(shared_file("models/stories260K.gguf"), "rb");
    if (!probe) {
        std::printf("SKIP: shared models absent\n");
        const char *req = std::getenv("LLAMAC_REQUIRE_SHARED");
        return req && *req && std::strcmp(req, "0") != 0 ? 1 : 77;
    }
    std::fclose(probe);
    llama_model *model = llama_load_model_from_file(shared_file("models/stories260K.gguf"), mp);
    if (!model) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.seed = 1234;
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    llama_context *ctx = llama_new_context_with_model(model, cp);
    std::vector<llama_token> toks(64);
    const std::string prompt = "Once upon a time";
    int n = llama_tokenize(model, prompt.c_str(), (int)prompt.size(), toks.data(), (int)toks.size(), true, false);
    toks.resize(n);
    llama_batch batch = llama_batch_init(64, 0, 1);
    batch.n_tokens = n;
    for (int i = 0; i < n; i++) {
        batch.token[i] = toks[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i == n - 1;
    }
    if (llama_decode(ctx, batch) != 0) return 1;
    std::string text;
    std::vector<llama_token_data> cand(llama_n_vocab(model));
    int pos = n;
    for (int step = 0; step < 30; step++) {
        const float *logits = llama_get_logits_ith(ctx, step == 0 ? n - 1 : 0);
        for (int i = 0; i < (int)cand.size(); i++) cand[i] = llama_token_data{ i, logits[i], 0.0f };
        llama_token_data_array arr = { cand.data(), cand.size(), false };
        llama_token id = llama_sample_token_greedy(ctx, &arr);
        char piece[64];
        int len = llama_token_to_piece(model, id, piece, sizeof piece);
        text.append(piece, len > 0 ? len : 0);
        batch.n_tokens = 1;
        batch.token[0] = id;
        batch.pos[0] = pos++;
        batch.logits[0] = 1;
        if (llama_decode(ctx, batch) != 0) return 1;
    }
    llama_batch_free(batch);
    // the first 30 greedy tokens of golden/eval-stories260K-F32.json's first prompt
    const std::string want = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big";
    int ok = want.compare(0, text.size(), text) == 0 && text.size() > 60;
    std::printf("%s: %s\n", ok ? "ok" : "MISMATCH", text.c_str());
    llama_free(ctx);
    llama_free_model(model);
    llama_backend_free();
    return ok ? 0 : 1;
}
