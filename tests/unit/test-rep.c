/* test-rep.c - the replication engines (node/rep_engine.h) by hand, without
 * the simulator: three nodes' engines over real stores, messages delivered
 * in order by the test.
 *
 *   bad_messages    malformed KEEL.REP.* are refused with KEEL_EPROTO
 *   bad_record      a corrupt rep/<p> record stops rep_restore (KEEL_ECORRUPT)
 *   checks          no lease: REP_ENOLEASE; |ISR| < min_insync: REP_ENOREPLICAS;
 *                   not leader: REP_ENOTLEADER
 *   commit          a turn commits only once every ISR member acknowledged it
 *   restart         a follower restarted keeps its position; one that
 *                   diverged truncates (by copy) and holds the leader's data
 *   copy_storm      a follower whose map still lists it in the ISR refuses
 *                   a copy and asks again only at its retry, not at once; a
 *                   copy started again before the last one arrived waits
 *                   (REP_COPY_BACKOFF_MS); once the maps agree it is copied
 *   stale_sub       a SUB that arrives after the copy it asked for finished
 *                   (the follower is STREAMING and will not ask again) leaves
 *                   the copy wanted: once the map has the follower out, the
 *                   leader copies it on its own and later writes reach it
 *   power_loss_leader_claimed_lost_batch
 *                   a leader loses power after its batch left (a follower
 *                   applied it) but before its fsync: restarted, its log
 *                   ends at what its data holds (the record's lo), and the
 *                   follower, now leading, streams the lost batch back
 *   power_loss_releader_kept_follower_tail
 *                   the same leader, restarted, leads again while the
 *                   follower holds the batch it lost: the follower truncates
 *                   (by copy) instead of keeping records the leader lacks
 *   follower_record a follower's rep/<p> record is written with the batch
 *                   it describes (flag exact, no redo); a batch that fails
 *                   to apply half-way leaves neither data nor record, and
 *                   the position survives a restart unchanged; a record
 *                   with a redo (an older Keel's) still restores: the batch
 *                   is applied again and the log ends at its hi
 *   pos0_data_copied data written before a partition had replicas (position
 *                   0, no record) reaches the followers added at 0: copied,
 *                   not streamed from 1 past it
 *   promoted_tail   a follower promoted after its old leader's last batch
 *                   reached it but not the other follower streams that
 *                   batch from the tail it kept, instead of a full copy
 *   resigned        a leader's KEEL.REP.RESIGNED makes its followers answer
 *                   REP_EHANDOFF (not a redirect back to it) until a map
 *                   with a new leader epoch; from another node or for
 *                   another epoch it changes nothing
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/crc16.h"
#include "core/err.h"
#include "core/log.h"
#include "core/buf.h"
#include "node/move_wire.h"
#include "node/rep_engine.h"
#include "store/store.h"

#define NP 4 /* partitions: 4096 slots each */

typedef struct msg {
    int from, to, argc;
    char *argv[8];
    size_t len[8];
} msg;

typedef struct tnode {
    char id[8], dir[128];
    store *st;
    rep *rp;
    uint64_t now;
    uint64_t committed[NP];
} tnode;

static tnode nodes[3];
static unsigned muts[3]; /* REP_MUT_* for open_node */
static msg q[4096];
static int nq;
static char root[96];

static uint64_t t_now(void *ctx) {
    return ((tnode *)ctx)->now;
}

static int t_send(void *ctx, const char *peer, int argc, const char **argv, const size_t *len) {
    tnode *n = ctx;
    assert_true(nq < 4096 && argc <= 8);
    msg *m = &q[nq++];
    m->from = (int)(n - nodes);
    m->to = peer[1] - '0';
    m->argc = argc;
    for (int i = 0; i < argc; i++) {
        m->argv[i] = malloc(len[i] + 1);
        memcpy(m->argv[i], argv[i], len[i]);
        m->argv[i][len[i]] = 0;
        m->len[i] = len[i];
    }
    return 0;
}

static void t_report(void *ctx, int argc, const char **argv, const size_t *len) {
    (void)ctx, (void)argc, (void)argv, (void)len;
}

static void t_committed(void *ctx, unsigned p, uint64_t pos) {
    ((tnode *)ctx)->committed[p] = pos;
}

static void open_node(int i) {
    tnode *n = &nodes[i];
    store_opts so;
    store_opts_default(&so);
    so.write_buffer_bytes = 1u << 20;
    char err[200];
    assert_int_equal(store_open(n->dir, &so, &n->st, err, sizeof err), 0);
    rep_env env = {.ctx = n,
                   .st = n->st,
                   .self_id = n->id,
                   .partitions = NP,
                   .now_us = t_now,
                   .send = t_send,
                   .report = t_report,
                   .committed = t_committed};
    n->rp = rep_new(&env, muts[i]);
    assert_non_null(n->rp);
    assert_int_equal(rep_restore(n->rp), 0);
}

static void close_node(int i) {
    rep_free(nodes[i].rp);
    nodes[i].rp = NULL;
    store_free(nodes[i].st);
    nodes[i].st = NULL;
}

/* Partition p led by `leader` in epoch e, ISR isr (bits). */
static void configure(int i, unsigned p, uint64_t e, uint64_t pe, int leader, unsigned isr) {
    rep_config c = {
        .leader_epoch = e, .part_epoch = pe, .leader = nodes[leader].id, .min_insync = 2};
    for (int k = 0; k < 3; k++) {
        c.replicas[c.nreplicas++] = nodes[k].id;
        if (isr & (1u << k)) c.isr[c.nisr++] = nodes[k].id;
    }
    assert_int_equal(rep_configure(nodes[i].rp, p, &c), 0);
}

