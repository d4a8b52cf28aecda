/*
 * `llamac embedding` against b1892 (golden/eval-stories260K-*.json
 * "embeddings"): for every stories260K file and prompt, the printed vector
 * (b1892's "%f " format) is the golden embedding to the printed precision.
 */
#include <math.h>

#include "cli_test_util.h"
#include "golden_eval.h"

int main(void) {
    static const char *const variants[] = { "F32", "F16", "Q8_0", "Q4_0" };
    for (int v = 0; v < 4; v++) {
        char rel[128];
        snprintf(rel, sizeof rel, "golden/eval-stories260K-%s.json", variants[v]);
        cJSON *golden = golden_load(rel);
        snprintf(rel, sizeof rel, "models/%s", cJSON_GetObjectItem(golden, "model")->valuestring);
        const char *model = test_require_shared(rel);
        const cJSON *embeddings = cJSON_GetObjectItem(cJSON_GetObjectItem(golden, "embeddings"), "per_prompt");
        const int n_embd = cJSON_GetObjectItem(cJSON_GetObjectItem(golden, "embeddings"), "n_embd")->valueint;
        double worst = 0;
        for (int i = 0; i < cJSON_GetArraySize(embeddings); i++) {
            const cJSON *prompt = cJSON_GetArrayItem(cJSON_GetObjectItem(golden, "prompts"), i);
            const char *text = cJSON_GetObjectItem(prompt, "text")->valuestring;
            struct cli_result r = cli_run((const char *[]){ "embedding", "-m", model, "-p", text, "-t", "1", NULL },
                                          NULL, 300);
            CHECK_MSG(r.status == 0, "%s", r.err);
            /* one line of n_embd numbers, each "%f " */
            const char *p = r.out;
            int n = 0;
            const cJSON *want;
            cJSON_ArrayForEach(want, cJSON_GetArrayItem(embeddings, i)) {
                char *end;
                const double got = strtod(p, &end);
                if (end == p) break;
                p = end;
                n++;
                /* ours is rounded to 6 decimals, b1892's value to 7 significant digits */
                const double d = fabs(got - want->valuedouble);
                const double tol = 5e-7 + 5e-7 * fabs(want->valuedouble) + 1e-9;
                CHECK_MSG(d <= tol, "%s prompt %d value %d: %f vs %.7g", variants[v], i, n, got, want->valuedouble);
                if (d > worst) worst = d;
            }
            CHECK_EQ_INT(n, n_embd);
            CHECK(strcmp(p, " \n") == 0);
            cli_result_free(&r);
        }
        printf("%-5s embeddings of %d prompts: largest difference %.2g (printed precision 5e-7)\n", variants[v],
               cJSON_GetArraySize(embeddings), worst);
        cJSON_Delete(golden);
    }
    /* errors: one line, non-zero status */
    struct cli_result r = cli_run((const char *[]){ "embedding", "-m", test_require_shared("models/stories260K.gguf"),
                                                    "-c", "8", "-p",
                                                    "a prompt that is longer than eight tokens for sure, yes", NULL },
                                  NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "longer than the context window"));
    cli_result_free(&r);
    return test_finish("test_embedding");
}
