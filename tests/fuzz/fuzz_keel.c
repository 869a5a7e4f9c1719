/* fuzz_keel.c - libFuzzer target over the KEEL.* peer commands of a node
 * (src/node/move.c: move_dispatch) and of the coordinator (src/coord:
 * coord_dispatch), issue 10 defect 2.
 *
 * Both run for real, without sockets: a node with a RocksDB store, a
 * partition table and a coordinator link that is started but whose loop
 * never runs (only its directive guard is used), and a coordinator with a
 * SQLite map store and no move executor. A connection is authenticated by
 * setting its proven peer id, as KEEL.AUTH would. State persists across
 * inputs (opening stores per input would be 100x slower), except the node's
 * moves, which are rebuilt for every input so an input replays the same way
 * on its own as often as not.
 *
 * Input: a list of commands, each
 *
 *   [target u8] [argc u8] then argc x ([len u8] [bytes])
 *
 * target bit 0: 0 node, 1 coordinator. Bits 1-2: the peer it comes from
 * (node: "coordinator", "n2", "self"; coordinator: "n1", "n2", "evil").
 * Bit 3: for a node directive, argv[1] (the term) is replaced with the
 * current term, so the handlers behind the guard are reached. argv[0] is
 * the first byte of its bytes mod the table of command names when bit 4 is
 * set, else the bytes themselves. KEEL.MOVE.IN's port is forced to 1, so a
 * source dial can never reach a real process.
 *
 * Checks: no crash, no sanitizer report (argv and the lengths are heap
 * arrays of exactly argc entries, so a read past argc is one), and exactly
 * one reply (a complete RESP value) per command that is not held.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ftw.h>
#include <sys/stat.h>

#include "coord/coord_int.h"
#include "coord/mapstore.h"
#include "core/log.h"
#include "node/cmd.h"
#include "node/coordlink.h"
#include "node/move.h"
#include "resp/resp.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int coord_dispatch(void *arg, client *c, int argc, char **argv, const size_t *argvlen);

static const char *names[] = {
    "KEEL.MOVE.OUT",    "KEEL.MOVE.IN",    "KEEL.MOVE.FENCE",   "KEEL.MOVE.VERIFY",
    "KEEL.MOVE.COMMIT", "KEEL.MOVE.ABORT", "KEEL.MOVE.CLEANUP", "KEEL.MOVE.RATE",
    "KEEL.MOVE.STATE",  "KEEL.MOVE.CHUNK", "KEEL.MOVE.CHANGES", "KEEL.REGISTER",
    "KEEL.HEARTBEAT",   "KEEL.LEAVE",      "KEEL.MOVE.REPORT",  "KEEL.AUTH",
};
static const char *node_peers[] = {COORDINATOR_ID, "n2", "self", "n2"};
static const char *coord_peers[] = {"n1", "n2", "evil", "n1"};

static struct {
    int ready;
    char dir[64];
    uv_loop_t loop;
    server srv;
    coord co;
    client nc, cc;
    peer_conn cpeer;
    uint64_t term;
} g;

static void no_map(void *arg, const char *json, size_t len, uint64_t term, uint64_t seq) {}
static void no_metrics(void *arg, kbuf *out) {}
static uint64_t map_version(void *arg) {
    return 1;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
    return remove(p);
}

/* libFuzzer ends with exit(): the stores' directory goes with it. */
static void remove_dir(void) {
    if (g.dir[0]) nftw(g.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void) {
    keel_log_set_level(KEEL_LOG_ERROR + 1); /* quiet */
    snprintf(g.dir, sizeof g.dir, "/tmp/keel-fuzz-keel-XXXXXX");
    CHECK(mkdtemp(g.dir));
    atexit(remove_dir);
    CHECK(uv_loop_init(&g.loop) == 0);
    server *s = &g.srv;
    s->loop = &g.loop;
    node_config_default(&s->cfg);
    snprintf(s->cfg.id, sizeof s->cfg.id, "self");
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_NO;
    char err[256], path[128];
    CHECK(store_open(g.dir, &o, &s->st, err, sizeof err) == 0);
    s->pt = ptable_new(16, "self");
    s->mx = metrics_new(16);
    keel_map m;
    CHECK(keel_map_init(&m, 16) == 0);
    keel_map_add_node(&m, "self", "127.0.0.1", 1);
    keel_map_add_node(&m, "n2", "127.0.0.1", 1);
    for (unsigned p = 0; p < 16; p++)
        m.owner[p] = p < 8 ? 0 : 1;
    m.version = 1;
    CHECK(ptable_apply_map(s->pt, &m) == 0);
    peerauth_secret sec;
    memset(&sec, 7, sizeof sec);
    coordlink_config lc = {.host = "127.0.0.1",
                           .port = 1,
                           .self_id = "self",
                           .adv_host = "127.0.0.1",
                           .adv_port = 1,
                           .rack = ""};
    coordlink_cbs cbs = {no_map, no_metrics, map_version};
    s->link = coordlink_start(&g.loop, &lc, &sec, &cbs, NULL);
    CHECK(s->link);
    s->mv = moves_new(s, &sec, 2000);
    CHECK(s->mv);
    g.nc.proto = 2;
    g.nc.authed = 1;
    snprintf(g.nc.addr, sizeof g.nc.addr, "fuzz");
    kbuf_init(&g.nc.out);

    coord *co = &g.co;
    coord_config_default(&co->cfg);
    co->loop = &g.loop;
    co->partitions = 16;
    co->term = 1;
    co->parts = calloc(16, sizeof *co->parts);
    CHECK(co->parts);
    snprintf(path, sizeof path, "%s/map.db", g.dir);
    char mer[MAPSTORE_ERR_MAX];
    CHECK(mapstore_sqlite_create(path, 16, 1, &co->ms, mer, sizeof mer) == 0);
    kbuf_init(&co->map_json);
    g.cc.proto = 2;
    g.cc.authed = 1;
    g.cc.user = &g.cpeer;
    snprintf(g.cc.addr, sizeof g.cc.addr, "fuzz");
    kbuf_init(&g.cc.out);
    g.term = 1;
    g.ready = 1;
}

/* One complete RESP reply in out, and nothing after it. */
static void check_one_reply(const kbuf *out) {
    resp_reader *r = resp_reader_new(NULL);
    CHECK(r);
    size_t used = 0;
    resp_value *v = NULL;
    int rc = resp_reader_feed(r, out->p, out->len, &used, &v);
    CHECK(rc == 1 && v && used == out->len);
    resp_value_free(v);
    resp_reader_free(r);
}

static void run_one(int target, int argc, char **argv, size_t *len) {
    if (target & 1) {
        snprintf(g.cpeer.peer_id, sizeof g.cpeer.peer_id, "%s", coord_peers[(target >> 1) & 3]);
        g.cc.out.len = 0;
        coord_dispatch(&g.co, &g.cc, argc, argv, len);
        if (strcasecmp(argv[0], "keel.auth")) check_one_reply(&g.cc.out);
        return;
    }
    node_conn *nc = node_conn_of(&g.nc);
    CHECK(nc);
    snprintf(nc->peer.peer_id, sizeof nc->peer.peer_id, "%s", node_peers[(target >> 1) & 3]);
    g.nc.out.len = 0;
    int rc = move_dispatch(g.srv.mv, &g.nc, argc, argv, len);
    if (rc != RSERVER_HOLD && strcasecmp(argv[0], "keel.auth")) check_one_reply(&g.nc.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g.ready) setup();
    size_t i = 0;
    for (int cmd = 0; cmd < 8 && i + 2 <= size; cmd++) {
        int target = data[i++];
        int argc = data[i++] % 12 + 1;
        char *argv[13];
        size_t len[13];
        char bufs[12][256];
        char term[24];
        int n = 0;
        for (; n < argc && i < size; n++) {
            size_t l = data[i++];
            if (l > size - i) l = size - i;
            memcpy(bufs[n], data + i, l);
            bufs[n][l] = 0;
            i += l;
            argv[n] = bufs[n];
            len[n] = l;
        }
        if (n == 0) break;
        argc = n;
        if ((target & 16) || len[0] == 0) {
            const char *name = names[(len[0] ? (uint8_t)bufs[0][0] : 0) % 16];
            argv[0] = (char *)name;
            len[0] = strlen(name);
        }
        if (!(target & 1) && (target & 8) && argc > 1) {
            snprintf(term, sizeof term, "%llu", (unsigned long long)g.term);
            argv[1] = term;
            len[1] = strlen(term);
        }
        if (!strcasecmp(argv[0], "keel.move.in") && argc == 8) {
            argv[7] = "1";
            len[7] = 1;
        }
        /* Exactly argc entries on the heap: a handler reading argv[argc] or
         * len[argc] is a heap-buffer-overflow report. */
        char **av = malloc((size_t)argc * sizeof *av);
        size_t *al = malloc((size_t)argc * sizeof *al);
        CHECK(av && al);
        memcpy(av, argv, (size_t)argc * sizeof *av);
        memcpy(al, len, (size_t)argc * sizeof *al);
        run_one(target, argc, av, al);
        free(av);
        free(al);
    }
    /* Rebuild the node's moves: a fresh move table for the next input. */
    move_conn_closed(g.srv.mv, &g.nc);
    moves_free(g.srv.mv);
    uv_run(&g.loop, UV_RUN_NOWAIT);
    peerauth_secret sec;
    memset(&sec, 7, sizeof sec);
    g.srv.mv = moves_new(&g.srv, &sec, 2000);
    CHECK(g.srv.mv);
    return 0;
}