/* The end of node i's turn, as a node does it. */
static void turn_end(int i) {
    assert_int_equal(store_sync(nodes[i].st, NULL), 0);
    assert_int_equal(rep_turn_end(nodes[i].rp), 0);
}

/* Delivers queued messages in order (dropping those to skip, -1 none). */
static void pump(int skip) {
    for (int k = 0; k < nq; k++) {
        msg *m = &q[k];
        if (m->to != skip && nodes[m->to].rp) {
            int rc = rep_message(nodes[m->to].rp, nodes[m->from].id, m->argc,
                                 (const char **)m->argv, m->len);
            assert_int_equal(rc, 0);
            turn_end(m->to);
        }
        for (int a = 0; a < m->argc; a++)
            free(m->argv[a]);
    }
    nq = 0;
}

static void put(int i, const char *k, const char *v) {
    unsigned slot = keel_key_slot(k, strlen(k));
    store_txn *t = store_txn_begin(nodes[i].st);
    assert_int_equal(store_txn_put(t, slot, k, strlen(k), STORE_T_STRING, 0, v, strlen(v)), 0);
    assert_int_equal(store_txn_commit(t), 0);
}

static int has(int i, const char *k, const char *v) {
    store_value sv;
    unsigned slot = keel_key_slot(k, strlen(k));
    if (store_get(nodes[i].st, slot, k, strlen(k), 0, &sv)) return 0;
    int same = sv.len == strlen(v) && !memcmp(sv.data, v, sv.len);
    store_value_release(&sv);
    return same;
}

static unsigned part_of(const char *k) {
    return keel_key_slot(k, strlen(k)) / (16384u / NP);
}

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "/tmp/test-rep-%d", (int)getpid());
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", root, root);
    assert_int_equal(system(cmd), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(nodes[i].id, sizeof nodes[i].id, "n%d", i);
        snprintf(nodes[i].dir, sizeof nodes[i].dir, "%s/n%d", root, i);
        nodes[i].now = 1000000;
        memset(nodes[i].committed, 0, sizeof nodes[i].committed);
        muts[i] = 0;
        open_node(i);
    }
    nq = 0;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pump(-2); /* frees what is left */
    for (int i = 0; i < 3; i++)
        close_node(i);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_bad_messages(void **state) {
    (void)state;
    rep *r = nodes[0].rp;
    const char *unknown[] = {"KEEL.REP.NOPE", "0", "1"};
    size_t ul[] = {13, 1, 1};
    assert_int_equal(rep_message(r, "n1", 3, unknown, ul), KEEL_EPROTO);
    const char *shortack[] = {"KEEL.REP.ACK", "0", "1"}; /* pos missing */
    size_t sl[] = {12, 1, 1};
    assert_int_equal(rep_message(r, "n1", 3, shortack, sl), KEEL_EPROTO);
    const char *notnum[] = {"KEEL.REP.ACK", "0", "1", "x7"};
    size_t nl[] = {12, 1, 1, 2};
    assert_int_equal(rep_message(r, "n1", 4, notnum, nl), KEEL_EPROTO);
    const char *range[] = {"KEEL.REP.ACK", "4", "1", "7"}; /* partition 4 of 4 */
    size_t rl[] = {12, 1, 1, 1};
    assert_int_equal(rep_message(r, "n1", 4, range, rl), KEEL_EPROTO);
    assert_int_equal(rep_message(r, NULL, 4, range, rl), KEEL_EPROTO);
}

/* Writes meta record name into node i's closed store, as the node left it. */
static void put_record(int i, const char *name, const char *v, size_t n) {
    store *st;
    store_opts so;
    store_opts_default(&so);
    char err[200];
    assert_int_equal(store_open(nodes[i].dir, &so, &st, err, sizeof err), 0);
    assert_int_equal(store_meta_put(st, name, v, n), 0);
    store_free(st);
}

static void test_bad_record(void **state) {
    (void)state;
    close_node(1);
    put_record(1, "rep/2", "short", 5);
    store_opts so;
    store_opts_default(&so);
    char err[200];
    assert_int_equal(store_open(nodes[1].dir, &so, &nodes[1].st, err, sizeof err), 0);
    rep_env env = {.ctx = &nodes[1],
                   .st = nodes[1].st,
                   .self_id = "n1",
                   .partitions = NP,
                   .now_us = t_now,
                   .send = t_send,
                   .report = t_report,
                   .committed = t_committed};
    nodes[1].rp = rep_new(&env, 0);
    assert_int_equal(rep_restore(nodes[1].rp), KEEL_ECORRUPT);
    env.partitions = 3; /* does not divide 16384 */
    assert_null(rep_new(&env, 0));
}

static void test_checks(void **state) {
    (void)state;
    for (int i = 0; i < 3; i++)
        configure(i, 0, 1, 1, 0, 1u); /* ISR {n0} only */
    assert_int_equal(rep_write_check(nodes[1].rp, 0), REP_ENOTLEADER);
    assert_int_equal(rep_write_check(nodes[0].rp, 0), REP_ENOLEASE); /* no heartbeat yet */
    assert_int_equal(rep_read_check(nodes[0].rp, 0), REP_ENOLEASE);
    rep_lease(nodes[0].rp, 0, 1, nodes[0].now);
    assert_int_equal(rep_read_check(nodes[0].rp, 0), REP_OK);
    assert_int_equal(rep_write_check(nodes[0].rp, 0), REP_ENOREPLICAS); /* |ISR| 1 < 2 */
    rep_lease(nodes[0].rp, 0, 2, nodes[0].now + 10000000);              /* another epoch: ignored */
    nodes[0].now += REP_LEASE_MS * 1000ull;                             /* the lease ran out */
    assert_int_equal(rep_read_check(nodes[0].rp, 0), REP_ENOLEASE);
}

