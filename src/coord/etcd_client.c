/* etcd_client.c - etcd v3 JSON gateway over libcurl, on a worker thread
 * (see etcd_client.h).
 *
 * One job at a time: the owner puts a job in `pending` and waits on `done`
 * with a deadline. The worker takes it, runs it with libcurl (whose own
 * timeout is the same timeout_ms), and signals. A job the owner gave up on
 * (deadline passed) is marked abandoned; the worker frees it. The job is
 * shared by exactly two parties, so a `refs` count under the mutex decides
 * who frees it.
 *
 * Mutex `mu` guards pending, stop, and every field of a job once it is
 * shared; `cur` (the endpoint index) and the curl handle belong to the
 * worker alone.
 */
#include "coord/etcd_client.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
    char *path, *body;
    int fault;
    int refs;     /* owner + worker */
    int finished; /* the worker is done with it */
    int rc;
    long status;
    char *answer; /* response body */
    size_t alen;
    char err[ETCD_ERR_MAX];
} job;

struct etcd_client {
    char *urls[ETCD_URLS_MAX];
    int nurls;
    int timeout_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* pending set, job finished, or stop */
    job *pending;
    int stop;
    int cur; /* worker only; copied to endpoint under mu */
    char endpoint[256];
    CURL *curl; /* worker only */
    char errmsg[ETCD_ERR_MAX];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void job_unref(job *j) { /* with mu held */
    if (--j->refs) return;
    free(j->path);
    free(j->body);
    free(j->answer);
    free(j);
}

static size_t on_data(char *p, size_t sz, size_t n, void *arg) {
    job *j = arg;
    size_t add = sz * n;
    char *a = realloc(j->answer, j->alen + add + 1);
    if (!a) return 0;
    memcpy(a + j->alen, p, add);
    j->alen += add;
    a[j->alen] = 0;
    j->answer = a;
    return add;
}

/* Runs j against the endpoints, on the worker. Sets j->rc and j->err. */
static void run_job(etcd_client *c, job *j) {
    if (j->fault == ETCD_FAULT_DROP) {
        j->rc = KEEL_EUNKNOWN;
        snprintf(j->err, sizeof j->err, "request dropped (test fault)");
        return;
    }
    for (int tries = 0; tries < c->nurls; tries++) {
        int at = (c->cur + tries) % c->nurls;
        char url[512];
        snprintf(url, sizeof url, "%s%s", c->urls[at], j->path);
        free(j->answer);
        j->answer = NULL;
        j->alen = 0;
        curl_easy_reset(c->curl);
        struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(c->curl, CURLOPT_URL, url);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, j->body);
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, j);
        curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
                         (long)(c->timeout_ms < 1000 ? c->timeout_ms : 1000));
        curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
        CURLcode cc = curl_easy_perform(c->curl);
        curl_slist_free_all(hdr);
        /* Only a refused connect proves nothing was sent; a timeout may
         * have sent the request, so it is never resent elsewhere. */
        if (cc == CURLE_COULDNT_CONNECT) {
            snprintf(j->err, sizeof j->err, "%s: %s", c->urls[at], curl_easy_strerror(cc));
            j->rc = KEEL_EIO;
            continue; /* nothing was sent: try the next member */
        }
        if (cc != CURLE_OK) {
            snprintf(j->err, sizeof j->err, "%s: %s", c->urls[at], curl_easy_strerror(cc));
            j->rc = KEEL_EUNKNOWN;
            return;
        }
        c->cur = at;
        pthread_mutex_lock(&c->mu);
        snprintf(c->endpoint, sizeof c->endpoint, "%s", c->urls[at]);
        pthread_mutex_unlock(&c->mu);
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &j->status);
        if (j->fault == ETCD_FAULT_LOSE_REPLY) {
            j->rc = KEEL_EUNKNOWN;
            snprintf(j->err, sizeof j->err, "answer lost (test fault)");
            return;
        }
        if (j->status >= 200 && j->status < 300) {
            j->rc = 0;
            return;
        }
        snprintf(j->err, sizeof j->err, "%s: HTTP %ld: %.180s", c->urls[at], j->status,
                 j->answer ? j->answer : "");
        j->rc = j->status >= 500 ? KEEL_EUNKNOWN : KEEL_EIO;
        return;
    }
}

