/* zset.h - sorted sets on the store (DESIGN.md §14, docs/storage-format.md):
 * for each member, a member record [0x01 ... version][member] whose value is
 * the score (IEEE-754 bits, u64 BE: ZSCORE, membership), and a score-index
 * record [0x02 ... version][zscore 8][member] with an empty payload (order
 * by score then member: ranks, score ranges, pops). Both carry the type
 * 0x83 and live under the key's slot, so moves, digests and store_gc cover
 * them. Every write here keeps the two in step inside the caller's txn.
 *
 * Calls take the handler's context (x->slot, x->srv->st). Reads with t ==
 * NULL go to committed data; scans need no txn open. Returns 0 or a negative
 * KEEL_E* (KEEL_ENOTFOUND for an absent member) unless said otherwise.
 * Threads: the node's event loop only.
 */
#ifndef KEEL_NODE_ZSET_H
#define KEEL_NODE_ZSET_H

#include "node/cmd.h"
#include "node/db.h"

#include <stddef.h>

/* Members with scores, in the order a scan produced them. */
typedef struct zitem {
    size_t mo, ml; /* member bytes at buf.p + mo */
    double s;
} zitem;
typedef struct zlist {
    kbuf buf;
    zitem *e;
    size_t n, cap;
} zlist;
void zlist_init(zlist *l);
void zlist_free(zlist *l);
/* Returns 0 or KEEL_ENOMEM. */
int zlist_add(zlist *l, const char *m, size_t ml, double s);
static inline const char *zlist_m(const zlist *l, size_t i) {
    return l->buf.p + l->e[i].mo;
}

/* The score of member m of o (key k). */
int zs_score(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
             size_t ml, double *s);
/* Sets m's score to s. old: its current score, NULL when m is new. Does
 * not change o->size. */
int zs_set(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
           size_t ml, double s, const double *old);
/* Removes m (both records). *existed 1 if it was there. Does not change
 * o->size. */
int zs_remove(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
              size_t ml, int *existed);

/* A score range: min/max with exclusive flags. */
typedef struct zs_srange {
    double min, max;
    int minex, maxex;
} zs_srange;
/* A lex range: "-" / "+" are inf = -1 / +1; else [x inclusive, (x exclusive. */
typedef struct zs_lrange {
    const char *min, *max;
    size_t minl, maxl;
    int mininf, maxinf, minex, maxex;
} zs_lrange;
/* Parses redis' "(1.5" / "-inf" form. Returns 0 or -1. */
int zs_parse_score(const char *s, size_t len, double *v, int *ex);
/* Parses "-", "+", "[x", "(x". Returns 0 or -1. Borrows s. */
int zs_parse_lex(const char *s, size_t len, const char **v, size_t *vl, int *inf, int *ex);
/* redis' getDoubleFromObject: the whole argument a double, not NaN. 0 / -1. */
int zs_arg_double(const char *s, size_t len, double *out);

/* Members of o in score order (rev: descending) within r (NULL: all),
 * skipping skip, at most max, appended to out (out NULL: only counted).
 * Returns the number found or KEEL_E*. No txn may be open. */
long zs_range_score(cmd_ctx *x, const char *k, size_t kl, const obj *o, const zs_srange *r, int rev,
                    size_t skip, size_t max, zlist *out);
/* The same by member order (BYLEX: meaningful when all scores are equal). */
long zs_range_lex(cmd_ctx *x, const char *k, size_t kl, const obj *o, const zs_lrange *r, int rev,
                  size_t skip, size_t max, zlist *out);
/* The 0-based ascending rank of (s, m) in o: members ordered before it. */
long zs_rank(cmd_ctx *x, const char *k, size_t kl, const obj *o, double s, const char *m,
             size_t ml);

/* Pops up to count members with the lowest (max 0) or highest scores from
 * key k, committing its own txn (for ZPOPMIN/ZPOPMAX/ZMPOP and a blocking
 * layer's BZPOPMIN/BZPOPMAX/BZMPOP). Fills out (initialised by the caller)
 * in pop order. Returns the number popped (0: no key), or -1 after
 * replying -WRONGTYPE or a storage error. No txn may be open. */
long zset_pop(cmd_ctx *x, const char *k, size_t kl, int max, size_t count, zlist *out);

/* Writes member (member, score) pairs of l as the new content of key dk
 * (whatever it held is replaced; l empty deletes it). The members of l
 * must be distinct. */
int zs_store(cmd_ctx *x, store_txn *t, const char *dk, size_t dkl, const zlist *l);
/* Writes the score-index record of one member copied by db_copy_value
 * (score = its member record's value, 8 bytes). */
int zs_index_copy(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
                  size_t ml, const char *val, size_t vl);

#endif