static void test_commit(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = part_of(k);
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 7u);
    pump(-1); /* SUB, STREAM, ACK */
    rep_lease(nodes[0].rp, p, 1, nodes[0].now);
    assert_int_equal(rep_write_check(nodes[0].rp, p), REP_OK);
    put(0, k, "v1");
    turn_end(0);
    assert_int_equal(rep_end(nodes[0].rp, p), 1);
    assert_int_equal(rep_committed(nodes[0].rp, p), 0);
    pump(2); /* n2 never gets it: n1's ack alone is not enough with n2 in the ISR */
    assert_true(has(1, k, "v1"));
    assert_false(has(2, k, "v1"));
    assert_int_equal(rep_committed(nodes[0].rp, p), 0);
    /* The ISR shrinks to {n0, n1} (the coordinator's map): committed. */
    configure(0, p, 1, 2, 0, 3u);
    assert_int_equal(rep_committed(nodes[0].rp, p), 1);
    assert_int_equal(nodes[0].committed[p], 1);
}

/* Partition of k at RF 3 in leader epoch 1 (n0 leads, all in the ISR),
 * followers subscribed, and v1 written and committed at position 1. */
static unsigned rf3_v1_committed(const char *k) {
    unsigned p = part_of(k);
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 7u);
    pump(-1);
    rep_lease(nodes[0].rp, p, 1, nodes[0].now);
    put(0, k, "v1");
    turn_end(0);
    pump(-1);
    assert_int_equal(rep_committed(nodes[0].rp, p), 1);
    return p;
}

static void test_restart(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = rf3_v1_committed(k);
    /* n0 writes position 2; only n1 gets it (n2's link is down). */
    put(0, k, "v2");
    turn_end(0);
    pump(2);
    assert_true(has(1, k, "v2"));
    /* n1 restarts: its position survives. */
    close_node(1);
    open_node(1);
    assert_int_equal(rep_end(nodes[1].rp, p), rep_end(nodes[0].rp, p));
    /* n0 is lost; n2 (behind) becomes leader in epoch 2 (an unclean choice
     * made here on purpose) and writes; n1 diverged and must truncate. */
    close_node(0);
    configure(2, p, 2, 2, 2, 4u); /* n1 not in the ISR: it may be copied */
    configure(1, p, 2, 2, 2, 4u);
    rep_lease(nodes[2].rp, p, 2, nodes[2].now);
    put(2, k, "v3");
    turn_end(2);
    for (int round = 0; round < 4; round++) {
        nodes[1].now += 300000; /* re-subscriptions are timed */
        assert_int_equal(rep_tick(nodes[1].rp), 0);
        turn_end(1);
        pump(0);
    }
    rep_stats s;
    rep_get_stats(nodes[1].rp, &s);
    assert_true(s.truncations >= 1);
    assert_true(s.copies_received >= 1);
    assert_true(has(1, k, "v3")); /* the leader's data, not its own tail */
    assert_int_equal(rep_end(nodes[1].rp, p), rep_end(nodes[2].rp, p));
    open_node(0); /* for teardown */
}

/* Counts messages of one command queued to node `to`. */
static int queued(const char *cmd, int to) {
    int n = 0;
    for (int k = 0; k < nq; k++)
        n += q[k].to == to && !strcmp(q[k].argv[0], cmd);
    return n;
}

/* Epoch 1: n0 leads p with ISR {n0, n1, n2}; k1 = v1 at position 1 on all
 * three; then n0 writes k2 = v2 at position 2, n1 applies it, n2 misses it,
 * and n0 loses power before its turn's fsync: it restarts on the disk image
 * of its last fsync (the synced prefix of its WAL; nothing of turn 2). */
static unsigned n0_loses_position_2(const char *k1, const char *k2) {
    unsigned p = part_of(k1);
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 7u);
    pump(-1);
    put(0, k1, "v1");
    /* A leader's turn as before_flush runs it (node_rep_presync): written,
     * sealed (its record goes to the WAL unsynced), then the fsync. */
    assert_int_equal(store_write_turn(nodes[0].st), 0);
    assert_int_equal(rep_turn_end(nodes[0].rp), 0);
    assert_int_equal(store_sync(nodes[0].st, NULL), 0);
    pump(-1);
    assert_int_equal(rep_committed(nodes[0].rp, p), 1);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cp -a %s %s.synced", nodes[0].dir, nodes[0].dir);
    assert_int_equal(system(cmd), 0); /* what an fsync made durable, and nothing since */
    put(0, k2, "v2");
    assert_int_equal(store_write_turn(nodes[0].st), 0); /* node_rep_presync: written, */
    assert_int_equal(rep_turn_end(nodes[0].rp), 0);     /* sealed, and APPEND 2 out */
    assert_int_equal(rep_end(nodes[0].rp, p), 2);
    pump(2);
    assert_true(has(1, k2, "v2"));
    close_node(0);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mv %s.synced %s", nodes[0].dir, nodes[0].dir,
             nodes[0].dir);
    assert_int_equal(system(cmd), 0);
    open_node(0);
    assert_false(has(0, k2, "v2")); /* the batch is gone from its data */
    return p;
}

/* A key of partition p other than k (buf of 16). */
static const char *key_in(unsigned p, const char *k, char *buf) {
    for (int i = 0;; i++) {
        snprintf(buf, 16, "key%d", i);
        if (part_of(buf) == p && strcmp(buf, k) != 0) return buf;
    }
}

/* Ticks and delivers (re-subscriptions, copies) a few rounds. */
static void settle(void) {
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 3; i++) {
            nodes[i].now += 300000;
            assert_int_equal(rep_tick(nodes[i].rp), 0);
            turn_end(i);
        }
        pump(-1);
    }
}

