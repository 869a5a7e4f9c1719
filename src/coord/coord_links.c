/* coord_links.c - see coord_links.h. */
#include "coord/coord_links.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coordkey.h"
#include "core/err.h"
#include "core/log.h"

void coord_links_init(coord_links *s, coord *co, void (*on_ready)(void *, coord_link *),
                      void *arg) {
    memset(s, 0, sizeof *s);
    s->co = co;
    s->on_ready = on_ready;
    s->arg = arg;
}

void coord_links_close(coord_links *s) {
    s->stopping = 1;
    for (coord_link *l = s->head, *next; l; l = next) {
        next = l->next;
        peerlink_close(l->pl);
        free(l);
    }
    s->head = NULL;
}

coord_link *coord_links_get(coord_links *s, const char *id) {
    for (coord_link *l = s->head; l; l = l->next)
        if (!strcmp(l->id, id)) return l;
    coord_link *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    snprintf(l->id, sizeof l->id, "%s", id);
    l->set = s;
    l->next = s->head;
    s->head = l;
    return l;
}

/* The coordinator key proof (peerlink cbs.sign): the node accepts directives
 * only from a peer that signs the handshake with the key it pinned. */
static int link_sign(void *arg, const unsigned char *binding, size_t n, char *sig_hex) {
    coord_links *s = ((coord_link *)arg)->set;
    if (s->stopping || !s->co->key) return KEEL_EINVAL;
    return coordkey_sign(s->co->key, "client", binding, n, sig_hex);
}

static void link_ready(void *arg, peerlink *pl) {
    coord_link *l = arg;
    l->ready = 1;
    l->gen++;
    keel_log(KEEL_LOG_INFO, "node_link_ready", "node=%s addr=%s", l->id, peerlink_addr(pl));
    if (!l->set->stopping && l->set->on_ready) l->set->on_ready(l->set->arg, l);
}

static void link_down(void *arg, peerlink *pl, const char *why) {
    (void)pl;
    coord_link *l = arg;
    if (l->ready) keel_log(KEEL_LOG_WARN, "node_link_lost", "node=%s reason=%s", l->id, why);
    l->ready = 0;
    l->dead = 1;
}

coord_link *coord_links_ready_for(coord_links *s, const char *id, int64_t now) {
    coord_link *l = coord_links_get(s, id);
    if (!l) return NULL;
    if (l->dead) { /* closed here, after hiredis ran its callbacks (link_down) */
        peerlink_close(l->pl);
        l->pl = NULL;
        l->dead = 0;
    }
    if (l->pl) return l->ready ? l : NULL;
    if (now < l->retry_ms) return NULL;
    mapstore_node n;
    if (mapstore_node_get(s->co->ms, id, &n) || n.membership == MAPSTORE_MEMBER_REMOVED)
        return NULL;
    peerlink_cbs cbs = {.on_ready = link_ready, .on_down = link_down, .sign = link_sign};
    l->retry_ms = now + COORD_LINK_REDIAL_MS;
    l->pl = peerlink_open(s->co->loop, n.host, n.port, COORD_ID, id, &s->co->secret, &cbs, l);
    return NULL;
}
