/* script_msgpack.c - the cmsgpack Lua module (see script_msgpack.h for the
 * contract).
 *
 * Packing walks the Lua value on top of the stack the way redis'
 * lua_cmsgpack.c does (same table test, same nesting limit, same stack
 * checks) and writes through msgpack-c's packer into one scratch
 * msgpack_sbuffer; msgpack-c already picks the smallest int and str/array/
 * map header, which are redis' choices; the float 32 / float 64 choice is
 * made here.
 *
 * Unpacking instantiates msgpack-c's unpack_template.h, the state machine
 * behind msgpack_unpack_next, with callbacks that push Lua values instead
 * of building msgpack_objects. The parser is depth first, so the Lua stack
 * is the container stack: an array pushes its table and the index of its
 * next element, a map its table, then its key; each finished element is
 * stored with lua_settable. The stack therefore holds what redis' recursive
 * decoder holds at the same point, and luaL_checkstack before every value
 * stops at the same depth with the same message. The template's own
 * container stack is sized past what the Lua stack can hold (LUAI_MAXCSTACK
 * is 8000 slots, two per level), so the Lua limit is the one that applies.
 */
#define MSGPACK_EMBED_STACK_SIZE 8192
#include "node/script_msgpack.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <lauxlib.h>
#include <msgpack/pack.h>
#include <msgpack/sbuffer.h>
#include <msgpack/unpack.h> /* the MSGPACK_UNPACK_* codes */
#include <msgpack/unpack_define.h>

#define MP_MAX_NESTING 16          /* tables nested deeper pack as nil (redis) */
#define MP_SCRATCH_KEEP (1u << 20) /* scratch buffer kept between calls */

static const char STACK_MSG[] =
    "too many return values at once; use unpack_one or unpack_limit instead.";

/* ---- Packing ------------------------------------------------------------- */

static msgpack_sbuffer g_out; /* scratch: one pack argument's encoding */

static void pack_value(lua_State *L, msgpack_packer *pk, int level);

/* msgpack-c's packers return the write callback's result: 0, or -1 when
 * the scratch buffer cannot grow. */
static void check_write(lua_State *L, int rc) {
    if (rc != 0) luaL_error(L, "not enough memory");
}

/* (int64_t)n == n without the undefined conversion of an out-of-range n. */
static int is_int64(lua_Number n) {
    return n >= -9223372036854775808.0 && n < 9223372036854775808.0 && (lua_Number)(int64_t)n == n;
}

static void pack_number(lua_State *L, msgpack_packer *pk) {
    lua_Number n = lua_tonumber(L, -1);
    if (is_int64(n))
        check_write(L, msgpack_pack_int64(pk, (int64_t)n));
    else if (isinf(n) || (fabs(n) <= FLT_MAX && (lua_Number)(float)n == n))
        check_write(L, msgpack_pack_float(pk, (float)n));
    else
        check_write(L, msgpack_pack_double(pk, (double)n));
}

static void pack_string(lua_State *L, msgpack_packer *pk) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    check_write(L, msgpack_pack_str(pk, len));
    check_write(L, msgpack_pack_str_body(pk, s, len));
}

/* 1 if the table on top has exactly the keys 1..n (n >= 0), as redis'
 * table_is_an_array for Lua 5.1: number keys, > 0, int-valued. */
static int table_is_array(lua_State *L) {
    int top = lua_gettop(L);
    int count = 0, max = 0;
    luaL_checkstack(L, 2, "in function table_is_an_array");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        lua_Number n;
        if (lua_type(L, -1) != LUA_TNUMBER || (n = lua_tonumber(L, -1)) <= 0 || n > INT_MAX ||
            floor(n) != n) {
            lua_settop(L, top);
            return 0;
        }
        if ((int)n > max) max = (int)n;
        count++;
    }
    lua_settop(L, top);
    return max == count;
}

static void pack_table(lua_State *L, msgpack_packer *pk, int level) {
    if (table_is_array(L)) {
        size_t len = lua_objlen(L, -1);
        check_write(L, msgpack_pack_array(pk, len));
        luaL_checkstack(L, 1, "in function mp_encode_lua_table_as_array");
        for (size_t j = 1; j <= len; j++) {
            lua_pushnumber(L, (lua_Number)j);
            lua_gettable(L, -2);
            pack_value(L, pk, level + 1);
        }
        return;
    }
    size_t len = 0;
    luaL_checkstack(L, 3, "in function mp_encode_lua_table_as_map");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        len++;
    }
    check_write(L, msgpack_pack_map(pk, len));
    lua_pushnil(L);
    while (lua_next(L, -2)) { /* ... key value */
        lua_pushvalue(L, -2); /* ... key value key */
        pack_value(L, pk, level + 1);
        pack_value(L, pk, level + 1);
    }
}