/* The first queued message cmd to node `to`, copied (NULL if none). */
static msg *queued_copy(const char *cmd, int to, msg *out) {
    for (int k = 0; k < nq; k++) {
        if (q[k].to != to || strcmp(q[k].argv[0], cmd) != 0) continue;
        *out = q[k];
        for (int a = 0; a < q[k].argc; a++) {
            out->argv[a] = malloc(q[k].len[a] + 1);
            memcpy(out->argv[a], q[k].argv[a], q[k].len[a] + 1);
        }
        return out;
    }
    return NULL;
}

static void msg_free(msg *m) {
    for (int a = 0; a < m->argc; a++)
        free(m->argv[a]);
}

/* n1's rep/<p> record: its flags byte and length. */
static int record_flags(int i, unsigned p, size_t *len) {
    char name[32], *v = NULL;
    snprintf(name, sizeof name, "rep/%u", p);
    assert_int_equal(store_meta_get(nodes[i].st, name, &v, len), 0);
    int f = *len >= 18 ? (unsigned char)v[16] : -1;
    free(v);
    return f;
}

static void test_follower_record(void **state) {
    (void)state;
    const char *k1 = "alpha";
    char b[16];
    const char *k2 = key_in(part_of(k1), k1, b);
    unsigned p = rf3_v1_committed(k1);
    size_t len;
    assert_int_equal(record_flags(1, p, &len), 4); /* exact, and no redo */
    assert_int_equal(len, 18 + 16);                /* one epoch-cache entry */
    /* Position 2 reaches n1 with a second record outside the partition: the
     * first record was put, then the batch is refused; nothing stays. */
    put(0, k2, "v2");
    turn_end(0);
    msg m;
    assert_non_null(queued_copy("KEEL.REP.APPEND", 1, &m));
    pump(1);
    kbuf bad;
    kbuf_init(&bad);
    assert_int_equal(kbuf_append(&bad, m.argv[5], m.len[5]), 0);
    unsigned other = (part_of(k1) + 1) % NP * (16384 / NP);
    assert_int_equal(move_put_record(&bad, other, "x", 1, "y", 1), 0);
    const char *argv[6];
    size_t alen[6];
    for (int a = 0; a < 5; a++)
        argv[a] = m.argv[a], alen[a] = m.len[a];
    argv[5] = bad.p, alen[5] = bad.len;
    assert_int_equal(rep_message(nodes[1].rp, "n0", 6, argv, alen), 0);
    kbuf_close(&bad);
    turn_end(1);
    assert_int_equal(rep_end(nodes[1].rp, p), 1);
    assert_false(has(1, k2, "v2"));
    for (int k = 0; k < nq; k++) /* n1's SUB for a copy: not delivered here */
        msg_free(&q[k]);
    nq = 0;
    close_node(1);
    open_node(1);
    assert_int_equal(rep_end(nodes[1].rp, p), 1);
    assert_int_equal(record_flags(1, p, &len), 4);
    /* An older Keel's record: {lo 1, hi 2, redo flag, the epoch cache, the
     * batch at 2}, written before the batch it carries. */
    close_node(1);
    char rec[18 + 16 + 8 + 512];
    assert_true(m.len[5] <= 512);
    move_be64(rec, 1);
    move_be64(rec + 8, 2);
    rec[16] = 2;
    rec[17] = 1;
    move_be64(rec + 18, 1); /* epoch 1 from position 1 */
    move_be64(rec + 26, 1);
    move_be64(rec + 34, 1); /* the batch's epoch */
    memcpy(rec + 42, m.argv[5], m.len[5]);
    char name[32];
    snprintf(name, sizeof name, "rep/%u", p);
    put_record(1, name, rec, 42 + m.len[5]);
    msg_free(&m);
    open_node(1); /* rep_restore applies the redo */
    assert_int_equal(rep_end(nodes[1].rp, p), 2);
    assert_true(has(1, k2, "v2"));
}

static void test_power_loss_leader_claimed_lost_batch(void **state) {
    (void)state;
    char b[16];
    const char *k1 = "alpha", *k2 = key_in(part_of(k1), k1, b);
    unsigned p = n0_loses_position_2(k1, k2);
    /* What its data surely holds: position 1 (the rule before the fix took
     * the record's hi, 2, and claimed the lost batch). */
    assert_int_equal(rep_end(nodes[0].rp, p), 1);
    /* n1 (holding position 2) leads epoch 2; n0 follows it. */
    for (int i = 0; i < 3; i++)
        configure(i, p, 2, 2, 1, 2u);
    settle();
    assert_true(has(0, k2, "v2")); /* streamed back (before the fix: never sent) */
    assert_int_equal(rep_end(nodes[0].rp, p), rep_end(nodes[1].rp, p));
}

static void test_power_loss_releader_kept_follower_tail(void **state) {
    (void)state;
    char b[16];
    const char *k1 = "alpha", *k2 = key_in(part_of(k1), k1, b);
    unsigned p = n0_loses_position_2(k1, k2);
    /* n0 is re-elected (the ISR's only member) while n1 holds position 2 of
     * epoch 1, which n0 lost: n1 must not keep it. */
    for (int i = 0; i < 3; i++)
        configure(i, p, 2, 2, 0, 1u);
    settle();
    rep_stats s;
    rep_get_stats(nodes[1].rp, &s);
    assert_true(s.truncations >= 1);
    assert_false(has(1, k2, "v2")); /* n0's data, not the tail n0 lost (before the fix: kept) */
    assert_true(has(1, k1, "v1"));
    assert_int_equal(rep_end(nodes[1].rp, p), rep_end(nodes[0].rp, p));
}

