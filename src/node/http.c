/* http.c - /metrics over libmicrohttpd; see http.h for the threading. */
#include "node/http.h"
#include "core/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct http_server {
    struct MHD_Daemon *daemon;
    uv_async_t async;
    const http_route *routes;
    size_t nroutes;
    void *arg;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    uint64_t asked, answered;
    size_t route; /* the page asked for (one request at a time) */
    kbuf page;
    int stopping;
};

/* Loop thread: render for every request waiting. */
static void on_async(uv_async_t *a) {
    http_server *h = a->data;
    kbuf page;
    kbuf_init(&page);
    pthread_mutex_lock(&h->mu);
    size_t route = h->route;
    pthread_mutex_unlock(&h->mu);
    h->routes[route].render(h->arg, &page);
    pthread_mutex_lock(&h->mu);
    kbuf_close(&h->page);
    h->page = page;
    h->answered = h->asked;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, char *body, size_t len,
                               const char *ctype) {
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body, body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* HTTP thread. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    http_server *h = cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("method not allowed\n"), 19,
                       "text/plain");
    size_t route = 0;
    while (route < h->nroutes && strcmp(url, h->routes[route].path) != 0)
        route++;
    if (route == h->nroutes)
        return respond(conn, MHD_HTTP_NOT_FOUND, strdup("not found\n"), 10, "text/plain");
    pthread_mutex_lock(&h->mu);
    h->route = route;
    uint64_t want = ++h->asked;
    uv_async_send(&h->async);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    int rc = 0;
    while (!h->stopping && h->answered < want && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&h->cv, &h->mu, &until);
    char *body = NULL;
    size_t len = 0;
    if (h->answered >= want && !h->stopping && (body = malloc(h->page.len + 1))) {
        memcpy(body, h->page.p, h->page.len);
        len = h->page.len;
    }
    pthread_mutex_unlock(&h->mu);
    if (!body)
        return respond(conn, MHD_HTTP_SERVICE_UNAVAILABLE, strdup("busy\n"), 5, "text/plain");
    return respond(conn, MHD_HTTP_OK, body, len, h->routes[route].content_type);
}

static void free_after_close(uv_handle_t *a) {
    http_server *h = a->data;
    kbuf_close(&h->page);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

int http_start(uv_loop_t *loop, const char *bind, int port, const http_route *routes,
               size_t nroutes, void *arg, http_server **out, char *err, size_t errcap) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, bind, &sa.sin_addr) != 1) {
        snprintf(err, errcap, "metrics: bad bind address %s", bind);
        return KEEL_EINVAL;
    }
    http_server *h = calloc(1, sizeof *h);
    if (!h) return KEEL_ENOMEM;
    h->routes = routes;
    h->nroutes = nroutes;
    h->arg = arg;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    kbuf_init(&h->page);
    uv_async_init(loop, &h->async, on_async);
    h->async.data = h;
    h->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL,
                                 on_request, h, MHD_OPTION_SOCK_ADDR, &sa,
                                 MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errcap, "metrics: cannot listen on %s:%d (port in use?)", bind, port);
        uv_close((uv_handle_t *)&h->async, free_after_close);
        return KEEL_EIO;
    }
    *out = h;
    return 0;
}

void http_stop(http_server *h) {
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    MHD_stop_daemon(h->daemon);
    uv_close((uv_handle_t *)&h->async, free_after_close);
}
