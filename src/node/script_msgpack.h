/* script_msgpack.h - the `cmsgpack` Lua module of EVAL scripts, as redis 7.0
 * embeds it (lua_cmsgpack.c 0.4), built over msgpack-c (Debian's
 * libmsgpack-dev: its packer, and its unpack_template.h state machine with
 * callbacks that build the Lua values on the Lua stack).
 *
 * API, for scripts (all errors are Lua errors with redis' texts):
 *   cmsgpack.pack(v1, ...) -> string
 *       The concatenated encodings of every argument. No argument:
 *       "bad argument #0 to 'pack' (MessagePack pack needs input.)".
 *   cmsgpack.unpack(s) -> v1, v2, ...
 *       Every object in s, as multiple returns ("" returns nothing).
 *   cmsgpack.unpack_one(s [, offset]) -> next_offset, v
 *   cmsgpack.unpack_limit(s, limit [, offset]) -> next_offset, v1..vlimit
 *       Decode from byte offset (0 based, default 0) at most 1 / limit
 *       objects; next_offset is where the next object starts, -1 once s is
 *       exhausted. unpack_limit(s, 0) with no offset is unpack(s) (redis'
 *       quirk: no offset returned). A negative offset or limit: "Invalid
 *       request to unpack with offset of O and limit of L." (redis prints
 *       the input length as L); offset past the end: "Start offset O
 *       greater than input length N."; truncated input: "Missing bytes in
 *       input."; a byte that is no type cmsgpack knows (0xc1, bin and ext
 *       types): "Bad data format in input."; more values than the Lua
 *       stack holds (about 8000): "stack overflow (too many return values
 *       at once; use unpack_one or unpack_limit instead.)" (or "... (in
 *       function mp_decode_to_lua_array)" when arrays nest that deep).
 *   Fields _NAME, _VERSION, _DESCRIPTION as redis' module has them.
 *
 * Encoding, as redis chooses it (so the bytes are redis' bytes):
 *   - nil, and functions/userdata/threads: nil (0xc0); booleans: 0xc2/0xc3.
 *   - a number n with (int64_t)n == n: the smallest msgpack int (positive
 *     fixint, uint 8/16/32/64 for n >= 0; negative fixint, int 8/16/32/64);
 *     otherwise float 32 (0xca) when (float)n == n (and for +-inf), else
 *     float 64 (0xcb); NaN is float 64.
 *   - a string: fixstr (< 32 bytes), str 8, str 16, str 32.
 *   - a table whose keys are exactly the integers 1..n (n >= 0): an array
 *     of its n values (fixarray/array 16/array 32); any other table: a map
 *     in lua_next order. A table nested 16 levels deep is packed as nil
 *     (so circular references terminate).
 * Decoding: ints and floats become Lua numbers, strings strings, nil nil,
 * arrays tables with keys 1..n, maps tables (a nil or NaN key is Lua's
 * "table index is nil/NaN" error, as in redis).
 *
 * A bin or ext value is "Bad data format" even when its bytes are cut
 * short (redis refuses the type byte before reading on; msgpack-c's parser
 * stops for lack of bytes, and its state says it stopped inside one).
 *
 * Known differences: keel's sandbox libraries (cjson, bit, redis, _G...)
 * are read-only proxies, empty tables with an __index, so packing one of
 * them gives an empty array where redis packs its functions as a map of
 * nils; the module table has no _COPYRIGHT field (this is not redis' code).
 *
 * Threads: only the thread that owns the Lua state; the module keeps one
 * process-wide scratch buffer and decoder context (the node runs one Lua
 * state, on the loop thread).
 */
#ifndef KEEL_SCRIPT_MSGPACK_H
#define KEEL_SCRIPT_MSGPACK_H

#include <lua.h>

/* lua_CFunction: pushes the module table (sets no global), returns 1.
 * Raises a Lua memory error if the table cannot be built. */
int script_msgpack_open(lua_State *L);

/* Frees the scratch buffers (server shutdown). Safe to call twice. */
void script_msgpack_release(void);

#endif
