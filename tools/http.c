#ifndef _GNU_SOURCE /* memmem, accept4 (the tools are built with it defined) */
#define _GNU_SOURCE
#endif
#include "http.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

/* Every response allows any origin, as b1892's server does (browser front ends on other ports). */
#define HTTP_CORS_HEADERS                                                                                  \
    "Access-Control-Allow-Origin: *\r\n"                                                                   \
    "Access-Control-Allow-Headers: content-type\r\n"                                                       \
    "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"

int http_listen(const char *host, int port, int *bound_port) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    const int rc = getaddrinfo(host, port_text, &hints, &res);
    if (rc != 0) {
        error_set("cannot resolve host '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        error_set("cannot listen on %s port %d: %s", host, port, strerror(err));
        return -1;
    }
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &addr_len) != 0) {
        error_set("getsockname: %s", strerror(errno));
        close(fd);
        return -1;
    }
    *bound_port = addr.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&addr)->sin_port);
    return fd;
}

int http_accept(int listen_fd, int timeout_ms, int send_timeout_ms) {
    struct pollfd pfd = { listen_fd, POLLIN, 0 };
    if (poll(&pfd, 1, timeout_ms) <= 0) return -1;
    const int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return -1;
    struct timeval tv = { send_timeout_ms / 1000, (send_timeout_ms % 1000) * 1000 };
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1: readable, 0: the deadline passed, -1: *stop was set or poll failed. */
static int wait_readable(int fd, int64_t deadline_ms, volatile sig_atomic_t *stop) {
    for (;;) {
        if (stop && *stop) return -1;
        const int64_t left = deadline_ms - now_ms();
        if (left <= 0) return 0;
        struct pollfd pfd = { fd, POLLIN, 0 };
        const int r = poll(&pfd, 1, left < 200 ? (int)left : 200); /* see *stop soon */
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

/* Reads what is available into req->buf, at most `want` bytes.
 * >0: bytes read, 0: end of stream or error, -408: deadline passed, -1: stopped. */
static long read_some(int fd, struct http_request *req, size_t want, int64_t deadline_ms,
                      volatile sig_atomic_t *stop) {
    if (req->len + want + 1 > req->cap) {
        size_t cap = req->cap ? req->cap : 16384;
        while (cap < req->len + want + 1) cap *= 2;
        char *grown = realloc(req->buf, cap);
        if (!grown) return 0;
        req->buf = grown;
        req->cap = cap;
    }
    const int ready = wait_readable(fd, deadline_ms, stop);
    if (ready <= 0) return ready == 0 ? -408 : -1;
    for (;;) {
        const ssize_t got = recv(fd, req->buf + req->len, want, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        req->len += (size_t)got;
        req->buf[req->len] = '\0';
        return (long)got;
    }
}

static bool is_token_char(unsigned char c) {
    return c > 32 && c < 127 && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* Parses the request line at line[0, n) into req; 0 or an HTTP status. */
static int parse_request_line(const char *line, size_t n, struct http_request *req) {
    const char *sp1 = memchr(line, ' ', n);
    if (!sp1 || sp1 == line || (size_t)(sp1 - line) >= sizeof req->method) return 400;
    for (const char *c = line; c < sp1; c++) {
        if (!is_token_char((unsigned char)*c)) return 400;
    }
    const char *target = sp1 + 1, *end = line + n;
    const char *sp2 = memchr(target, ' ', (size_t)(end - target));
    if (!sp2 || sp2 == target) return 400;
    const char *version = sp2 + 1;
    const size_t version_len = (size_t)(end - version);
    if (version_len != 8 || memcmp(version, "HTTP/", 5) != 0) return 400;
    if (memcmp(version, "HTTP/1.1", 8) != 0 && memcmp(version, "HTTP/1.0", 8) != 0) return 505;
    size_t path_len = (size_t)(sp2 - target);
    const char *query = memchr(target, '?', path_len);
    if (query) path_len = (size_t)(query - target);
    if (path_len >= sizeof req->path) return 400;
    /* origin form ("/completion"), or "*" (OPTIONS *); no absolute URLs: we are not a proxy */
    if (!(path_len > 0 && target[0] == '/') && !(path_len == 1 && target[0] == '*')) return 400;
    for (size_t i = 0; i < path_len; i++) {
        if ((unsigned char)target[i] <= 32 || target[i] == 127) return 400;
    }
    memcpy(req->method, line, (size_t)(sp1 - line));
    req->method[sp1 - line] = '\0';
    memcpy(req->path, target, path_len);
    req->path[path_len] = '\0';
    return 0;
}

struct header_info {
    bool has_length, chunked, expect_continue;
    size_t content_length;
};

/* Parses the header lines in text[0, n) (each ending in CRLF); 0 or an HTTP status. */
static int parse_headers(const char *text, size_t n, struct header_info *h) {
    const char *p = text, *end = text + n;
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) return 400;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon || colon == p) return 400; /* also a folded line: it starts with a space */
        for (const char *c = p; c < colon; c++) {
            if (!is_token_char((unsigned char)*c)) return 400;
        }
        const char *v = colon + 1, *v_end = eol;
        while (v < v_end && (*v == ' ' || *v == '\t')) v++;
        while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t')) v_end--;
        for (const char *c = v; c < v_end; c++) {
            if ((unsigned char)*c < 32 && *c != '\t') return 400;
        }
        const size_t name_len = (size_t)(colon - p), v_len = (size_t)(v_end - v);
        if (name_len == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
            if (v_len == 0) return 400;
            size_t value = 0;
            bool too_big = false;
            for (const char *c = v; c < v_end; c++) {
                if (*c < '0' || *c > '9') return 400;
                if (!too_big && value > (SIZE_MAX - 9) / 10) too_big = true;
                if (!too_big) value = value * 10 + (size_t)(*c - '0');
            }
            if (too_big) value = SIZE_MAX;
            if (h->has_length && h->content_length != value) return 400;
            h->has_length = true;
            h->content_length = value;
        } else if (name_len == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
            h->chunked = true;
        } else if (name_len == 6 && strncasecmp(p, "Expect", 6) == 0) {
            h->expect_continue = v_len == 12 && strncasecmp(v, "100-continue", 12) == 0;
        }
        p = eol + 2;
    }
    return 0;
}

int http_read_request(int fd, struct http_request *req, int timeout_ms, volatile sig_atomic_t *stop) {
    memset(req, 0, sizeof *req);
    const int64_t deadline = now_ms() + timeout_ms;
    const char *head_end = NULL;
    size_t scanned = 0; /* where the search for the blank line goes on */
    while (!(head_end = req->len ? memmem(req->buf + scanned, req->len - scanned, "\r\n\r\n", 4) : NULL)) {
        scanned = req->len > 3 ? req->len - 3 : 0;
        if (req->len >= HTTP_MAX_HEADER) return 431;
        const long got = read_some(fd, req, HTTP_MAX_HEADER + 4 - req->len, deadline, stop);
        if (got == -408) return 408;
        if (got <= 0) return -1;
    }
    const size_t head_len = (size_t)(head_end - req->buf) + 4;
    if (head_len > HTTP_MAX_HEADER + 4) return 431;
    if (memchr(req->buf, '\0', head_len)) return 400;
    const char *line_end = memmem(req->buf, head_len, "\r\n", 2);
    int status = parse_request_line(req->buf, (size_t)(line_end - req->buf), req);
    if (status) return status;
    struct header_info h = { 0 };
    status = parse_headers(line_end + 2, head_len - 2 - (size_t)(line_end + 2 - req->buf), &h);
    if (status) return status;
    if (h.chunked) return 411;
    if (h.content_length > HTTP_MAX_BODY) return 413;
    size_t have = req->len - head_len;
    if (h.expect_continue && have < h.content_length) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (!http_send_all(fd, cont, sizeof cont - 1)) return -1;
    }
    while (have < h.content_length) {
        const long got = read_some(fd, req, h.content_length - have, deadline, stop);
        if (got == -408) return 408;
        if (got <= 0) return -1;
        have += (size_t)got;
    }
    req->body = req->buf + head_len;
    req->body_len = h.content_length;
    req->body[req->body_len] = '\0'; /* bytes after the body (a pipelined request) are not served */
    return 0;
}

void http_request_free(struct http_request *req) {
    free(req->buf);
    memset(req, 0, sizeof *req);
}

const char *http_status_text(int status) {
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

bool http_send_all(int fd, const char *data, size_t len) {
    while (len) {
        const ssize_t sent = send(fd, data, len, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) return false; /* gone, or not reading for the send timeout */
        data += sent;
        len -= (size_t)sent;
    }
    return true;
}

bool http_send_response(int fd, int status, const char *content_type, const char *body, size_t len) {
    char head[512];
    const int n = snprintf(head, sizeof head,
                           "HTTP/1.1 %d %s\r\nServer: llamac\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                           HTTP_CORS_HEADERS "Connection: close\r\n\r\n",
                           status, http_status_text(status), content_type, len);
    return http_send_all(fd, head, (size_t)n) && http_send_all(fd, body, len);
}

bool http_send_stream_head(int fd) {
    static const char head[] = "HTTP/1.1 200 OK\r\nServer: llamac\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-cache\r\n" HTTP_CORS_HEADERS "Connection: close\r\n\r\n";
    return http_send_all(fd, head, sizeof head - 1);
}

bool http_peer_closed(int fd) {
    struct pollfd pfd = { fd, POLLIN, 0 };
    if (poll(&pfd, 1, 0) <= 0) return false;
    if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
    char byte;
    const ssize_t got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void http_close(int fd) {
    shutdown(fd, SHUT_WR);
    /* the client reads the response, sees the end and closes: usually at once */
    char sink[4096];
    size_t drained = 0;
    for (int waited = 0; waited < 1000 && drained < ((size_t)1 << 20); waited += 50) {
        struct pollfd pfd = { fd, POLLIN, 0 };
        if (poll(&pfd, 1, 50) <= 0) continue;
        const ssize_t got = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) break;
        if (got > 0) drained += (size_t)got;
    }
    close(fd);
}
