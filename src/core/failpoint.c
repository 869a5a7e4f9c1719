/* failpoint.c - named failpoints; see failpoint.h.
 *
 * The registry is a small fixed array (no allocation, so a failpoint can be
 * set from anywhere, even when memory is short) kept in the order entries
 * were first enabled. failpoint__enabled mirrors the number of used slots:
 * it is the whole fast path, so every change to the array goes through
 * add_entry() and remove_at(), which keep the two in step.
 *
 * Parsing is strict and separate from applying: parse_spec() fills a
 * fp_spec or says why not, and only then does anything change. That is what
 * makes failpoint_load_env() all or nothing.
 */
#include "core/failpoint.h"
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct fp_spec {
    failpoint_action action; /* FP_NONE means "off" */
    unsigned count;          /* hits left; 0 = unlimited */
    unsigned pause_ms;       /* FP_PAUSE only */
} fp_spec;

typedef struct fp_entry {
    char name[FAILPOINT_NAME_MAX + 1];
    fp_spec spec;
} fp_entry;

unsigned failpoint__enabled;
static fp_entry entries[FAILPOINT_MAX]; /* [0, failpoint__enabled) in use */
/* Guards entries and failpoint__enabled: the coordinator's map store hits
 * failpoints on its worker thread (coord/mapstore_async.c) while the loop
 * sets them. Never held across a log line or a pause. */
static pthread_mutex_t fp_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *const action_names[] = {
#define FAILPOINT_ACTION_STR(name, str) [FP_##name] = str,
    FAILPOINT_ACTION_MAP(FAILPOINT_ACTION_STR)
#undef FAILPOINT_ACTION_STR
};

const char *failpoint_action_name(failpoint_action a) {
    size_t i = (size_t)a;
    return i < sizeof action_names / sizeof *action_names ? action_names[i] : "unknown";
}

/* ---- Parsing ------------------------------------------------------------ */

