/* coord_elect.c - leader election on etcd (see coord_elect.h).
 *
 * The thread's loop, every 50 ms or sooner when stopped:
 *   no lease          grant one; on failure retry later
 *   lease, standby    campaign (create-if-absent txn); learn who leads
 *   lease             keepalive every ttl/3 (and at once when the deadline is
 *                     within ttl/3): deadline = t_sent + TTL answered;
 *                     TTL 0 or no answer past the deadline: lease lost
 * `mu` guards the view and `stop`; the client belongs to the thread.
 */
#include "coord/coord_elect.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coord/etcd_client.h"
#include "coord/mapstore_etcd.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/id.h"
#include "core/log.h"

struct coord_elect {
    etcd_client *c;
    char key[MAPSTORE_ETCD_PREFIX_MAX + 16];
    char id[COORD_ELECT_ID_MAX + 1], addr[COORD_ELECT_ADDR_MAX + 1];
    int ttl_s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    coord_elect_view v; /* under mu */
    /* thread only */
    int64_t lease, lease_deadline_ms, next_keepalive_ms, next_campaign_ms;
    char seen_leader[COORD_ELECT_ID_MAX + 1];
    uv_timer_t watch;
    int watching;                                        /* watch is initialised and not closed */
    int64_t next_members_ms;                             /* thread only */
    coord_elect_member members[COORD_ELECT_MEMBERS_MAX]; /* under mu */
    size_t nmembers;                                     /* under mu */
};

static coord_elect *current; /* coord_elect_current */

static int64_t mono_ms(void) {
    return (int64_t)(keel_mono_us() / 1000);
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_view(coord_elect *e, const coord_elect_view *v) {
    pthread_mutex_lock(&e->mu);
    e->v = *v;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void lose(coord_elect *e, const char *why) {
    coord_elect_view v;
    pthread_mutex_lock(&e->mu);
    int was = e->v.leading;
    e->v.leading = 0;
    v = e->v;
    pthread_mutex_unlock(&e->mu);
    (void)v;
    if (was) keel_log(KEEL_LOG_WARN, "election_lost", "id=%s reason=%s", e->id, why);
    e->lease = 0;
}

static int grant(coord_elect *e) {
    char body[64];
    cJSON *r = NULL;
    snprintf(body, sizeof body, "{\"TTL\":\"%d\"}", e->ttl_s);
    int64_t t0 = mono_ms();
    int rc = etcd_post(e->c, "/v3/lease/grant", body, &r);
    int64_t id = rc ? 0 : etcd_json_i64(r, "ID"), ttl = rc ? 0 : etcd_json_i64(r, "TTL");
    cJSON_Delete(r);
    if (!id || ttl <= 0) return -1;
    e->lease = id;
    e->lease_deadline_ms = t0 + ttl * 1000;
    e->next_keepalive_ms = t0 + ttl * 1000 / 3;
    /* announce this candidate (for keel status), with the same lease */
    char key[sizeof e->key + COORD_ELECT_ID_MAX + 16], val[256];
    snprintf(key, sizeof key, "%.*scoordinators/%s", (int)(strlen(e->key) - strlen("leader")),
             e->key, e->id);
    snprintf(val, sizeof val, "{\"id\":\"%s\",\"addr\":\"%s\"}", e->id, e->addr);
    cJSON *b = cJSON_CreateObject(), *ans = NULL;
    char *k64 = etcd_b64(key, strlen(key)), *v64 = etcd_b64(val, strlen(val));
    char lease[24];
    snprintf(lease, sizeof lease, "%lld", (long long)id);
    if (b && k64 && v64 && cJSON_AddStringToObject(b, "key", k64) &&
        cJSON_AddStringToObject(b, "value", v64) && cJSON_AddStringToObject(b, "lease", lease) &&
        etcd_post_json(e->c, "/v3/kv/put", b, &ans) == 0)
        e->next_members_ms = 0;
    cJSON_Delete(ans);
    cJSON_Delete(b);
    free(k64);
    free(v64);
    return 0;
}

/* Reads PREFIX coordinators/ into the member list. */
static void read_members(coord_elect *e) {
    char key[sizeof e->key + 16];
    snprintf(key, sizeof key, "%.*scoordinators/", (int)(strlen(e->key) - strlen("leader")),
             e->key);
    char *end = etcd_prefix_end(key), *k64 = etcd_b64(key, strlen(key));
    char *e64 = end ? etcd_b64(end, strlen(end)) : NULL;
    cJSON *b = cJSON_CreateObject(), *r = NULL;
    int ok = b && k64 && e64 && cJSON_AddStringToObject(b, "key", k64) &&
             cJSON_AddStringToObject(b, "range_end", e64) &&
             etcd_post_json(e->c, "/v3/kv/range", b, &r) == 0;
    free(end), free(k64), free(e64);
    cJSON_Delete(b);
    if (!ok) {
        cJSON_Delete(r);
        return;
    }
    coord_elect_member m[COORD_ELECT_MEMBERS_MAX];
    size_t n = 0;
    const cJSON *kv;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(r, "kvs")) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
        char *text = NULL;
        size_t len;
        if (n == COORD_ELECT_MEMBERS_MAX || !cJSON_IsString(v) ||
            etcd_unb64(v->valuestring, &text, &len))
            continue;
        cJSON *o = cJSON_Parse(text);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
        const cJSON *addr = cJSON_GetObjectItemCaseSensitive(o, "addr");
        if (cJSON_IsString(id) && cJSON_IsString(addr)) {
            snprintf(m[n].id, sizeof m[n].id, "%s", id->valuestring);
            snprintf(m[n].addr, sizeof m[n].addr, "%s", addr->valuestring);
            n++;
        }
        cJSON_Delete(o);
        free(text);
    }
    cJSON_Delete(r);
    pthread_mutex_lock(&e->mu);
    memcpy(e->members, m, n * sizeof *m);
    e->nmembers = n;
    pthread_mutex_unlock(&e->mu);
}