/* Epoch 1: n0 leads p with ISR {n0, n2}; n1 misses the write of k = v1. */
static void epoch1_n1_behind(unsigned p, const char *k) {
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 5u);
    pump(1);
    put(0, k, "v1");
    turn_end(0);
    pump(1);
}

static void test_copy_storm(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = part_of(k);
    epoch1_n1_behind(p, k);
    /* Epoch 2: n0 leads again (its log starts empty, so n1 at 0 needs a
     * full copy). n0's map has n1 out of the ISR; n1's stale map has it in. */
    configure(0, p, 2, 2, 0, 5u);
    configure(2, p, 2, 2, 0, 5u);
    configure(1, p, 2, 2, 0, 7u);
    assert_int_equal(queued("KEEL.REP.SUB", 0), 2);
    pump(-1); /* before: SNAP, refusal, SUB, SNAP ... until the queue overflowed */
    rep_stats s0, s1;
    rep_get_stats(nodes[0].rp, &s0);
    rep_get_stats(nodes[1].rp, &s1);
    assert_int_equal(s1.copies_received, 0);
    assert_int_equal(s0.copies_deferred, 0); /* n1 did not ask again at once */
    assert_false(has(1, k, "v1"));
    /* n1 asks again at its retry; the second copy start waits for the
     * backoff of REP_COPY_BACKOFF_MS. */
    nodes[1].now += REP_SUB_RETRY_MS * 1000ull;
    assert_int_equal(rep_tick(nodes[1].rp), 0);
    assert_int_equal(queued("KEEL.REP.SUB", 0), 1);
    pump(-1);
    rep_get_stats(nodes[0].rp, &s0);
    assert_true(s0.copies_deferred >= 1);
    assert_int_equal(queued("KEEL.REP.SNAP", 1), 0);
    /* The coordinator's map reaches n1 (out of the ISR); after the backoff
     * the leader's tick copies it. */
    configure(1, p, 2, 3, 0, 5u);
    for (int round = 0; round < 6 && !has(1, k, "v1"); round++) {
        nodes[0].now += REP_COPY_BACKOFF_MS * 1000ull;
        nodes[1].now += REP_SUB_RETRY_MS * 1000ull;
        assert_int_equal(rep_tick(nodes[1].rp), 0);
        pump(-1);
        assert_int_equal(rep_tick(nodes[0].rp), 0);
        turn_end(0);
        pump(-1);
    }
    rep_get_stats(nodes[1].rp, &s1);
    assert_int_equal(s1.copies_received, 1);
    assert_true(has(1, k, "v1"));
    rep_get_stats(nodes[0].rp, &s0);
    assert_int_equal(s0.copies_active, 0);
}

static void test_stale_sub(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = part_of(k);
    epoch1_n1_behind(p, k);
    /* Epoch 2: n1 (out of the ISR in every map) is copied. Its SUB is kept
     * to be delivered again after the copy, as a retry that crossed it. */
    for (int i = 0; i < 3; i++)
        configure(i, p, 2, 2, 0, 5u);
    msg stale = {0};
    for (int j = 0; j < nq; j++)
        if (q[j].from == 1 && q[j].to == 0 && !strcmp(q[j].argv[0], "KEEL.REP.SUB")) {
            stale.argc = q[j].argc;
            for (int a = 0; a < q[j].argc; a++) {
                stale.argv[a] = strdup(q[j].argv[a]);
                stale.len[a] = q[j].len[a];
            }
        }
    assert_int_equal(stale.argc, 7);
    pump(-1); /* SNAP, applied, ACK */
    assert_true(has(1, k, "v1"));
    nodes[0].now += 300000;
    assert_int_equal(rep_tick(nodes[0].rp), 0); /* proposes expand n1 */
    turn_end(0);
    pump(-1);
    assert_int_equal(
        rep_message(nodes[0].rp, "n1", stale.argc, (const char **)stale.argv, stale.len), 0);
    turn_end(0);
    for (int a = 0; a < stale.argc; a++)
        free(stale.argv[a]);
    pump(-1);
    /* The coordinator commits the expansion, then the leader's shrink. */
    for (int i = 0; i < 3; i++)
        configure(i, p, 2, 3, 0, 7u);
    for (int round = 0; round < 8; round++) {
        nodes[0].now += 300000;
        assert_int_equal(rep_tick(nodes[0].rp), 0);
        turn_end(0);
        pump(-1);
    }
    for (int i = 0; i < 3; i++)
        configure(i, p, 2, 4, 0, 5u);
    rep_lease(nodes[0].rp, p, 2, nodes[0].now);
    assert_int_equal(rep_write_check(nodes[0].rp, p), REP_OK);
    put(0, k, "v2");
    turn_end(0);
    pump(-1);
    for (int round = 0; round < 8 && !has(1, k, "v2"); round++) {
        nodes[0].now += REP_COPY_BACKOFF_MS * 1000ull;
        nodes[1].now += REP_SUB_RETRY_MS * 1000ull;
        assert_int_equal(rep_tick(nodes[1].rp), 0);
        turn_end(1);
        pump(-1);
        assert_int_equal(rep_tick(nodes[0].rp), 0);
        turn_end(0);
        pump(-1);
    }
    assert_true(has(1, k, "v2")); /* before the fix: the leader never sent it again */
    assert_int_equal(rep_end(nodes[1].rp, p), rep_end(nodes[0].rp, p));
}

