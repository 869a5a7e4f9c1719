/* cmd_zblocking.c - BZPOPMIN, BZPOPMAX, BZMPOP: argument checks in redis
 * 7.0's order (t_zset.c), then blocking_run() (blocking.h) with a try
 * function over zset_pop (zset.h). Replies as redis: BZPOPMIN/BZPOPMAX
 * [key, member, score]; BZMPOP [key, [[member, score], ...]]; a timeout a
 * null array. Writes of a sorted set's metadata wake the waiters (db_put
 * calls blocking_touch for STORE_T_ZSET as for lists). */
#include "node/blocking.h"
#include "node/cmd.h"
#include "node/zset.h"

#include <string.h>

typedef struct zpop_args {
    int max;
    int first, nkeys;
    long long count; /* -1: BZPOPMIN/BZPOPMAX's flat [key, member, score] */
} zpop_args;

/* 1 a sorted set, 0 absent, 2 another type, -1 replied a storage error. */
static int key_kind(cmd_ctx *x, const char *k, size_t kl) {
    store_value v;
    int rc = db_get(x, NULL, k, kl, &v);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) {
        reply_storage(x, rc);
        return -1;
    }
    int kind = v.type == STORE_T_ZSET ? 1 : 2;
    store_value_release(&v);
    return kind;
}

/* Serves the first key (in argument order) holding a sorted set; a key of
 * another type is -WRONGTYPE on a fresh call and skipped when serving. */
static int try_zpop(cmd_ctx *x, int serving, void *arg) {
    const zpop_args *a = arg;
    for (int i = a->first; i < a->first + a->nkeys; i++) {
        const char *k = x->argv[i];
        size_t kl = x->argvlen[i];
        int r = key_kind(x, k, kl);
        if (r < 0) return 1;
        if (r == 2) {
            if (serving) continue;
            reply_wrongtype(x);
            return 1;
        }
        if (r == 0) continue;
        zlist l;
        zlist_init(&l);
        long n = zset_pop(x, k, kl, a->max, a->count < 0 ? 1 : (size_t)a->count, &l);
        if (n > 0 && a->count < 0) {
            resp_w_array(x->out, 3);
            resp_w_bulk(x->out, k, kl);
            resp_w_bulk(x->out, zlist_m(&l, 0), l.e[0].ml);
            resp_w_double(x->out, x->proto, l.e[0].s);
        } else if (n > 0) {
            resp_w_array(x->out, 2);
            resp_w_bulk(x->out, k, kl);
            resp_w_array(x->out, l.n);
            for (size_t j = 0; j < l.n; j++) {
                resp_w_array(x->out, 2);
                resp_w_bulk(x->out, zlist_m(&l, j), l.e[j].ml);
                resp_w_double(x->out, x->proto, l.e[j].s);
            }
        }
        zlist_free(&l);
        if (n) return 1; /* popped, or replied an error */
    }
    return 0;
}

static void bzpop_generic(cmd_ctx *x, int max) {
    zpop_args a = {.max = max, .first = 1, .nkeys = x->argc - 2, .count = -1};
    blocking_spec sp = {.first_key = 1,
                        .nkeys = x->argc - 2,
                        .timeout_arg = x->argc - 1,
                        .null_array = 1,
                        .try_serve = try_zpop,
                        .arg = &a};
    blocking_run(x, &sp);
}

void cmd_bzpopmin(cmd_ctx *x) {
    bzpop_generic(x, 0);
}
void cmd_bzpopmax(cmd_ctx *x) {
    bzpop_generic(x, 1);
}

/* BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count] */
void cmd_bzmpop(cmd_ctx *x) {
    int max, nk;
    long long count;
    if (arg_mpop(x, 2, "max", "min", &max, &nk, &count)) return;
    zpop_args a = {.max = max, .first = 3, .nkeys = nk, .count = count};
    blocking_spec sp = {.first_key = 3,
                        .nkeys = nk,
                        .timeout_arg = 1,
                        .null_array = 1,
                        .try_serve = try_zpop,
                        .arg = &a};
    blocking_run(x, &sp);
}
