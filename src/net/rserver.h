/* rserver.h - a RESP server on a libuv loop: listener, connections, request
 * parsing, and once-per-turn output with a group-commit hook.
 *
 * The turn. Each read callback parses every complete request it received and
 * hands it to ops.dispatch, which appends its reply to client.out. At the end
 * of the loop turn (a uv_check handle) the server calls ops.before_flush - the
 * node's group commit - and only then writes each client's output once. A
 * write the kernel does not take whole continues as a uv_write; replies made
 * meanwhile wait for the next turn's check, never leaving before their
 * before_flush. Both the node and the coordinator serve through this.
 *
 * Threads: everything runs on the loop thread.
 */
#ifndef KEEL_RSERVER_H
#define KEEL_RSERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "resp/resp.h"

typedef struct rserver rserver;

/* One client connection. The fields above the line are for handlers. */
typedef struct client {
    uint64_t id;
    int proto;      /* 2 or 3 (HELLO) */
    int authed;     /* passed AUTH, or no password is required */
    char name[128]; /* CLIENT SETNAME */
    char addr[64];  /* peer "ip:port" */
    int64_t created_ms;
    int64_t last_ms; /* wall clock when the current request batch arrived */
    kbuf out;        /* replies of this turn, not yet handed to the kernel */
    void *user;      /* owner's per-connection state */
    /* ---- internal ---- */
    uv_tcp_t tcp;
    rserver *rs;
    resp_req *parser;
    kbuf wbuf; /* bytes of the write in flight */
    uv_write_t wreq;
    int writing, reading, close_after_flush, closing, pending;
    struct client *next_pending;
    struct client *prev, *next;
} client;

typedef struct rserver_ops {
    /* Executes one request; must append exactly one reply to c->out. */
    void (*dispatch)(void *arg, client *c, int argc, char **argv, const size_t *argvlen);
    /* Runs once per turn before any output leaves; non-zero is fatal for
     * the turn's replies (the owner decides what to do; see server.c). May
     * be NULL. */
    int (*before_flush)(void *arg);
    /* Called when a connection closes, before it is freed. May be NULL. */
    void (*on_close)(void *arg, client *c);
} rserver_ops;

typedef struct rserver_config {
    const char *bind; /* copied */
    int port;
    int maxclients;
    size_t max_output; /* output backlog at which a client's reads pause */
    resp_limits limits;
    int auth_required; /* new clients start unauthenticated */
} rserver_config;

typedef struct rserver_stats {
    size_t clients;
    uint64_t total_connections, rejected_connections, total_commands;
} rserver_stats;

/* Binds and listens. Returns 0 and *out, or a negative KEEL_E* with a reason
 * in err (bad address, port in use). ops and arg are borrowed for the
 * server's life. */
int rserver_start(uv_loop_t *loop, const rserver_config *cfg, const rserver_ops *ops, void *arg,
                  rserver **out, char *err, size_t errcap);
/* Runs the turn-end work now (before_flush, then flush): for shutdown. */
void rserver_flush_now(rserver *rs);
/* Closes the listener and every connection; frees once the loop has run
 * the close callbacks. NULL is a no-op. */
void rserver_stop(rserver *rs);
void rserver_get_stats(const rserver *rs, rserver_stats *out);
/* Closes c once its pending output has been written (QUIT, fatal errors). */
void rserver_close_after_reply(client *c);

#endif