/* Encodes the value on top of the stack and pops it. */
static void pack_value(lua_State *L, msgpack_packer *pk, int level) {
    int t = lua_type(L, -1);
    if (t == LUA_TTABLE && level == MP_MAX_NESTING) t = LUA_TNIL;
    switch (t) {
    case LUA_TSTRING:
        pack_string(L, pk);
        break;
    case LUA_TBOOLEAN:
        check_write(L, lua_toboolean(L, -1) ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
        break;
    case LUA_TNUMBER:
        pack_number(L, pk);
        break;
    case LUA_TTABLE:
        pack_table(L, pk, level);
        break;
    default:
        check_write(L, msgpack_pack_nil(pk));
        break;
    }
    lua_pop(L, 1);
}

static int l_pack(lua_State *L) {
    int nargs = lua_gettop(L);
    if (nargs == 0) return luaL_argerror(L, 0, "MessagePack pack needs input.");
    if (!lua_checkstack(L, nargs))
        return luaL_argerror(L, 0, "Too many arguments for MessagePack pack.");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &g_out, msgpack_sbuffer_write);
    for (int i = 1; i <= nargs; i++) {
        luaL_checkstack(L, 1, "in function mp_check");
        g_out.size = 0; /* an error above may have left bytes behind */
        lua_pushvalue(L, i);
        pack_value(L, &pk, 0);
        lua_pushlstring(L, g_out.data ? g_out.data : "", g_out.size);
        g_out.size = 0;
    }
    if (g_out.alloc > MP_SCRATCH_KEEP) script_msgpack_release();
    lua_concat(L, nargs);
    return 1;
}

/* ---- Unpacking: msgpack-c's template, values built on the Lua stack ----- */

/* The template's per-value object: the Lua stack holds the values, so
 * only a container's count of elements still to store lives here. */
typedef struct kmp_obj {
    unsigned left;
} kmp_obj;

#define msgpack_unpack_struct(name) struct kmp##name
#define msgpack_unpack_func(ret, name) static ret kmp##name
#define msgpack_unpack_callback(name) kmp_cb##name
#define msgpack_unpack_object kmp_obj
#define msgpack_unpack_user lua_State *

static inline kmp_obj kmp_cb_root(lua_State **u) {
    kmp_obj o = {0};
    return o;
}

static inline void need_slot(lua_State *L) {
    luaL_checkstack(L, 1, STACK_MSG);
}

static inline int push_num(lua_State *L, lua_Number n) {
    need_slot(L);
    lua_pushnumber(L, n);
    return 0;
}

static inline int kmp_cb_uint8(lua_State **u, uint8_t d, kmp_obj *o) {
    return push_num(*u, d);
}
static inline int kmp_cb_uint16(lua_State **u, uint16_t d, kmp_obj *o) {
    return push_num(*u, d);
}
static inline int kmp_cb_uint32(lua_State **u, uint32_t d, kmp_obj *o) {
    return push_num(*u, d);
}
/* redis pushes a uint 64 through lua_Integer: 2^63 and above wrap negative. */
static inline int kmp_cb_uint64(lua_State **u, uint64_t d, kmp_obj *o) {
    return push_num(*u, (lua_Number)(int64_t)d);
}
static inline int kmp_cb_int8(lua_State **u, int8_t d, kmp_obj *o) {
    return push_num(*u, d);
}
static inline int kmp_cb_int16(lua_State **u, int16_t d, kmp_obj *o) {
    return push_num(*u, d);
}
static inline int kmp_cb_int32(lua_State **u, int32_t d, kmp_obj *o) {
    return push_num(*u, d);
}
static inline int kmp_cb_int64(lua_State **u, int64_t d, kmp_obj *o) {
    return push_num(*u, (lua_Number)d);
}
static inline int kmp_cb_float(lua_State **u, float d, kmp_obj *o) {
    return push_num(*u, d);
}
static inline int kmp_cb_double(lua_State **u, double d, kmp_obj *o) {
    return push_num(*u, d);
}

static inline int kmp_cb_nil(lua_State **u, kmp_obj *o) {
    need_slot(*u);
    lua_pushnil(*u);
    return 0;
}
static inline int kmp_cb_true(lua_State **u, kmp_obj *o) {
    need_slot(*u);
    lua_pushboolean(*u, 1);
    return 0;
}
static inline int kmp_cb_false(lua_State **u, kmp_obj *o) {
    need_slot(*u);
    lua_pushboolean(*u, 0);
    return 0;
}

