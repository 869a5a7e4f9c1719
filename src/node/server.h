/* server.h - the node's event loop: listener, connections, group commit.
 *
 * One libuv loop thread does everything on the request path. A turn of the
 * loop reads whatever arrived, parses and executes every complete request,
 * and appends each reply to its client's output buffer. At the end of the
 * turn (a uv_check handle) the server makes the turn's writes durable with one
 * store_sync() and only then writes each client's output once. So no reply
 * ever reveals data that is not yet durable, and N pipelined or concurrent
 * writes cost one WAL sync.
 */
#ifndef KEEL_SERVER_H
#define KEEL_SERVER_H

#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "node/config.h"
#include "node/metrics.h"
#include "node/ptable.h"
#include "resp/resp.h"
#include "store/store.h"

typedef struct server server;

typedef struct client {
    uv_tcp_t tcp;
    server *srv;
    uint64_t id;
    resp_req *parser;
    kbuf out;  /* replies of this turn, not yet handed to the kernel */
    kbuf wbuf; /* bytes of the write in flight */
    uv_write_t wreq;
    int writing;           /* a uv_write is in flight */
    int reading;           /* uv_read_start is active */
    int close_after_flush; /* QUIT or protocol error */
    int closing;           /* uv_close called */
    int proto;             /* 2 or 3 */
    int authed;
    int pending; /* on srv->pending list */
    char name[128];
    char addr[64];
    int64_t created_ms;
    int64_t last_ms;
    struct client *next_pending;
    struct client *prev, *next; /* srv->clients */
} client;

struct server {
    uv_loop_t *loop;
    node_config cfg;
    store *st;
    ptable *pt;
    metrics *mx;
    uv_tcp_t listener;
    uv_check_t turn_end;
    uv_timer_t sweep_timer;
    uv_timer_t second_timer;
    uv_signal_t sigint, sigterm;
    client *clients;
    client *pending;
    size_t nclients;
    uint64_t next_client_id;
    int64_t start_ms;
    int64_t now_ms; /* wall clock at the start of the current read batch */
    uint64_t total_connections;
    uint64_t rejected_connections;
    uint64_t total_commands;
    uint64_t expired_keys;
    uint64_t last_fsync_us;
    int64_t last_sync_ok_ms;
    int stopping;
    char runid[41];
    char readbuf[65536];
};

/* Opens the store, builds the partition table, binds the ports and runs the
 * loop until SIGINT/SIGTERM. Everything that can fail on configuration
 * (directory, map file, id) fails before any port is opened. Returns the
 * process exit status. */
int server_run(const node_config *cfg);

/* Called by handlers: schedule c to be closed once its output is written. */
void server_close_after_reply(client *c);

#endif
