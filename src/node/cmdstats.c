/* cmdstats.c - see cmdstats.h. Commands are keyed by their cmd_def pointer
 * in an open-addressing table (the table holds a few hundred commands and
 * subcommands); the "parent|sub" name is found only when INFO renders. */
#include "node/cmdstats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CS_SLOTS 1024 /* > 2x the commands and subcommands keel has */
#define ES_MAX 128    /* distinct error codes kept, as redis' 128 */

#define HIST_BUCKETS 24 /* bucket k: calls under 2^k us (the last: the rest) */

typedef struct cs_ent {
    const cmd_def *d;
    uint64_t calls, usec, rejected, failed;
    uint64_t hist[HIST_BUCKETS];
} cs_ent;

typedef struct es_ent {
    char code[32];
    uint64_t count;
} es_ent;

struct cmdstats {
    cs_ent ent[CS_SLOTS];
    es_ent err[ES_MAX];
    size_t nerr;
    uint64_t total_errors;
};

static struct cmdstats *get(server *s) {
    if (!s->cstats) s->cstats = calloc(1, sizeof *s->cstats);
    return s->cstats;
}

static cs_ent *slot_of(server *s, const cmd_def *d) {
    struct cmdstats *cs = get(s);
    if (!cs || !d) return NULL;
    size_t h = ((uintptr_t)d >> 3) * 2654435761u % CS_SLOTS;
    for (size_t n = 0; n < CS_SLOTS; n++, h = (h + 1) % CS_SLOTS) {
        if (cs->ent[h].d == d) return &cs->ent[h];
        if (!cs->ent[h].d) {
            cs->ent[h].d = d;
            return &cs->ent[h];
        }
    }
    return NULL;
}

void cmdstats_call(server *s, const cmd_def *d, uint64_t us, int failed) {
    cs_ent *e = slot_of(s, d);
    if (!e) return;
    e->calls++;
    e->usec += us;
    e->failed += failed != 0;
    size_t k = 0;
    while (k + 1 < HIST_BUCKETS && us >= (1ull << k))
        k++;
    e->hist[k]++;
}

uint64_t cmdstats_calls(server *s, const cmd_def *d) {
    if (!s->cstats) return 0;
    cs_ent *e = slot_of(s, d);
    return e ? e->calls : 0;
}

void cmdstats_write_histogram(cmd_ctx *x, const cmd_def *d) {
    cs_ent *e = slot_of(x->srv, d);
    uint64_t zero[HIST_BUCKETS] = {0};
    const uint64_t *h = e ? e->hist : zero;
    resp_w_map(x->out, x->proto, 2);
    resp_w_bulkstr(x->out, "calls");
    resp_w_int(x->out, e ? (long long)e->calls : 0);
    resp_w_bulkstr(x->out, "histogram_usec");
    size_t n = 0;
    for (size_t k = 0; k < HIST_BUCKETS; k++)
        n += h[k] != 0;
    resp_w_map(x->out, x->proto, n);
    uint64_t cum = 0;
    for (size_t k = 0; k < HIST_BUCKETS; k++) {
        if (!h[k]) continue;
        cum += h[k];
        resp_w_int(x->out, 1ll << k);
        resp_w_int(x->out, (long long)cum);
    }
}

void cmdstats_rejected(server *s, const cmd_def *d) {
    cs_ent *e = slot_of(s, d);
    if (e) e->rejected++;
}

void cmdstats_error(server *s, const char *reply, size_t len) {
    struct cmdstats *cs = get(s);
    if (!cs || len < 2 || reply[0] != '-') return;
    size_t n = 0;
    while (n + 1 < len && n < 31 && reply[1 + n] != ' ' && reply[1 + n] != '\r')
        n++;
    cs->total_errors++;
    for (size_t i = 0; i < cs->nerr; i++)
        if (strlen(cs->err[i].code) == n && !memcmp(cs->err[i].code, reply + 1, n)) {
            cs->err[i].count++;
            return;
        }
    if (cs->nerr == ES_MAX) return; /* redis too stops tracking new codes */
    memcpy(cs->err[cs->nerr].code, reply + 1, n);
    cs->err[cs->nerr].code[n] = 0;
    cs->err[cs->nerr++].count = 1;
}

void cmdstats_reset(server *s) {
    if (s->cstats) memset(s->cstats, 0, sizeof *s->cstats);
}

uint64_t cmdstats_total_errors(const server *s) {
    return s->cstats ? s->cstats->total_errors : 0;
}

/* "get", or "client|list": the parent is found by searching the table. */
static void full_name(const cmd_def *d, char *out, size_t cap) {
    for (size_t i = 0; i < cmd_count(); i++) {
        const cmd_def *p = cmd_at(i);
        if (p == d) break;
        for (const cmd_def *sub = p->subs; sub && sub->name; sub++)
            if (sub == d) {
                snprintf(out, cap, "%s|%s", p->name, d->name);
                return;
            }
    }
    snprintf(out, cap, "%s", d->name);
}

void cmdstats_info_commands(server *s, kbuf *b) {
    if (!s->cstats) return;
    for (size_t i = 0; i < CS_SLOTS; i++) {
        const cs_ent *e = &s->cstats->ent[i];
        if (!e->d || (!e->calls && !e->rejected && !e->failed)) continue;
        char name[80];
        full_name(e->d, name, sizeof name);
        kbuf_printf(b,
                    "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                    "failed_calls=%llu\r\n",
                    name, (unsigned long long)e->calls, (unsigned long long)e->usec,
                    e->calls ? (double)e->usec / (double)e->calls : 0.0,
                    (unsigned long long)e->rejected, (unsigned long long)e->failed);
    }
}

void cmdstats_info_errors(server *s, kbuf *b) {
    if (!s->cstats) return;
    for (size_t i = 0; i < s->cstats->nerr; i++)
        kbuf_printf(b, "errorstat_%s:count=%llu\r\n", s->cstats->err[i].code,
                    (unsigned long long)s->cstats->err[i].count);
}

void cmdstats_free(struct cmdstats *cs) {
    free(cs);
}
