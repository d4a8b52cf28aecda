/* `llamac run` option handling: every bad option or value is one error line
 * ("llamac run: ...") and exit status 1, as every command's usage errors are; grammar errors name the line and
 * column; pathological grammars are refused or stay bounded in time (the
 * runs have a time limit); --logit-bias changes what greedy picks. */
#include "cli_test_util.h"
#include "test_util.h"

static const char *g_model;

static struct cli_result run_llamac(const char *const *extra, double timeout_s) {
    const char *args[48];
    const char *const *lists[] = { (const char *[]){ "run", "-m", g_model, "-t", "1", "-p", "Once upon a time", NULL },
                                   extra, NULL };
    return cli_run(cli_args_join(args, 48, lists), NULL, timeout_s);
}

/* An error found before anything is generated: exit status 1, nothing on
 * stdout, and stderr is one line that starts with "llamac run: " and
 * contains what. */
static void check_error(const char *const *extra, const char *what) {
    struct cli_result r = run_llamac(extra, 60);
    const char *err = r.err ? r.err : "";
    const char *nl = strchr(err, '\n');
    CHECK_MSG(r.status == 1, "%s %s: status %d", extra[0], extra[1] ? extra[1] : "", r.status);
    CHECK_MSG(strncmp(err, "llamac run: ", 12) == 0 && nl && nl[1] == '\0' && strstr(err, what),
              "%s: want one line with '%s', got: %s", extra[0], what, err);
    CHECK_MSG(r.out && r.out[0] == '\0', "stdout: %s", r.out);
    cli_result_free(&r);
}

/* An error during generation: exit status 1 and the last line of stderr is
 * the error (progress messages may precede it). */
static void check_late_error(const char *const *extra, const char *what) {
    struct cli_result r = run_llamac(extra, 60);
    const char *err = r.err ? r.err : "";
    size_t len = strlen(err);
    const char *last = len ? err + len - 1 : err;
    while (last > err && last[-1] != '\n') last--;
    CHECK_MSG(r.status == 1, "%s %s: status %d", extra[0], extra[1] ? extra[1] : "", r.status);
    CHECK_MSG(len && err[len - 1] == '\n' && strncmp(last, "llamac run: ", 12) == 0 && strstr(last, what),
              "%s: want a last line with '%s', got: %s", extra[0], what, err);
    cli_result_free(&r);
}

static void check_errors(void) {
    check_error((const char *[]){ "--temp", "warm", NULL }, "--temp expects a number, got 'warm'");
    check_error((const char *[]){ "--top-k", "4x", NULL }, "--top-k expects an integer");
    check_error((const char *[]){ "--mirostat", "3", NULL }, "--mirostat expects an integer in 0..2");
    check_error((const char *[]){ "-n", "-3", NULL }, "-n expects an integer in -2..");
    check_error((const char *[]){ "--keep", "some", NULL }, "--keep expects an integer >= -1, got 'some'");
    check_error((const char *[]){ "--repeat-last-n", NULL }, "option --repeat-last-n needs a value");
    check_error((const char *[]){ "--reverse-prompt", NULL }, "option --reverse-prompt needs a value");
    check_error((const char *[]){ "--frobnicate", NULL }, "unknown option '--frobnicate'");
    check_error((const char *[]){ "--logit-bias", "15", NULL }, "--logit-bias expects TOKEN_ID+BIAS");
    check_error((const char *[]){ "--logit-bias", "x+1", NULL }, "--logit-bias expects TOKEN_ID+BIAS");
    check_error((const char *[]){ "--logit-bias", "600+1", NULL }, "token 600 is outside the vocabulary (512 tokens)");
    check_error((const char *[]){ "--grammar", "root ::= \"a\" (\n  \"b\"", NULL },
                "llamac run: grammar: line 2, column 6: expecting ')'\n");
    check_error((const char *[]){ "--grammar", "root ::= [a-", NULL }, "grammar: line 1, column");
    check_error((const char *[]){ "--grammar", "start ::= \"a\"", NULL }, "grammar: no rule named 'root'");
    check_error((const char *[]){ "--grammar", "root ::= item\n", NULL },
                "llamac run: grammar: line 1, column 10: rule 'item' is used but never defined\n");
    check_error((const char *[]){ "--grammar", "root ::= root \"a\" | \"a\"", NULL },
                "grammar: rule 'root' is left-recursive");
    check_error((const char *[]){ "--grammar-file", "/nonexistent/g.gbnf", NULL }, "cannot read grammar file");
    check_error((const char *[]){ "-f", "/nonexistent/prompt.txt", NULL }, "cannot read prompt file");
    check_error((const char *[]){ "--prompt-cache", "x.bin", "--prompt-cache-all", "-i", NULL },
                "--prompt-cache-all is not supported in interactive mode");
    check_error((const char *[]){ "-c", "16", "-p", "Once upon a time there was a girl who liked to run and jump", NULL },
                "prompt is too long");
    /* a complete grammar with EOS banned: nothing can follow "a" */
    check_late_error((const char *[]){ "--grammar", "root ::= \"a\"", "--ignore-eos", "--temp", "0", NULL },
                "cannot sample: the grammar allows no further token");
    /* the cache cannot be written: the directory does not exist */
    check_late_error((const char *[]){ "-n", "4", "--prompt-cache", "/nonexistent/dir/cache.bin", NULL },
                "cannot save the prompt cache");

    struct cli_result r = cli_run((const char *[]){ "run", "-m", "/nonexistent.gguf", "-p", "hi", NULL }, NULL, 60);
    CHECK(r.status == 1 && r.err && strncmp(r.err, "llamac run: cannot load model '/nonexistent.gguf': ", 50) == 0 &&
          strchr(r.err, '\n') == r.err + strlen(r.err) - 1);
    cli_result_free(&r);
    r = cli_run((const char *[]){ "chat", "--temp", "hot", NULL }, NULL, 60);
    CHECK_MSG(r.status == 1 && r.err && strcmp(r.err, "llamac chat: --temp expects a number, got 'hot'\n") == 0, "%s",
              r.err);
    cli_result_free(&r);
    r = cli_run((const char *[]){ "run", "--help", NULL }, NULL, 60);
    CHECK(r.status == 0 && r.out && strstr(r.out, "--cfg-negative-prompt") && strstr(r.out, "--prompt-cache"));
    cli_result_free(&r);
}

