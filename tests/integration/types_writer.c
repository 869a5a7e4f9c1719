/* types_writer.c - a hiredis client for tests/integration/test_types_cluster:
 * builds large hashes, sets, sorted sets and lists in a cluster, then keeps
 * adding to them (and SETting strings) while partitions move, and records
 * every acknowledged write so that the test can check each one afterwards.
 *
 *     types_writer HOST PORT KEYFILE STOPFILE TAG PRELOAD
 *
 * KEYFILE has one "<type> <key>" per line, type one of hash, set, zset,
 * list, string. The client starts with every slot at HOST:PORT and learns the
 * owners from -MOVED; -TRYAGAIN is retried after 2 ms.
 *
 * Phase 1, preload: each compound key gets PRELOAD elements in commands of
 * 1000: hash fields p<i> = v<i>, set members p<i>, zset members p<i> with
 * score i - PRELOAD/2 (negative and positive), list elements p<i> by RPUSH;
 * a string key gets "TAG:0:". Every reply is checked (HSET/SADD/ZADD count
 * the new elements, RPUSH the length); any other reply or an I/O error ends
 * the program with status 1. Then it prints "LOADED" and flushes.
 *
 * Phase 2, writes, round-robin over the keys until STOPFILE exists; SEQ
 * grows by one per write, so every element is unique:
 *     hash    HSET key w<SEQ> TAG:<SEQ>     acknowledged by :1
 *     set     SADD key w<SEQ>               acknowledged by :1
 *     zset    ZADD key <SEQ>.5 w<SEQ>       acknowledged by :1
 *     list    RPUSH key TAG:<SEQ>           acknowledged by :N (the length)
 *     string  SET key TAG:<SEQ>:            acknowledged by +OK
 * An I/O error leaves the write's outcome unknown (it may or may not have
 * been applied); a MOVED or TRYAGAIN reply is retried with the same SEQ (the
 * refused attempt was not applied). When it stops it prints
 *
 *     STAT writes=N ok=N moved=N tryagain=N errors=N ioerrors=N max_us=N
 *     ERR <first error replies, at most 20 lines>
 *     A <key> <SEQ> <N>      one per acknowledged write (N: RPUSH's length, else 0)
 *     U <key> <SEQ>          one per write whose outcome is unknown
 *
 * max_us is the longest an acknowledged write took, redirections and retries
 * included (what an application would see).
 *
 * Exits 0 after phase 2 (error replies are counted; the test judges them),
 * 1 if the preload failed, 2 on bad usage.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define MAXCONN 16
#define MAXERR 20
#define BATCH 1000
#define RETRY_S 30 /* longest a write keeps following MOVED / TRYAGAIN */

enum ktype { T_HASH, T_SET, T_ZSET, T_LIST, T_STRING };
static const char *const type_names[] = {"hash", "set", "zset", "list", "string"};

typedef struct {
    enum ktype type;
    char *key;
    unsigned slot;
} keyrec;

typedef struct {
    char host[64];
    int port;
    redisContext *c;
} conn;

static conn conns[MAXCONN];
static int nconns;
static int slot_port[16384];
static char slot_host[16384][64];
static long long n_moved, n_tryagain;

static unsigned crc16(const char *buf, size_t len) {
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)buf[i] << 8;
        for (int j = 0; j < 8; j++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) : (crc << 1);
        crc &= 0xffff;
    }
    return crc;
}

static unsigned keyslot(const char *k, size_t n) {
    size_t s, e;
    for (s = 0; s < n; s++)
        if (k[s] == '{') break;
    if (s < n) {
        for (e = s + 1; e < n; e++)
            if (k[e] == '}') break;
        if (e < n && e != s + 1) return crc16(k + s + 1, e - s - 1) % 16384;
    }
    return crc16(k, n) % 16384;
}

