/* coord_rf.c - the replication settings and the RF switch; see coord_rf.h.
 *
 * The checks live here, once, so --init, SETTING SET and SETTING RESET
 * refuse the same pairs with the same words.
 */
#include "coord/coord_rf.h"
#include "coord/coord_int.h"
#include "core/err.h"
#include "core/num.h"

#include <stdio.h>
#include <string.h>

int coord_rf_default_min_insync(int rf) {
    return rf >= 3 ? 2 : rf;
}

int coord_rf_validate(int rf, int min_insync, int for_init, char *err, size_t cap) {
    const char *r = for_init ? "--replicas" : "replicas";
    const char *m = for_init ? "--min-insync" : "min_insync";
    if (rf < 1 || rf > KEEL_RF_MAX) {
        snprintf(err, cap, "%s must be from 1 to %d, got %d", r, KEEL_RF_MAX, rf);
        return KEEL_EINVAL;
    }
    if (min_insync < 1 || min_insync > rf) {
        snprintf(err, cap, "%s must be from 1 to %s (%d), got %d", m, r, rf, min_insync);
        return KEEL_EINVAL;
    }
    return 0;
}

/* A stored integer setting, or def when unset or unreadable. */
static int stored_int(coord *co, const char *name, int def) {
    mapstore_setting st;
    int64_t v;
    if (mapstore_setting_get(co->ms, name, &st) || keel_parse_i64z(st.value, &v) || v < 0 ||
        v > 1000)
        return def;
    return (int)v;
}

void coord_rf_get(coord *co, int *rf, int *min_insync) {
    *rf = stored_int(co, "replicas", COORD_RF_DEFAULT);
    *min_insync = stored_int(co, "min_insync", coord_rf_default_min_insync(*rf));
}

int coord_rf_check_change(coord *co, const char *name, const char *value, char *msg, size_t cap) {
    int is_rf = !strcmp(name, "replicas");
    if (!is_rf && strcmp(name, "min_insync")) return 0;
    int rf, mi;
    coord_rf_get(co, &rf, &mi);
    int64_t v;
    if (value && (keel_parse_i64z(value, &v) || v < 1 || v > KEEL_RF_MAX)) {
        snprintf(msg, cap, "ERR %s must be an integer from 1 to %d, got '%.32s'", name, KEEL_RF_MAX,
                 value);
        return KEEL_EINVAL;
    }
    if (is_rf)
        rf = value ? (int)v : COORD_RF_DEFAULT;
    else
        mi = value ? (int)v : coord_rf_default_min_insync(rf);
    char why[320];
    if (coord_rf_validate(rf, mi, 0, why, sizeof why)) {
        snprintf(msg, cap, "ERR %s%s", why,
                 is_rf && mi > rf ? " (lower min_insync first: keel set min_insync N)" : "");
        return KEEL_EINVAL;
    }
    return 0;
}

int coord_rf_map_rep(const keel_map *m, const mapstore_partition *p, map_rep *out) {
    memset(out, 0, sizeof *out);
    if (!p->owner[0] || !p->nreplicas || strcmp(p->replicas[0], p->owner)) return KEEL_ENOTFOUND;
    for (unsigned i = 0; i < p->nreplicas && i < KEEL_RF_MAX; i++) {
        int k = keel_map_find_node(m, p->replicas[i]);
        if (k < 0) {
            if (i == 0) return KEEL_ENOTFOUND;
            continue;
        }
        if ((p->isr >> i) & 1) out->isr |= (uint8_t)(1u << out->n);
        out->node[out->n++] = k;
    }
    out->leader_epoch = p->leader_epoch;
    out->partition_epoch = p->partition_epoch;
    return 0;
}

void coord_rf_counts(const mapstore_partition *parts, size_t n, int rf, int min_insync,
                     size_t *under_replicated, size_t *under_min_isr) {
    *under_replicated = *under_min_isr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!parts[i].owner[0]) continue;
        *under_replicated += parts[i].nreplicas < (unsigned)rf;
        *under_min_isr += (unsigned)__builtin_popcount(parts[i].isr) < (unsigned)min_insync;
    }
}
