/* move_writer.c - a hiredis writer that follows -MOVED and retries
 * -TRYAGAIN, for tests/integration/test_moves.
 *
 *     move_writer HOST PORT KEYFILE STOPFILE [TAG [VSIZE [EVENTFILE]]]
 *
 * KEYFILE holds one key per line. The writer SETs the keys round-robin until
 * STOPFILE exists, every attempt with a fresh value "TAG:SEQ:" padded with
 * 'x' to VSIZE bytes (SEQ grows by one per attempt, so no two attempts write
 * the same value). It starts with every slot at HOST:PORT and learns the
 * owners from -MOVED; -TRYAGAIN is retried after 2 ms with a new value.
 *
 * It keeps, per key, the SEQ of the last acknowledged (+OK) SET and the SEQ
 * of a later SET whose outcome is unknown (an I/O error: the connection broke
 * or timed out), and prints, when it stops:
 *
 *     STAT sets=N ok=N moved=N tryagain=N errors=N ioerrors=N
 *     ERR <first error replies, at most 20 lines>
 *     K <key> <acked SEQ or -1> <unknown-outcome SEQ or -1>
 *
 * EVENTFILE, if given, gets a line per reply:
 *     <send unix-us> <reply unix-us> <port> <key> <SEQ> OK|MOVED|TRYAGAIN|ERR|IOERR
 *
 * MOVE_WRITER_SEEDS (environment, optional): "PORT,PORT,..." on HOST; after
 * an I/O error a slot is tried at the next of them, whose -MOVED then names
 * the slot's new leader (test_replication_failover kills a leader).
 *
 * Exits 0 (even when replies were errors: the test judges them), 2 on bad
 * usage.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 16
#define MAXERR 20

typedef struct {
    char *key;
    long long acked, unknown;
} keyrec;

typedef struct {
    char host[64];
    int port;
    redisContext *c;
} conn;

static conn conns[MAXCONN];
static int nconns;
static int slot_port[16384];
static char slot_host[16384][16]; /* loopback tests: short hosts only */

static long long now_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000000 + tv.tv_usec;
}

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

