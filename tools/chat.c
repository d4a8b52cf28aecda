/*
 * llamac chat: `llamac run` in interactive mode with a dialogue set up. The
 * prompt is a short exchange that ends with "User:", so the first line read
 * from stdin is the user's turn; "Assistant:" is added after each line and
 * the answer streams until the model writes "User:" again (or -n tokens).
 * Options given on the command line come after these defaults, so -p, -n,
 * --in-suffix ... replace them (-r adds another reverse prompt).
 */
#include <stdlib.h>

#include "cli.h"

int run_main(const char *cmd, int argc, char **argv);

static const char CHAT_PROMPT[] =
    "A conversation between a curious User and a helpful Assistant, who answers briefly and kindly.\n"
    "User: Hello, who are you?\n"
    "Assistant: Hello! I am the Assistant. What would you like to talk about?\n"
    "User:";

int cmd_chat(int argc, char **argv) {
    const char *defaults[] = { "-i", "-r", "User:", "--in-prefix", " ", "--in-suffix", "Assistant:", "-p", CHAT_PROMPT };
    const int n_defaults = (int)(sizeof defaults / sizeof defaults[0]);
    char **args = malloc((size_t)(argc + n_defaults + 1) * sizeof *args);
    if (!args) return cli_fail("chat", "out of memory");
    int n = 0;
    args[n++] = argv[0];
    for (int i = 0; i < n_defaults; i++) args[n++] = (char *)defaults[i];
    for (int i = 1; i < argc; i++) args[n++] = argv[i];
    args[n] = NULL;
    int status = run_main("chat", n, args);
    free(args);
    return status;
}