size_t coord_elect_members(coord_elect *e, coord_elect_member *out, size_t max) {
    pthread_mutex_lock(&e->mu);
    size_t n = e->nmembers;
    memcpy(out, e->members, (n < max ? n : max) * sizeof *out);
    pthread_mutex_unlock(&e->mu);
    return n;
}

coord_elect *coord_elect_current(void) {
    return current;
}

int coord_elect_may_act(void) {
    coord_elect_view v;
    if (!current) return 1;
    coord_elect_get(current, &v);
    return v.leading;
}

const char *coord_elect_id(const coord_elect *e) {
    return e->id;
}

static void keepalive(coord_elect *e) {
    char body[64];
    cJSON *r = NULL;
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)e->lease);
    int64_t t0 = mono_ms(); /* the deadline counts from before the request */
    int rc = etcd_post(e->c, "/v3/lease/keepalive", body, &r);
    const cJSON *res = rc ? NULL : cJSON_GetObjectItemCaseSensitive(r, "result");
    int64_t ttl = res ? etcd_json_i64(res, "TTL") : -1;
    cJSON_Delete(r);
    if (ttl == 0) { /* answered: the lease is gone */
        lose(e, "lease-expired");
        return;
    }
    e->next_keepalive_ms = mono_ms() + 200; /* no answer: try again soon */
    if (ttl < 0) return;
    e->lease_deadline_ms = t0 + ttl * 1000;
    e->next_keepalive_ms = t0 + ttl * 1000 / 3;
    pthread_mutex_lock(&e->mu);
    if (e->v.leading) e->v.deadline_ms = e->lease_deadline_ms;
    pthread_mutex_unlock(&e->mu);
}