static void test_resigned(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = rf3_v1_committed(k);
    assert_int_equal(rep_write_check(nodes[1].rp, p), REP_ENOTLEADER);
    assert_int_equal(rep_resign_announce(nodes[1].rp, p), KEEL_EINVAL); /* not its leader */
    /* From a follower, or in another epoch: ignored. */
    char ps[8];
    snprintf(ps, sizeof ps, "%u", p); /* one digit: NP is 4 */
    const char *fake[] = {"KEEL.REP.RESIGNED", ps, "1", "1"};
    size_t fl[] = {17, 1, 1, 1};
    assert_int_equal(rep_message(nodes[1].rp, "n2", 4, fake, fl), 0);
    fake[2] = "7";
    assert_int_equal(rep_message(nodes[1].rp, "n0", 4, fake, fl), 0);
    assert_int_equal(rep_write_check(nodes[1].rp, p), REP_ENOTLEADER);
    assert_int_equal(rep_read_check(nodes[1].rp, p), REP_ENOTLEADER);
    /* The leader's announcement: to both followers, a message that may
     * leave before the turn's sync (it claims nothing durable). */
    assert_int_equal(rep_resign_announce(nodes[0].rp, p), 0);
    assert_int_equal(queued("KEEL.REP.RESIGNED", 1) + queued("KEEL.REP.RESIGNED", 2), 2);
    assert_int_equal(rep_msg_early(q[0].argc, (const char **)q[0].argv, q[0].len), 1);
    pump(-1);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(rep_write_check(nodes[i].rp, p), REP_EHANDOFF);
        assert_int_equal(rep_read_check(nodes[i].rp, p), REP_EHANDOFF);
    }
    assert_int_equal(rep_write_check(nodes[0].rp, p), REP_OK); /* the binding refuses it (C5) */
    /* An ISR change in the same epoch keeps it; the new leader's map ends it. */
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 2, 0, 7u);
    assert_int_equal(rep_write_check(nodes[2].rp, p), REP_EHANDOFF);
    for (int i = 0; i < 3; i++)
        configure(i, p, 2, 3, 1, 7u);
    assert_int_equal(rep_write_check(nodes[1].rp, p), REP_ENOLEASE); /* leads, no lease yet */
    assert_int_equal(rep_write_check(nodes[2].rp, p), REP_ENOTLEADER);
    assert_int_equal(rep_write_check(nodes[0].rp, p), REP_ENOTLEADER);
}

/* The next leader's followers install its map first and subscribe before it
 * knows it leads: their SUBs are kept and answered when its map arrives,
 * not at their next retry (REP_SUB_RETRY_MS, 200 ms: the worst transfer
 * pause at 1,024 partitions). */
static void test_early_sub(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = rf3_v1_committed(k);
    configure(0, p, 2, 2, 1, 7u);
    configure(2, p, 2, 2, 1, 7u);
    assert_int_equal(queued("KEEL.REP.SUB", 1), 2);
    pump(-1); /* n1 still follows n0 in epoch 1 */
    assert_int_equal(rep_role(nodes[1].rp, p), REP_FOLLOWER);
    configure(1, p, 2, 2, 1, 7u);
    assert_int_equal(queued("KEEL.REP.STREAM", 0), 1);
    assert_int_equal(queued("KEEL.REP.STREAM", 2), 1);
    rep_stats st;
    rep_get_stats(nodes[1].rp, &st);
    assert_int_equal(st.early_subs, 2);
    pump(-1);
    rep_lease(nodes[1].rp, p, 2, nodes[1].now);
    assert_int_equal(rep_write_check(nodes[1].rp, p), REP_OK);
    put(1, k, "v2");
    turn_end(1);
    pump(-1); /* APPEND to both, their ACKs: committed with no retry */
    assert_int_equal(rep_committed(nodes[1].rp, p), rep_end(nodes[1].rp, p));
    assert_true(has(0, k, "v2") && has(2, k, "v2"));
    /* A kept SUB of an epoch this node does not lead (yet) is not run. */
    configure(0, p, 4, 3, 2, 7u);
    assert_int_equal(queued("KEEL.REP.SUB", 2), 1);
    pump(-1);
    configure(2, p, 3, 3, 1, 7u); /* n2 moves to epoch 3 under n1, not 4 */
    assert_int_equal(queued("KEEL.REP.STREAM", 0), 0);
}

/* Data written before p had replicas (position 0, no record: an RF 1
 * partition whose RF was raised) reaches followers added at position 0. */
static void test_pos0_data_copied(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = part_of(k);
    put(0, k, "v0");
    assert_int_equal(store_sync(nodes[0].st, NULL), 0);
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 1u);
    pump(-1);
    settle();
    /* Before: both were streamed from position 1, held nothing, and were
     * counted caught up at end 0 (the ISR would take them in). */
    assert_true(has(1, k, "v0"));
    assert_true(has(2, k, "v0"));
    assert_int_equal(rep_end(nodes[1].rp, p), rep_end(nodes[0].rp, p));
    rep_stats s;
    rep_get_stats(nodes[0].rp, &s);
    assert_int_equal(s.copies_sent, 2);
}

/* Epoch 1: n0 leads p (ISR all three); its batch 2 reaches n1, not n2, and
 * n0 is lost. n1 leads epoch 2 and streams batch 2 to n2 from the tail it
 * kept as a follower: no full copy, so n2 is never taken out of the ISR. */
static void test_promoted_tail(void **state) {
    (void)state;
    char b[16];
    const char *k1 = "alpha", *k2 = key_in(part_of(k1), k1, b);
    unsigned p = part_of(k1);
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 7u);
    pump(-1);
    put(0, k1, "v1");
    turn_end(0);
    pump(-1);
    put(0, k2, "v2");
    turn_end(0);
    pump(2); /* n2 misses batch 2 */
    assert_int_equal(rep_end(nodes[1].rp, p), 2);
    assert_int_equal(rep_end(nodes[2].rp, p), 1);
    close_node(0);
    configure(1, p, 2, 2, 1, 6u);
    configure(2, p, 2, 2, 1, 6u);
    pump(0);
    assert_true(has(2, k2, "v2"));
    assert_int_equal(rep_end(nodes[2].rp, p), 2);
    rep_stats s;
    rep_get_stats(nodes[1].rp, &s);
    assert_int_equal(s.copies_sent, 0);   /* before: a full copy (n1's log started empty) */
    assert_int_equal(s.isr_proposals, 0); /* before: a shrink of n2 first */
    open_node(0);                         /* for teardown */
}

