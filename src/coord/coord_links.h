/* coord_links.h - the coordinator's directive connections to nodes.
 *
 * One authenticated peer connection per node (net/peerlink), dialled on
 * demand to the node's client port, where the coordinator proves the
 * cluster secret under the id "coordinator" and signs the handshake with its
 * Ed25519 key (core/coordkey). A link that drops is closed on the next use
 * and redialled, at most every COORD_LINK_REDIAL_MS. Each time a link
 * becomes ready its generation goes up and on_ready runs, so the executor
 * can ask the node what it holds (a node that restarted lost its moves).
 *
 * Used by the move executor (coord_move.c). Loop thread only.
 */
#ifndef KEEL_COORD_LINKS_H
#define KEEL_COORD_LINKS_H

#include <stdint.h>

#include "coord/coord_int.h"
#include "net/peerlink.h"

#define COORD_LINK_REDIAL_MS 500

typedef struct coord_link {
    char id[KEEL_ID_MAX + 1]; /* the node */
    peerlink *pl;             /* NULL while not dialled */
    int ready, dead;          /* handshake done; dropped (closed on the next use) */
    unsigned gen;             /* +1 each time the link becomes ready */
    int want_reconcile;       /* the node registered: keep dialling until it is asked */
    int64_t retry_ms;         /* coord_now() before which no redial */
    struct coord_links *set;  /* the set it belongs to */
    struct coord_link *next;
} coord_link;

typedef struct coord_links {
    coord *co;
    coord_link *head;
    int stopping;
    void (*on_ready)(void *arg, coord_link *l); /* the link just became ready */
    void *arg;
} coord_links;

/* Starts an empty set. on_ready (may be NULL) gets arg. */
void coord_links_init(coord_links *s, coord *co, void (*on_ready)(void *, coord_link *), void *arg);
/* Closes every link; callbacks still in flight do nothing afterwards. */
void coord_links_close(coord_links *s);
/* The link record for node id (created if new, not dialled). NULL on ENOMEM. */
coord_link *coord_links_get(coord_links *s, const char *id);
/* The link to node id if it is ready; otherwise starts or continues dialling
 * (unless the node is unknown or REMOVED) and returns NULL. now: coord_now(). */
coord_link *coord_links_ready_for(coord_links *s, const char *id, int64_t now);

#endif
