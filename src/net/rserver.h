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
 * Holding. A handler may decline to answer yet: dispatch returns
 * RSERVER_HOLD and appends nothing (a request to a fenced partition waiting
 * out a move, a peer's long-poll waiting for changes). RESP has no request
 * ids, so replies must leave in request order: holding a request pauses its
 * whole connection. The server stops parsing that client's input right after
 * the held request and keeps the unparsed rest in the client's own buffer.
 * It reads on into that buffer, without parsing, only so that a disconnect
 * is noticed while the request waits; at 64 KiB it stops reading, and later
 * pipelined requests wait in the kernel, then in TCP (memory per held
 * client: at most 64 KiB). Replies already made by earlier requests still
 * leave at the turn end. The owner keeps its own list of held clients and,
 * when the reason is gone or its own timer fires, calls rserver_resume: the
 * request is dispatched again with the same arguments and may be served,
 * refused, or held again; then the client's saved input and reading go on.
 * Holding is the owner's to bound: the server has no timeout of its own. A
 * held client that disconnects closes as usual, and ops.on_close tells the
 * owner (rserver_is_held(c) is still 1 there).
 *
 * Sealed turns (replication, docs/replication.md). A turn's writes may be
 * durable locally but not yet acknowledged by the partition's followers;
 * their replies must not leave before that. ops.seal_turn, when set, runs
 * after a successful before_flush and returns 0 (the turn's replies leave
 * now, as always) or a token t > 0, strictly greater than every token it
 * returned before: every reply made in this turn is then set aside, per
 * client, until the owner calls rserver_release(rs, t') with t' >= t.
 * Replies stay in request order: a client's later output, sealed or not,
 * queues behind its earliest sealed reply and leaves with it (a later
 * unsealed turn's replies leave with the last seal before them), while
 * clients with nothing sealed are not delayed at all. Released replies
 * leave at the next turn end (the server keeps the loop from sleeping
 * until then), before that turn's before_flush: they wait for nothing of
 * that turn (nor do any other bytes ready from earlier turns). A client
 * that sent QUIT behind a sealed reply closes once that reply has left.
 * When the owner can never release (it lost its lease, the ISR cannot be
 * reached), rserver_drop_sealed closes every client holding sealed output:
 * as with a lost connection, the client cannot know whether the write
 * happened, and no reply claims that it did. Sealed bytes count towards
 * max_output. Cost: release walks the client list (O(clients) per call).
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
    char laddr[64];  /* local "ip:port" */
    int fd;          /* the socket's descriptor, for CLIENT LIST */
    /* CLIENT REPLY / SETINFO / NO-EVICT and the last command, for CLIENT LIST
     * (node/cmd_client.c); the server itself never reads these. */
    unsigned char reply_off, reply_skip, reply_skip_next, no_evict, monitor;
    const char *cmd_name, *cmd_sub; /* static strings: last command (and subcommand) */
    char lib_name[64], lib_ver[64];
    /* ---- internal ---- */
    uv_tcp_t tcp;
    rserver *rs;
    resp_req *parser;
    kbuf wbuf;                  /* bytes of the write in flight */
    kbuf saved;                 /* input behind a held request, <= 64 KiB; empty unless held */
    kbuf sealed;                /* replies of sealed turns, oldest first */
    struct rserver_mark *marks; /* per sealed turn: token and end offset in sealed */
    size_t nmarks, capmarks;
    size_t out_ready; /* leading bytes of out already past their turn (released) */
    uv_write_t wreq;
    int writing, reading, close_after_flush, closing, pending, held;
    struct client *next_pending;
    struct client *prev, *next;
} client;

/* ops.dispatch's return for a request it wants held; see "Holding" above. */
#define RSERVER_HOLD 1

typedef struct rserver_ops {
    /* Executes one request and returns 0 after appending exactly one reply to
     * c->out, or returns RSERVER_HOLD having appended nothing: the request is
     * held until the owner calls rserver_resume, which calls dispatch again
     * with the same argc, argv and argvlen. argv and argvlen are the
     * server's: valid, and left unchanged by the server, until dispatch
     * returns 0 for this request, or the client closes; the handler must not
     * modify them when it holds. */
    int (*dispatch)(void *arg, client *c, int argc, char **argv, const size_t *argvlen);
    /* Runs once per turn before any output leaves; non-zero is fatal for
     * the turn's replies (the owner decides what to do; see server.c). May
     * be NULL. */
    int (*before_flush)(void *arg);
    /* Called when a connection closes, before it is freed; held or not (a
     * held request is then dropped unanswered). After it returns, c is gone:
     * the owner removes it from any list of held clients here, and must not
     * pass it to rserver_resume or any other call. May be NULL. */
    void (*on_close)(void *arg, client *c);
    /* Runs after a successful before_flush: 0 lets the turn's replies
     * leave, a token t > 0 (increasing) seals them until rserver_release;
     * see "Sealed turns" above. May be NULL (never seals). */
    uint64_t (*seal_turn)(void *arg);
    /* 1 when the current turn has committed nothing that its before_flush
     * must make durable first, so that its replies may leave early (only
     * rserver_poll_busy asks). May be NULL (never). */
    int (*turn_clean)(void *arg);
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
/* The connections, newest first: iterate with c = c->next. Closing clients
 * (rserver_kill) stay listed until the loop has run their close. */
client *rserver_clients(rserver *rs);
/* Closes c now (CLIENT KILL): unsent output is dropped; on_close follows
 * from the loop. Safe while iterating rserver_clients. */
void rserver_kill(client *c);
/* For output appended to c->out outside c's own dispatch (MONITOR feeds):
 * c's output leaves at this turn's end, after before_flush. */
void rserver_wake(client *c);
/* Changes the client limit for new connections (CONFIG SET maxclients). */
void rserver_set_maxclients(rserver *rs, int maxclients);
/* Re-dispatches c's held request now (from the caller's stack, on the loop
 * thread), then, unless it is held again, goes on with the client's saved
 * input (which may hold again at a later request) and resumes reading.
 * Replies made here leave at the next turn end, after before_flush, like any
 * other; the server keeps the loop from sleeping until then. c->last_ms is
 * set to now: the request executes now, not when it arrived. Safe from any
 * loop callback - a timer, a hiredis reply, another client's dispatch (even
 * of the same turn), and c's own dispatch (where c is not held, so it does
 * nothing) - except ops.before_flush, whose turn is already being
 * committed. Does nothing for a client that is not held (NULL included) or
 * is closing (its on_close is still to come). c must not have been passed to
 * ops.on_close. */
void rserver_resume(client *c);
/* Serves the other clients while the loop thread is stuck in one long
 * request of `self` (a script past its time limit; see node/script.h):
 * reads what each idle connection has sent, with one non-blocking recv
 * into a private buffer (the shared read buffer may still hold self's
 * unparsed input), dispatches the complete requests through ops.dispatch
 * (which is expected to answer them at once, -BUSY or SCRIPT KILL, never
 * holding and never writing data), and writes their replies straight to
 * the socket. A client's output queued before the busy dispatch is
 * written first: bytes of earlier turns always, this turn's replies only
 * when ops.turn_clean says nothing of the turn awaits its group commit
 * (a client whose PING was answered in the turn the script started in
 * would otherwise wait out the whole script); a client with such output
 * still queued, a sealed reply, a write in flight, a held request, or reads
 * paused is left alone: its replies must not overtake what is queued.
 * Accepts no new connection.
 * Call only from inside a dispatch, on the loop thread. */
void rserver_poll_busy(rserver *rs, const client *self);
/* Makes the current turn's end run for c as for a client with a reply
 * (ops.seal_turn included), for a request that answers nothing but whose
 * effects the turn end completes: a one-way replication message, whose
 * acknowledgement leaves from seal_turn. Call from c's dispatch. */
void rserver_touch(client *c);
/* Lets every reply sealed under a token <= t leave at the next turn end. */
void rserver_release(rserver *rs, uint64_t t);
/* Closes every client that holds sealed replies, dropping them unsent;
 * returns how many. For an owner that can never release them. */
size_t rserver_drop_sealed(rserver *rs);
/* Replies waiting for a release: bytes and clients. */
void rserver_sealed_stats(const rserver *rs, size_t *bytes, size_t *clients);
/* 1 while c has a held request, else 0. It is 0 during the re-dispatch in
 * rserver_resume: the request is then executing, not held. */
int rserver_is_held(const client *c);

#endif
