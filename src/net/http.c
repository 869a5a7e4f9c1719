/* http.c - /metrics, /status and the dashboard over libmicrohttpd; see http.h
 * for the threading. The daemon runs one internal polling thread, so requests
 * are answered one at a time and the single page slot below is enough. */
#include "net/http.h"
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
    char query[HTTP_QUERY_MAX + 1];
    kbuf page;
    int status; /* of page */
    int stopping;
};

/* Loop thread: render for every request waiting. */
static void on_async(uv_async_t *a) {
    http_server *h = a->data;
    kbuf page;
    kbuf_init(&page);
    pthread_mutex_lock(&h->mu);
    size_t route = h->route;
    char query[HTTP_QUERY_MAX + 1];
    memcpy(query, h->query, sizeof query);
    pthread_mutex_unlock(&h->mu);
    int status = MHD_HTTP_OK;
    if (h->routes[route].render_q)
        status = h->routes[route].render_q(h->arg, query, &page);
    else
        h->routes[route].render(h->arg, &page);
    pthread_mutex_lock(&h->mu);
    kbuf_close(&h->page);
    h->page = page;
    h->status = status;
    h->answered = h->asked;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result respond_mode(struct MHD_Connection *conn, unsigned code, void *body,
                                    size_t len, const char *ctype, enum MHD_ResponseMemoryMode mode,
                                    const char *cache) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", cache);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, char *body, size_t len,
                               const char *ctype) {
    return respond_mode(conn, code, body, len, ctype,
                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT, "no-store");
}

/* Collects the query arguments as "k=v&k=v"; a query that does not fit
 * sets overflow. */
typedef struct query_acc {
    char *p;
    size_t len;
    int overflow;
} query_acc;

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
    query_acc *q = cls;
    int n = snprintf(q->p + q->len, HTTP_QUERY_MAX + 1 - q->len, "%s%s%s%s", q->len ? "&" : "", key,
                     value ? "=" : "", value ? value : "");
    if (n < 0 || q->len + (size_t)n > HTTP_QUERY_MAX) {
        q->overflow = 1;
        q->p[q->len] = 0;
        return MHD_NO;
    }
    q->len += (size_t)n;
    return MHD_YES;
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
    const http_route *rt = &h->routes[route];
    if (rt->body)
        return respond_mode(conn, MHD_HTTP_OK, (void *)rt->body, rt->body_len, rt->content_type,
                            MHD_RESPMEM_PERSISTENT, "max-age=300");
    char query[HTTP_QUERY_MAX + 1] = "";
    query_acc qa = {query, 0, 0};
    if (rt->render_q) MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_arg, &qa);
    if (qa.overflow) {
        static const char msg[] = "{\"error\":\"query string too long\"}\n";
        return respond(conn, MHD_HTTP_BAD_REQUEST, strdup(msg), sizeof msg - 1, rt->content_type);
    }
    pthread_mutex_lock(&h->mu);
    h->route = route;
    memcpy(h->query, query, sizeof query);
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
    unsigned status = MHD_HTTP_OK;
    if (h->answered >= want && !h->stopping && (body = malloc(h->page.len + 1))) {
        memcpy(body, h->page.p, h->page.len);
        len = h->page.len;
        status = (unsigned)h->status;
    }
    pthread_mutex_unlock(&h->mu);
    if (!body)
        return respond(conn, MHD_HTTP_SERVICE_UNAVAILABLE, strdup("busy\n"), 5, "text/plain");
    return respond(conn, status, body, len, rt->content_type);
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
