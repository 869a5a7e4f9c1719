/* latency.c - the latency monitor and LATENCY commands (see latency.h). */
#include "node/latency.h"
#include "core/clock.h"
#include "node/cmdstats.h"
#include "node/introspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SAMPLES 160 /* redis' LATENCY_TS_LEN */
#define NEVENTS 2

static const char *const event_names[NEVENTS] = {"command", "fast-command"};

typedef struct lat_sample {
    int64_t time_s;
    uint32_t ms;
} lat_sample;

typedef struct lat_event {
    lat_sample s[SAMPLES]; /* ring, oldest at idx when full */
    size_t idx, n;
    uint32_t max;
} lat_event;

struct latency_mon {
    lat_event ev[NEVENTS];
    unsigned gen; /* s->config_gen threshold_ms was read at (+1) */
    long long threshold_ms;
};

static struct latency_mon *get(server *s) {
    struct latency_mon *m = s->latency;
    if (!m) {
        if (!(m = calloc(1, sizeof *m))) return NULL;
        s->latency = m;
    }
    if (m->gen != s->config_gen + 1) {
        const char *v = config_value(s, "latency-monitor-threshold"); /* introspect.h */
        m->threshold_ms = v ? strtoll(v, NULL, 10) : 0;
        m->gen = s->config_gen + 1;
    }
    return m;
}

static void add_sample(lat_event *e, int64_t now_s, uint32_t ms) {
    if (e->n) { /* one sample per second: keep that second's max */
        lat_sample *last = &e->s[(e->idx + SAMPLES - 1) % SAMPLES];
        if (last->time_s == now_s) {
            if (ms > last->ms) last->ms = ms;
            if (ms > e->max) e->max = ms;
            return;
        }
    }
    e->s[e->idx] = (lat_sample){now_s, ms};
    e->idx = (e->idx + 1) % SAMPLES;
    if (e->n < SAMPLES) e->n++;
    if (ms > e->max) e->max = ms;
}

void latency_record(cmd_ctx *x, const cmd_def *d, uint64_t duration_us) {
    struct latency_mon *m = x->srv->latency;
    if (!m && duration_us < 1000) return; /* cheap path: nothing to record yet */
    if (!(m = get(x->srv)) || m->threshold_ms <= 0) return;
    uint64_t ms = duration_us / 1000;
    if ((long long)ms < m->threshold_ms) return;
    add_sample(&m->ev[(d->flags & CMD_FAST) ? 1 : 0], keel_wall_ms() / 1000,
               ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms);
}

void latency_free(struct latency_mon *m) {
    free(m);
}

static int event_index(const char *name) {
    for (int i = 0; i < NEVENTS; i++)
        if (!strcasecmp(name, event_names[i])) return i;
    return -1;
}

static const lat_sample *nth(const lat_event *e, size_t i) { /* i-th oldest */
    size_t first = e->n < SAMPLES ? 0 : e->idx;
    return &e->s[(first + i) % SAMPLES];
}

void cmd_latency(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'latency' command");
}

void cmd_latency_latest(cmd_ctx *x) {
    struct latency_mon *m = get(x->srv);
    size_t n = 0;
    for (int i = 0; m && i < NEVENTS; i++)
        n += m->ev[i].n > 0;
    resp_w_array(x->out, n);
    for (int i = 0; m && i < NEVENTS; i++) {
        const lat_event *e = &m->ev[i];
        if (!e->n) continue;
        const lat_sample *last = nth(e, e->n - 1);
        resp_w_array(x->out, 4);
        resp_w_bulkstr(x->out, event_names[i]);
        resp_w_int(x->out, last->time_s);
        resp_w_int(x->out, last->ms);
        resp_w_int(x->out, e->max);
    }
}

void cmd_latency_history(cmd_ctx *x) {
    struct latency_mon *m = get(x->srv);
    int i = event_index(x->argv[2]);
    const lat_event *e = m && i >= 0 ? &m->ev[i] : NULL;
    size_t n = e ? e->n : 0;
    resp_w_array(x->out, n);
    for (size_t j = 0; j < n; j++) {
        resp_w_array(x->out, 2);
        resp_w_int(x->out, nth(e, j)->time_s);
        resp_w_int(x->out, nth(e, j)->ms);
    }
}

void cmd_latency_reset(cmd_ctx *x) {
    struct latency_mon *m = get(x->srv);
    long long n = 0;
    for (int i = 0; m && i < NEVENTS; i++) {
        int named = x->argc == 2;
        for (int j = 2; j < x->argc && !named; j++)
            named = !strcasecmp(x->argv[j], event_names[i]);
        if (!named || !m->ev[i].n) continue;
        memset(&m->ev[i], 0, sizeof m->ev[i]);
        n++;
    }
    resp_w_int(x->out, n);
}

void cmd_latency_doctor(cmd_ctx *x) {
    struct latency_mon *m = get(x->srv);
    kbuf b;
    kbuf_init(&b);
    size_t seen = 0;
    for (int i = 0; m && i < NEVENTS; i++) {
        const lat_event *e = &m->ev[i];
        if (!e->n) continue;
        uint64_t sum = 0;
        for (size_t j = 0; j < e->n; j++)
            sum += nth(e, j)->ms;
        kbuf_printf(&b, "%zu. %s: %zu latency spikes (average %llums, max %ums).\n", ++seen,
                    event_names[i], e->n, (unsigned long long)(sum / e->n), e->max);
    }
    if (!seen)
        kbuf_printf(&b, "Dave, no latency spike was observed during the lifetime of this "
                        "keel node (latency-monitor-threshold %lld ms; 0 means disabled).\n",
                    m ? m->threshold_ms : 0);
    else
        kbuf_printf(&b, "keel samples only command latency; see SLOWLOG GET for the commands.\n");
    resp_w_verbatim(x->out, x->proto, "txt", b.p ? b.p : "", b.len);
    kbuf_close(&b);
}

/* LATENCY HISTOGRAM [command ...]: every command with calls, or those named
 * ("client" gives its subcommands with calls, "client|id" that one);
 * unknown names are skipped. */
void cmd_latency_histogram(cmd_ctx *x) {
    for (int pass = 0; pass < 2; pass++) {
        size_t n = 0;
        for (size_t i = 0; i < cmd_count(); i++) {
            const cmd_def *p = cmd_at(i);
            for (int sub = -1; sub < 0 || (p->subs && p->subs[sub].name); sub++) {
                const cmd_def *d = sub < 0 ? p : &p->subs[sub];
                char full[80];
                if (sub < 0)
                    snprintf(full, sizeof full, "%s", p->name);
                else
                    snprintf(full, sizeof full, "%s|%s", p->name, d->name);
                int want = x->argc == 2;
                for (int j = 2; j < x->argc && !want; j++)
                    want = !strcasecmp(x->argv[j], full) ||
                           (sub >= 0 && !strcasecmp(x->argv[j], p->name));
                if (!want || !cmdstats_calls(x->srv, d)) continue;
                if (pass) {
                    resp_w_bulkstr(x->out, full);
                    cmdstats_write_histogram(x, d);
                }
                n++;
            }
        }
        if (!pass) resp_w_map(x->out, x->proto, n);
    }
}

void cmd_latency_help(cmd_ctx *x) {
    static const char *help[] = {
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
        "    If no commands are specified then all histograms are replied.",
        "HELP",
        "    Prints this help."};
    resp_w_array(x->out, sizeof help / sizeof *help);
    for (size_t i = 0; i < sizeof help / sizeof *help; i++)
        resp_w_simple(x->out, help[i]);
}