static int name_ok(const char *s, size_t n) {
    if (n < 1 || n > FAILPOINT_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* Parses the decimal digits at s[*i..) into *out, advancing *i. Requires at
 * least one digit and a value <= max; no sign, no blanks. */
static int parse_uint(const char *s, size_t n, size_t *i, unsigned max, unsigned *out) {
    uint64_t v = 0;
    size_t start = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9') {
        v = v * 10 + (uint64_t)(s[*i] - '0');
        if (v > max) return -1;
        (*i)++;
    }
    if (*i == start) return -1;
    *out = (unsigned)v;
    return 0;
}

static int word_is(const char *s, size_t n, const char *w) {
    return strlen(w) == n && memcmp(s, w, n) == 0;
}

/* Parses spec s[0..n) (not NUL-terminated: env entries are slices). */
static int parse_spec(const char *s, size_t n, fp_spec *out, char *err, size_t cap) {
    fp_spec sp = {FP_NONE, 0, 0};
    const char *star = memchr(s, '*', n);
    if (star) {
        size_t i = 0, cn = (size_t)(star - s);
        if (parse_uint(s, cn, &i, FAILPOINT_COUNT_MAX, &sp.count) || i != cn || sp.count == 0)
            return keel_errf(err, cap, KEEL_EINVAL, "bad count '%.*s': want 1..%u before '*'",
                             (int)cn, s, FAILPOINT_COUNT_MAX);
        n -= cn + 1;
        s = star + 1;
    }
    if (word_is(s, n, "off")) {
        if (sp.count) return keel_errf(err, cap, KEEL_EINVAL, "'off' takes no count");
    } else if (word_is(s, n, "crash")) {
        sp.action = FP_CRASH;
    } else if (word_is(s, n, "error")) {
        sp.action = FP_ERROR;
    } else if (n > 6 && memcmp(s, "pause(", 6) == 0) {
        size_t i = 6;
        if (parse_uint(s, n, &i, FAILPOINT_PAUSE_MAX_MS, &sp.pause_ms) || i + 1 != n || s[i] != ')')
            return keel_errf(err, cap, KEEL_EINVAL, "bad pause '%.*s': want pause(0..%u)", (int)n,
                             s, FAILPOINT_PAUSE_MAX_MS);
        sp.action = FP_PAUSE;
    } else {
        return keel_errf(err, cap, KEEL_EINVAL,
                         "unknown action '%.*s': want off, crash, error or pause(MS)", (int)n, s);
    }
    *out = sp;
    return 0;
}

/* ---- Registry ----------------------------------------------------------- */

static fp_entry *find(const char *name, size_t n) {
    for (unsigned i = 0; i < failpoint__enabled; i++)
        if (strncmp(entries[i].name, name, n) == 0 && entries[i].name[n] == 0) return &entries[i];
    return NULL;
}

static void remove_at(fp_entry *e) {
    size_t i = (size_t)(e - entries);
    memmove(e, e + 1, (failpoint__enabled - i - 1) * sizeof *e);
    failpoint__enabled--;
}

/* Applies an already-parsed spec. Fails only when the registry is full. */
static int apply(const char *name, size_t n, const fp_spec *sp) {
    fp_entry *e = find(name, n);
    if (sp->action == FP_NONE) {
        if (e) remove_at(e);
        return 0;
    }
    if (!e) {
        if (failpoint__enabled == FAILPOINT_MAX) return KEEL_ELIMIT;
        e = &entries[failpoint__enabled];
        memcpy(e->name, name, n);
        e->name[n] = 0;
        failpoint__enabled++;
    }
    e->spec = *sp;
    return 0;
}

int failpoint_set(const char *name, const char *spec, char *err, size_t cap) {
    size_t n = name ? strnlen(name, FAILPOINT_NAME_MAX + 1) : 0;
    if (!name_ok(name, n))
        return keel_errf(err, cap, KEEL_EINVAL, "bad failpoint name: want [a-z0-9._-]{1,%d}",
                         FAILPOINT_NAME_MAX);
    fp_spec sp;
    int rc = parse_spec(spec ? spec : "", spec ? strlen(spec) : 0, &sp, err, cap);
    if (rc) return rc;
    pthread_mutex_lock(&fp_mu);
    rc = apply(name, n, &sp);
    pthread_mutex_unlock(&fp_mu);
    if (rc) return keel_errf(err, cap, rc, "too many failpoints enabled (max %d)", FAILPOINT_MAX);
    return 0;
}

/* ---- Environment -------------------------------------------------------- */

typedef struct env_entry {
    const char *name;
    size_t name_len;
    fp_spec spec;
} env_entry;

static int is_blank(char c) {
    return c == ' ' || c == '\t';
}

/* Trims blanks from both ends of s[0..*n). */
static const char *trim(const char *s, size_t *n) {
    while (*n && is_blank(*s))
        s++, (*n)--;
    while (*n && is_blank(s[*n - 1]))
        (*n)--;
    return s;
}

/* Parses one non-empty "name=spec" slice (entry number k, from 1). */
static int parse_env_entry(const char *s, size_t n, unsigned k, env_entry *out, char *err,
                           size_t cap) {
    const char *eq = memchr(s, '=', n);
    if (!eq)
        return keel_errf(err, cap, KEEL_EINVAL, "entry %u '%.*s': want name=spec", k, (int)n, s);
    size_t nn = (size_t)(eq - s), sn = n - nn - 1;
    const char *name = trim(s, &nn), *spec = trim(eq + 1, &sn);
    if (!name_ok(name, nn))
        return keel_errf(err, cap, KEEL_EINVAL, "entry %u: bad failpoint name '%.*s'", k, (int)nn,
                         name);
    char why[160];
    if (parse_spec(spec, sn, &out->spec, why, sizeof why))
        return keel_errf(err, cap, KEEL_EINVAL, "entry %u (%.*s): %s", k, (int)nn, name, why);
    out->name = name;
    out->name_len = nn;
    return 0;
}

/* 1 if v[i] is the last entry for its name, the one that decides. */
static int is_last(const env_entry *v, unsigned n, unsigned i) {
    for (unsigned j = i + 1; j < n; j++)
        if (v[j].name_len == v[i].name_len && !memcmp(v[j].name, v[i].name, v[i].name_len))
            return 0;
    return 1;
}

/* Failpoints enabled once the deciding entries are applied. */
static unsigned enabled_after(const env_entry *v, unsigned n) {
    unsigned after = failpoint__enabled;
    for (unsigned i = 0; i < n; i++) {
        if (!is_last(v, n, i)) continue;
        int on = v[i].spec.action != FP_NONE, was = find(v[i].name, v[i].name_len) != NULL;
        after += (unsigned)(on && !was);
        after -= (unsigned)(!on && was);
    }
    return after;
}

int failpoint_load_env(const char *envval, char *err, size_t cap) {
    env_entry v[FAILPOINT_MAX];
    unsigned n = 0, k = 0;
    for (const char *s = envval; s && *s;) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        size_t tl = len;
        const char *t = trim(s, &tl);
        k++;
        if (tl) {
            if (n == FAILPOINT_MAX)
                return keel_errf(err, cap, KEEL_ELIMIT, "more than %d entries", FAILPOINT_MAX);
            int rc = parse_env_entry(t, tl, k, &v[n], err, cap);
            if (rc) return rc;
            n++;
        }
        s = end ? end + 1 : s + len;
    }
    pthread_mutex_lock(&fp_mu);
    if (enabled_after(v, n) > FAILPOINT_MAX) {
        pthread_mutex_unlock(&fp_mu);
        return keel_errf(err, cap, KEEL_ELIMIT, "too many failpoints enabled (max %d)",
                         FAILPOINT_MAX);
    }
    /* Only deciding entries, "off"s first, so the registry never overfills midway. */
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < n; i++)
            if (is_last(v, n, i) && (v[i].spec.action == FP_NONE) == (pass == 0))
                apply(v[i].name, v[i].name_len, &v[i].spec);
    pthread_mutex_unlock(&fp_mu);
    return 0;
}

