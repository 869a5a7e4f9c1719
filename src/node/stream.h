/* stream.h - the stream type's encoding (DESIGN.md §14,
 * docs/storage-format.md "Streams") and the helpers its commands share
 * (cmd_stream.c: XADD..XREAD; cmd_xgroup.c: consumer groups).
 *
 * A stream is one metadata record (type STORE_T_STREAM) and, under the
 * key's version, field records whose first byte says what they are:
 *
 *   [0x01][id ms u64 BE][id seq u64 BE]            an entry; value
 *        [node u64 BE][n u32 BE] n x ([flen u32 BE][field][vlen u32 BE][value])
 *   [0x02][group name]                              a consumer group; value
 *        [last id ms][last id seq][entries-read u64, ~0 = invalid]
 *   [0x03][glen u16 BE][group][id ms][id seq]       a pending entry (PEL); value
 *        [delivery time ms u64][delivery count u64][consumer name]
 *   [0x04][glen u16 BE][group][consumer name]       a consumer; value
 *        [seen time ms u64]
 *
 * so entries are in id order, a group's PEL in id order, and DEL, expiry,
 * moves, digests and byte counts cover groups and PELs as any field
 * record. "node" numbers the redis listpack node an entry would live in
 * (stream-node-max-entries per node), so that approximate trimming (~)
 * removes whole nodes as redis does.
 *
 * Reads that scan (store_scan_range) need no txn open: commands scan
 * first, then open the txn and write. Everything runs on the loop thread.
 */
#ifndef KEEL_NODE_STREAM_H
#define KEEL_NODE_STREAM_H

#include "node/cmd.h"
#include "node/db.h"

#include <stddef.h>
#include <stdint.h>

#define SK_ENTRY 0x01
#define SK_GROUP 0x02
#define SK_PEL 0x03
#define SK_CONS 0x04
#define SID_STRLEN 44
#define ENTRIES_READ_INVALID UINT64_MAX

typedef struct sid {
    uint64_t ms, seq;
} sid;

/* The metadata record's payload: 11 u64 BE in this order. */
typedef struct smeta {
    int64_t expire_ms;
    uint64_t version;
    uint64_t length;
    sid last;           /* last-generated id */
    uint64_t added;     /* entries-added */
    sid maxdel;         /* max-deleted-entry-id */
    sid first;          /* the first entry's id (0-0 when empty) */
    uint64_t tail_node; /* the node the last entry went to */
    uint64_t tail_count;
} smeta;
#define SMETA_LEN (11 * 8)

/* ---- Ids ------------------------------------------------------------------ */
int sid_cmp(sid a, sid b);
int sid_incr(sid *id); /* 0, or -1 on overflow (then unchanged) */
int sid_decr(sid *id);
size_t sid_fmt(char *out, sid id); /* "%llu-%llu", returns the length */
void sid_reply(cmd_ctx *x, sid id);
/* redis' streamGenericParseIDOrReply: "-" / "+" (unless strict), "ms",
 * "ms-seq", and with seq_given non-NULL "ms-*". Returns 0, or -1 after
 * replying "ERR Invalid stream ID specified as stream command argument". */
int sid_parse(cmd_ctx *x, const char *s, size_t n, sid *id, uint64_t missing_seq, int strict,
              int *seq_given);
/* XRANGE-style interval bound: "(" prefix = exclusive (*ex set). */
int sid_parse_interval(cmd_ctx *x, const char *s, size_t n, sid *id, int *ex, uint64_t missing_seq);
void sid_put(char *p, sid id);
sid sid_get(const char *p);

/* ---- Metadata ------------------------------------------------------------- */
/* 1 found, 0 absent (*m a fresh empty stream with a new version), -1 after
 * replying WRONGTYPE or a storage error. */
int sm_lookup(cmd_ctx *x, store_txn *t, const char *k, size_t kl, smeta *m);
/* Writes m (a stream stays when empty, as in redis). */
int sm_save(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m);

/* ---- Field records -------------------------------------------------------- */
/* Builds the field of a record in out (room for 3 + gl + 16 or + cl). */
size_t sf_entry(char *out, sid id);
size_t sf_group(char *out, const char *g, size_t gl);
size_t sf_pel(char *out, const char *g, size_t gl, sid id);
size_t sf_cons(char *out, const char *g, size_t gl, const char *c, size_t cl);

/* One record loaded by a scan: field (after the kind byte and any group
 * prefix) and value, both copies owned by the list. */
typedef struct srec {
    sid id;     /* entries and PEL records */
    char *name; /* groups and consumers: the name */
    size_t namelen;
    char *val;
    size_t vlen;
} srec;
typedef struct slist {
    srec *r;
    size_t n, cap;
} slist;
void slist_free(slist *l);

/* Loads entries with start <= id <= end, ascending (rev 0) or descending,
 * at most max (0 = all). Returns the count or a negative KEEL_E*. */
long st_load_entries(cmd_ctx *x, const char *k, size_t kl, const smeta *m, sid start, sid end,
                     int rev, size_t max, slist *out);
/* Loads every group (name, value) in name order. */
long st_load_groups(cmd_ctx *x, const char *k, size_t kl, const smeta *m, slist *out);
/* Loads group g's PEL records with start <= id <= end, at most max. */
long st_load_pel(cmd_ctx *x, const char *k, size_t kl, const smeta *m, const char *g, size_t gl,
                 sid start, sid end, size_t max, slist *out);
/* Loads group g's consumers in name order. */
long st_load_consumers(cmd_ctx *x, const char *k, size_t kl, const smeta *m, const char *g,
                       size_t gl, slist *out);

/* Writes an entry's reply [id, [f, v, ...]] from its record value. */
void st_reply_entry(cmd_ctx *x, sid id, const char *val, size_t vl);

/* A group's value. */
typedef struct sgroup {
    sid last;
    uint64_t entries_read;
} sgroup;
void sg_decode(const char *v, size_t vl, sgroup *g);
void sg_encode(char *out, const sgroup *g); /* 24 bytes */
/* Reads group g of m: 1 found, 0 absent, negative KEEL_E* on error. */
int sg_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
           size_t gl, sgroup *out);
int sg_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
           size_t gl, const sgroup *sg);

/* A PEL record's value. */
typedef struct spel {
    uint64_t time, count;
    const char *cons;
    size_t conslen;
} spel;
int sp_decode(const char *v, size_t vl, spel *p); /* 0, or -1 if malformed */
int sp_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
           size_t gl, sid id, const spel *p);
/* Ensures consumer c exists, setting its seen time to now when touch or
 * new. *created (may be NULL) gets 1 if it was created. */
int sc_touch(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
             size_t gl, const char *c, size_t cl, int touch, int *created);

/* redis' streamRangeHasTombstones / streamEstimateDistanceFromFirstEverEntry. */
int st_range_has_tombstones(const smeta *m, const sid *start, const sid *end);
uint64_t st_estimate_distance(const smeta *m, sid id);

/* The last entry's id (0-0 when empty): redis' streamLastValidID. cmd_stream.c. */
int st_last_valid(cmd_ctx *x, const char *k, size_t kl, const smeta *m, sid *out);

/* "ERR storage error" for rc < 0 with t (if any) aborted. */
void st_fail(cmd_ctx *x, store_txn *t, int rc);

/* Generic field-record helpers over an arbitrary field. */
int st_sub_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *f,
               size_t fl, store_value *v);
int st_sub_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *f,
               size_t fl, const void *p, size_t len);
int st_sub_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *f,
               size_t fl, int *existed);

#endif
