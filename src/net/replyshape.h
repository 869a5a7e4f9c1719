/* replyshape.h - checks a peer's reply before any field of it is read
 * (issue 10, defect 2).
 *
 * A reply from another node or from the coordinator is peer input: an
 * element that should be an integer may be a string, nil or an array, and
 * reading ->integer, ->str or ->element of the wrong type either reads
 * garbage or walks off the end. Every reply handler first asks
 * reply_shape() whether the reply has the shape it expects, then reads.
 *
 * A shape is a string with one character per element of an array reply:
 *
 *   i  integer            s  bulk or simple string
 *   n  nil                S  string or nil
 *   a  array              .  anything
 *
 * Threads: pure; any thread.
 */
#ifndef KEEL_REPLYSHAPE_H
#define KEEL_REPLYSHAPE_H

#include <hiredis/hiredis.h>

/* 1 if r is an array of exactly strlen(shape) elements whose types match
 * shape, else 0 (also for r NULL). */
int reply_shape(const redisReply *r, const char *shape);

/* 1 if r is an element of type c (one character of a shape), else 0. */
int reply_is(const redisReply *r, char c);

#endif
