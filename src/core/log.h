/*
 * Logging and error reporting.
 *
 * Every message goes through one callback (llama_log_set() installs it).
 * error_set() is how a failing function explains itself: it records the
 * message as this thread's last error and logs it at ERROR level, so a caller
 * that only sees NULL/false can still print one clear line (error_last()).
 */
#ifndef LLAMAC_CORE_LOG_H
#define LLAMAC_CORE_LOG_H

#include <stdarg.h>
#include "ggml.h"

#if defined(__GNUC__)
#define LC_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define LC_PRINTF(fmt_idx, arg_idx)
#endif

/* Installs the log sink; NULL restores the default (stderr, see log.c). */
void log_set_callback(ggml_log_callback callback, void *user_data);

void log_msg(enum ggml_log_level level, const char *fmt, ...) LC_PRINTF(2, 3);
void log_vmsg(enum ggml_log_level level, const char *fmt, va_list ap);

#define LOG_ERROR(...) log_msg(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)
#define LOG_WARN(...)  log_msg(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define LOG_INFO(...)  log_msg(GGML_LOG_LEVEL_INFO, __VA_ARGS__)

/* Records "why" as this thread's last error and logs it (a newline is added). */
void error_set(const char *fmt, ...) LC_PRINTF(1, 2);
/* This thread's last error message ("" if none). */
const char *error_last(void);
void error_clear(void);

#endif