static conn *conn_for(const char *host, int port) {
    for (int i = 0; i < nconns; i++)
        if (conns[i].port == port && !strcmp(conns[i].host, host)) return &conns[i];
    if (nconns == MAXCONN) return NULL;
    conn *c = &conns[nconns++];
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
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

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr,
                "usage: move_writer HOST PORT KEYFILE STOPFILE [TAG [VSIZE [EVENTFILE]]]\n");
        return 2;
    }
    const char *host = argv[1];
    int port = atoi(argv[2]);
    const char *tag = argc > 5 ? argv[5] : "w";
    size_t vsize = argc > 6 ? (size_t)atol(argv[6]) : 0;
    FILE *ev = argc > 7 ? fopen(argv[7], "w") : NULL;
    if (argc > 7 && !ev) {
        perror(argv[7]);
        return 2;
    }
    FILE *kf = fopen(argv[3], "r");
    if (!kf) {
        perror(argv[3]);
        return 2;
    }
    keyrec *keys = NULL;
    size_t nkeys = 0, capk = 0;
    char line[1024];
    while (fgets(line, sizeof line, kf)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (nkeys == capk) {
            capk = capk ? capk * 2 : 64;
            keys = realloc(keys, capk * sizeof *keys);
        }
        keys[nkeys].key = strdup(line);
        keys[nkeys].acked = keys[nkeys].unknown = -1;
        nkeys++;
    }
    fclose(kf);
    if (!nkeys) {
        fprintf(stderr, "move_writer: no keys\n");
        return 2;
    }
    int seeds[MAXCONN], nseeds = 0;
    for (const char *e = getenv("MOVE_WRITER_SEEDS"); e && *e && nseeds < MAXCONN;) {
        seeds[nseeds++] = atoi(e);
        e = strchr(e, ',');
        if (e) e++;
    }
    for (int i = 0; i < 16384; i++) {
        slot_port[i] = port;
        snprintf(slot_host[i], sizeof slot_host[i], "%s", host);
    }
    char *val = malloc(vsize + 64);
    long long seq = 0, sets = 0, ok = 0, moved = 0, tryagain = 0, errors = 0, ioerrors = 0;
    char errs[MAXERR][160];
    int nerr = 0;
    struct stat sb;
    size_t ki = 0;
    for (long long iter = 0;; iter++) {
        if ((iter & 15) == 0 && stat(argv[4], &sb) == 0) break;
        keyrec *k = &keys[ki];
        size_t klen = strlen(k->key);
        unsigned slot = keyslot(k->key, klen);
        conn *cn = conn_for(slot_host[slot], slot_port[slot]);
        long long s = ++seq;
        int n = snprintf(val, 64, "%s:%lld:", tag, s);
        size_t vlen = (size_t)n;
        if (vlen < vsize) {
            memset(val + vlen, 'x', vsize - vlen);
            vlen = vsize;
        }
        long long t0 = now_us();
        redisContext *c = cn ? ctx(cn) : NULL;
        redisReply *r = c ? redisCommand(c, "SET %b %b", k->key, klen, val, vlen) : NULL;
        long long t1 = now_us();
        const char *kind;
        sets++;
        if (!r) {
            kind = "IOERR";
            ioerrors++;
            k->unknown = s;
            if (nerr < MAXERR)
                snprintf(errs[nerr++], sizeof errs[0], "io error on port %d: %s",
                         cn ? cn->port : -1, c ? c->errstr : "cannot connect");
            if (cn && cn->c) {
                redisFree(cn->c);
                cn->c = NULL;
            }
            if (nseeds) { /* ask the next seed: its -MOVED names the new leader */
                int at = 0;
                for (int i = 0; i < nseeds; i++)
                    if (seeds[i] == slot_port[slot]) at = i + 1;
                slot_port[slot] = seeds[at % nseeds];
                snprintf(slot_host[slot], sizeof slot_host[slot], "%s", host);
            }
            usleep(10000);
        } else if (r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK")) {
            kind = "OK";
            ok++;
            k->acked = s;
            k->unknown = -1;
        } else if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "MOVED ", 6)) {
            kind = "MOVED";
            moved++;
            unsigned ms;
            char addr[128];
            if (sscanf(r->str, "MOVED %u %127s", &ms, addr) == 2 && ms < 16384) {
                char *colon = strrchr(addr, ':');
                if (colon) {
                    *colon = 0;
                    slot_port[ms] = atoi(colon + 1);
                    snprintf(slot_host[ms], sizeof slot_host[ms], "%s", addr);
                }
            }
        } else if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "TRYAGAIN", 8)) {
            kind = "TRYAGAIN";
            tryagain++;
            usleep(2000);
        } else {
            kind = "ERR";
            errors++;
            if (nerr < MAXERR)
                snprintf(errs[nerr++], sizeof errs[0], "port %d key %s: %.100s", cn->port, k->key,
                         r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply type");
            usleep(10000);
        }
        if (ev)
            fprintf(ev, "%lld %lld %d %s %lld %s\n", t0, t1, cn ? cn->port : -1, k->key, s, kind);
        int retry = r && r->type == REDIS_REPLY_ERROR &&
                    (!strncmp(r->str, "MOVED ", 6) || !strncmp(r->str, "TRYAGAIN", 8));
        if (r) freeReplyObject(r);
        if (!retry) ki = (ki + 1) % nkeys; /* a redirected or refused SET is retried first */
    }
    if (ev) fclose(ev);
    printf("STAT sets=%lld ok=%lld moved=%lld tryagain=%lld errors=%lld ioerrors=%lld\n", sets, ok,
           moved, tryagain, errors, ioerrors);
    for (int i = 0; i < nerr; i++)
        printf("ERR %s\n", errs[i]);
    for (size_t i = 0; i < nkeys; i++)
        printf("K %s %lld %lld\n", keys[i].key, keys[i].acked, keys[i].unknown);
    for (int i = 0; i < nconns; i++)
        if (conns[i].c) redisFree(conns[i].c);
    free(val);
    return 0;
}
