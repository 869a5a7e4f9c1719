/* http.h - small HTTP endpoints such as /metrics and /status (libmicrohttpd).
 *
 * libmicrohttpd serves from its own thread. Everything it reports belongs to
 * the loop thread, so a request wakes the loop (uv_async), the loop renders
 * the text with render() or render_q(), and the HTTP thread waits for it (up
 * to 2 s). No counter is ever read from two threads. Static routes (files
 * embedded in the binary, such as the dashboard's) never change, so the HTTP
 * thread answers them itself without waking the loop.
 *
 * Answers: 200; 400 from a render_q that refused its query; 404 for any
 * path not in the table; 405 for a method other than GET or HEAD; 503 when
 * the loop did not render within 2 s.
 */
#ifndef KEEL_HTTP_H
#define KEEL_HTTP_H

#include <uv.h>

#include "core/buf.h"

typedef struct http_server http_server;
/* Renders one page into out; runs on the loop thread. */
typedef void (*http_render_fn)(void *arg, kbuf *out);
/* Renders one page for a request with a query: query is "k=v&k=v" with
 * the values already URL-decoded ("" without one; borrowed for the call).
 * Returns the HTTP status: 200 with the page in out, or 400 with a one-line
 * reason in out (sent as the body). Runs on the loop thread. */
typedef int (*http_query_fn)(void *arg, const char *query, kbuf *out);

#define HTTP_QUERY_MAX 512 /* a longer query string is refused with 400 */

/* A route has exactly one of render, render_q or body. */
typedef struct http_route {
    const char *path;         /* exact, e.g. "/metrics" */
    const char *content_type; /* e.g. "text/plain; version=0.0.4" */
    http_render_fn render;
    http_query_fn render_q;
    const unsigned char *body; /* static: served as is by the HTTP thread */
    size_t body_len;
} http_route;

#define HTTP_PROMETHEUS "text/plain; version=0.0.4"

/* Starts serving GET for each of routes[0..nroutes) on bind:port (routes
 * is borrowed for the server's life). Returns 0 and *out, or a negative
 * KEEL_E* with a reason in err (e.g. the port is in use). Loop thread. */
int http_start(uv_loop_t *loop, const char *bind, int port, const http_route *routes,
               size_t nroutes, void *arg, http_server **out, char *err, size_t errcap);
/* Stops the HTTP thread and frees. Loop thread. NULL is a no-op. */
void http_stop(http_server *h);

#endif
