/* directive.c - directive admission guard (DESIGN.md I3); see directive.h.
 *
 * State is a single high-water mark (term, seq) of the last accepted
 * directive. Because a directive is accepted only if it is strictly above the
 * mark in (term, seq) order - a higher term, or the same term and a higher
 * seq - the mark only rises. That one comparison gives both properties the
 * design asks for: no (term, seq) is accepted twice, and terms never go
 * backwards. Remembering only the mark (not a window of seen seqs) is why a
 * reordered directive counts as replayed: the coordinator sends a term's
 * directives in order on one connection, so a lower seq is never legitimate.
 */
#include "core/directive.h"
#include "core/err.h"

#include <stdlib.h>

struct directive_guard {
    int any;       /* 0 until the first directive is accepted */
    uint64_t term; /* highest coordinator term accepted */
    uint64_t seq;  /* last seq accepted in that term */
};

static const char *const verdict_names[] = {
#define DIRECTIVE_VERDICT_STR(name, str) [DIRECTIVE_##name] = str,
    DIRECTIVE_VERDICT_MAP(DIRECTIVE_VERDICT_STR)
#undef DIRECTIVE_VERDICT_STR
};

directive_guard *directive_guard_new(void) {
    return calloc(1, sizeof(directive_guard));
}

void directive_guard_free(directive_guard *g) {
    free(g);
}

/* 1 if (term, seq) is strictly above the guard's mark. */
static int above_mark(const directive_guard *g, uint64_t term, uint64_t seq) {
    return !g->any || term > g->term || (term == g->term && seq > g->seq);
}

directive_verdict directive_admit(directive_guard *g, int from_coordinator, uint64_t term,
                                  uint64_t seq) {
    if (!from_coordinator) return DIRECTIVE_NOT_COORDINATOR;
    if (g->any && term < g->term) return DIRECTIVE_STALE_TERM;
    if (g->any && term - g->term > DIRECTIVE_TERM_JUMP_MAX) return DIRECTIVE_TERM_JUMP;
    if (!above_mark(g, term, seq)) return DIRECTIVE_REPLAYED;
    g->any = 1;
    g->term = term;
    g->seq = seq;
    return DIRECTIVE_ACCEPT;
}

directive_verdict directive_admit_term(directive_guard *g, int from_coordinator, uint64_t term) {
    if (!from_coordinator) return DIRECTIVE_NOT_COORDINATOR;
    if (g->any && term < g->term) return DIRECTIVE_STALE_TERM;
    if (g->any && term - g->term > DIRECTIVE_TERM_JUMP_MAX) return DIRECTIVE_TERM_JUMP;
    if (!g->any || term > g->term) {
        g->any = 1;
        g->term = term;
        g->seq = 0;
    }
    return DIRECTIVE_ACCEPT;
}

int directive_guard_last(const directive_guard *g, uint64_t *term, uint64_t *seq) {
    if (!g->any) return 0;
    *term = g->term;
    *seq = g->seq;
    return 1;
}

int directive_guard_restore(directive_guard *g, uint64_t term, uint64_t seq) {
    if (!above_mark(g, term, seq)) return KEEL_ERANGE;
    g->any = 1;
    g->term = term;
    g->seq = seq;
    return 0;
}

const char *directive_verdict_name(directive_verdict v) {
    size_t i = (size_t)v;
    return i < sizeof verdict_names / sizeof *verdict_names ? verdict_names[i] : "unknown";
}
