/* test-script_msgpack.c - the cmsgpack Lua module (node/script_msgpack) in a
 * bare Lua state: the exact bytes redis 7.0's lua_cmsgpack produces (values
 * taken from redis-server; tests/integration/test_scripting compares many
 * more scripts against a live one), offsets, and the error texts. Runs under
 * ASan with the other unit tests, for the decoder's bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "node/script_msgpack.h"

static const char PRELUDE[] =
    "local function hex(s) local h = {} for i = 1, #s do "
    "h[i] = string.format('%02x', string.byte(s, i)) end return table.concat(h) end\n";

static char g_out[4096];

/* Runs PRELUDE .. body in a fresh state; returns its first result as text,
 * or "ERR " and the error message. */
static const char *run(const char *body) {
    lua_State *L = luaL_newstate();
    assert_non_null(L);
    luaL_openlibs(L);
    lua_pushcfunction(L, script_msgpack_open);
    lua_call(L, 0, 1);
    lua_setglobal(L, "cmsgpack");
    char code[8192];
    snprintf(code, sizeof code, "%s%s", PRELUDE, body);
    if (luaL_loadstring(L, code) || lua_pcall(L, 0, 1, 0)) {
        snprintf(g_out, sizeof g_out, "ERR %s", lua_tostring(L, -1));
    } else {
        const char *s = lua_tostring(L, -1);
        snprintf(g_out, sizeof g_out, "%s", s ? s : "(nil)");
    }
    lua_close(L);
    return g_out;
}

