/*
 * Seeded sampling end to end on stories260K (golden/sampling-stories260K.json):
 * b1892's common sampling call order written against llama.h (the file's
 * "conventions"), every case's 64 tokens identical to b1892's.
 */
#include "golden_eval.h"

struct params {
    int top_k;
    float top_p, min_p, tfs_z, typical_p, temp, penalty_repeat, penalty_freq, penalty_present, tau, eta, cfg_scale;
    int penalty_last_n, mirostat;
    const char *samplers;
};

static float num(const cJSON *o, const char *k) { return (float)cJSON_GetObjectItem(o, k)->valuedouble; }

static void run_case(struct llama_model *model, const cJSON *c) {
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *pj = cJSON_GetObjectItem(c, "params");
    struct params p = {
        .top_k = (int)num(pj, "top_k"), .top_p = num(pj, "top_p"), .min_p = num(pj, "min_p"),
        .tfs_z = num(pj, "tfs_z"), .typical_p = num(pj, "typical_p"), .temp = num(pj, "temp"),
        .penalty_repeat = num(pj, "penalty_repeat"), .penalty_freq = num(pj, "penalty_freq"),
        .penalty_present = num(pj, "penalty_present"), .tau = num(pj, "mirostat_tau"),
        .eta = num(pj, "mirostat_eta"), .cfg_scale = num(pj, "cfg_scale"),
        .penalty_last_n = (int)num(pj, "penalty_last_n"), .mirostat = (int)num(pj, "mirostat"),
        .samplers = cJSON_GetObjectItem(pj, "samplers_sequence")->valuestring,
    };
    const cJSON *sj = cJSON_GetObjectItem(c, "context_seed");
    const uint32_t seed = (uint32_t)(cJSON_IsString(sj) ? atoll(sj->valuestring) : sj->valuedouble);
    struct llama_context_params cp = llama_context_default_params();
    cp.seed = seed;
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    struct llama_context *cfg = p.cfg_scale > 1.0f ? llama_new_context_with_model(model, cp) : NULL;

    const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
    llama_token toks[64];
    int n = llama_tokenize(model, prompt, (int32_t)strlen(prompt), toks, 64, true, true);
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0)) == 0);
    int n_cfg = 0;
    if (cfg) {
        const char *neg = cJSON_GetObjectItem(pj, "cfg_negative_prompt")->valuestring;
        llama_token ntoks[64];
        n_cfg = llama_tokenize(model, neg, (int32_t)strlen(neg), ntoks, 64, true, true);
        CHECK(llama_decode(cfg, llama_batch_get_one(ntoks, n_cfg, 0, 0)) == 0);
    }
    llama_token prev[64] = {0};
    for (int i = 0; i < n; i++) {
        memmove(prev, prev + 1, 63 * sizeof *prev);
        prev[63] = toks[i];
    }
    float mu = strstr(name, "mu2tau") ? 2.0f * p.tau : 0.0f;
    int32_t want[64];
    golden_int_array(cJSON_GetObjectItem(c, "tokens"), want, 64);
    const int n_vocab = llama_n_vocab(model);
    llama_token_data *cand = malloc(sizeof *cand * (size_t)n_vocab);
    int first_bad = -1;
    for (int step = 0; step < 64; step++) {
        float *logits = llama_get_logits_ith(ctx, 0);
        if (cfg) llama_sample_apply_guidance(ctx, logits, llama_get_logits_ith(cfg, 0), p.cfg_scale);
        for (int i = 0; i < n_vocab; i++) cand[i] = (llama_token_data){ i, logits[i], 0.0f };
        llama_token_data_array arr = { cand, (size_t)n_vocab, false };
        int pen_n = p.penalty_last_n < 64 ? p.penalty_last_n : 64;
        if (pen_n > 0) {
            llama_sample_repetition_penalties(ctx, &arr, prev + 64 - pen_n, (size_t)pen_n, p.penalty_repeat,
                                              p.penalty_freq, p.penalty_present);
        }
        llama_token id;
        if (p.temp == 0.0f) {
            id = llama_sample_token_greedy(ctx, &arr);
        } else if (p.mirostat == 1) {
            llama_sample_temp(ctx, &arr, p.temp);
            id = llama_sample_token_mirostat(ctx, &arr, p.tau, p.eta, 100, &mu);
        } else if (p.mirostat == 2) {
            llama_sample_temp(ctx, &arr, p.temp);
            id = llama_sample_token_mirostat_v2(ctx, &arr, p.tau, p.eta, &mu);
        } else {
            for (const char *s = p.samplers; *s; s++) {
                switch (*s) {
                case 'k': llama_sample_top_k(ctx, &arr, p.top_k <= 0 ? n_vocab : p.top_k, 1); break;
                case 'f': llama_sample_tail_free(ctx, &arr, p.tfs_z, 1); break;
                case 'y': llama_sample_typical(ctx, &arr, p.typical_p, 1); break;
                case 'p': llama_sample_top_p(ctx, &arr, p.top_p, 1); break;
                case 'm': llama_sample_min_p(ctx, &arr, p.min_p, 1); break;
                case 't': llama_sample_temp(ctx, &arr, p.temp); break;
                }
            }
            id = llama_sample_token(ctx, &arr);
        }
        if (id != want[step] && first_bad < 0) first_bad = step;
        id = want[step]; /* follow the reference so one difference does not hide the rest */
        memmove(prev, prev + 1, 63 * sizeof *prev);
        prev[63] = id;
        CHECK(llama_decode(ctx, llama_batch_get_one(&id, 1, n + step, 0)) == 0);
        if (cfg) CHECK(llama_decode(cfg, llama_batch_get_one(&id, 1, n_cfg + step, 0)) == 0);
    }
    printf("case %-9s %s\n", name, first_bad < 0 ? "64 tokens identical" : "DIFFERS");
    CHECK_MSG(first_bad < 0, "case %s: token %d differs", name, first_bad);
    struct llama_timings t = llama_get_timings(ctx);
    CHECK(t.n_sample >= 64);
    free(cand);
    llama_free(cfg);
    llama_free(ctx);
}

int main(void) {
    llama_backend_init(false);
    cJSON *golden = golden_load("golden/sampling-stories260K.json");
    struct llama_model *model = golden_load_model("models/stories260K.gguf");
    CHECK(model != NULL);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "cases")) run_case(model, c);
    llama_free_model(model);
    cJSON_Delete(golden);
    return test_finish("test_sampling_golden");
}