static void campaign(coord_elect *e) {
    cJSON *val = cJSON_CreateObject(), *body = cJSON_CreateObject(), *r = NULL;
    cJSON_AddStringToObject(val, "id", e->id);
    cJSON_AddStringToObject(val, "addr", e->addr);
    cJSON_AddNumberToObject(val, "since_ms", (double)wall_ms());
    char *vt = cJSON_PrintUnformatted(val);
    cJSON_Delete(val);
    cJSON *cmp = cJSON_AddArrayToObject(body, "compare");
    cJSON *ok = cJSON_AddArrayToObject(body, "success");
    cJSON *fail = cJSON_AddArrayToObject(body, "failure");
    int built = vt && etcd_cmp(cmp, e->key, "CREATE", "EQUAL", 0) &&
                etcd_op_put(ok, e->key, vt, e->lease) && etcd_op_get(fail, e->key);
    free(vt);
    int rc = built ? etcd_post_json(e->c, "/v3/kv/txn", body, &r) : KEEL_ENOMEM;
    cJSON_Delete(body);
    if (rc) {
        cJSON_Delete(r);
        return; /* unknown or failed: the next campaign reads what happened */
    }
    coord_elect_view v;
    memset(&v, 0, sizeof v);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"))) {
        v.leading = 1;
        v.create_rev = etcd_revision(r);
        v.since_ms = wall_ms();
        v.deadline_ms = e->lease_deadline_ms;
        snprintf(v.leader_id, sizeof v.leader_id, "%s", e->id);
        snprintf(v.leader_addr, sizeof v.leader_addr, "%s", e->addr);
        set_view(e, &v);
        keel_log(KEEL_LOG_INFO, "election_won", "id=%s addr=%s revision=%lld lease=%llx", e->id,
                 e->addr, (long long)v.create_rev, (unsigned long long)e->lease);
        cJSON_Delete(r);
        return;
    }
    const cJSON *kv = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "responses"), 0),
                "response_range"),
            "kvs"),
        0);
    if (kv && etcd_json_i64(kv, "lease") == e->lease) {
        /* our own key: an earlier campaign applied but its answer was lost */
        v.leading = 1;
        v.create_rev = etcd_json_i64(kv, "create_revision");
        v.since_ms = wall_ms();
        v.deadline_ms = e->lease_deadline_ms;
        snprintf(v.leader_id, sizeof v.leader_id, "%s", e->id);
        snprintf(v.leader_addr, sizeof v.leader_addr, "%s", e->addr);
        set_view(e, &v);
        keel_log(KEEL_LOG_INFO, "election_won", "id=%s addr=%s revision=%lld lease=%llx settled=1",
                 e->id, e->addr, (long long)v.create_rev, (unsigned long long)e->lease);
        cJSON_Delete(r);
        return;
    }
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(kv, "value");
    char *text = NULL;
    size_t n;
    if (cJSON_IsString(value) && etcd_unb64(value->valuestring, &text, &n) == 0) {
        cJSON *lv = cJSON_Parse(text);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(lv, "id");
        const cJSON *addr = cJSON_GetObjectItemCaseSensitive(lv, "addr");
        if (cJSON_IsString(id) && cJSON_IsString(addr)) {
            snprintf(v.leader_id, sizeof v.leader_id, "%s", id->valuestring);
            snprintf(v.leader_addr, sizeof v.leader_addr, "%s", addr->valuestring);
        }
        cJSON_Delete(lv);
    }
    free(text);
    cJSON_Delete(r);
    if (strcmp(v.leader_id, e->seen_leader)) {
        keel_log(KEEL_LOG_INFO, "election_standby", "id=%s leader=%s leader_addr=%s", e->id,
                 v.leader_id[0] ? v.leader_id : "?", v.leader_addr[0] ? v.leader_addr : "?");
        snprintf(e->seen_leader, sizeof e->seen_leader, "%s", v.leader_id);
    }
    set_view(e, &v);
}

