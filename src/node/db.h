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
    uint64_t head; /* lists: the index record of the first element */
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
/* The same from the first field >= from (one seek, not a walk past the
 * fields before it). */
long sub_scan_from(cmd_ctx *x, const char *k, size_t kl, const obj *o, const char *from,
                   size_t fromlen, size_t skip, size_t max, sub_cb cb, void *arg);

/* HDEL, SREM, ZREM: removes the fields or members argv[2..] of the key
 * argv[1] of type `type` and replies how many there were (0 for no key,
 * -WRONGTYPE for another type). */
void db_del_fields(cmd_ctx *x, uint8_t type);

/* Replies "ERR storage error: ..." for rc. */
void reply_storage(cmd_ctx *x, int rc);
/* Ends a write command's txn: with rc != 0 aborts it and replies the
 * storage error; else commits it (a commit fails only without an open txn,
 * and that is replied too). Returns 0 when committed, -1 when replied. */
int db_finish(cmd_ctx *x, store_txn *t, int rc);

/* redis' stringmatchlen: glob match of s against pattern p (*, ?, [..], \). */
int db_glob(const char *p, size_t pl, const char *s, size_t sl, int nocase);

#endif

/* All fields of a compound key, loaded before a txn opens (store_scan_range
 * needs none open): field i is buf.p[e[i].fo .. +fl), its value [vo .. +vl). */
typedef struct flist_ent {
    size_t fo, fl, vo, vl;
} flist_ent;
typedef struct flist {
    kbuf buf;
    flist_ent *e;
    size_t n, cap;
} flist;
void flist_init(flist *l);
void flist_free(flist *l);
/* Appends a field and value. Returns 0 or KEEL_ENOMEM. */
int flist_add(flist *l, const char *f, size_t fl, const char *v, size_t vl);
/* Loads o's fields (skip, max as sub_scan). Returns the count or KEEL_E*. */
long flist_load(cmd_ctx *x, const char *k, size_t kl, const obj *o, size_t skip, size_t max,
                flist *l);
static inline const char *flist_f(const flist *l, size_t i) {
    return l->buf.p + l->e[i].fo;
}
static inline const char *flist_v(const flist *l, size_t i) {
    return l->buf.p + l->e[i].vo;
}

/* Writes a copy of key src (value sv; fields in l for a compound key) as
 * dk, replacing whatever dk held, with expiry expire_ms. */
int db_copy_value(cmd_ctx *x, store_txn *t, const store_value *sv, const flist *l, const char *dk,
                  size_t dkl, int64_t expire_ms);
/* Reads key k for a copy: *sv (release it) and, for a compound key, its
 * fields into l (initialised here either way). Returns 0, KEEL_ENOTFOUND or
 * KEEL_E*. No txn may be open. */
int db_load_value(cmd_ctx *x, const char *k, size_t kl, store_value *sv, flist *l);
/* The type name TYPE replies ("string", "hash", ...). */
const char *db_type_name(uint8_t type);