/* Stack after: ... table 1 (the index of the first element), when n > 0. */
static inline int kmp_cb_array(lua_State **u, unsigned n, kmp_obj *o) {
    need_slot(*u);
    lua_newtable(*u);
    luaL_checkstack(*u, 1, "in function mp_decode_to_lua_array");
    o->left = n;
    if (n) lua_pushnumber(*u, 1);
    return 0;
}
/* Stack: ... table index value -> ... table [next index]. */
static inline int kmp_cb_array_item(lua_State **u, kmp_obj *c, kmp_obj o) {
    lua_Number next = lua_tonumber(*u, -2) + 1;
    lua_settable(*u, -3);
    if (--c->left) lua_pushnumber(*u, next);
    return 0;
}
static inline int kmp_cb_map(lua_State **u, unsigned n, kmp_obj *o) {
    need_slot(*u);
    lua_newtable(*u);
    o->left = n;
    return 0;
}
/* Stack: ... table key value -> ... table. */
static inline int kmp_cb_map_item(lua_State **u, kmp_obj *c, kmp_obj k, kmp_obj v) {
    lua_settable(*u, -3);
    return 0;
}
static inline int kmp_cb_str(lua_State **u, const char *b, const char *p, unsigned l, kmp_obj *o) {
    need_slot(*u);
    lua_pushlstring(*u, p, l);
    return 0;
}
/* redis' cmsgpack knows no bin or ext type: "Bad data format". */
static inline int kmp_cb_bin(lua_State **u, const char *b, const char *p, unsigned l, kmp_obj *o) {
    return MSGPACK_UNPACK_PARSE_ERROR;
}
static inline int kmp_cb_ext(lua_State **u, const char *b, const char *p, unsigned l, kmp_obj *o) {
    return MSGPACK_UNPACK_PARSE_ERROR;
}

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#pragma clang diagnostic ignored "-Wsign-compare"
#pragma clang diagnostic ignored "-Wimplicit-fallthrough"
#include <msgpack/unpack_template.h>
#pragma clang diagnostic pop

/* The decoder context: ~200 KiB with its container stack, so one for the
 * process (one Lua state, one thread; see the header) instead of one per
 * call on the C stack. A Lua error leaves it mid-parse: kmp_init resets
 * it before each object. */
static struct kmp_context g_ctx;

/* 1 if the parser stopped for lack of bytes inside a bin or ext value:
 * redis refuses those at their type byte, so that is a format error. */
static int stopped_in_refused_type(unsigned cs) {
    return (cs >= MSGPACK_CS_BIN_8 && cs <= MSGPACK_CS_EXT_32) ||
           (cs >= MSGPACK_CS_FIXEXT_1 && cs <= MSGPACK_CS_FIXEXT_16) ||
           cs == MSGPACK_ACS_BIN_VALUE || cs == MSGPACK_ACS_EXT_VALUE;
}

static int unpack_full(lua_State *L, lua_Integer limit, lua_Integer offset) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    int decode_all = !limit && !offset;
    if (offset < 0 || limit < 0)
        return luaL_error(L, "Invalid request to unpack with offset of %d and limit of %d.",
                          (int)offset, (int)len);
    if ((size_t)offset > len)
        return luaL_error(L, "Start offset %d greater than input length %d.", (int)offset,
                          (int)len);
    if (decode_all) limit = INT_MAX;
    size_t off = (size_t)offset;
    int cnt;
    for (cnt = 0; off < len && cnt < limit; cnt++) {
        kmp_init(&g_ctx);
        g_ctx.user = L;
        int rc = kmp_execute(&g_ctx, s, len, &off);
        if (rc == 0 && !stopped_in_refused_type(g_ctx.cs))
            return luaL_error(L, "Missing bytes in input.");
        if (rc <= 0) return luaL_error(L, "Bad data format in input.");
    }
    if (!decode_all) {
        luaL_checkstack(L, 1, "in function mp_unpack_full");
        lua_pushinteger(L, off == len ? -1 : (lua_Integer)off);
        lua_insert(L, 2);
        cnt++;
    }
    return cnt;
}

static int l_unpack(lua_State *L) {
    return unpack_full(L, 0, 0);
}

static int l_unpack_one(lua_State *L) {
    lua_Integer offset = luaL_optinteger(L, 2, 0);
    lua_pop(L, lua_gettop(L) - 1);
    return unpack_full(L, 1, offset);
}

static int l_unpack_limit(lua_State *L) {
    lua_Integer limit = luaL_checkinteger(L, 2);
    lua_Integer offset = luaL_optinteger(L, 3, 0);
    lua_pop(L, lua_gettop(L) - 1);
    return unpack_full(L, limit, offset);
}

/* ---- Module -------------------------------------------------------------- */

int script_msgpack_open(lua_State *L) {
    static const luaL_Reg fns[] = {{"pack", l_pack},
                                   {"unpack", l_unpack},
                                   {"unpack_one", l_unpack_one},
                                   {"unpack_limit", l_unpack_limit},
                                   {NULL, NULL}};
    lua_newtable(L);
    for (const luaL_Reg *f = fns; f->name; f++) {
        lua_pushcfunction(L, f->func);
        lua_setfield(L, -2, f->name);
    }
    lua_pushliteral(L, "cmsgpack");
    lua_setfield(L, -2, "_NAME");
    lua_pushliteral(L, "lua-cmsgpack 0.4.0");
    lua_setfield(L, -2, "_VERSION");
    lua_pushliteral(L, "MessagePack C implementation for Lua");
    lua_setfield(L, -2, "_DESCRIPTION");
    return 1;
}

void script_msgpack_release(void) {
    msgpack_sbuffer_destroy(&g_out);
    msgpack_sbuffer_init(&g_out);
}