/* Drops every queued message undelivered. */
static void drop_queue(void) {
    for (int k = 0; k < nq; k++)
        msg_free(&q[k]);
    nq = 0;
}

static void del(int i, const char *k) {
    unsigned slot = keel_key_slot(k, strlen(k));
    store_txn *t = store_txn_begin(nodes[i].st);
    assert_int_equal(store_txn_del(t, slot, k, strlen(k), NULL), 0);
    assert_int_equal(store_txn_commit(t), 0);
}

/* Node i's kept statistics of p match a scan of its data; returns its keys. */
static uint64_t kept_matches_data(int i, unsigned p) {
    unsigned per = 16384u / NP;
    uint64_t kx, kk, sx, sk;
    assert_int_equal(store_range_digest(nodes[i].st, p * per, p * per + per - 1, &kx, &kk), 0);
    assert_int_equal(store_range_checksum(nodes[i].st, NULL, p * per, p * per + per - 1, &sx, &sk),
                     0);
    assert_int_equal(kk, sk);
    assert_true(kx == sx);
    return kk;
}

/* Followers apply a leader's puts, overwrites (one with an expiry) and
 * deletes with the old states the leader sends (no read of their own but
 * the expiring key's), and keep statistics equal to their data. */
static void test_olds(void **state) {
    (void)state;
    char b1[16], b2[16];
    const char *k1 = "alpha", *k2 = key_in(part_of(k1), k1, b1);
    const char *k3 = key_in(part_of(k1), k2, b2);
    if (!strcmp(k3, k1)) k3 = "alpha2";
    unsigned p = part_of(k1);
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 7u);
    pump(-1);
    put(0, k1, "v1");
    put(0, k2, "v2");
    turn_end(0);
    pump(-1);
    put(0, k1, "v1-longer"); /* an overwrite: bytes change, keys do not */
    del(0, k2);
    unsigned slot = keel_key_slot(k3, strlen(k3));
    store_txn *t = store_txn_begin(nodes[0].st);
    assert_int_equal(
        store_txn_put(t, slot, k3, strlen(k3), STORE_T_STRING, 4102444800000ll, "x", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    turn_end(0);
    pump(-1);
    put(0, k3, "y"); /* over a key with an expiry: the follower reads its own */
    turn_end(0);
    pump(-1);
    for (int i = 1; i < 3; i++) {
        assert_true(has(i, k1, "v1-longer"));
        assert_false(has(i, k2, "v2"));
        assert_true(has(i, k3, "y"));
        assert_int_equal(kept_matches_data(i, p), kept_matches_data(0, p));
        rep_stats s;
        rep_get_stats(nodes[i].rp, &s);
        /* the first batch of an epoch reads (the follower's data may hold
         * more than its end); then 3 records with olds, 1 with an expiry */
        assert_int_equal(s.olds_read, 2 + 1);
        assert_int_equal(s.olds_used, 3);
        assert_int_equal(s.olds_mismatched, 0);
    }
}

/* n1 is copied in a turn in which the leader already wrote k2: the copy
 * holds k2 and batch 2 repeats it. A follower that took batch 2's old
 * state of k2 (absent) would count k2 twice. */
static void copy_mid_turn(void) {
    char b[16];
    const char *k = "alpha", *k2 = key_in(part_of(k), k, b);
    unsigned p = part_of(k);
    epoch1_n1_behind(p, k); /* n0 and n2 hold k at 1, n1 nothing */
    for (int i = 0; i < 3; i++)
        configure(i, p, 2, 2, 0, 5u); /* n1 out of the ISR: it may be copied */
    msg sub;
    assert_non_null(queued_copy("KEEL.REP.SUB", 0, &sub));
    drop_queue();
    put(0, k2, "v2"); /* in n0's turn, before the SUB arrives in it */
    assert_int_equal(rep_message(nodes[0].rp, "n1", sub.argc, (const char **)sub.argv, sub.len), 0);
    msg_free(&sub);
    turn_end(0);
    for (int round = 0; round < 8 && nq; round++) /* no ticks: no stale SUB (test_stale_sub) */
        pump(-1);
    assert_true(has(1, k, "v1") && has(1, k2, "v2"));
    assert_int_equal(rep_end(nodes[1].rp, p), 2);
    rep_stats s;
    rep_get_stats(nodes[1].rp, &s);
    assert_int_equal(s.copies_received, 1);
}

static void test_olds_after_copy(void **state) {
    (void)state;
    copy_mid_turn();
    unsigned p = part_of("alpha");
    assert_int_equal(kept_matches_data(1, p), 2);
    assert_int_equal(kept_matches_data(0, p), 2);
}

/* The same with REP_MUT_OLDS_ALWAYS: the statistics go wrong, which is
 * what the rule above prevents (and the check above would see). */
static void test_olds_after_copy_mutation(void **state) {
    (void)state;
    close_node(1);
    muts[1] = REP_MUT_OLDS_ALWAYS;
    open_node(1);
    copy_mid_turn();
    unsigned p = part_of("alpha"), per = 16384u / NP;
    uint64_t kx, kk, sx, sk;
    assert_int_equal(store_range_digest(nodes[1].st, p * per, p * per + per - 1, &kx, &kk), 0);
    assert_int_equal(store_range_checksum(nodes[1].st, NULL, p * per, p * per + per - 1, &sx, &sk),
                     0);
    assert_int_equal(sk, 2);
    rep_stats s;
    rep_get_stats(nodes[1].rp, &s);
    if (REP_OLD_VERIFY == 1) { /* a debug build checks every old state: caught, and corrected */
        assert_int_equal(s.olds_mismatched, 1);
        assert_int_equal(kk, 2);
    } else {
        assert_int_equal(kk, 3);
    }
}

/* A batch whose olds do not parse, or do not match its records one to
 * one, is applied by reading (counted in olds_bad), as is one without
 * olds (from a version before them); a leader told its store may lack
 * expired keys its followers hold sends "absent" as unknown. */
static void test_olds_bad_and_absent(void **state) {
    (void)state;
    char b[16];
    const char *k = "alpha", *k2 = key_in(part_of(k), k, b);
    unsigned p = part_of(k);
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 7u);
    pump(-1);
    put(0, k, "v1");
    turn_end(0);
    pump(-1); /* the epoch's first batch: read; exactly at 1 from now on */
    const char *variants[] = {"garbage", "extra", "none"};
    for (int v = 0; v < 3; v++) {
        char val[8];
        snprintf(val, sizeof val, "v%d", v + 2);
        put(0, k, val);
        turn_end(0);
        msg a;
        assert_non_null(queued_copy("KEEL.REP.APPEND", 1, &a));
        assert_int_equal(a.argc, 7);
        drop_queue();
        char olds[64] = {(char)0x40};
        size_t olen = 1;
        if (v == 1) {
            memcpy(olds, a.argv[6], a.len[6]);
            olds[a.len[6]] = 0; /* an old state for a record that is not there */
            olen = a.len[6] + 1;
        }
        const char *argv[7];
        size_t len[7];
        for (int i = 0; i < 7; i++)
            argv[i] = a.argv[i], len[i] = a.len[i];
        argv[6] = olds, len[6] = olen;
        rep_stats s0, s1;
        rep_get_stats(nodes[1].rp, &s0);
        assert_int_equal(rep_message(nodes[1].rp, "n0", v == 2 ? 6 : 7, argv, len), 0);
        turn_end(1);
        assert_true(has(1, k, val));
        rep_get_stats(nodes[1].rp, &s1);
        assert_int_equal(s1.olds_bad, s0.olds_bad + (v < 2));
        assert_int_equal(s1.olds_read, s0.olds_read + 1);
        assert_int_equal(s1.olds_used, s0.olds_used);
        assert_int_equal(kept_matches_data(1, p), 1);
        msg_free(&a);
        printf("olds %s: applied by reading\n", variants[v]);
    }
    /* the downgrade for an old peer's link */
    const char *no_olds = "KEEL.REP.SUB";
    assert_int_equal(rep_msg_downgrade(1, &no_olds, (size_t[]){12}), 1);
    put(0, k, "v5");
    turn_end(0);
    msg a;
    assert_non_null(queued_copy("KEEL.REP.APPEND", 1, &a));
    assert_int_equal(rep_msg_downgrade(a.argc, (const char **)a.argv, a.len), 6);
    msg_free(&a);
    pump(-1);
    /* absent olds off: a new key's record goes as unknown; an overwrite's
     * old state still goes */
    rep_set_olds_absent(nodes[0].rp, 0);
    rep_stats s0, s1;
    rep_get_stats(nodes[1].rp, &s0);
    put(0, k2, "new");
    put(0, k, "v6");
    turn_end(0);
    pump(-1);
    rep_get_stats(nodes[1].rp, &s1);
    assert_int_equal(s1.olds_read, s0.olds_read + 1);
    assert_int_equal(s1.olds_used, s0.olds_used + 1);
    assert_true(has(1, k2, "new"));
    assert_int_equal(kept_matches_data(1, p), 2);
}