static double now_s(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static conn *conn_for(unsigned slot) {
    for (int i = 0; i < nconns; i++)
        if (conns[i].port == slot_port[slot] && !strcmp(conns[i].host, slot_host[slot]))
            return &conns[i];
    if (nconns == MAXCONN) return NULL;
    conn *c = &conns[nconns++];
    snprintf(c->host, sizeof c->host, "%s", slot_host[slot]);
    c->port = slot_port[slot];
    c->c = NULL;
    return c;
}

static redisContext *ctx(conn *c) {
    if (c->c && !c->c->err) return c->c;
    if (c->c) redisFree(c->c);
    struct timeval tv = {15, 0};
    c->c = redisConnectWithTimeout(c->host, c->port, tv);
    if (!c->c || c->c->err) {
        if (c->c) redisFree(c->c);
        c->c = NULL;
        return NULL;
    }
    redisSetTimeout(c->c, tv);
    return c->c;
}

/* Learns the new owner of a slot from "MOVED <slot> <host>:<port>". */
static void learn_moved(const char *err) {
    unsigned ms;
    char addr[128];
    if (sscanf(err, "MOVED %u %127s", &ms, addr) != 2 || ms >= 16384) return;
    char *colon = strrchr(addr, ':');
    if (!colon) return;
    *colon = 0;
    slot_port[ms] = atoi(colon + 1);
    snprintf(slot_host[ms], sizeof slot_host[ms], "%s", addr);
}

/* Sends one command to the owner of `slot`, following MOVED and retrying
 * TRYAGAIN for up to RETRY_S seconds. Returns the final reply (owned by the
 * caller), or NULL on an I/O error or a connection that cannot be made (the
 * command's outcome is then unknown; the broken connection is dropped). */
static redisReply *run(unsigned slot, int argc, const char **argv, const size_t *lens) {
    double deadline = now_s() + RETRY_S;
    for (;;) {
        conn *cn = conn_for(slot);
        redisContext *c = cn ? ctx(cn) : NULL;
        if (!c) return NULL;
        redisReply *r = redisCommandArgv(c, argc, argv, lens);
        if (!r) {
            redisFree(cn->c);
            cn->c = NULL;
            return NULL;
        }
        int moved = r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "MOVED ", 6);
        int again = r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "TRYAGAIN", 8);
        if ((!moved && !again) || now_s() > deadline) return r;
        if (moved) {
            n_moved++;
            learn_moved(r->str);
        } else {
            n_tryagain++;
            usleep(2000);
        }
        freeReplyObject(r);
    }
}

/* Phase 1 for one key: PRELOAD elements in commands of BATCH. 0 or -1. */
static int preload(const keyrec *k, const char *tag, long n) {
    static const char *cmds[] = {"HSET", "SADD", "ZADD", "RPUSH", "SET"};
    const char **argv = malloc(sizeof *argv * (2 + 2 * BATCH));
    size_t *lens = malloc(sizeof *lens * (2 + 2 * BATCH));
    char *bufs = malloc((size_t)64 * 2 * BATCH);
    int rc = 0;
    if (k->type == T_STRING) n = 1;
    for (long lo = 0; lo < n && rc == 0; lo += BATCH) {
        long hi = lo + BATCH < n ? lo + BATCH : n;
        int argc = 0;
        argv[argc] = cmds[k->type];
        lens[argc++] = strlen(cmds[k->type]);
        argv[argc] = k->key;
        lens[argc++] = strlen(k->key);
        char *b = bufs;
        for (long i = lo; i < hi; i++) {
            int w;
            if (k->type == T_ZSET) { /* score, then member */
                w = snprintf(b, 64, "%ld", i - n / 2);
                argv[argc] = b;
                lens[argc++] = (size_t)w;
                b += 64;
            }
            if (k->type == T_STRING)
                w = snprintf(b, 64, "%s:0:", tag);
            else
                w = snprintf(b, 64, "p%ld", i);
            argv[argc] = b;
            lens[argc++] = (size_t)w;
            b += 64;
            if (k->type == T_HASH) {
                w = snprintf(b, 64, "v%ld", i);
                argv[argc] = b;
                lens[argc++] = (size_t)w;
                b += 64;
            }
        }
        redisReply *r = run(k->slot, argc, argv, lens);
        long long want = k->type == T_LIST ? hi : hi - lo;
        int ok = r && (k->type == T_STRING ? r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK")
                                           : r->type == REDIS_REPLY_INTEGER && r->integer == want);
        if (!ok) {
            fprintf(stderr, "types_writer: preload of %s %s at %ld: %s\n", type_names[k->type],
                    k->key, lo,
                    !r                               ? "I/O error"
                    : r->type == REDIS_REPLY_ERROR   ? r->str
                    : r->type == REDIS_REPLY_INTEGER ? "unexpected count"
                                                     : "unexpected reply type");
            rc = -1;
        }
        if (r) freeReplyObject(r);
    }
    free(argv);
    free(lens);
    free(bufs);
    return rc;
}

static int load_keys(const char *path, keyrec **out, size_t *nout) {
    FILE *kf = fopen(path, "r");
    if (!kf) {
        perror(path);
        return -1;
    }
    keyrec *keys = NULL;
    size_t n = 0, cap = 0;
    char line[1024], tname[16], key[1000];
    while (fgets(line, sizeof line, kf)) {
        if (sscanf(line, "%15s %999s", tname, key) != 2) continue;
        int t;
        for (t = 0; t <= T_STRING; t++)
            if (!strcmp(tname, type_names[t])) break;
        if (t > T_STRING) {
            fprintf(stderr, "types_writer: unknown type %s\n", tname);
            fclose(kf);
            return -1;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            keys = realloc(keys, cap * sizeof *keys);
        }
        keys[n].type = (enum ktype)t;
        keys[n].key = strdup(key);
        keys[n].slot = keyslot(key, strlen(key));
        n++;
    }
    fclose(kf);
    *out = keys;
    *nout = n;
    return n ? 0 : -1;
}

