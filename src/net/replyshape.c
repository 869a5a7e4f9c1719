/* replyshape.c - see replyshape.h. */
#include "net/replyshape.h"

#include <string.h>

int reply_is(const redisReply *r, char c) {
    if (!r) return 0;
    switch (c) {
    case 'i':
        return r->type == REDIS_REPLY_INTEGER;
    case 's':
        return (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->str;
    case 'n':
        return r->type == REDIS_REPLY_NIL;
    case 'S':
        return r->type == REDIS_REPLY_NIL || ((r->type == REDIS_REPLY_STRING) && r->str);
    case 'a':
        return r->type == REDIS_REPLY_ARRAY;
    case '.':
        return 1;
    default:
        return 0;
    }
}

int reply_shape(const redisReply *r, const char *shape) {
    size_t n = strlen(shape);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != n || (n && !r->element)) return 0;
    for (size_t i = 0; i < n; i++)
        if (!reply_is(r->element[i], shape[i])) return 0;
    return 1;
}
