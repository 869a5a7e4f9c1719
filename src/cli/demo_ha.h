/* demo_ha.h - `keel demo --ha`: the demo's control plane made highly
 * available (issue 12): three etcd members and three coordinators on
 * loopback, started by the demo in its temporary directory; the leading
 * coordinator is killed with SIGKILL while the joining node's partitions
 * move, and the summary shows the failover.
 *
 * Ports, for the demo's BASE (nodes keep BASE+1.., metrics BASE+81..):
 *   coordinators c1, c2, c3   BASE, BASE+10, BASE+11 (HTTP BASE+80, +90, +91)
 *   etcd members e1..e3       client BASE+20..22, peer BASE+23..25
 * Every coordinator and node appends to DIR/audit.log (core/audit.h): the
 * failover time is from the kill to the first map write (op=bump_term,
 * rc=0) of another coordinator in that log.
 *
 * Threads: the demo's main thread only.
 */
#ifndef KEEL_DEMO_HA_H
#define KEEL_DEMO_HA_H

#include <hiredis/hiredis.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#define DEMO_HA_N 3

typedef struct demo_ha {
    int on;
    long base, partitions;
    const char *dir, *exe;
    char etcd[PATH_MAX];
    pid_t etcd_pid[DEMO_HA_N], coord_pid[DEMO_HA_N];
    char coord_list[160]; /* 127.0.0.1:BASE,127.0.0.1:BASE+10,... for --coord */
    char audit[PATH_MAX];
    int killed;           /* index of the coordinator killed, -1 before */
    int64_t kill_wall_ms; /* when */
    int restarted;        /* it was started again, as a standby */
} demo_ha;

/* The coordinator port of c(i+1). */
int demo_ha_coord_port(const demo_ha *h, int i);
/* 1 if an etcd binary is there (KEEL_ETCD, else etcd on PATH, else
 * /usr/bin/etcd), its path in h->etcd. */
int demo_ha_find_etcd(demo_ha *h);
/* Starts the three members, creates the cluster on them (retrying while
 * they elect), and starts c1 (which leads), then c2 and c3. 0, or -1 with
 * a message on stderr. */
int demo_ha_start(demo_ha *h, long base, const char *dir, const char *exe);
/* A connection to whichever coordinator answers PING as the leader (trying
 * each, for up to wait_ms), or NULL. */
redisContext *demo_ha_dial(demo_ha *h, int wait_ms);
/* Index of the leader (its PING answered PONG), or -1. */
int demo_ha_leader(demo_ha *h);
/* SIGKILL to the leader; records which and when. 0, or -1 if none leads. */
int demo_ha_kill_leader(demo_ha *h);
/* Once another coordinator leads: starts the killed one again (it rejoins
 * as a standby). Returns 1 when it did (now or before). */
int demo_ha_restart_killed(demo_ha *h);
/* ms from the kill to the new leader's first map write, from the audit
 * log, with its id in who[cap]; -1 when not found yet. */
double demo_ha_failover_ms(const demo_ha *h, char *who, size_t cap);
/* Stops the coordinators and the members (SIGTERM, waited for). */
void demo_ha_stop(demo_ha *h);

#endif
