/* cmd_blocking.c - BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP: argument
 * checks in redis 7.0's order (t_list.c), then blocking_run() with a try
 * function over the list operations of node/list.h. Replies byte for byte
 * as redis: BLPOP/BRPOP [key, element]; BLMPOP [key, [elements]]; the
 * moves the element; a timeout a null array (pops) or null bulk (moves).
 * See blocking.h for parking, waking, timeouts and -MOVED. */
#include "node/blocking.h"
#include "node/cmd.h"
#include "node/list.h"

#include <string.h>

typedef struct pop_args {
    int left;
    long long count; /* -1: BLPOP/BRPOP's [key, element] reply */
} pop_args;

/* Serves the first key (in argument order) holding a list; a key of another
 * type is -WRONGTYPE on a fresh call and skipped when serving (redis keeps
 * the client blocked). */
static int try_pop(cmd_ctx *x, int serving, void *arg, int first, int nkeys) {
    const pop_args *a = arg;
    for (int i = first; i < first + nkeys; i++) {
        const char *k = x->argv[i];
        size_t kl = x->argvlen[i];
        int r = list_peek(x, k, kl);
        if (r == -1) return 1;
        if (r == -2) {
            if (serving) continue;
            reply_wrongtype(x);
            return 1;
        }
        if (r == 0) continue;
        kbuf out;
        kbuf_init(&out);
        long n = list_pop_n(x, k, kl, a->left, a->count < 0 ? 1 : a->count, &out);
        if (n > 0) {
            resp_w_array(x->out, 2);
            resp_w_bulk(x->out, k, kl);
            if (a->count >= 0) resp_w_array(x->out, (size_t)n);
            kbuf_append(x->out, out.p, out.len);
        }
        kbuf_close(&out);
        if (n) return 1;
    }
    return 0;
}

static int try_bpop(cmd_ctx *x, int serving, void *arg) {
    return try_pop(x, serving, arg, 1, x->argc - 2);
}

static void bpop_generic(cmd_ctx *x, int left) {
    pop_args a = {.left = left, .count = -1};
    blocking_spec sp = {.first_key = 1,
                        .nkeys = x->argc - 2,
                        .timeout_arg = x->argc - 1,
                        .null_array = 1,
                        .try_serve = try_bpop,
                        .arg = &a};
    blocking_run(x, &sp);
}

void cmd_blpop(cmd_ctx *x) {
    bpop_generic(x, 1);
}
void cmd_brpop(cmd_ctx *x) {
    bpop_generic(x, 0);
}

/* BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]. */
typedef struct mpop_args {
    pop_args pop;
    int nkeys;
} mpop_args;

static int try_blmpop(cmd_ctx *x, int serving, void *arg) {
    const mpop_args *a = arg;
    return try_pop(x, serving, (void *)&a->pop, 3, a->nkeys);
}

void cmd_blmpop(cmd_ctx *x) {
    int left, nk;
    long long count;
    if (arg_mpop(x, 2, "left", "right", &left, &nk, &count)) return;
    mpop_args a = {.pop = {.left = left, .count = count}, .nkeys = nk};
    blocking_spec sp = {.first_key = 3,
                        .nkeys = nk,
                        .timeout_arg = 1,
                        .null_array = 1,
                        .try_serve = try_blmpop,
                        .arg = &a};
    blocking_run(x, &sp);
}

/* BRPOPLPUSH and BLMOVE: argv[1] the source, argv[2] the destination. */
typedef struct move_args {
    int from_left, to_left;
} move_args;

static int try_move(cmd_ctx *x, int serving, void *arg) {
    const move_args *a = arg;
    int r = list_peek(x, x->argv[1], x->argvlen[1]);
    if (r == -1) return 1;
    if (r == -2) {
        if (serving) return 0;
        reply_wrongtype(x);
        return 1;
    }
    if (r == 0) return 0;
    /* A destination of another type: -WRONGTYPE, nothing moved (redis). */
    return list_move(x, x->argv[1], x->argvlen[1], x->argv[2], x->argvlen[2], a->from_left,
                     a->to_left);
}

static void bmove_generic(cmd_ctx *x, int from_left, int to_left, int timeout_arg) {
    move_args a = {.from_left = from_left, .to_left = to_left};
    blocking_spec sp = {.first_key = 1,
                        .nkeys = 1,
                        .timeout_arg = timeout_arg,
                        .null_array = 0,
                        .try_serve = try_move,
                        .arg = &a};
    blocking_run(x, &sp);
}

void cmd_brpoplpush(cmd_ctx *x) {
    bmove_generic(x, 0, 1, 3);
}

void cmd_blmove(cmd_ctx *x) {
    int fl = arg_is(x, 3, "left"), fr = arg_is(x, 3, "right");
    int tl = arg_is(x, 4, "left"), tr = arg_is(x, 4, "right");
    if (!(fl || fr) || !(tl || tr)) {
        reply_syntax(x);
        return;
    }
    bmove_generic(x, fl, tl, 5);
}
