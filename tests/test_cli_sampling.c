/* `llamac run` sampling options against b1892 (stories260K):
 *  - golden/sampling-stories260K.json: every case that CLI flags can express
 *    (a, b, c, d, d_defaults, e and f with mu starting at 0, g = guidance,
 *    h = greedy) prints the prompt and then exactly the case's 64 tokens;
 *  - golden/grammar-stories260K.json: greedy generation under each grammar
 *    (--grammar, stop at EOS or after n tokens) prints b1892's text;
 *    the same through --grammar-file. */
#include <cjson/cJSON.h>

#include "cli_test_util.h"
#include "test_util.h"

static const char *json_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double json_num(const cJSON *o, const char *key) {
    return cJSON_GetObjectItem(o, key)->valuedouble;
}

/* "prompt" as llama_token_to_piece reads it back after BOS: SPM adds a space. */
static char *expected_stdout(const char *prompt, const char *text) {
    size_t n = strlen(prompt) + strlen(text) + 3;
    char *s = malloc(n);
    snprintf(s, n, " %s%s\n", prompt, text);
    return s;
}

static void check_sampling_cases(const char *model) {
    cJSON *golden = golden_load("golden/sampling-stories260K.json");
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "cases")) {
        const char *name = json_str(c, "name");
        if (strstr(name, "mu2tau")) continue; /* mu from 2 * tau: not what b1892's tools do */
        const cJSON *p = cJSON_GetObjectItem(c, "params");
        char seed[32], temp[32], top_k[32], top_p[32], min_p[32], tfs[32], typical[32], rep[32], last_n[32], freq[32],
            pres[32], miro[32], eta[32], tau[32], cfg_scale[32];
        snprintf(seed, sizeof seed, "%d", (int)json_num(c, "context_seed"));
        snprintf(temp, sizeof temp, "%.9g", json_num(p, "temp"));
        snprintf(top_k, sizeof top_k, "%d", (int)json_num(p, "top_k"));
        snprintf(top_p, sizeof top_p, "%.9g", json_num(p, "top_p"));
        snprintf(min_p, sizeof min_p, "%.9g", json_num(p, "min_p"));
        snprintf(tfs, sizeof tfs, "%.9g", json_num(p, "tfs_z"));
        snprintf(typical, sizeof typical, "%.9g", json_num(p, "typical_p"));
        snprintf(rep, sizeof rep, "%.9g", json_num(p, "penalty_repeat"));
        snprintf(last_n, sizeof last_n, "%d", (int)json_num(p, "penalty_last_n"));
        snprintf(freq, sizeof freq, "%.9g", json_num(p, "penalty_freq"));
        snprintf(pres, sizeof pres, "%.9g", json_num(p, "penalty_present"));
        snprintf(miro, sizeof miro, "%d", (int)json_num(p, "mirostat"));
        snprintf(eta, sizeof eta, "%.9g", json_num(p, "mirostat_eta"));
        snprintf(tau, sizeof tau, "%.9g", json_num(p, "mirostat_tau"));
        snprintf(cfg_scale, sizeof cfg_scale, "%.9g", json_num(p, "cfg_scale"));
        const char *args[64] = { "run", "-m", model, "-p", json_str(c, "prompt"), "-n", "64", "--ignore-eos",
                                 "-s", seed, "-c", "256", "-t", "1", "--temp", temp, "--top-k", top_k,
                                 "--top-p", top_p, "--min-p", min_p, "--tfs", tfs, "--typical", typical,
                                 "--repeat-penalty", rep, "--repeat-last-n", last_n, "--frequency-penalty", freq,
                                 "--presence-penalty", pres, "--mirostat", miro, "--mirostat-lr", eta,
                                 "--mirostat-ent", tau };
        size_t n = 0;
        while (args[n]) n++;
        const char *neg = json_str(p, "cfg_negative_prompt");
        if (neg && *neg) {
            args[n++] = "--cfg-negative-prompt";
            args[n++] = neg;
            args[n++] = "--cfg-scale";
            args[n++] = cfg_scale;
        }
        struct cli_result r = cli_run(args, NULL, 300);
        char *want = expected_stdout(json_str(c, "prompt"), json_str(c, "text"));
        CHECK_MSG(r.status == 0, "case %s: status %d: %s", name, r.status, r.err);
        CHECK_MSG(r.out && strcmp(r.out, want) == 0, "case %s:\n got: %s\nwant: %s", name, r.out, want);
        CHECK_EQ_INT(cli_generated_tokens(r.err), 64);
        free(want);
        cli_result_free(&r);
        n_cases++;
    }
    CHECK_EQ_INT(n_cases, 9);
    cJSON_Delete(golden);
}

static void check_grammar_cases(const char *model) {
    cJSON *golden = golden_load("golden/grammar-stories260K.json");
    const char *prompt = json_str(golden, "prompt");
    const cJSON *g;
    int n_cases = 0;
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(golden, "grammars")) {
        const cJSON *gen = cJSON_GetObjectItem(g, "generation");
        if (!gen) continue;
        const char *name = json_str(g, "name");
        char n_gen[32];
        snprintf(n_gen, sizeof n_gen, "%d", (int)json_num(gen, "n_gen_max"));
        const int n_tokens = cJSON_GetArraySize(cJSON_GetObjectItem(gen, "tokens"));
        const bool stop_eos = strcmp(json_str(gen, "stop"), "eos") == 0;
        char *want = expected_stdout(prompt, json_str(gen, "text"));

        /* --grammar TEXT, then --grammar-file FILE */
        const char *path = "test_cli_sampling.gbnf";
        CHECK(test_write_file(path, json_str(g, "text"), strlen(json_str(g, "text"))));
        for (int from_file = 0; from_file < 2; from_file++) {
            const char *args[] = { "run", "-m", model, "-p", prompt, "-n", n_gen, "-s", "1234", "-c", "256", "-t", "1",
                                   "--temp", "0", "--repeat-penalty", "1.0",
                                   from_file ? "--grammar-file" : "--grammar", from_file ? path : json_str(g, "text"),
                                   NULL };
            struct cli_result r = cli_run(args, NULL, 300);
            CHECK_MSG(r.status == 0, "grammar %s: status %d: %s", name, r.status, r.err);
            CHECK_MSG(r.out && strcmp(r.out, want) == 0, "grammar %s:\n got: %s\nwant: %s", name, r.out, want);
            /* stopping at EOS: the EOS token is sampled (and counted), not printed */
            CHECK_EQ_INT(cli_generated_tokens(r.err), n_tokens);
            CHECK_EQ_INT(r.err && strstr(r.err, "[end of text]") != NULL, stop_eos);
            cli_result_free(&r);
        }
        remove(path);
        free(want);
        n_cases++;
    }
    CHECK_EQ_INT(n_cases, 6);
    cJSON_Delete(golden);
}

int main(void) {
    const char *model = test_require_shared("models/stories260K.gguf");
    check_sampling_cases(model);
    check_grammar_cases(model);
    return test_finish("test_cli_sampling");
}
