/* plan_json.c - the JSON model format of docs/planner.md, and the plan as
 * JSON, on libcjson.
 *
 * Parsing is strict so a typo cannot silently take a default: every value is
 * type-checked, unknown fields are refused, and each error names the field
 * by its path ("partitions[3].replicas[0]"). Missing fields take the
 * defaults of plan_node_default / plan_part_default / plan_settings_default.
 * The parsed model then goes through plan_model_check like any other.
 */
#include "planner/plan_int.h"
#include "core/err.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jerr {
    char *buf;
    size_t cap;
} jerr;

static int jfail(jerr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jfail(jerr *e, const char *fmt, ...) {
    if (e->buf && e->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->buf, e->cap, fmt, ap);
        va_end(ap);
    }
    return KEEL_EINVAL;
}

static const char *jtype(const cJSON *v) {
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* Refuses any member of obj not in the NULL-terminated list. */
static int known_fields(const cJSON *obj, const char *const *names, const char *path, jerr *e) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        int ok = 0;
        for (const char *const *n = names; *n && !ok; n++)
            ok = strcmp(it->string, *n) == 0;
        if (!ok) return jfail(e, "%s: unknown field \"%s\"", path, it->string);
    }
    return 0;
}

static int get_num(const cJSON *obj, const char *key, const char *path, double lo, double *out,
                   jerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v))
        return jfail(e, "%s.%s: expected a number, got %s", path, key, jtype(v));
    if (!isfinite(v->valuedouble) || v->valuedouble < lo)
        return jfail(e, "%s.%s: must be >= %g, got %g", path, key, lo, v->valuedouble);
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *obj, const char *key, const char *path, bool *out, jerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return jfail(e, "%s.%s: expected a boolean, got %s", path, key, jtype(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_str(const cJSON *obj, const char *key, const char *path, char *out, size_t cap,
                   jerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return 0;
    if (!cJSON_IsString(v))
        return jfail(e, "%s.%s: expected a string, got %s", path, key, jtype(v));
    if (strlen(v->valuestring) >= cap)
        return jfail(e, "%s.%s: longer than %zu bytes", path, key, cap - 1);
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

/* ---- Parsing -------------------------------------------------------------- */

static const char *const node_fields[] = {"id",       "capacity",  "rack",          "state",
                                          "draining", "disk_used", "disk_capacity", "metrics_age_s",
                                          NULL};

static int parse_node(const cJSON *j, size_t i, plan_model *m, jerr *e) {
    char path[48], state[16] = "up";
    snprintf(path, sizeof path, "nodes[%zu]", i);
    if (!cJSON_IsObject(j)) return jfail(e, "%s: expected an object, got %s", path, jtype(j));
    int rc;
    plan_node n;
    plan_node_default(&n, "");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (!cJSON_IsString(id) || !id->valuestring[0])
        return jfail(e, "%s.id: required, a non-empty string", path);
    if ((rc = known_fields(j, node_fields, path, e)) ||
        (rc = get_str(j, "id", path, n.id, sizeof n.id, e)) ||
        (rc = get_str(j, "rack", path, n.rack, sizeof n.rack, e)) ||
        (rc = get_str(j, "state", path, state, sizeof state, e)) ||
        (rc = get_bool(j, "draining", path, &n.draining, e)) ||
        (rc = get_num(j, "capacity", path, 0, &n.capacity, e)) ||
        (rc = get_num(j, "disk_used", path, 0, &n.disk_used, e)) ||
        (rc = get_num(j, "disk_capacity", path, 0, &n.disk_capacity, e)) ||
        (rc = get_num(j, "metrics_age_s", path, 0, &n.metrics_age_s, e)))
        return rc;
    if (plan_node_state_parse(state, &n.state))
        return jfail(e, "%s.state: \"%s\" is not up, suspect, down or draining", path, state);
    if ((rc = plan__check_node(&n, i, e->buf, e->cap))) return rc;
    rc = plan_model_add_node(m, &n);
    if (rc == KEEL_EEXIST) return jfail(e, "%s.id: duplicate node id \"%s\"", path, n.id);
    return rc < 0 ? rc : 0;
}

static int parse_node_ref(const cJSON *v, const plan_model *m, const char *path, int32_t *out,
                          jerr *e) {
    if (!cJSON_IsString(v))
        return jfail(e, "%s: expected a node id string, got %s", path, jtype(v));
    int n = plan_model_find_node(m, v->valuestring);
    if (n < 0) return jfail(e, "%s: unknown node \"%s\"", path, v->valuestring);
    *out = n;
    return 0;
}

static int parse_replicas(const cJSON *j, const plan_model *m, const char *path, plan_part *p,
                          jerr *e) {
    const cJSON *reps = cJSON_GetObjectItemCaseSensitive(j, "replicas");
    if (!reps) return 0;
    if (!cJSON_IsArray(reps))
        return jfail(e, "%s.replicas: expected an array of node ids, got %s", path, jtype(reps));
    if (cJSON_GetArraySize(reps) > PLAN_MAX_REPLICAS)
        return jfail(e, "%s.replicas: more than %d replicas", path, PLAN_MAX_REPLICAS);
    const cJSON *r;
    cJSON_ArrayForEach(r, reps) {
        char rp[80];
        snprintf(rp, sizeof rp, "%s.replicas[%d]", path, p->nreplicas);
        int rc = parse_node_ref(r, m, rp, &p->replicas[p->nreplicas], e);
        if (rc) return rc;
        for (int k = 0; k < p->nreplicas; k++)
            if (p->replicas[k] == p->replicas[p->nreplicas])
                return jfail(e, "%s: node \"%s\" already holds a replica", rp, r->valuestring);
        p->nreplicas++;
    }
    return 0;
}

static const char *const part_fields[] = {"id",        "replicas",  "bytes",
                                          "load",      "pinned",    "since_last_move_s",
                                          "in_flight", "moving_to", NULL};

static int parse_part(const cJSON *j, size_t i, plan_model *m, jerr *e) {
    char path[48];
    snprintf(path, sizeof path, "partitions[%zu]", i);
    if (!cJSON_IsObject(j)) return jfail(e, "%s: expected an object, got %s", path, jtype(j));
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (!cJSON_IsNumber(id))
        return jfail(e, "%s.id: required, a number, got %s", path, id ? jtype(id) : "nothing");
    double idv = id->valuedouble;
    if (!(idv >= 0 && idv <= 9007199254740992.0) || idv != floor(idv))
        return jfail(e, "%s.id: must be an integer from 0 to 2^53, got %g", path, idv);
    plan_part p;
    plan_part_default(&p, (uint64_t)idv);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "moving_to");
    int rc;
    if ((rc = known_fields(j, part_fields, path, e)) || (rc = parse_replicas(j, m, path, &p, e)) ||
        (rc = get_num(j, "bytes", path, 0, &p.bytes, e)) ||
        (rc = get_num(j, "load", path, 0, &p.load, e)) ||
        (rc = get_num(j, "since_last_move_s", path, 0, &p.since_last_move_s, e)) ||
        (rc = get_bool(j, "pinned", path, &p.pinned, e)) ||
        (rc = get_bool(j, "in_flight", path, &p.in_flight, e)))
        return rc;
    if (mt && !cJSON_IsNull(mt)) {
        char mp[64];
        snprintf(mp, sizeof mp, "%s.moving_to", path);
        if ((rc = parse_node_ref(mt, m, mp, &p.moving_to, e))) return rc;
        if (p.nreplicas == 0) return jfail(e, "%s: needs an owner in replicas", mp);
        p.in_flight = true;
    }
    if ((rc = plan__check_part(&p, i, m->nnodes, e->buf, e->cap))) return rc;
    if ((rc = plan_model_add_part(m, &p))) return rc;
    return 0;
}

static const char *const settings_fields[] = {"load_weight",     "start_ratio",
                                              "stop_ratio",      "max_moves_per_round",
                                              "min_gain",        "min_residence",
                                              "min_residence_s", "disk_low",
                                              "disk_high",       "disk_flood",
                                              "max_metrics_age", "max_metrics_age_s",
                                              "replicas",        NULL};

static int parse_settings(const cJSON *j, plan_settings *s, jerr *e) {
    if (!j) return 0;
    if (!cJSON_IsObject(j)) return jfail(e, "settings: expected an object, got %s", jtype(j));
    double mm = s->max_moves, rf = s->replicas;
    int rc;
    if ((rc = known_fields(j, settings_fields, "settings", e)) ||
        (rc = get_num(j, "load_weight", "settings", 0, &s->load_weight, e)) ||
        (rc = get_num(j, "start_ratio", "settings", 1, &s->start_ratio, e)) ||
        (rc = get_num(j, "stop_ratio", "settings", 1, &s->stop_ratio, e)) ||
        (rc = get_num(j, "max_moves_per_round", "settings", 0, &mm, e)) ||
        (rc = get_num(j, "min_gain", "settings", 0, &s->min_gain, e)) ||
        (rc = get_num(j, "min_residence", "settings", 0, &s->min_residence_s, e)) ||
        (rc = get_num(j, "min_residence_s", "settings", 0, &s->min_residence_s, e)) ||
        (rc = get_num(j, "disk_low", "settings", 0, &s->disk_low, e)) ||
        (rc = get_num(j, "disk_high", "settings", 0, &s->disk_high, e)) ||
        (rc = get_num(j, "disk_flood", "settings", 0, &s->disk_flood, e)) ||
        (rc = get_num(j, "max_metrics_age", "settings", 0, &s->max_metrics_age_s, e)) ||
        (rc = get_num(j, "max_metrics_age_s", "settings", 0, &s->max_metrics_age_s, e)) ||
        (rc = get_num(j, "replicas", "settings", 0, &rf, e)))
        return rc;
    if (rf != floor(rf) || rf > PLAN_MAX_REPLICAS)
        return jfail(e, "settings.replicas: must be an integer 0..%d (0 = no repair)",
                     PLAN_MAX_REPLICAS);
    s->replicas = (uint8_t)rf;
    if (mm != floor(mm) || mm > UINT32_MAX)
        return jfail(e, "settings.max_moves_per_round: must be an integer (0 = no limit)");
    s->max_moves = (uint32_t)mm;
    return 0;
}

static int parse_episode(const cJSON *j, plan_episode *ep, jerr *e) {
    static const char *const fields[] = {"active", "rounds", "lead_active", NULL};
    if (!j) return 0;
    if (!cJSON_IsObject(j)) return jfail(e, "episode: expected an object, got %s", jtype(j));
    double rounds = 0;
    int rc;
    if ((rc = known_fields(j, fields, "episode", e)) ||
        (rc = get_bool(j, "active", "episode", &ep->active, e)) ||
        (rc = get_num(j, "rounds", "episode", 0, &rounds, e)) ||
        (rc = get_bool(j, "lead_active", "episode", &ep->lead_active, e)))
        return rc;
    ep->rounds = rounds > UINT32_MAX ? UINT32_MAX : (uint32_t)rounds;
    return 0;
}

static int parse_array(const cJSON *root, const char *key, bool required, plan_model *m, jerr *e,
                       int (*each)(const cJSON *, size_t, plan_model *, jerr *)) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!a && !required) return 0;
    if (!cJSON_IsArray(a))
        return jfail(e, "%s: required, an array, got %s", key, a ? jtype(a) : "nothing");
    if (!strcmp(key, "partitions") && plan_model_reserve_parts(m, (size_t)cJSON_GetArraySize(a)))
        return KEEL_ENOMEM;
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        int rc = each(it, i++, m, e);
        if (rc) return rc;
    }
    return 0;
}

