/* db.h - the command layer's view of the data model (DESIGN.md §14): user
 * keys mapped to the store's record keys, compound keys' metadata, and
 * their field/member records. See store.h for the format.
 *
 * Every call takes the handler's context for the slot (x->slot) and the
 * store. With t == NULL reads go to the store directly (committed data);
 * otherwise through the open txn, which reads its own writes. Returns are 0
 * or a negative KEEL_E* (KEEL_ENOTFOUND for an absent or expired key or
 * field). Values filled in must be released with store_value_release.
 * Threads: the node's event loop only.
 */
#ifndef KEEL_NODE_DB_H
#define KEEL_NODE_DB_H

#include "node/cmd.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

/* ---- Keys ------------------------------------------------------------------ */
int db_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, store_value *v);
int db_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, uint8_t type, int64_t expire_ms,
           const void *p, size_t len);
/* Drops the key record (a compound key's fields become orphans, removed by
 * store_gc). *existed as store_txn_del. */
int db_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, int *existed);

/* ---- Compound keys ----------------------------------------------------------- */
typedef struct obj {
    uint8_t type;
    int64_t expire_ms;
    uint64_t version;
    uint64_t size; /* fields or members */
} obj;

/* Reads the metadata of k. Returns 1 (found, of type want), 0 (absent:
 * *o is a fresh object of type want with a new version, size 0), or -1
 * after replying WRONGTYPE or a storage error. */
int obj_lookup(cmd_ctx *x, store_txn *t, const char *k, size_t kl, uint8_t want, obj *o);
/* Writes o's metadata, or deletes the key when o->size == 0. */
int obj_save(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o);

/* Field records of o (the key k). */
int sub_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *f,
            size_t fl, store_value *v);
int sub_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *f,
            size_t fl, const void *p, size_t len);
int sub_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *f,
            size_t fl, int *existed);

/* Calls cb(arg, field, flen, value) for o's fields in field order, skipping
 * the first skip, at most max. No txn may be open. Returns the number
 * passed to cb or a negative KEEL_E*. */
typedef int (*sub_cb)(void *arg, const char *f, size_t fl, const store_value *v);
long sub_scan(cmd_ctx *x, const char *k, size_t kl, const obj *o, size_t skip, size_t max,
              sub_cb cb, void *arg);

/* Replies "ERR storage error: ..." for rc. */
void reply_storage(cmd_ctx *x, int rc);

/* redis' stringmatchlen: glob match of s against pattern p (*, ?, [..], \). */
int db_glob(const char *p, size_t pl, const char *s, size_t sl, int nocase);

#endif
