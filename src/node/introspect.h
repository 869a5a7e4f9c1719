/* introspect.h - the hooks the server and dispatch call into the CLIENT /
 * MONITOR (cmd_client.c) and CONFIG (cmd_config.c) modules.
 */
#ifndef KEEL_INTROSPECT_H
#define KEEL_INTROSPECT_H

#include "node/cmd.h"

/* Feeds an executed command to every MONITOR client but x's own (admin
 * commands are not shown). Cheap when there are no monitors. */
void monitor_feed(cmd_ctx *x, const cmd_def *d);
/* 1 if d is fed to monitors before it runs rather than after: the script
 * commands (EVAL*, FCALL*), so that MONITOR shows them ahead of the
 * commands their script calls, as redis does. */
int monitor_feed_first(const cmd_def *d);
/* rserver on_close: forgets c if it was a monitor. */
void client_conn_closed(server *s, client *c);
void monitors_free(struct monitor_list *m);
void config_params_free(struct param_state *ps);
/* The current value of CONFIG parameter `name` (its canonical name), or
 * NULL if unknown or out of memory; valid until the next CONFIG SET. */
const char *config_value(server *s, const char *name);

#endif