int plan_model_from_json(const char *text, plan_model *m, char *err, size_t cap) {
    static const char *const top[] = {"nodes", "partitions", "settings", "episode", NULL};
    jerr e = {err, cap};
    plan_model_init(m);
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return jfail(&e, "model: not valid JSON (near byte %ld)",
                     (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : 0));
    int rc;
    if (!cJSON_IsObject(root))
        rc = jfail(&e, "model: expected an object, got %s", jtype(root));
    else if (!(rc = known_fields(root, top, "model", &e)) &&
             !(rc = parse_array(root, "nodes", true, m, &e, parse_node)) &&
             !(rc = parse_settings(cJSON_GetObjectItemCaseSensitive(root, "settings"), &m->settings,
                                   &e)) &&
             !(rc = parse_episode(cJSON_GetObjectItemCaseSensitive(root, "episode"), &m->episode,
                                  &e)) &&
             !(rc = parse_array(root, "partitions", false, m, &e, parse_part)))
        rc = plan_model_check(m, err, cap);
    cJSON_Delete(root);
    return rc;
}

/* ---- Writing -------------------------------------------------------------- */

/* Non-finite numbers become null: JSON has no infinity. */
static int add_num(cJSON *o, const char *key, double v) {
    cJSON *x = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
    return x && cJSON_AddItemToObject(o, key, x) ? 0 : KEEL_ENOMEM;
}

