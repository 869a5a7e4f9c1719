/* loopstat.c - see loopstat.h. */
#include "node/loopstat.h"

#include <stdlib.h>
#include <time.h>

struct loopstat {
    uv_prepare_t prep;
    int started;
    uint64_t last_ns;      /* uv_hrtime at the previous prepare */
    uint64_t last_idle_ns; /* uv_metrics_idle_time then */
    uint64_t last_cpu_ns;  /* the loop thread's CPU time then */
    uint64_t turns, slow_turns, max_ns, cpu_max_ns;
    uint64_t win_end_ns, win_max_ns, prev_win_max_ns, prev_win_end_ns;
    uint64_t win_cpu_max_ns, prev_win_cpu_max_ns;
    histogram hist, cpu;
};

loopstat *loopstat_new(void) {
    return calloc(1, sizeof(loopstat));
}

void loopstat_observe(loopstat *ls, uint64_t busy_ns, uint64_t cpu_ns, uint64_t now_ns) {
    if (now_ns >= ls->win_end_ns) {
        /* The window closes at the first turn past its end (a live loop
         * turns at least every 100 ms, for the sweep timer). */
        ls->prev_win_max_ns = ls->win_max_ns;
        ls->prev_win_cpu_max_ns = ls->win_cpu_max_ns;
        ls->prev_win_end_ns = ls->win_end_ns;
        ls->win_max_ns = ls->win_cpu_max_ns = 0;
        ls->win_end_ns = now_ns + LOOPSTAT_WINDOW_NS;
    }
    ls->turns++;
    if (busy_ns > LOOPSTAT_SLOW_NS) ls->slow_turns++;
    if (busy_ns > ls->max_ns) ls->max_ns = busy_ns;
    if (busy_ns > ls->win_max_ns) ls->win_max_ns = busy_ns;
    if (cpu_ns > ls->cpu_max_ns) ls->cpu_max_ns = cpu_ns;
    if (cpu_ns > ls->win_cpu_max_ns) ls->win_cpu_max_ns = cpu_ns;
    histogram_observe(&ls->hist, (double)busy_ns / 1e9);
    histogram_observe(&ls->cpu, (double)cpu_ns / 1e9);
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Just before the loop polls: the turn that began at the previous prepare
 * has ended; its busy time is the wall time minus the time spent blocked. */
static void on_prepare(uv_prepare_t *h) {
    loopstat *ls = h->data;
    uint64_t now = uv_hrtime();
    uint64_t idle = uv_metrics_idle_time(h->loop);
    uint64_t cpu = thread_cpu_ns();
    uint64_t wall = now - ls->last_ns, blocked = idle - ls->last_idle_ns;
    uint64_t used = cpu > ls->last_cpu_ns ? cpu - ls->last_cpu_ns : 0;
    ls->last_ns = now;
    ls->last_idle_ns = idle;
    ls->last_cpu_ns = cpu;
    loopstat_observe(ls, wall > blocked ? wall - blocked : 0, used, now);
}

int loopstat_start(loopstat *ls, uv_loop_t *loop) {
    int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rc) return rc;
    if ((rc = uv_prepare_init(loop, &ls->prep))) return rc;
    ls->prep.data = ls;
    ls->last_ns = uv_hrtime();
    ls->last_idle_ns = uv_metrics_idle_time(loop);
    ls->last_cpu_ns = thread_cpu_ns();
    if ((rc = uv_prepare_start(&ls->prep, on_prepare))) {
        uv_close((uv_handle_t *)&ls->prep, NULL);
        return rc;
    }
    uv_unref((uv_handle_t *)&ls->prep);
    ls->started = 1;
    return 0;
}

void loopstat_get(const loopstat *ls, loopstat_stats *out) {
    out->turns = ls->turns;
    out->slow_turns = ls->slow_turns;
    out->max_ns = ls->max_ns;
    out->window_max_ns = ls->prev_win_max_ns;
    out->window_end_ns = ls->prev_win_end_ns;
    out->cpu_max_ns = ls->cpu_max_ns;
    out->window_cpu_max_ns = ls->prev_win_cpu_max_ns;
    out->hist = &ls->hist;
    out->cpu = &ls->cpu;
}

void loopstat_info(const loopstat *ls, kbuf *b) {
    if (!ls) return;
    kbuf_printf(b,
                "loop_turns:%llu\r\nloop_turns_over_1ms:%llu\r\nloop_turn_max_us:%llu\r\n"
                "loop_turn_max_1s_us:%llu\r\nloop_turn_1s_end_ms:%llu\r\n"
                "loop_turn_cpu_max_us:%llu\r\nloop_turn_cpu_max_1s_us:%llu\r\n",
                (unsigned long long)ls->turns, (unsigned long long)ls->slow_turns,
                (unsigned long long)(ls->max_ns / 1000),
                (unsigned long long)(ls->prev_win_max_ns / 1000),
                (unsigned long long)(ls->prev_win_end_ns / 1000000),
                (unsigned long long)(ls->cpu_max_ns / 1000),
                (unsigned long long)(ls->prev_win_cpu_max_ns / 1000));
}

void loopstat_metrics(const loopstat *ls, kbuf *b) {
    if (!ls) return;
    kbuf_appendstr(b, "# HELP keel_loop_turn_seconds Busy time of each event-loop turn "
                      "(wall time between polls minus time blocked in the poll).\n"
                      "# TYPE keel_loop_turn_seconds histogram\n");
    histogram_write(b, "keel_loop_turn_seconds", "", &ls->hist);
    kbuf_appendstr(b, "# HELP keel_loop_turn_cpu_seconds CPU time of the loop thread in each "
                      "event-loop turn.\n"
                      "# TYPE keel_loop_turn_cpu_seconds histogram\n");
    histogram_write(b, "keel_loop_turn_cpu_seconds", "", &ls->cpu);
    kbuf_printf(b,
                "# HELP keel_loop_turn_max_seconds Longest event-loop turn since start.\n"
                "# TYPE keel_loop_turn_max_seconds gauge\nkeel_loop_turn_max_seconds %.9f\n",
                (double)ls->max_ns / 1e9);
    kbuf_printf(b,
                "# HELP keel_loop_turns_slow_total Event-loop turns busy longer than 1 ms.\n"
                "# TYPE keel_loop_turns_slow_total counter\nkeel_loop_turns_slow_total %llu\n",
                (unsigned long long)ls->slow_turns);
}

static void on_closed(uv_handle_t *h) {
    free(h->data);
}

void loopstat_free(loopstat *ls) {
    if (!ls) return;
    if (!ls->started) {
        free(ls);
        return;
    }
    uv_close((uv_handle_t *)&ls->prep, on_closed);
}
