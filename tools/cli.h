/*
 * The `llamac` command line: one binary, one subcommand per file in tools/.
 * Each subcommand is `int cmd_NAME(int argc, char **argv)` where argv[0] is
 * the subcommand's name; it returns the process exit status. Errors are one
 * clear line on stderr ("llamac NAME: ...") and a non-zero status.
 */
#ifndef LLAMAC_TOOLS_CLI_H
#define LLAMAC_TOOLS_CLI_H

#include <stdbool.h>

struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

/* Prints "llamac NAME: message" to stderr and returns 1 (for `return cli_fail(...)`). */
int cli_fail(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict number parsing for option values: false on junk or out of range. */
bool cli_parse_int(const char *s, long long min, long long max, long long *out);
bool cli_parse_float(const char *s, double *out);

#endif