/* scripting.tcl's two pinned encodings, and ints of each width. */
static void pack_ints(void **st) {
    static const char *const cases[][2] = {
        {"0", "00"},
        {"127", "7f"},
        {"128", "cc80"},
        {"256", "cd0100"},
        {"65536", "ce00010000"},
        {"2^32", "cf0000000100000000"},
        {"-1", "ff"},
        {"-32", "e0"},
        {"-33", "d0df"},
        {"-129", "d1ff7f"},
        {"-32769", "d2ffff7fff"},
        {"-1099511627776", "d3ffffff0000000000"},
        {"-2^63", "d38000000000000000"},
        {"-0.0", "00"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char body[128];
        snprintf(body, sizeof body, "return hex(cmsgpack.pack(%s))", cases[i][0]);
        assert_string_equal(run(body), cases[i][1]);
    }
}

/* float 32 when exact, float 64 otherwise; 2^63 is no int64. */
static void pack_floats(void **st) {
    assert_string_equal(run("return hex(cmsgpack.pack(0.1))"), "cb3fb999999999999a");
    assert_string_equal(run("return hex(cmsgpack.pack(0.5))"), "ca3f000000");
    assert_string_equal(run("return hex(cmsgpack.pack(1/0))"), "ca7f800000");
    assert_string_equal(run("return hex(cmsgpack.pack(2^63))"), "ca5f000000");
    assert_string_equal(run("return hex(cmsgpack.pack(1e300))"), "cb7e37e43c8800759c");
}

static void pack_strings_and_tables(void **st) {
    assert_string_equal(run("return hex(cmsgpack.pack(''))"), "a0");
    assert_string_equal(run("return hex(cmsgpack.pack(string.rep('x', 32)):sub(1, 2))"), "d920");
    assert_string_equal(run("return hex(cmsgpack.pack(string.rep('x', 256)):sub(1, 3))"), "da0100");
    assert_string_equal(run("return hex(cmsgpack.pack(string.rep('x', 65536)):sub(1, 5))"),
                        "db00010000");
    assert_string_equal(run("return hex(cmsgpack.pack({}))"), "90");
    assert_string_equal(run("return hex(cmsgpack.pack({1, 'a', true, false}))"), "9401a161c3c2");
    assert_string_equal(run("return hex(cmsgpack.pack({a = 1}))"), "81a16101");
    assert_string_equal(run("return hex(cmsgpack.pack({[0] = 1}))"), "810001");
    assert_string_equal(run("return hex(cmsgpack.pack(nil, print))"), "c0c0");
    /* A table holding itself: 16 levels, then nil. */
    char want[64] = "";
    for (int i = 0; i < 16; i++)
        strcat(want, "91");
    strcat(want, "c0");
    assert_string_equal(run("local t = {} t[1] = t return hex(cmsgpack.pack(t))"), want);
}

static void unpack_offsets(void **st) {
    assert_string_equal(run("local a, b, c = cmsgpack.unpack(cmsgpack.pack(1, 'x', {2}))"
                            " return a .. b .. c[1]"),
                        "1x2");
    assert_string_equal(run("return select('#', cmsgpack.unpack(''))"), "0");
    assert_string_equal(run("local s = cmsgpack.pack('a', 'bb') local o, v = cmsgpack.unpack_one(s)"
                            " local o2, v2 = cmsgpack.unpack_one(s, o) return o .. v .. o2 .. v2"),
                        "2a-1bb");
    assert_string_equal(run("local s = cmsgpack.pack(1, 2, 3, 4) "
                            "return table.concat({cmsgpack.unpack_limit(s, 2, 1)}, ',')"),
                        "3,2,3");
    /* limit 0 without offset is unpack: no offset first. */
    assert_string_equal(
        run("return table.concat({cmsgpack.unpack_limit(cmsgpack.pack(7, 8), 0)}, ',')"), "7,8");
    /* uint 64 wraps through lua_Integer as in redis. */
    assert_string_equal(
        run("return cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')"), "-1");
    assert_string_equal(run("local t = cmsgpack.unpack('\\222\\0\\1\\161k\\202\\63\\192\\0\\0')"
                            " return t.k"),
                        "1.5");
    assert_string_equal(run("local t = cmsgpack.unpack(string.rep('\\145', 300) .. '\\7')"
                            " for i = 1, 300 do t = t[1] end return t"),
                        "7");
}

static void errors(void **st) {
    assert_non_null(strstr(run("cmsgpack.pack()"),
                           "bad argument #0 to 'pack' (MessagePack pack needs input.)"));
    assert_non_null(strstr(run("cmsgpack.unpack('\\146\\1')"), "Missing bytes in input."));
    assert_non_null(strstr(run("cmsgpack.unpack('\\193')"), "Bad data format in input."));
    assert_non_null(strstr(run("cmsgpack.unpack('\\196\\1a')"), "Bad data format in input."));
    assert_non_null(strstr(run("cmsgpack.unpack('\\196\\9a')"), "Bad data format in input."));
    assert_non_null(strstr(run("cmsgpack.unpack('\\214\\1ab')"), "Bad data format in input."));
    assert_non_null(strstr(run("cmsgpack.unpack_one('\\1\\2', -1)"),
                           "Invalid request to unpack with offset of -1 and limit of 2."));
    assert_non_null(strstr(run("cmsgpack.unpack_one('\\1\\2', 3)"),
                           "Start offset 3 greater than input length 2."));
    assert_non_null(
        strstr(run("cmsgpack.unpack_limit('\\1')"), "bad argument #2 to 'unpack_limit'"));
    assert_non_null(
        strstr(run("cmsgpack.unpack(string.rep('\\1', 9000))"), "too many return values at once"));
    assert_non_null(strstr(run("cmsgpack.unpack(string.rep('\\145', 9000))"),
                           "in function mp_decode_to_lua_array"));
    assert_non_null(strstr(run("cmsgpack.unpack(string.rep('\\129', 9000))"), "stack overflow"));
    assert_non_null(strstr(run("cmsgpack.unpack('\\129\\192\\1')"), "table index is nil"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pack_ints),
        cmocka_unit_test(pack_floats),
        cmocka_unit_test(pack_strings_and_tables),
        cmocka_unit_test(unpack_offsets),
        cmocka_unit_test(errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    script_msgpack_release();
    return rc;
}