static int add_str(cJSON *o, const char *key, const char *s) {
    return cJSON_AddStringToObject(o, key, s) ? 0 : KEEL_ENOMEM;
}

/* Adds item to obj under key, taking ownership (freed on failure). */
static int attach(cJSON *obj, const char *key, cJSON *item) {
    if (item && cJSON_AddItemToObject(obj, key, item)) return 0;
    cJSON_Delete(item);
    return KEEL_ENOMEM;
}

static int append(cJSON *arr, cJSON *item) {
    if (item && cJSON_AddItemToArray(arr, item)) return 0;
    cJSON_Delete(item);
    return KEEL_ENOMEM;
}

static cJSON *node_json(const plan_node *n) {
    cJSON *o = cJSON_CreateObject();
    if (!o || add_str(o, "id", n->id) || add_num(o, "capacity", n->capacity) ||
        add_str(o, "rack", n->rack) || add_str(o, "state", plan_node_state_name(n->state)) ||
        !cJSON_AddBoolToObject(o, "draining", n->draining) ||
        add_num(o, "disk_used", n->disk_used) || add_num(o, "disk_capacity", n->disk_capacity) ||
        add_num(o, "metrics_age_s", n->metrics_age_s)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *part_json(const plan_model *m, const plan_part *p) {
    cJSON *o = cJSON_CreateObject(), *reps = cJSON_CreateArray();
    int rc = o ? attach(o, "replicas", reps) : KEEL_ENOMEM;
    if (!o) cJSON_Delete(reps);
    for (int r = 0; r < p->nreplicas && !rc; r++)
        rc = append(reps, cJSON_CreateString(m->nodes[p->replicas[r]].id));
    if (!rc) rc = add_num(o, "id", (double)p->id);
    if (!rc) rc = add_num(o, "bytes", p->bytes);
    if (!rc) rc = add_num(o, "load", p->load);
    if (!rc && !cJSON_AddBoolToObject(o, "pinned", p->pinned)) rc = KEEL_ENOMEM;
    if (!rc) rc = add_num(o, "since_last_move_s", p->since_last_move_s);
    if (!rc && !cJSON_AddBoolToObject(o, "in_flight", p->in_flight)) rc = KEEL_ENOMEM;
    if (!rc && p->moving_to >= 0) rc = add_str(o, "moving_to", m->nodes[p->moving_to].id);
    if (rc) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *settings_json(const plan_settings *s) {
    cJSON *o = cJSON_CreateObject();
    if (!o || add_num(o, "load_weight", s->load_weight) ||
        add_num(o, "start_ratio", s->start_ratio) || add_num(o, "stop_ratio", s->stop_ratio) ||
        add_num(o, "max_moves_per_round", s->max_moves) || add_num(o, "min_gain", s->min_gain) ||
        add_num(o, "min_residence", s->min_residence_s) || add_num(o, "disk_low", s->disk_low) ||
        add_num(o, "disk_high", s->disk_high) || add_num(o, "disk_flood", s->disk_flood) ||
        add_num(o, "max_metrics_age", s->max_metrics_age_s) ||
        add_num(o, "replicas", s->replicas)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *episode_json(const plan_episode *ep) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddBoolToObject(o, "active", ep->active) || add_num(o, "rounds", ep->rounds) ||
        !cJSON_AddBoolToObject(o, "lead_active", ep->lead_active)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static char *finish_json(cJSON *root, int rc, int pretty) {
    char *s = rc ? NULL : (pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root));
    cJSON_Delete(root);
    return s;
}

char *plan_model_to_json(const plan_model *m) {
    cJSON *root = cJSON_CreateObject(), *nodes = cJSON_CreateArray(), *parts = NULL;
    int rc = root ? attach(root, "nodes", nodes) : KEEL_ENOMEM;
    for (size_t i = 0; i < m->nnodes && !rc; i++)
        rc = append(nodes, node_json(&m->nodes[i]));
    if (!rc && !(rc = attach(root, "partitions", parts = cJSON_CreateArray())))
        for (size_t i = 0; i < m->nparts && !rc; i++)
            rc = append(parts, part_json(m, &m->parts[i]));
    if (!rc) rc = attach(root, "settings", settings_json(&m->settings));
    if (!rc) rc = attach(root, "episode", episode_json(&m->episode));
    if (!root) cJSON_Delete(nodes);
    return finish_json(root, rc, 0);
}

static cJSON *reason_json(const plan_model *m, const plan_move *mv) {
    char text[320];
    plan_move_describe(m, mv, text, sizeof text);
    cJSON *o = cJSON_CreateObject();
    if (!o || add_str(o, "why", plan_why_name(mv->why)) || add_str(o, "text", text) ||
        add_num(o, "src_util_before", mv->src_util_before) ||
        add_num(o, "src_util_after", mv->src_util_after) ||
        add_num(o, "dst_util_before", mv->dst_util_before) ||
        add_num(o, "dst_util_after", mv->dst_util_after) || add_num(o, "bytes", mv->bytes) ||
        add_num(o, "load", mv->load) || add_num(o, "weight", mv->weight) ||
        add_num(o, "gain", mv->gain) || !cJSON_AddBoolToObject(o, "overshoot", mv->overshoot)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *move_json(const plan_model *m, const plan_move *mv) {
    cJSON *o = cJSON_CreateObject();
    if (!o || add_num(o, "partition", (double)mv->part_id) ||
        add_str(o, "from", m->nodes[mv->from].id) || add_str(o, "to", m->nodes[mv->to].id) ||
        add_num(o, "replica", mv->replica) || attach(o, "reason", reason_json(m, mv))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *repair_json(const plan_model *m, const plan_repair *rp) {
    cJSON *o = cJSON_CreateObject();
    if (!o || add_num(o, "partition", (double)rp->part_id) ||
        add_str(o, "action", rp->kind == PLAN_REPAIR_ADD ? "add" : "remove") ||
        add_str(o, "node", m->nodes[rp->node].id) ||
        (rp->replace >= 0 && add_str(o, "replaces", m->nodes[rp->replace].id)) ||
        add_num(o, "live_replicas", rp->live) || add_num(o, "bytes", rp->bytes)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *lead_json(const plan_model *m, const plan_lead *ld) {
    cJSON *o = cJSON_CreateObject();
    if (!o || add_num(o, "partition", (double)ld->part_id) ||
        add_str(o, "from", m->nodes[ld->from].id) || add_str(o, "to", m->nodes[ld->to].id) ||
        add_num(o, "load", ld->load) || add_num(o, "from_fill_before", ld->from_fill_before) ||
        add_num(o, "from_fill_after", ld->from_fill_after) ||
        add_num(o, "to_fill_before", ld->to_fill_before) ||
        add_num(o, "to_fill_after", ld->to_fill_after)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *stop_json(const plan_stop *s) {
    cJSON *o = cJSON_CreateObject();
    if (!o || add_str(o, "key", s->key) || add_str(o, "text", s->text)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *util_json(const plan_model *m, const plan_result *r, size_t i) {
    cJSON *o = cJSON_CreateObject();
    if (!o || add_str(o, "id", m->nodes[i].id) ||
        add_str(o, "state", plan_node_state_name(m->nodes[i].state)) ||
        add_num(o, "capacity", m->nodes[i].capacity) ||
        add_num(o, "util_before", r->util_before[i]) ||
        add_num(o, "util_after", r->util_after[i])) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int summary_json(cJSON *root, const plan_result *r) {
    int rc = add_num(root, "floor", r->floor);
    if (!rc) rc = add_num(root, "moved", r->moved);
    if (!rc) rc = add_num(root, "efficiency", r->efficiency);
    if (!rc) rc = add_num(root, "floor_bytes", r->floor_bytes);
    if (!rc) rc = add_num(root, "moved_bytes", r->moved_bytes);
    if (!rc) rc = add_num(root, "imbalance_before", r->imbalance_before);
    if (!rc) rc = add_num(root, "imbalance_after", r->imbalance_after);
    if (!rc) rc = add_num(root, "min_ratio_before", r->min_ratio_before);
    if (!rc) rc = add_num(root, "min_ratio_after", r->min_ratio_after);
    if (!rc) rc = attach(root, "episode", episode_json(&r->episode));
    return rc;
}

char *plan_result_to_json(const plan_model *m, const plan_result *r, int pretty) {
    cJSON *root = cJSON_CreateObject(), *moves, *keys, *details, *nodes;
    if (!root) return NULL;
    int rc = attach(root, "moves", moves = cJSON_CreateArray());
    for (size_t i = 0; i < r->nmoves && !rc; i++)
        rc = append(moves, move_json(m, &r->moves[i]));
    cJSON *repairs, *leads;
    if (!rc) rc = attach(root, "repairs", repairs = cJSON_CreateArray());
    for (size_t i = 0; i < r->nrepairs && !rc; i++)
        rc = append(repairs, repair_json(m, &r->repairs[i]));
    if (!rc) rc = attach(root, "leadership_transfers", leads = cJSON_CreateArray());
    for (size_t i = 0; i < r->nleads && !rc; i++)
        rc = append(leads, lead_json(m, &r->leads[i]));
    if (!rc) rc = add_num(root, "lead_imbalance_before", r->lead_imbalance_before);
    if (!rc) rc = add_num(root, "lead_imbalance_after", r->lead_imbalance_after);
    if (!rc) rc = summary_json(root, r);
    if (!rc) rc = attach(root, "reasons_for_stopping", keys = cJSON_CreateArray());
    for (size_t i = 0; i < r->nstops && !rc; i++)
        rc = append(keys, cJSON_CreateString(r->stops[i].key));
    if (!rc) rc = attach(root, "stop_details", details = cJSON_CreateArray());
    for (size_t i = 0; i < r->nstops && !rc; i++)
        rc = append(details, stop_json(&r->stops[i]));
    if (!rc) rc = attach(root, "nodes", nodes = cJSON_CreateArray());
    for (size_t i = 0; i < r->nnodes && i < m->nnodes && !rc; i++)
        rc = append(nodes, util_json(m, r, i));
    return finish_json(root, rc, pretty);
}
