/*
 * Running the llamac binary from tests: arguments as an array (no shell
 * quoting, so grammars and prompts go through untouched), stdout and stderr
 * captured separately, optional stdin text, a time limit. cli_spawn and
 * cli_pump drive a running process step by step (signals, interactive input).
 */
#ifndef LLAMAC_CLI_TEST_UTIL_H
#define LLAMAC_CLI_TEST_UTIL_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct cli_buf {
    char *data; /* NUL-terminated */
    size_t len, cap;
};

struct cli_proc {
    pid_t pid;
    int in, out, err; /* -1 once closed */
    struct cli_buf stdout_text, stderr_text;
};

struct cli_result {
    int status;      /* exit code; 128 + N when killed by signal N; -1 if it could not run */
    bool timed_out;  /* killed after the time limit */
    char *out, *err; /* malloc'ed */
};

static inline void cli_buf_add(struct cli_buf *b, const char *data, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        b->data = (char *)realloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static inline double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Joins argument lists (each NULL-terminated; lists itself ends with NULL)
 * into out, which has room for cap entries; the result is NULL-terminated
 * (what would not fit is left out). Returns out. */
static inline const char *const *cli_args_join(const char **out, size_t cap, const char *const *const *lists) {
    size_t n = 0;
    for (; *lists; lists++) {
        for (const char *const *a = *lists; *a && n + 1 < cap; a++) out[n++] = *a;
    }
    out[n] = NULL;
    return out;
}

/* Starts LLAMAC_BINARY_DIR/llamac with args (NULL-terminated, args[0] = the subcommand). */
static inline bool cli_spawn(struct cli_proc *p, const char *const *args) {
    int in[2], out[2], err[2];
    memset(p, 0, sizeof *p);
    signal(SIGPIPE, SIG_IGN); /* writing to a child that has exited must not kill the test */
    if (pipe(in) || pipe(out) || pipe(err)) return false;
    size_t n = 0;
    while (args[n]) n++;
    char **argv = (char **)calloc(n + 2, sizeof *argv);
    argv[0] = (char *)LLAMAC_BINARY_DIR "/llamac";
    for (size_t i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
    p->pid = fork();
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]); close(err[0]); close(err[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    free(argv);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    p->in = in[1];
    p->out = out[0];
    p->err = err[0];
    cli_buf_add(&p->stdout_text, "", 0);
    cli_buf_add(&p->stderr_text, "", 0);
    return p->pid > 0;
}

static inline void cli_close_stdin(struct cli_proc *p) {
    if (p->in >= 0) close(p->in);
    p->in = -1;
}

static inline bool cli_write(struct cli_proc *p, const char *text) {
    size_t n = strlen(text);
    while (n) {
        ssize_t w = write(p->in, text, n);
        if (w <= 0) return false;
        text += w;
        n -= (size_t)w;
    }
    return true;
}

/* Collects output for up to timeout_s seconds, returning early once stdout
 * holds at least min_stdout bytes (0: only when both streams are closed).
 * False when both streams are closed. */
static inline bool cli_pump(struct cli_proc *p, double timeout_s, size_t min_stdout) {
    const double end = cli_now() + timeout_s;
    while (p->out >= 0 || p->err >= 0) {
        if (min_stdout && p->stdout_text.len >= min_stdout) return true;
        const double left = end - cli_now();
        if (left <= 0) return true;
        struct pollfd fds[2] = { { p->out, POLLIN, 0 }, { p->err, POLLIN, 0 } };
        int r = poll(fds, 2, (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR) return false;
        for (int k = 0; k < 2; k++) {
            int *fd = k == 0 ? &p->out : &p->err;
            if (*fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[4096];
            ssize_t got = read(*fd, buf, sizeof buf);
            if (got > 0) {
                cli_buf_add(k == 0 ? &p->stdout_text : &p->stderr_text, buf, (size_t)got);
            } else {
                close(*fd);
                *fd = -1;
            }
        }
    }
    return false;
}

/* Waits for the process (killing it after timeout_s) and returns its status as in struct cli_result. */
static inline int cli_wait(struct cli_proc *p, double timeout_s, bool *timed_out) {
    *timed_out = false;
    const double end = cli_now() + timeout_s;
    while (cli_pump(p, end - cli_now() > 0 ? end - cli_now() : 0, 0) && cli_now() < end) {
    }
    int st = 0;
    if (p->out >= 0 || p->err >= 0) {
        *timed_out = true;
        kill(p->pid, SIGKILL);
    }
    cli_close_stdin(p);
    if (p->out >= 0) close(p->out);
    if (p->err >= 0) close(p->err);
    if (waitpid(p->pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* Runs llamac args with stdin_text (NULL: empty stdin) and a time limit. */
static inline struct cli_result cli_run(const char *const *args, const char *stdin_text, double timeout_s) {
    struct cli_result r = { -1, false, NULL, NULL };
    struct cli_proc p;
    if (!cli_spawn(&p, args)) return r;
    if (stdin_text) cli_write(&p, stdin_text);
    cli_close_stdin(&p);
    r.status = cli_wait(&p, timeout_s, &r.timed_out);
    r.out = p.stdout_text.data;
    r.err = p.stderr_text.data;
    return r;
}

static inline void cli_result_free(struct cli_result *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* The number after "generation: " in llamac run's summary line, or -1. */
static inline int cli_generated_tokens(const char *err) {
    const char *g = err ? strstr(err, "generation: ") : NULL;
    return g ? atoi(g + strlen("generation: ")) : -1;
}

#endif
