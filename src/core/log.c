#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The default sink prints warnings and errors; LLAMAC_LOG=info shows info too. */
static void log_default_sink(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    static int show_info = -1;
    if (show_info < 0) {
        const char *env = getenv("LLAMAC_LOG");
        show_info = env && strcmp(env, "info") == 0;
    }
    if (level == GGML_LOG_LEVEL_INFO && !show_info) {
        return;
    }
    fputs(text, stderr);
    fflush(stderr);
}

static ggml_log_callback g_log_callback = log_default_sink;
static void *g_log_user_data;

void log_set_callback(ggml_log_callback callback, void *user_data) {
    g_log_callback = callback ? callback : log_default_sink;
    g_log_user_data = callback ? user_data : NULL;
}

void log_vmsg(enum ggml_log_level level, const char *fmt, va_list ap) {
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    g_log_callback(level, buf, g_log_user_data);
}

void log_msg(enum ggml_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

static _Thread_local char t_last_error[512];

void error_set(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
    va_end(ap);
    log_msg(GGML_LOG_LEVEL_ERROR, "%s\n", t_last_error);
}

const char *error_last(void) {
    return t_last_error;
}

void error_clear(void) {
    t_last_error[0] = '\0';
}