/* Every command, given an unknown option or nothing at all, fails the same
 * way: one line "llamac COMMAND: ..." on stderr, nothing on stdout, status 1. */
static void check_every_command(void) {
    static const char *const commands[] = { "run", "chat", "info", "grammar", "train", "train-tokenizer", "quantize",
                                            "perplexity", "imatrix", "embedding", "make-model", "bench" };
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "llamac %s: ", commands[c]);
        for (int bare = 0; bare < 2; bare++) {
            const char *args[] = { commands[c], bare ? NULL : "--frobnicate", NULL };
            struct cli_result r = cli_run(args, NULL, 60);
            const char *nl = strchr(r.err, '\n');
            CHECK_MSG(r.status == 1 && r.out[0] == '\0' && strncmp(r.err, prefix, strlen(prefix)) == 0 && nl &&
                          nl[1] == '\0',
                      "llamac %s%s: status %d, stderr: %s", commands[c], bare ? "" : " --frobnicate", r.status, r.err);
            cli_result_free(&r);
        }
    }
    struct cli_result r = cli_run((const char *[]){ "frobnicate", NULL }, NULL, 60);
    CHECK_MSG(r.status == 1 && strcmp(r.err, "llamac: unknown command 'frobnicate' (see llamac --help)\n") == 0,
              "status %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
}

/* Checks that text is a^k "." then k letters from {b, c} (k >= 0). */
static bool nested_ok(const char *text) {
    size_t k = 0;
    while (text[k] == 'a') k++;
    if (text[k] != '.') return false;
    const char *rest = text + k + 1;
    size_t n = 0;
    while (rest[n] == 'b' || rest[n] == 'c') n++;
    return n == k && strcmp(rest + n, "\n") == 0;
}

static void check_pathological_grammars(void) {
    /* b1892 recurses forever on these (a repetition of something that can be empty is left-recursive) */
    check_error((const char *[]){ "--grammar", "root ::= ( [a-z ]* [a-z ]* )*", NULL }, "is left-recursive");
    check_error((const char *[]){ "--grammar", "root ::= ((((( [a-z ]* )*)*)*)*)*", NULL }, "is left-recursive");

    /* 2^k parse stacks after k a's in b1892; here bounded by the stack limit:
     * once more a's would exceed it, only "." is allowed. The logit bias makes
     * greedy pick "a" (id 412) whenever it may. */
    const double t0 = cli_now();
    struct cli_result r = run_llamac((const char *[]){ "-n", "100", "--temp", "0", "--logit-bias", "412+100",
                                                       "--grammar", "root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \".\"",
                                                       NULL },
                                     120);
    CHECK_MSG(r.status == 0 && !r.timed_out, "status %d: %s", r.status, r.err);
    const char *text = r.out ? r.out + strlen(" Once upon a time") : "";
    CHECK_MSG(r.out && strncmp(r.out, " Once upon a time", 17) == 0 && nested_ok(text), "%s", r.out);
    CHECK_MSG(strncmp(text, "aaaaaaaa", 8) == 0, "the bias should have produced a's: %s", text);
    CHECK(r.err && strstr(r.err, "[end of text]"));
    printf("nested grammar: '%.*s' in %.2f s\n", (int)strcspn(text, "\n"), text, cli_now() - t0);
    cli_result_free(&r);

    /* many ambiguous ways to split the same text: stays fast */
    r = run_llamac((const char *[]){ "-n", "60", "--temp", "0", "--grammar",
                                     "root ::= x x x x x x x x x x x x x x x x x x x x\nx ::= [a-z ]* | [a-z ]* | [a-z ]+",
                                     NULL },
                   120);
    CHECK_MSG(r.status == 0 && !r.timed_out, "status %d: %s", r.status, r.err);
    CHECK_EQ_INT(cli_generated_tokens(r.err), 60);
    for (const char *c = r.out ? r.out + strlen(" Once upon a time") : ""; *c && *c != '\n'; c++) {
        CHECK_MSG((*c >= 'a' && *c <= 'z') || *c == ' ', "character %d outside [a-z ]", *c);
    }
    cli_result_free(&r);

    /* --logit-bias with -inf bans a token: greedy "named Lily" becomes something else */
    r = run_llamac((const char *[]){ "-n", "12", "--temp", "0", NULL }, 60);
    struct cli_result banned = run_llamac((const char *[]){ "-n", "12", "--temp", "0", "-l", "317-inf", NULL }, 60);
    CHECK(r.out && strstr(r.out, "Lily"));
    CHECK_MSG(banned.status == 0 && banned.out && !strstr(banned.out, "Lily"), "%s", banned.out);
    cli_result_free(&r);
    cli_result_free(&banned);
}

int main(void) {
    g_model = test_require_shared("models/stories260K.gguf");
    check_errors();
    check_every_command();
    check_pathological_grammars();
    return test_finish("test_cli_options");
}