static void *worker(void *arg) {
    etcd_client *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->pending && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stop && !c->pending) break;
        job *j = c->pending;
        c->pending = NULL;
        pthread_mutex_unlock(&c->mu);
        run_job(c, j);
        pthread_mutex_lock(&c->mu);
        j->finished = 1;
        job_unref(j);
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int etcd_client_new(const char *urls, int timeout_ms, etcd_client **out, char *err, size_t errcap) {
    *out = NULL;
    if (!urls || !*urls) return keel_errf(err, errcap, KEEL_EINVAL, "no etcd URL");
    if (timeout_ms < 100 || timeout_ms > 60000)
        return keel_errf(err, errcap, KEEL_EINVAL, "etcd timeout %d ms not in 100..60000",
                         timeout_ms);
    etcd_client *c = calloc(1, sizeof *c);
    if (!c) return KEEL_ENOMEM;
    c->timeout_ms = timeout_ms;
    char *copy = strdup(urls), *save = NULL;
    int rc = copy ? 0 : KEEL_ENOMEM;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && !rc;
         t = strtok_r(NULL, ",", &save)) {
        if (strncmp(t, "http://", 7) || strlen(t) > 200)
            rc = keel_errf(err, errcap, KEEL_EINVAL, "etcd URL '%s' must start with http://", t);
        else if (c->nurls == ETCD_URLS_MAX)
            rc = keel_errf(err, errcap, KEEL_EINVAL, "more than %d etcd URLs", ETCD_URLS_MAX);
        else if (!(c->urls[c->nurls++] = strdup(t)))
            rc = KEEL_ENOMEM;
        size_t n = c->nurls && c->urls[c->nurls - 1] ? strlen(c->urls[c->nurls - 1]) : 0;
        if (n && c->urls[c->nurls - 1][n - 1] == '/') c->urls[c->nurls - 1][n - 1] = 0;
    }
    free(copy);
    if (!rc && !c->nurls) rc = keel_errf(err, errcap, KEEL_EINVAL, "no etcd URL");
    pthread_once(&curl_once, curl_init_once);
    if (!rc && !(c->curl = curl_easy_init()))
        rc = keel_errf(err, errcap, KEEL_EIO, "libcurl failed to start");
    if (rc) goto fail;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", c->urls[0]);
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&c->thread, NULL, worker, c)) {
        rc = keel_errf(err, errcap, KEEL_EIO, "cannot start the etcd thread");
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        goto fail;
    }
    *out = c;
    return 0;
fail:
    for (int i = 0; i < c->nurls; i++)
        free(c->urls[i]);
    if (c->curl) curl_easy_cleanup(c->curl);
    free(c);
    return rc;
}

void etcd_client_free(etcd_client *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    if (c->pending) job_unref(c->pending);
    curl_easy_cleanup(c->curl);
    for (int i = 0; i < c->nurls; i++)
        free(c->urls[i]);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

int etcd_post_ex(etcd_client *c, const char *path, const char *body, int fault,
                 struct cJSON **reply) {
    *reply = NULL;
    job *j = calloc(1, sizeof *j);
    if (!j || !(j->path = strdup(path)) || !(j->body = strdup(body))) {
        if (j) free(j->path), free(j);
        snprintf(c->errmsg, sizeof c->errmsg, "out of memory");
        return KEEL_ENOMEM;
    }
    j->fault = fault;
    j->refs = 2;
    struct timespec dl;
    deadline_in(&dl, c->timeout_ms + 250); /* curl's own timeout fires first */
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    while (c->pending && rc != ETIMEDOUT) /* an abandoned job still queued */
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &dl);
    if (rc == ETIMEDOUT) { /* never handed over: certainly not sent */
        j->refs = 1;
        job_unref(j);
        pthread_mutex_unlock(&c->mu);
        snprintf(c->errmsg, sizeof c->errmsg, "etcd thread busy: request not sent");
        return KEEL_EIO;
    }
    c->pending = j;
    pthread_cond_broadcast(&c->cv);
    while (!j->finished && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &dl);
    if (!j->finished) {
        if (c->pending == j) { /* the worker never took it: not sent */
            c->pending = NULL;
            j->refs--;
            job_unref(j);
            pthread_mutex_unlock(&c->mu);
            snprintf(c->errmsg, sizeof c->errmsg, "etcd thread busy: request not sent");
            return KEEL_EIO;
        }
        job_unref(j); /* the worker frees it */
        pthread_mutex_unlock(&c->mu);
        snprintf(c->errmsg, sizeof c->errmsg, "no answer from etcd in %d ms", c->timeout_ms);
        return KEEL_EUNKNOWN;
    }
    pthread_mutex_unlock(&c->mu);
    rc = j->rc;
    snprintf(c->errmsg, sizeof c->errmsg, "%s", j->err);
    if (!rc) {
        *reply = j->answer ? cJSON_Parse(j->answer) : NULL;
        if (!*reply || !cJSON_IsObject(*reply)) {
            cJSON_Delete(*reply);
            *reply = NULL;
            snprintf(c->errmsg, sizeof c->errmsg, "etcd answered something that is not JSON");
            rc = KEEL_EPROTO;
        }
    }
    pthread_mutex_lock(&c->mu);
    job_unref(j);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int etcd_post(etcd_client *c, const char *path, const char *body, struct cJSON **reply) {
    return etcd_post_ex(c, path, body, ETCD_FAULT_NONE, reply);
}

int etcd_post_json(etcd_client *c, const char *path, const struct cJSON *body,
                   struct cJSON **reply) {
    *reply = NULL;
    char *txt = cJSON_PrintUnformatted(body);
    if (!txt) return KEEL_ENOMEM;
    int rc = etcd_post(c, path, txt, reply);
    free(txt);
    return rc;
}

const char *etcd_client_errmsg(const etcd_client *c) {
    return c->errmsg;
}

const char *etcd_client_endpoint(const etcd_client *c) {
    return c->endpoint;
}

/* ---- Helpers --------------------------------------------------------------- */

char *etcd_b64(const void *s, size_t n) {
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out) return NULL;
    EVP_EncodeBlock((unsigned char *)out, s, (int)n);
    return out;
}