static void *run(void *arg) {
    coord_elect *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        pthread_mutex_unlock(&e->mu);
        int64_t now = mono_ms();
        if (e->lease && now >= e->lease_deadline_ms) lose(e, "lease-deadline-passed");
        if (!e->lease) {
            if (grant(e) == 0) e->next_campaign_ms = 0;
        } else {
            if (now >= e->next_keepalive_ms) keepalive(e);
            pthread_mutex_lock(&e->mu);
            int leading = e->v.leading;
            pthread_mutex_unlock(&e->mu);
            if (e->lease && !leading && mono_ms() >= e->next_campaign_ms) {
                campaign(e);
                e->next_campaign_ms = mono_ms() + 200;
            }
            if (mono_ms() >= e->next_members_ms) {
                read_members(e);
                e->next_members_ms = mono_ms() + 1000;
            }
        }
        pthread_mutex_lock(&e->mu);
        if (e->stop) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int coord_elect_start(const coord_elect_config *cfg, coord_elect **out, char *err, size_t cap) {
    *out = NULL;
    if (!cfg->id || !keel_id_validz(cfg->id))
        return keel_errf(err, cap, KEEL_EINVAL, "--id: not a valid id (" KEEL_ID_RULE ")");
    if (!cfg->addr || strlen(cfg->addr) > COORD_ELECT_ADDR_MAX)
        return keel_errf(err, cap, KEEL_EINVAL, "bad coordinator address");
    int ttl = cfg->ttl_s ? cfg->ttl_s : COORD_ELECT_DEFAULT_TTL_S;
    if (ttl < 2 || ttl > 60)
        return keel_errf(err, cap, KEEL_EINVAL, "lease TTL %d not in 2..60", ttl);
    coord_elect *e = calloc(1, sizeof *e);
    if (!e) return keel_errf(err, cap, KEEL_ENOMEM, "out of memory");
    e->ttl_s = ttl;
    snprintf(e->key, sizeof e->key, "%sleader",
             cfg->prefix ? cfg->prefix : MAPSTORE_ETCD_DEFAULT_PREFIX);
    snprintf(e->id, sizeof e->id, "%s", cfg->id);
    snprintf(e->addr, sizeof e->addr, "%s", cfg->addr);
    /* a request never waits longer than a third of the lease */
    int timeout = ttl * 1000 / 3 > 60000 ? 60000 : ttl * 1000 / 3;
    int rc = etcd_client_new(cfg->urls, timeout < 100 ? 100 : timeout, &e->c, err, cap);
    if (rc) {
        free(e);
        return rc;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&e->thread, NULL, run, e)) {
        etcd_client_free(e->c);
        free(e);
        return keel_errf(err, cap, KEEL_EIO, "cannot start the election thread");
    }
    *out = e;
    current = e;
    return 0;
}

void coord_elect_stop(coord_elect *e) {
    if (!e) return;
    if (current == e) current = NULL;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    if (e->lease) { /* hand over now rather than after the TTL */
        char body[64];
        cJSON *r = NULL;
        snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)e->lease);
        if (etcd_post(e->c, "/v3/lease/revoke", body, &r) == 0)
            keel_log(KEEL_LOG_INFO, "election_resigned", "id=%s", e->id);
        cJSON_Delete(r);
    }
    etcd_client_free(e->c);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

void coord_elect_get(coord_elect *e, coord_elect_view *v) {
    pthread_mutex_lock(&e->mu);
    *v = e->v;
    if (v->leading && mono_ms() >= v->deadline_ms) v->leading = 0;
    pthread_mutex_unlock(&e->mu);
}

int coord_elect_wait(coord_elect *e, int timeout_ms) {
    int64_t end = mono_ms() + timeout_ms;
    coord_elect_view v;
    for (;;) {
        coord_elect_get(e, &v);
        if (v.leading) return 1;
        if (mono_ms() >= end) return 0;
        usleep(20 * 1000);
    }
}

static void on_watch(uv_timer_t *t) {
    coord_elect *e = t->data;
    coord_elect_view v;
    coord_elect_get(e, &v);
    if (v.leading) return;
    keel_log(KEEL_LOG_ERROR, "leadership_lost",
             "id=%s leader=%s action=exit status=%d (a deposed leader stops at once)", e->id,
             v.leader_id[0] ? v.leader_id : "?", COORD_ELECT_EXIT_LOST);
    _exit(COORD_ELECT_EXIT_LOST);
}

void coord_elect_unwatch(coord_elect *e) {
    if (e && e->watching) uv_close((uv_handle_t *)&e->watch, NULL);
    if (e) e->watching = 0;
}

int coord_elect_watch(coord_elect *e, uv_loop_t *loop) {
    if (uv_timer_init(loop, &e->watch)) return KEEL_EIO;
    e->watching = 1;
    e->watch.data = e;
    uv_unref((uv_handle_t *)&e->watch); /* does not keep the loop alive */
    return uv_timer_start(&e->watch, on_watch, 50, 50) ? KEEL_EIO : 0;
}
