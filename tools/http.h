/*
 * The small HTTP/1.1 layer of `llamac server`: a listening socket, one
 * request read at a time (request line, headers, a Content-Length body), and
 * responses written whole or streamed. Every response says
 * "Connection: close", so a connection carries one request and a streamed
 * body ends when the connection does.
 *
 * What a client can get wrong is answered with a status, never a crash:
 * malformed request line or headers 400, headers over HTTP_MAX_HEADER 431,
 * a body over HTTP_MAX_BODY 413, a Transfer-Encoding (chunked) body 411,
 * an HTTP version other than 1.0/1.1 505, a request that takes longer than
 * the read timeout to arrive 408.
 */
#ifndef LLAMAC_TOOLS_HTTP_H
#define LLAMAC_TOOLS_HTTP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_HEADER (64 * 1024)
#define HTTP_MAX_BODY (16 * 1024 * 1024)

struct http_request {
    char method[16];
    char path[2048];     /* the target without its query string */
    char *body;          /* NUL-terminated, body_len bytes (may contain NULs) */
    size_t body_len;
    char *buf;           /* what was read: headers, then the body */
    size_t len, cap;
};

/* Listens on host:port (port 0: the kernel picks one, returned in
 * *bound_port). Returns the socket, or -1 with error_set(). */
int http_listen(const char *host, int port, int *bound_port);

/* Accepts the next connection (waiting at most timeout_ms; -1 when none
 * came or on an error). Sends to it give up after send_timeout_ms, so a
 * client that stops reading cannot hold the server. */
int http_accept(int listen_fd, int timeout_ms, int send_timeout_ms);

/* Reads one request from fd. Returns 0 when *req holds it, an HTTP error
 * status (400, 408, 411, 413, 431, 505) when the request is bad, or -1 when
 * the client went away or *stop was set before a request arrived (nothing
 * to answer). The whole request must arrive within timeout_ms (408). */
int http_read_request(int fd, struct http_request *req, int timeout_ms, volatile sig_atomic_t *stop);
void http_request_free(struct http_request *req);

/* The reason phrase of a status ("Not Found"). */
const char *http_status_text(int status);

/* Sends a whole response with the CORS headers; false if the client is gone. */
bool http_send_response(int fd, int status, const char *content_type, const char *body, size_t len);
/* Sends the head of a 200 text/event-stream response; events follow with http_send_all. */
bool http_send_stream_head(int fd);
bool http_send_all(int fd, const char *data, size_t len);

/* Whether the client has closed its end (checked without waiting). */
bool http_peer_closed(int fd);

/* Ends the response and closes fd, reading what the client still sends for
 * a moment so that unread request bytes do not turn into a reset that
 * destroys the response before the client reads it. */
void http_close(int fd);

#endif
