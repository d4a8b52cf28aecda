/* `llamac run` end to end: b1892 main's greedy output on stories260K
 * (golden/cli-main-stories260K.json), and one-line errors. */
#include <cjson/cJSON.h>

#include "cli_test_util.h"
#include "test_util.h"

int main(void) {
    const char *model = test_require_shared("models/stories260K.gguf");
    cJSON *golden = golden_load("golden/cli-main-stories260K.json");
    const char *flags[2][3] = { { NULL }, { "--repeat-penalty", "1.0", NULL } };
    for (int i = 0; i < 2; i++) {
        const cJSON *run = cJSON_GetArrayItem(cJSON_GetObjectItem(golden, "runs"), i);
        const char *args[16] = { "run", "-m", model, "-p", "Once upon a time", "-n", "64", "--temp", "0",
                                 "-t", "1", "-s", "1234", flags[i][0], flags[i][1], NULL };
        struct cli_result r = cli_run(args, NULL, 300);
        CHECK_MSG(r.status == 0, "%s", r.err);
        const char *want = cJSON_GetObjectItem(run, "stdout")->valuestring;
        size_t len = strlen(r.out);
        if (len && r.out[len - 1] == '\n') r.out[len - 1] = '\0';
        CHECK_MSG(strcmp(r.out, want) == 0, "llamac run %s:\n got: %s\nwant: %s", flags[i][0] ? flags[i][0] : "",
                  r.out, want);
        cli_result_free(&r);
    }
    /* errors: one line, non-zero status */
    struct cli_result r = cli_run((const char *[]){ "run", "-m", "/nonexistent.gguf", "-p", "hi", NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "llamac run: cannot load model"));
    cli_result_free(&r);
    r = cli_run((const char *[]){ "run", "-m", model, "-c", "16", "-p",
                                  "Once upon a time there was a very long prompt that does not fit in sixteen tokens at all",
                                  NULL },
                NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "prompt is too long"));
    cli_result_free(&r);
    r = cli_run((const char *[]){ "run", "-m", model, "-n", "abc", NULL }, NULL, 300);
    CHECK(r.status != 0 && strstr(r.err, "expects an integer"));
    cli_result_free(&r);
    cJSON_Delete(golden);
    return test_finish("test_cli_run");
}