/* The expiry sweep and the gc leave a replicated partition alone on every
 * replica but its leader, and on a node that holds replica state before
 * its map arrives; a partition never replicated here is swept. */
static void test_sweep_only_at_the_leader(void **state) {
    (void)state;
    const char *k = "alpha";
    unsigned p = part_of(k), slot = keel_key_slot(k, strlen(k)), other = (slot + 4096) % 16384;
    assert_int_equal(rep_sweep_skip(nodes[1].rp, slot), 0); /* nothing here yet */
    for (int i = 0; i < 3; i++)
        configure(i, p, 1, 1, 0, 7u);
    pump(-1);
    put(0, k, "v1");
    turn_end(0);
    pump(-1);
    assert_int_equal(rep_sweep_skip(nodes[0].rp, slot), 0);
    assert_int_equal(rep_sweep_skip(nodes[1].rp, slot), 1);
    assert_int_equal(rep_sweep_skip(nodes[2].rp, slot), 1);
    assert_int_equal(rep_sweep_skip(nodes[1].rp, other), 0);
    close_node(0); /* restarted: its record restored, no map yet */
    open_node(0);
    assert_int_equal(rep_sweep_skip(nodes[0].rp, slot), 1);
}

int main(void) {
    keel_log_set_level(getenv("TEST_REP_LOG") ? KEEL_LOG_DEBUG : KEEL_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_storm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_sub, setup, teardown),
        cmocka_unit_test_setup_teardown(test_power_loss_leader_claimed_lost_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_power_loss_releader_kept_follower_tail, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_follower_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resigned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_sub, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pos0_data_copied, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promoted_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_olds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_olds_after_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_olds_after_copy_mutation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_olds_bad_and_absent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_only_at_the_leader, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
