/* list.h - list operations cmd_list.c shares with the blocking forms
 * (cmd_blocking.c). Each runs its own store txn on x->slot and, where it
 * says so, replies to x->out. Loop thread only. */
#ifndef KEEL_NODE_LIST_H
#define KEEL_NODE_LIST_H

#include <stddef.h>

#include "core/buf.h"
#include "node/cmd.h"

/* What key k holds, replying nothing: 1 a list (never empty), 0 nothing
 * (absent or expired), -2 another type; -1 after replying a storage
 * error. */
int list_peek(cmd_ctx *x, const char *k, size_t kl);

/* Pops up to count (> 0) elements from the left or right end of list k
 * and appends them, as bulk strings, to out (not x->out). Returns the
 * number popped, 0 when k holds nothing (nothing replied), or -1 after
 * replying to x->out (-WRONGTYPE, a storage error; out unchanged). */
long list_pop_n(cmd_ctx *x, const char *k, size_t kl, int left, long long count, kbuf *out);

/* LMOVE sk dk: returns 0 when sk holds nothing (nothing replied), else 1
 * after replying the moved element, -WRONGTYPE (sk or dk; nothing moved)
 * or a storage error. */
int list_move(cmd_ctx *x, const char *sk, size_t skl, const char *dk, size_t dkl, int from_left,
              int to_left);

#endif
