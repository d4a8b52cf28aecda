/* libFuzzer target: the server's HTTP request reader (tools/http.c) on
 * arbitrary bytes arriving over a socket. Checked: a request it accepts has
 * a method, a path starting with '/' (or "*"), and a NUL-terminated body of its
 * Content-Length inside what was read; anything else is an HTTP status the
 * server can answer, or -1 (the client went away). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
    const int buf = 1 << 20; /* the whole input fits in the socket: one write, no second thread */
    setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    if (size == 0 || write(fds[0], data, size) == (ssize_t)size) {
        shutdown(fds[0], SHUT_WR); /* the client has sent everything */
        volatile sig_atomic_t stop = 0;
        struct http_request req;
        const int status = http_read_request(fds[1], &req, 1000, &stop);
        if (status == 0) {
            if (!req.method[0] || (req.path[0] != '/' && strcmp(req.path, "*") != 0)) abort();
            if (req.body < req.buf || req.body + req.body_len >= req.buf + req.cap) abort();
            if (req.body[req.body_len] != '\0' || req.body_len > size) abort();
        } else if (status != -1 && !(status >= 400 && status < 600)) {
            abort();
        }
        http_request_free(&req);
    }
    close(fds[0]);
    close(fds[1]);
    return 0;
}