int etcd_unb64(const char *s, char **out, size_t *n) {
    size_t len = strlen(s);
    *out = NULL;
    if (len % 4) return KEEL_EPROTO;
    char *o = malloc(len / 4 * 3 + 1);
    if (!o) return KEEL_ENOMEM;
    int k = len ? EVP_DecodeBlock((unsigned char *)o, (const unsigned char *)s, (int)len) : 0;
    if (k < 0) {
        free(o);
        return KEEL_EPROTO;
    }
    if (len && s[len - 1] == '=') k--; /* EVP_DecodeBlock counts the padding */
    if (len > 1 && s[len - 2] == '=') k--;
    o[k] = 0;
    *out = o;
    *n = (size_t)k;
    return 0;
}

int64_t etcd_json_i64(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (cJSON_IsString(v)) return strtoll(v->valuestring, NULL, 10);
    if (cJSON_IsNumber(v)) return (int64_t)v->valuedouble;
    return 0;
}

int64_t etcd_revision(const cJSON *reply) {
    return etcd_json_i64(cJSON_GetObjectItemCaseSensitive(reply, "header"), "revision");
}

char *etcd_prefix_end(const char *prefix) {
    char *e = strdup(prefix);
    if (!e) return NULL;
    size_t n = strlen(e);
    while (n && (unsigned char)e[n - 1] == 0xff)
        e[--n] = 0;
    if (n) e[n - 1]++;
    return e;
}

static cJSON *add_b64(cJSON *o, const char *name, const char *text) {
    char *b = etcd_b64(text, strlen(text));
    cJSON *r = b ? cJSON_AddStringToObject(o, name, b) : NULL;
    free(b);
    return r;
}

static cJSON *add_i64(cJSON *o, const char *name, int64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)v);
    return cJSON_AddStringToObject(o, name, num);
}

cJSON *etcd_cmp(cJSON *arr, const char *key, const char *target, const char *result,
                int64_t value) {
    cJSON *c = cJSON_CreateObject();
    if (!c) return NULL;
    cJSON_AddItemToArray(arr, c);
    const char *field = !strcmp(target, "MOD")      ? "mod_revision"
                        : !strcmp(target, "CREATE") ? "create_revision"
                        : !strcmp(target, "LEASE")  ? "lease"
                                                    : "version";
    if (!add_b64(c, "key", key) || !cJSON_AddStringToObject(c, "target", target) ||
        !cJSON_AddStringToObject(c, "result", result) || !add_i64(c, field, value))
        return NULL;
    return arr;
}

static cJSON *add_op(cJSON *arr, const char *kind, cJSON **inner) {
    cJSON *op = cJSON_CreateObject();
    if (!op) return NULL;
    cJSON_AddItemToArray(arr, op);
    *inner = cJSON_AddObjectToObject(op, kind);
    return *inner;
}

cJSON *etcd_op_put(cJSON *arr, const char *key, const char *value, int64_t lease) {
    cJSON *in;
    if (!add_op(arr, "request_put", &in) || !add_b64(in, "key", key) ||
        !add_b64(in, "value", value))
        return NULL;
    if (lease && !add_i64(in, "lease", lease)) return NULL;
    return arr;
}

cJSON *etcd_op_del(cJSON *arr, const char *key) {
    cJSON *in;
    if (!add_op(arr, "request_delete_range", &in) || !add_b64(in, "key", key)) return NULL;
    return arr;
}

cJSON *etcd_op_get(cJSON *arr, const char *key) {
    cJSON *in;
    if (!add_op(arr, "request_range", &in) || !add_b64(in, "key", key)) return NULL;
    return arr;
}
