/* move_wire.c - stream record codec; see move_wire.h. */
#include "node/move_wire.h"

void move_be16(char *p, unsigned v) {
    p[0] = (char)(v >> 8), p[1] = (char)v;
}
void move_be32(char *p, uint32_t v) {
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (char)v;
}
void move_be64(char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (char)v;
}
uint64_t move_rd(const char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | (uint8_t)p[i];
    return v;
}

int move_put_record(kbuf *b, unsigned slot, const char *k, size_t klen, const char *v,
                    size_t vlen) {
    char h[6];
    move_be16(h, slot);
    move_be32(h + 2, (uint32_t)klen);
    char l[4];
    move_be32(l, v ? (uint32_t)vlen : MOVE_DEL);
    if (kbuf_append(b, h, 6) || kbuf_append(b, k, klen) || kbuf_append(b, l, 4)) return -1;
    return v ? kbuf_append(b, v, vlen) : 0;
}

size_t move_get_record(const char *p, size_t n, unsigned *slot, const char **k, size_t *klen,
                       const char **v, size_t *vlen) {
    if (n < 10) return 0;
    *slot = (unsigned)move_rd(p, 2);
    *klen = (size_t)move_rd(p + 2, 4);
    if (*slot >= 16384 || *klen > n - 10) return 0;
    *k = p + 6;
    uint32_t vl = (uint32_t)move_rd(p + 6 + *klen, 4);
    size_t used = 10 + *klen;
    if (vl == MOVE_DEL) {
        *v = NULL, *vlen = 0;
        return used;
    }
    if (vl > n - used) return 0;
    *v = p + used, *vlen = vl;
    return used + vl;
}
