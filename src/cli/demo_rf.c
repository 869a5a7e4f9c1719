/* demo_rf.c - see demo_rf.h. */
#include "cli/demo_rf.h"
#include "cli/demo_client.h"
#include "core/clock.h"
#include "core/crc16.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *str_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int demo_rf_pick_victim(demo_rf *r, demo_rf_json_fn json, void *arg) {
    int led[64] = {0}, best = 0;
    cJSON *arr = json(arg, "PARTITIONS JSON"), *p;
    cJSON_ArrayForEach(p, arr) {
        const char *o = str_of(p, "owner");
        int k = o && o[0] == 'n' ? atoi(o + 1) : 0;
        if (k > 0 && k < 64) led[k]++;
    }
    cJSON_Delete(arr);
    for (int k = 1; k < 64; k++)
        if (led[k] > led[best]) best = k;
    r->victim_index = best;
    r->led = best ? led[best] : 0;
    snprintf(r->victim, sizeof r->victim, "n%d", best);
    return best;
}

/* A partition the victim leads, or -1. */
static long victim_partition(demo_rf *r, demo_rf_json_fn json, void *arg) {
    long found = -1, i = 0;
    cJSON *arr = json(arg, "PARTITIONS JSON"), *p;
    cJSON_ArrayForEach(p, arr) {
        const char *o = str_of(p, "owner");
        if (found < 0 && o && !strcmp(o, r->victim)) found = i;
        i++;
    }
    cJSON_Delete(arr);
    return found;
}

/* Every partition has rf replicas, none of them the victim, all in sync. */
static int rf_restored(demo_rf *r, demo_rf_json_fn json, void *arg) {
    cJSON *arr = json(arg, "PARTITIONS JSON"), *p;
    int ok = arr != NULL && cJSON_GetArraySize(arr) > 0;
    cJSON_ArrayForEach(p, arr) {
        const cJSON *reps = cJSON_GetObjectItemCaseSensitive(p, "replicas");
        const cJSON *isr = cJSON_GetObjectItemCaseSensitive(p, "isr"), *x;
        if (cJSON_GetArraySize(reps) != r->rf || cJSON_GetArraySize(isr) != r->rf) ok = 0;
        cJSON_ArrayForEach(x, reps) if (cJSON_IsString(x) && !strcmp(x->valuestring, r->victim))
            ok = 0;
    }
    cJSON_Delete(arr);
    return ok;
}

int demo_rf_kill_and_measure(demo_rf *r, pid_t pid, int nodes, demo_rf_json_fn json, void *arg,
                             int wait_ms, int restore_ms) {
    r->failover_ms = r->restored_ms = -1;
    long p = victim_partition(r, json, arg);
    if (p < 0 || pid <= 0) return -1;
    /* A key of partition p (partitions own equal runs of slots). */
    char key[48];
    long per = 16384 / r->partitions;
    for (long k = 0;; k++) {
        int n = snprintf(key, sizeof key, "demo:rfprobe:%ld", k);
        if ((long)keel_key_slot(key, (size_t)n) / per == p) break;
    }
    dcc c;
    dcc_init(&c, (int)r->base, nodes);
    uint64_t t0 = keel_mono_us();
    kill(pid, SIGKILL);
    while (keel_mono_us() - t0 < (uint64_t)wait_ms * 1000) {
        const char *set[] = {"SET", key, "after-the-kill"};
        redisReply *rep = dcc_command(&c, 3, set, NULL);
        int ok = rep && rep->type == REDIS_REPLY_STATUS;
        freeReplyObject(rep);
        if (ok) {
            r->failover_ms = (double)(keel_mono_us() - t0) / 1000.0;
            break;
        }
        usleep(20000);
    }
    dcc_close(&c);
    while (r->failover_ms >= 0 && keel_mono_us() - t0 < (uint64_t)restore_ms * 1000) {
        if (rf_restored(r, json, arg)) {
            r->restored_ms = (double)(keel_mono_us() - t0) / 1000.0;
            break;
        }
        usleep(200000);
    }
    return r->failover_ms >= 0 && r->restored_ms >= 0 ? 0 : -1;
}