/* Is r the acknowledgement of a phase-2 write of this type? */
static int acked(enum ktype t, const redisReply *r) {
    if (t == T_STRING) return r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
    if (t == T_LIST) return r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: types_writer HOST PORT KEYFILE STOPFILE TAG PRELOAD\n");
        return 2;
    }
    const char *tag = argv[5];
    long preload_n = atol(argv[6]);
    keyrec *keys;
    size_t nkeys;
    if (load_keys(argv[3], &keys, &nkeys)) {
        fprintf(stderr, "types_writer: no usable keys in %s\n", argv[3]);
        return 2;
    }
    for (int i = 0; i < 16384; i++) {
        slot_port[i] = atoi(argv[2]);
        snprintf(slot_host[i], sizeof slot_host[i], "%s", argv[1]);
    }
    for (size_t i = 0; i < nkeys; i++)
        if (preload(&keys[i], tag, preload_n)) return 1;
    printf("LOADED\n");
    fflush(stdout);

    /* Records: "A key seq n" / "U key seq", kept in memory until the end. */
    size_t cap = 1 << 16, nrec = 0;
    struct rec {
        unsigned key;
        char acked;
        long long seq, n;
    } *recs = malloc(cap * sizeof *recs);
    long long seq = 0, writes = 0, ok = 0, errors = 0, ioerrors = 0, max_us = 0;
    char errs[MAXERR][200];
    int nerr = 0;
    struct stat sb;
    char field[64], val[64], score[64];
    for (size_t ki = 0;; ki = (ki + 1) % nkeys) {
        if ((writes & 15) == 0 && stat(argv[4], &sb) == 0) break;
        const keyrec *k = &keys[ki];
        long long s = ++seq;
        snprintf(field, sizeof field, "w%lld", s);
        snprintf(val, sizeof val, k->type == T_STRING ? "%s:%lld:" : "%s:%lld", tag, s);
        snprintf(score, sizeof score, "%lld.5", s);
        const char *av[4];
        size_t al[4];
        int ac = 2;
        static const char *cmds[] = {"HSET", "SADD", "ZADD", "RPUSH", "SET"};
        av[0] = cmds[k->type];
        av[1] = k->key;
        switch (k->type) {
        case T_HASH:
            av[ac++] = field;
            av[ac++] = val;
            break;
        case T_SET:
            av[ac++] = field;
            break;
        case T_ZSET:
            av[ac++] = score;
            av[ac++] = field;
            break;
        case T_LIST:
            av[ac++] = val;
            break;
        case T_STRING:
            av[ac++] = val;
            break;
        }
        for (int i = 0; i < ac; i++)
            al[i] = strlen(av[i]);
        writes++;
        double t0 = now_s();
        redisReply *r = run(k->slot, ac, av, al);
        long long us = (long long)((now_s() - t0) * 1e6);
        if (nrec == cap) {
            cap *= 2;
            recs = realloc(recs, cap * sizeof *recs);
        }
        if (!r) {
            ioerrors++;
            recs[nrec++] = (struct rec){(unsigned)ki, 0, s, 0};
            if (nerr < MAXERR)
                snprintf(errs[nerr++], sizeof errs[0], "io error: %s %s", av[0], k->key);
            usleep(10000);
        } else if (acked(k->type, r)) {
            ok++;
            if (us > max_us) max_us = us;
            recs[nrec++] = (struct rec){(unsigned)ki, 1, s, k->type == T_LIST ? r->integer : 0};
        } else {
            errors++;
            if (nerr < MAXERR)
                snprintf(errs[nerr++], sizeof errs[0], "%s %s: %.120s", av[0], k->key,
                         r->type == REDIS_REPLY_ERROR     ? r->str
                         : r->type == REDIS_REPLY_INTEGER ? "unexpected integer"
                                                          : "unexpected reply type");
        }
        if (r) freeReplyObject(r);
    }
    printf("STAT writes=%lld ok=%lld moved=%lld tryagain=%lld errors=%lld ioerrors=%lld "
           "max_us=%lld\n",
           writes, ok, n_moved, n_tryagain, errors, ioerrors, max_us);
    for (int i = 0; i < nerr; i++)
        printf("ERR %s\n", errs[i]);
    for (size_t i = 0; i < nrec; i++) {
        if (recs[i].acked)
            printf("A %s %lld %lld\n", keys[recs[i].key].key, recs[i].seq, recs[i].n);
        else
            printf("U %s %lld\n", keys[recs[i].key].key, recs[i].seq);
    }
    for (int i = 0; i < nconns; i++)
        if (conns[i].c) redisFree(conns[i].c);
    free(recs);
    return 0;
}