/* ---- Firing ------------------------------------------------------------- */

static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

failpoint_action failpoint_hit(const char *name) {
    if (!failpoint__enabled || !name) return FP_NONE;
    size_t n = strnlen(name, FAILPOINT_NAME_MAX + 1);
    pthread_mutex_lock(&fp_mu);
    fp_entry *e = n <= FAILPOINT_NAME_MAX ? find(name, n) : NULL;
    if (!e) {
        pthread_mutex_unlock(&fp_mu);
        return FP_NONE;
    }
    fp_spec sp = e->spec;
    unsigned left = 0;
    if (sp.count) {
        left = sp.count - 1;
        if (left)
            e->spec.count = left;
        else
            remove_at(e); /* e is dangling from here on */
    }
    pthread_mutex_unlock(&fp_mu);
    char ms[24] = "", rem[16] = "unlimited";
    if (sp.action == FP_PAUSE) snprintf(ms, sizeof ms, " ms=%u", sp.pause_ms);
    if (sp.count) snprintf(rem, sizeof rem, "%u", left);
    keel_log(KEEL_LOG_WARN, "failpoint", "name=%s action=%s%s remaining=%s", name,
             failpoint_action_name(sp.action), ms, rem);
    switch (sp.action) {
    case FP_CRASH:
        _exit(KEEL_FAILPOINT_EXIT_CODE);
    case FP_PAUSE:
        sleep_ms(sp.pause_ms);
        return FP_PAUSE;
    default:
        return sp.action;
    }
}

/* ---- Listing ------------------------------------------------------------ */

/* Appends like snprintf at buf+*len, tracking the full length even past cap. */
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (m > 0) *len += (size_t)m;
}

size_t failpoint_list(char *buf, size_t cap) {
    size_t len = 0;
    if (cap) buf[0] = 0;
    pthread_mutex_lock(&fp_mu);
    for (unsigned i = 0; i < failpoint__enabled; i++) {
        const fp_entry *e = &entries[i];
        append(buf, cap, &len, "%s%s=", i ? ";" : "", e->name);
        if (e->spec.count) append(buf, cap, &len, "%u*", e->spec.count);
        if (e->spec.action == FP_PAUSE)
            append(buf, cap, &len, "pause(%u)", e->spec.pause_ms);
        else
            append(buf, cap, &len, "%s", failpoint_action_name(e->spec.action));
    }
    pthread_mutex_unlock(&fp_mu);
    return len;
}

void failpoint_clear_all(void) {
    pthread_mutex_lock(&fp_mu);
    failpoint__enabled = 0;
    memset(entries, 0, sizeof entries);
    pthread_mutex_unlock(&fp_mu);
}
