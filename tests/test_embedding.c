/*
 * `llamac embedding` against b1892 (golden/eval-stories260K-*.json
 * "embeddings"): for every stories260K file and prompt, the printed vector
 * (b1892's "%f " format) is the golden embedding to the printed precision.
 */
#include <math.h>

#include "golden_eval.h"

static char *run_capture(const char *cmd, int *status) {
    *status = -1;
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) len += n;
    buf[len] = '\0';
    *status = pclose(p);
    return buf;
}

/* 'text' for the shell, each ' written as '\'' */
static void shell_quote(const char *text, char *out, size_t cap) {
    size_t n = 0;
    out[n++] = '\'';
    for (const char *p = text; *p && n + 6 < cap; p++) {
        if (*p == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *p;
        }
    }
    out[n++] = '\'';
    out[n] = '\0';
}

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
            char quoted[2048], cmd[4096];
            shell_quote(text, quoted, sizeof quoted);
            snprintf(cmd, sizeof cmd, "%s/llamac embedding -m '%s' -p %s -t 1 2>/dev/null", LLAMAC_BINARY_DIR,
                     model, quoted);
            int status;
            char *out = run_capture(cmd, &status);
            CHECK(status == 0 && out);
            if (!out) continue;
            /* one line of n_embd numbers, each "%f " */
            const char *p = out;
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
            free(out);
        }
        printf("%-5s embeddings of %d prompts: largest difference %.2g (printed precision 5e-7)\n", variants[v],
               cJSON_GetArraySize(embeddings), worst);
        cJSON_Delete(golden);
    }
    /* errors: one line, non-zero status */
    int status;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/llamac embedding -m '%s' -c 8 -p '%s' 2>&1", LLAMAC_BINARY_DIR,
             test_require_shared("models/stories260K.gguf"), "a prompt that is longer than eight tokens for sure, yes");
    char *out = run_capture(cmd, &status);
    CHECK(status != 0 && out && strstr(out, "longer than the context window"));
    free(out);
    return test_finish("test_embedding");
}
