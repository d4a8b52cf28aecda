/* `llamac run` end to end: b1892 main's greedy output on stories260K
 * (golden/cli-main-stories260K.json), and one-line errors. */
#include <cjson/cJSON.h>

#include "test_util.h"

static char *run_capture(const char *cmd, int *status) {
    *status = -1;
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) len += n;
    buf[len] = '\0';
    *status = pclose(p);
    return buf;
}

int main(void) {
    const char *model = test_require_shared("models/stories260K.gguf");
    char *text = test_read_file(test_require_shared("golden/cli-main-stories260K.json"), NULL);
    cJSON *golden = cJSON_Parse(text);
    const char *flags[2] = { "", "--repeat-penalty 1.0" };
    for (int i = 0; i < 2; i++) {
        const cJSON *run = cJSON_GetArrayItem(cJSON_GetObjectItem(golden, "runs"), i);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s/llamac run -m '%s' -p 'Once upon a time' -n 64 --temp 0 %s -t 1 -s 1234 2>/dev/null",
                 LLAMAC_BINARY_DIR, model, flags[i]);
        int status;
        char *out = run_capture(cmd, &status);
        CHECK(status == 0);
        const char *want = cJSON_GetObjectItem(run, "stdout")->valuestring;
        size_t len = out ? strlen(out) : 0;
        if (len && out[len - 1] == '\n') out[len - 1] = '\0';
        CHECK_MSG(out && strcmp(out, want) == 0, "llamac run %s:\n got: %s\nwant: %s", flags[i], out, want);
        free(out);
    }
    /* errors: one line, non-zero status */
    char cmd[2048];
    int status;
    snprintf(cmd, sizeof cmd, "%s/llamac run -m /nonexistent.gguf -p hi 2>&1", LLAMAC_BINARY_DIR);
    char *out = run_capture(cmd, &status);
    CHECK(status != 0 && out && strstr(out, "llamac run: cannot load model"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s/llamac run -m '%s' -c 16 -p '%s' 2>&1", LLAMAC_BINARY_DIR, model,
             "Once upon a time there was a very long prompt that does not fit in sixteen tokens at all");
    out = run_capture(cmd, &status);
    CHECK(status != 0 && out && strstr(out, "prompt is too long"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s/llamac run -m '%s' -n abc 2>&1", LLAMAC_BINARY_DIR, model);
    out = run_capture(cmd, &status);
    CHECK(status != 0 && out && strstr(out, "expects an integer"));
    free(out);
    cJSON_Delete(golden);
    free(text);
    return test_finish("test_cli_run");
}
