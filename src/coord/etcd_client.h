/* etcd_client.h - a small client for etcd v3's JSON gateway (etcd 3.4:
 * POST /v3/kv/range, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive,
 * /v3/lease/revoke), over libcurl, with requests run on a thread of the
 * client's own.
 *
 * Why a thread. The coordinator's event loop must never wait on an etcd
 * member that has stopped answering. Each client owns one worker thread that
 * does the HTTP; a caller hands it a request and waits for the answer at most
 * `timeout_ms` (a condition variable with a deadline). When the deadline
 * passes the caller gets KEEL_EUNKNOWN at once and the worker finishes (or
 * times out) the request on its own, throwing the answer away. So a call
 * blocks its caller for at most timeout_ms + a few ms, never longer; what
 * remains synchronous, and why that is acceptable, is in docs/coordinator.md.
 *
 * Endpoints. `urls` is a comma-separated list ("http://127.0.0.1:2379,...").
 * A request goes to the endpoint that last answered; when it cannot connect
 * (nothing was sent) the worker tries the next one, so one dead member costs
 * one refused connect. Once a request may have been sent, it is never resent
 * to another member: its outcome is the caller's to reconcile.
 *
 * Wire format. Keys and values are base64 (etcd_b64 helpers below); 64-bit
 * integers are JSON strings; fields that are zero or false are omitted from
 * answers (etcd_json_i64 treats a missing field as 0).
 *
 * Errors:
 *   KEEL_EIO      no endpoint could be connected to (nothing was sent), or
 *                 etcd refused the request with a 4xx answer (it did nothing)
 *   KEEL_EUNKNOWN the request may have reached etcd but no answer came in
 *                 time, the connection broke, or etcd answered 5xx (e.g.
 *                 "request timed out", "leader changed"): it may or may not
 *                 have been applied
 *   KEEL_EPROTO   the answer was not the JSON object expected
 *   KEEL_ENOMEM
 *
 * Threads: a client may be used from one thread at a time (its owner); the
 * worker is internal. Distinct clients are independent (the election's
 * keepalive uses a client of its own so it never queues behind map writes).
 */
#ifndef KEEL_ETCD_CLIENT_H
#define KEEL_ETCD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct cJSON;
typedef struct etcd_client etcd_client;

#define ETCD_URLS_MAX 8
#define ETCD_ERR_MAX 256

/* Test hooks for one request (etcd_post_ex): drop it without sending, or
 * send it and then lose the answer. Either way the call returns
 * KEEL_EUNKNOWN, which is what a real timeout looks like to the caller. */
enum { ETCD_FAULT_NONE = 0, ETCD_FAULT_DROP, ETCD_FAULT_LOSE_REPLY };

/* Starts a client (and its worker thread) on urls, copied. timeout_ms bounds
 * every call (100..60000). Errors: KEEL_EINVAL (no URL, more than
 * ETCD_URLS_MAX, a URL not starting http://), KEEL_ENOMEM, KEEL_EIO (thread
 * or libcurl failed to start); err gets the reason. */
KEEL_MUST_CHECK int etcd_client_new(const char *urls, int timeout_ms, etcd_client **out, char *err,
                                    size_t errcap);
/* Stops the worker (waits for a request in progress, at most its timeout)
 * and frees the client. NULL is a no-op. */
void etcd_client_free(etcd_client *c);

/* POSTs body (JSON text, borrowed) to path ("/v3/kv/txn") and parses the
 * answer into *reply (caller frees with cJSON_Delete; NULL on failure).
 * Errors above. On failure etcd_client_errmsg says why. */
KEEL_MUST_CHECK int etcd_post(etcd_client *c, const char *path, const char *body,
                              struct cJSON **reply);
/* etcd_post with a test fault (ETCD_FAULT_*). */
KEEL_MUST_CHECK int etcd_post_ex(etcd_client *c, const char *path, const char *body, int fault,
                                 struct cJSON **reply);
/* Posts a cJSON body (borrowed), printing it first. */
KEEL_MUST_CHECK int etcd_post_json(etcd_client *c, const char *path, const struct cJSON *body,
                                   struct cJSON **reply);
/* The reason for the last failure; valid until the next call. */
const char *etcd_client_errmsg(const etcd_client *c);
/* The endpoint that answered last (for logs). */
const char *etcd_client_endpoint(const etcd_client *c);

/* ---- Helpers (any thread) ------------------------------------------------ */

/* base64 of n bytes of s into a malloc'd NUL-terminated string; NULL on
 * ENOMEM. */
char *etcd_b64(const void *s, size_t n);
/* Decodes base64 text; *out malloc'd with a NUL after the *n bytes.
 * Errors: KEEL_EPROTO (not base64), KEEL_ENOMEM. */
int etcd_unb64(const char *s, char **out, size_t *n);
/* A 64-bit field of an answer: a JSON string of digits, a number, or absent
 * (0: the gateway omits zero fields). */
int64_t etcd_json_i64(const struct cJSON *obj, const char *name);
/* The header.revision of an answer (0 if absent). */
int64_t etcd_revision(const struct cJSON *reply);
/* The key that sorts after every key starting with prefix (a range_end),
 * malloc'd; NULL on ENOMEM. */
char *etcd_prefix_end(const char *prefix);

/* Builders for txn bodies (all add to an existing cJSON object/array and
 * return it, or NULL on ENOMEM). Keys and values are plain text here and
 * base64-encoded on the way in. */
struct cJSON *etcd_cmp(struct cJSON *arr, const char *key, const char *target, const char *result,
                       int64_t value);
struct cJSON *etcd_op_put(struct cJSON *arr, const char *key, const char *value, int64_t lease);
struct cJSON *etcd_op_del(struct cJSON *arr, const char *key);
struct cJSON *etcd_op_get(struct cJSON *arr, const char *key);

#endif
