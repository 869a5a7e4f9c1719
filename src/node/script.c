/* script.c - the Lua engine (see script.h for the contract).
 *
 * Layout of the Lua state. The real globals table G holds the libraries
 * (each replaced by a read-only proxy), the redis table (a proxy too), KEYS
 * and ARGV; its metatable's __index raises "Script attempted to access
 * nonexistent global variable". Scripts do not see G: their environment is
 * E, an empty read-only proxy of G, and G._G is E. The registry holds the
 * compiled scripts (REG_SCRIPTS, sha -> function), the functions of
 * FUNCTION LOAD (REG_FUNCS, name -> {fn, lib, ro}) and the error handler
 * (redis' __redis__err__handler, turning an error into a table with err,
 * source and line).
 *
 * A run. script_eval/script_fcall set e->run (the caller's context, the
 * slot the script is bound to, read-only, dirty, killed), install a count
 * hook and pcall the function. redis.call builds an argv, applies redis'
 * script checks, runs the handler through cmd_call with a private output
 * buffer and a private client (so SELECT, CLIENT SETNAME... do not touch
 * the caller), and converts the RESP reply back with keel's resp_reader.
 */
#include "node/script.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "node/multi.h"
#include "node/script_msgpack.h"

#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <lua-bitop.h>
#include <lua-cjson.h>

#define REG_SCRIPTS "keel_scripts"
#define REG_FUNCS "keel_funcs"
#define REG_LIBS "keel_libs"
#define REG_ERRH "keel_errh"
#define REG_RO "keel_readonly" /* set of read-only proxies */
#define HOOK_EVERY 100000      /* Lua instructions between time checks, as redis */
#define DEFAULT_BUSY_MS 5000

enum {
    SF_NO_WRITES = 1,
    SF_ALLOW_OOM = 2,
    SF_ALLOW_STALE = 4,
    SF_NO_CLUSTER = 8,
    SF_CROSS_SLOT = 16,
    SF_COMPAT = 32
};

typedef struct script_run {
    cmd_ctx *caller;
    const char *funcname; /* sha or function name, for error replies */
    int ro, dirty, killed, timed_out, is_eval, proto;
    int has_slot;
    unsigned slot, partition;
    uint64_t start_ms;
} script_run;

struct script_engine {
    lua_State *L;
    server *srv;
    script_run *run;
    int loading;     /* FUNCTION LOAD running the library body */
    const char *lib; /* the library being loaded */
    size_t nscripts;
    client fake; /* the client redis.call's commands see */
    resp_reader *reader;
    long long busy_ms;
};

static script_engine *g_engine; /* one per process: the node's */

static const char *const lib_names[] = {"string",   "table",     "math",  "cjson", "bit",
                                        "cmsgpack", "coroutine", "redis", NULL};

/* ---- Errors -------------------------------------------------------------- */

/* Pushes redis' error table for msg: "-CODE text" keeps CODE, otherwise
 * the code is ERR (luaPushErrorBuff). */
static void push_error(lua_State *L, const char *msg) {
    char buf[1024];
    if (msg[0] == '-') {
        const char *sp = strchr(msg, ' ');
        if (sp)
            snprintf(buf, sizeof buf, "%.*s %s", (int)(sp - msg - 1), msg + 1, sp + 1);
        else
            snprintf(buf, sizeof buf, "ERR %s", msg + 1);
    } else {
        snprintf(buf, sizeof buf, "ERR %s", msg);
    }
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\r' || buf[n - 1] == '\n'))
        buf[--n] = 0;
    lua_newtable(L);
    lua_pushstring(L, "err");
    lua_pushstring(L, buf);
    lua_rawset(L, -3);
}

static int raise_error(lua_State *L, const char *msg) {
    push_error(L, msg);
    return lua_error(L);
}

static int l_readonly_error(lua_State *L) {
    return luaL_error(L, "Attempt to modify a readonly table");
}

static int l_global_missing(lua_State *L) {
    const char *k = lua_tostring(L, 2);
    return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
                      k ? k : "?");
}

/* ---- Sandbox ------------------------------------------------------------- */

static int is_readonly(lua_State *L, int idx) {
    if (!lua_istable(L, idx)) return 0;
    lua_pushvalue(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_RO);
    lua_insert(L, -2);
    lua_rawget(L, -2);
    int ro = lua_toboolean(L, -1);
    lua_pop(L, 2);
    return ro;
}

/* Replaces the table on top of the stack by a read-only proxy of it. */
static void make_proxy(lua_State *L) {
    lua_newtable(L); /* t proxy */
    lua_newtable(L); /* t proxy mt */
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_readonly_error);
    lua_setfield(L, -2, "__newindex");
    lua_getfield(L, LUA_REGISTRYINDEX, "keel_ro_meta");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2); /* t proxy */
    lua_getfield(L, LUA_REGISTRYINDEX, REG_RO);
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_remove(L, -2); /* proxy */
}

static int l_setmetatable(lua_State *L) {
    if (is_readonly(L, 1)) return luaL_error(L, "Attempt to modify a readonly table");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static int l_rawset(lua_State *L) {
    if (is_readonly(L, 1)) return luaL_error(L, "Attempt to modify a readonly table");
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

/* ---- Lua -> RESP (a script's return value) ------------------------------ */

static void reply_from_lua(lua_State *L, kbuf *out, int proto, int script_proto);

static int field_type(lua_State *L, const char *k) {
    lua_pushstring(L, k);
    lua_rawget(L, -2);
    return lua_type(L, -1);
}

static void reply_table(lua_State *L, kbuf *out, int proto, int sp) {
    if (field_type(L, "err") == LUA_TSTRING) {
        resp_w_error(out, lua_tostring(L, -1));
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    if (field_type(L, "ok") == LUA_TSTRING) {
        resp_w_simple(out, lua_tostring(L, -1)); /* CR/LF cannot be in it: keel maps them */
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    if (field_type(L, "double") == LUA_TNUMBER) {
        resp_w_double(out, proto, lua_tonumber(L, -1));
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    if (field_type(L, "big_number") == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        if (proto == 3)
            kbuf_printf(out, "(%.*s\r\n", (int)n, s);
        else
            resp_w_bulk(out, s, n);
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    if (field_type(L, "verbatim_string") == LUA_TTABLE) {
        lua_getfield(L, -1, "format");
        lua_getfield(L, -2, "string");
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
            size_t n;
            const char *s = lua_tolstring(L, -1, &n);
            char fmt[4] = "txt";
            snprintf(fmt, sizeof fmt, "%s", lua_tostring(L, -2));
            resp_w_verbatim(out, proto, fmt, s, n);
            lua_pop(L, 3);
            return;
        }
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    int is_map = field_type(L, "map") == LUA_TTABLE;
    if (is_map || (lua_pop(L, 1), field_type(L, "set")) == LUA_TTABLE) {
        size_t n = 0;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            n++;
            lua_pop(L, 1);
        }
        if (is_map)
            resp_w_map(out, proto, n);
        else
            resp_w_set(out, proto, n);
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            lua_pushvalue(L, -2);
            reply_from_lua(L, out, proto, sp); /* the key */
            if (is_map)
                reply_from_lua(L, out, proto, sp); /* the value */
            else
                lua_pop(L, 1);
        }
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    /* An array, up to its first nil. */
    size_t n = 0;
    for (;; n++) {
        lua_rawgeti(L, -1, (int)n + 1);
        int nil = lua_isnil(L, -1);
        lua_pop(L, 1);
        if (nil) break;
    }
    resp_w_array(out, n);
    for (size_t j = 1; j <= n; j++) {
        lua_rawgeti(L, -1, (int)j);
        reply_from_lua(L, out, proto, sp);
    }
}

/* Writes the value on top of the stack as a reply and pops it. */
static void reply_from_lua(lua_State *L, kbuf *out, int proto, int sp) {
    if (!lua_checkstack(L, 4)) {
        resp_w_error(out, "ERR reached lua stack limit");
        lua_pop(L, 1);
        return;
    }
    switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        resp_w_bulk(out, s, n);
        break;
    }
    case LUA_TBOOLEAN:
        if (sp == 2) {
            if (lua_toboolean(L, -1))
                resp_w_int(out, 1);
            else
                resp_w_null(out, proto);
        } else {
            resp_w_bool(out, proto, lua_toboolean(L, -1));
        }
        break;
    case LUA_TNUMBER:
        resp_w_int(out, (long long)lua_tonumber(L, -1));
        break;
    case LUA_TTABLE:
        reply_table(L, out, proto, sp);
        break;
    default:
        resp_w_null(out, proto);
    }
    lua_pop(L, 1);
}

/* ---- RESP -> Lua (a command's reply) ------------------------------------ */

static void push_value(lua_State *L, const resp_value *v, int sp) {
    if (!lua_checkstack(L, 4)) luaL_error(L, "reached lua stack limit");
    switch (v->type) {
    case RESP_T_INT:
        lua_pushnumber(L, (lua_Number)v->integer);
        return;
    case RESP_T_BULK:
        lua_pushlstring(L, v->str, v->len);
        return;
    case RESP_T_SIMPLE:
        lua_newtable(L);
        lua_pushstring(L, "ok");
        lua_pushlstring(L, v->str, v->len);
        lua_rawset(L, -3);
        return;
    case RESP_T_ERROR:
    case RESP_T_BULKERR: {
        char *m = malloc(v->len + 2);
        if (!m) luaL_error(L, "out of memory");
        m[0] = '-';
        memcpy(m + 1, v->str, v->len + 1);
        push_error(L, m);
        free(m);
        return;
    }
    case RESP_T_NULL:
        if (sp == 3)
            lua_pushnil(L);
        else
            lua_pushboolean(L, 0);
        return;
    case RESP_T_BOOL:
        lua_pushboolean(L, v->integer != 0);
        return;
    case RESP_T_DOUBLE:
        lua_newtable(L);
        lua_pushstring(L, "double");
        lua_pushnumber(L, v->dbl);
        lua_rawset(L, -3);
        return;
    case RESP_T_BIGNUM:
        lua_newtable(L);
        lua_pushstring(L, "big_number");
        lua_pushlstring(L, v->str, v->len);
        lua_rawset(L, -3);
        return;
    case RESP_T_VERBATIM:
        lua_newtable(L);
        lua_pushstring(L, "verbatim_string");
        lua_newtable(L);
        lua_pushstring(L, "format");
        lua_pushlstring(L, v->str, v->len >= 3 ? 3 : v->len);
        lua_rawset(L, -3);
        lua_pushstring(L, "string");
        lua_pushlstring(L, v->len > 4 ? v->str + 4 : "", v->len > 4 ? v->len - 4 : 0);
        lua_rawset(L, -3);
        lua_rawset(L, -3);
        return;
    case RESP_T_MAP:
    case RESP_T_ATTR:
        lua_newtable(L);
        lua_pushstring(L, "map");
        lua_newtable(L);
        for (size_t i = 0; i < v->n; i++) {
            push_value(L, v->elems[2 * i], sp);
            push_value(L, v->elems[2 * i + 1], sp);
            lua_rawset(L, -3);
        }
        lua_rawset(L, -3);
        return;
    case RESP_T_SET:
        lua_newtable(L);
        lua_pushstring(L, "set");
        lua_newtable(L);
        for (size_t i = 0; i < v->n; i++) {
            push_value(L, v->elems[i], sp);
            lua_pushboolean(L, 1);
            lua_rawset(L, -3);
        }
        lua_rawset(L, -3);
        return;
    case RESP_T_ARRAY:
    case RESP_T_PUSH:
        lua_newtable(L);
        for (size_t i = 0; i < v->n; i++) {
            push_value(L, v->elems[i], sp);
            lua_rawseti(L, -2, (int)i + 1);
        }
        return;
    }
    lua_pushboolean(L, 0);
}

/* ---- redis.call ---------------------------------------------------------- */

/* Commands a script may not call (redis' NOSCRIPT flag), by name or by
 * "container|sub". */
static const char *const denied[] = {"blpop",       "brpop",         "brpoplpush",
                                     "blmove",      /* not blmpop */ "bzpopmin",
                                     "bzpopmax",    "bzmpop",        "multi",
                                     "exec",        "discard",       "watch",
                                     "unwatch",     "eval",          "evalsha",
                                     "eval_ro",     "evalsha_ro",    "fcall",
                                     "fcall_ro",    "script",        "function",
                                     "subscribe",   "psubscribe",    "ssubscribe",
                                     "unsubscribe", "punsubscribe",  "sunsubscribe",
                                     "monitor",     "wait",          "auth",
                                     "hello",       "quit",          "reset",
                                     "save",        "bgsave",        "bgrewriteaof",
                                     "shutdown",    "sync",          "psync",
                                     "replconf",    "debug",         "client",
                                     "config",      "acl",           "latency",
                                     "module",      "failover",      "replicaof",
                                     "slaveof",     "cluster|reset", NULL};

static int is_denied(int argc, char **argv, const size_t *len) {
    char name[64];
    for (int i = 0; denied[i]; i++) {
        const char *bar = strchr(denied[i], '|');
        if (!bar) {
            if (strlen(denied[i]) == len[0] && !strncasecmp(denied[i], argv[0], len[0])) return 1;
            continue;
        }
        if (argc < 2) continue;
        snprintf(name, sizeof name, "%.*s|%.*s", (int)(len[0] > 20 ? 20 : len[0]), argv[0],
                 (int)(len[1] > 20 ? 20 : len[1]), argv[1]);
        if (!strcasecmp(name, denied[i])) return 1;
    }
    return 0;
}

/* Runs one command for the script. Returns NULL with the reply in *out, or
 * a refusal (before the handler ran) for the error table. */
static const char *run_command(script_engine *e, int argc, char **argv, size_t *len, kbuf *out) {
    script_run *r = e->run;
    if (is_denied(argc, argv, len)) return "This Redis command is not allowed from script";
    const cmd_def *d = cmd_lookup(argv[0], len[0]);
    if (d && d->subs && argc >= 2) d = cmd_lookup_sub(d, argv[1], len[1]);
    if (!d) return "Unknown Redis command called from script";
    if ((d->arity > 0 && argc != d->arity) || argc < (d->arity < 0 ? -d->arity : d->arity))
        return "Wrong number of args calling Redis command from script";
    if (d->flags & (CMD_NOQUEUE | CMD_NOSCRIPT))
        return "This Redis command is not allowed from script";
    if (r->ro && (d->flags & CMD_WRITE))
        return "Write commands are not allowed from read-only scripts.";
    cmd_ctx y = {.srv = e->srv,
                 .c = &e->fake,
                 .argc = argc,
                 .argv = argv,
                 .argvlen = len,
                 .out = out,
                 .proto = r->proto,
                 .now_ms = r->caller->now_ms};
    e->fake.proto = r->proto;
    int has_keys = 0;
    if (cmd_keys_slot(&y, d, &has_keys)) return NULL; /* -CROSSSLOT in out */
    if (has_keys) {
        if (r->has_slot && y.slot != r->slot)
            return "Script attempted to access keys that do not hash to the same slot";
        route rt;
        ptable_route(e->srv->pt, y.slot, &rt);
        if (rt.kind != ROUTE_SERVE)
            return "Script attempted to access a non local key in a cluster node";
        r->has_slot = 1;
        r->slot = y.slot;
        r->partition = y.partition = rt.partition;
    }
    if (d->flags & CMD_WRITE) r->dirty = 1;
    cmd_call(&y, d, has_keys);
    return NULL;
}

static void free_argv(char **argv, size_t *len, int n) {
    for (int i = 0; i < n; i++)
        free(argv[i]);
    free(argv);
    free(len);
}

static int l_call_generic(lua_State *L, int raise) {
    script_engine *e = g_engine;
    if (!e || !e->run || e->loading)
        return raise_error(L, "redis.call/pcall can only be called inside a script invocation");
    int argc = lua_gettop(L);
    if (argc == 0) {
        push_error(L, "Please specify at least one argument for this redis lib call");
        return raise ? lua_error(L) : 1;
    }
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    size_t *len = calloc((size_t)argc + 1, sizeof *len);
    if (!argv || !len) {
        free(argv);
        free(len);
        return raise_error(L, "out of memory");
    }
    int j = 0;
    for (; j < argc; j++) {
        char num[64];
        const char *s;
        size_t n;
        if (lua_type(L, j + 1) == LUA_TNUMBER) {
            n = (size_t)snprintf(num, sizeof num, "%.17g", (double)lua_tonumber(L, j + 1));
            s = num;
        } else if (lua_type(L, j + 1) == LUA_TSTRING) {
            s = lua_tolstring(L, j + 1, &n);
        } else {
            break;
        }
        if (!(argv[j] = malloc(n + 1))) break;
        memcpy(argv[j], s, n);
        argv[j][n] = 0;
        len[j] = n;
    }
    lua_settop(L, 0);
    if (j != argc) {
        free_argv(argv, len, j);
        push_error(L, "Lua redis lib command arguments must be strings or integers");
        return raise ? lua_error(L) : 1;
    }
    kbuf out;
    kbuf_init(&out);
    const char *refused = run_command(e, argc, argv, len, &out);
    free_argv(argv, len, argc);
    if (refused) {
        kbuf_close(&out);
        push_error(L, refused);
        return raise ? lua_error(L) : 1;
    }
    resp_value *v = NULL;
    size_t used = 0;
    int rc = out.oom ? KEEL_ENOMEM : resp_reader_feed(e->reader, out.p, out.len, &used, &v);
    kbuf_close(&out);
    if (rc != 1) {
        /* A handler wrote nothing whole: a keel bug, not the script's. */
        resp_reader_free(e->reader);
        e->reader = resp_reader_new(NULL);
        return raise_error(L, "internal error: a command's reply could not be read");
    }
    int is_err = v->type == RESP_T_ERROR || v->type == RESP_T_BULKERR;
    push_value(L, v, e->run->proto);
    resp_value_free(v);
    if (is_err && raise) return lua_error(L);
    return 1;
}

static int l_call(lua_State *L) {
    return l_call_generic(L, 1);
}
static int l_pcall(lua_State *L) {
    return l_call_generic(L, 0);
}

static void sha1_hex(const void *p, size_t n, char out[41]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (!EVP_Digest(p, n, md, &mdlen, EVP_sha1(), NULL)) mdlen = 0;
    for (unsigned i = 0; i < 20; i++)
        snprintf(out + 2 * i, 3, "%02x", i < mdlen ? md[i] : 0);
    out[40] = 0;
}

static int l_sha1hex(lua_State *L) {
    if (lua_gettop(L) != 1) return raise_error(L, "wrong number of arguments");
    size_t n = 0;
    const char *s = lua_tolstring(L, 1, &n);
    char hex[41];
    sha1_hex(s ? s : "", s ? n : 0, hex);
    lua_pushstring(L, hex);
    return 1;
}

static int l_error_reply(lua_State *L) {
    if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
        push_error(L, "wrong number or type of arguments");
        return 1;
    }
    const char *s = lua_tostring(L, 1);
    size_t n = strlen(s);
    char *m = malloc(n + 2);
    if (!m) return raise_error(L, "out of memory");
    m[0] = '-';
    memcpy(m + 1, s, n + 1);
    push_error(L, s[0] == '-' ? s : m);
    free(m);
    return 1;
}

static int l_status_reply(lua_State *L) {
    if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
        push_error(L, "wrong number or type of arguments");
        return 1;
    }
    lua_newtable(L);
    lua_pushstring(L, "ok");
    lua_pushvalue(L, 1);
    lua_rawset(L, -3);
    return 1;
}

static int l_log(lua_State *L) {
    int argc = lua_gettop(L);
    if (argc < 2) return raise_error(L, "redis.log() requires two arguments or more.");
    if (!lua_isnumber(L, 1)) return raise_error(L, "First argument must be a number (log level).");
    int level = (int)lua_tonumber(L, 1);
    if (level < 0 || level > 3) return raise_error(L, "Invalid debug level.");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int j = 2; j <= argc; j++) {
        size_t n;
        const char *s = lua_tolstring(L, j, &n);
        if (!s) continue;
        if (j != 2) luaL_addchar(&b, ' ');
        luaL_addlstring(&b, s, n);
    }
    luaL_pushresult(&b);
    char q[512];
    size_t n;
    const char *msg = lua_tolstring(L, -1, &n);
    static const int lv[] = {KEEL_LOG_DEBUG, KEEL_LOG_INFO, KEEL_LOG_INFO, KEEL_LOG_WARN};
    keel_log(lv[level], "script_log", "msg=%s", keel_log_quote(q, sizeof q, msg, n));
    return 0;
}

static int l_setresp(lua_State *L) {
    script_engine *e = g_engine;
    if (!e || !e->run)
        return raise_error(L, "redis.setresp can only be called inside a script invocation");
    if (lua_gettop(L) != 1) return raise_error(L, "redis.setresp() requires one argument.");
    int p = (int)lua_tonumber(L, 1);
    if (p != 2 && p != 3) return raise_error(L, "RESP version must be 2 or 3.");
    e->run->proto = p;
    return 0;
}

/* redis.set_repl and redis.replicate_commands: keel replicates by data, not
 * by command, so effects replication is always on. */
static int l_set_repl(lua_State *L) {
    script_engine *e = g_engine;
    if (!e || !e->run)
        return raise_error(L, "redis.set_repl can only be called inside a script invocation");
    if (lua_gettop(L) != 1) return raise_error(L, "redis.set_repl() requires two arguments.");
    int f = (int)lua_tonumber(L, 1);
    if (f & ~3)
        return raise_error(
            L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
    return 0;
}

static int l_replicate_commands(lua_State *L) {
    lua_pushboolean(L, 1);
    return 1;
}

static int l_breakpoint(lua_State *L) {
    lua_pushboolean(L, 0);
    return 1;
}

static int l_debug_noop(lua_State *L) {
    (void)L;
    return 0;
}

/* FUNCTION LOAD: redis.register_function(name, fn) or {function_name=,
 * callback=, flags={...}}. */
static int l_register_function(lua_State *L) {
    script_engine *e = g_engine;
    if (!e || !e->loading)
        return raise_error(L,
                           "redis.register_function can only be called on FUNCTION LOAD command");
    int ro = 0;
    if (lua_gettop(L) == 1 && lua_istable(L, 1)) {
        lua_getfield(L, 1, "function_name");
        lua_getfield(L, 1, "callback");
        lua_getfield(L, 1, "flags");
        if (lua_istable(L, -1)) {
            for (int i = 1;; i++) {
                lua_rawgeti(L, -1, i);
                if (lua_isnil(L, -1)) {
                    lua_pop(L, 1);
                    break;
                }
                const char *f = lua_tostring(L, -1);
                if (f && !strcmp(f, "no-writes")) ro = 1;
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
        lua_remove(L, 1);
    }
    if (lua_gettop(L) != 2 || lua_type(L, 1) != LUA_TSTRING || !lua_isfunction(L, 2))
        return raise_error(L, "wrong number of arguments to redis.register_function");
    lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
    lua_pushvalue(L, 1);
    lua_rawget(L, -2);
    int exists = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (exists) {
        lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
        lua_pushvalue(L, 1);
        lua_rawget(L, -2);
        lua_getfield(L, -1, "lib");
        int same = lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), e->lib);
        lua_pop(L, 3);
        if (!same) {
            char m[300];
            snprintf(m, sizeof m, "Function %s already exists", lua_tostring(L, 1));
            lua_pop(L, 1);
            return raise_error(L, m);
        }
    }
    lua_pushvalue(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "fn");
    lua_pushstring(L, e->lib);
    lua_setfield(L, -2, "lib");
    lua_pushboolean(L, ro);
    lua_setfield(L, -2, "ro");
    lua_rawset(L, -3);
    lua_pop(L, 1);
    return 0;
}

/* ---- The state ----------------------------------------------------------- */

static const char *const err_handler =
    "local dbg = debug\n"
    "return function(err)\n"
    "  local i = dbg.getinfo(2,'nSl')\n"
    "  if i and i.what == 'C' then i = dbg.getinfo(3,'nSl') end\n"
    "  if type(err) ~= 'table' then err = {err='ERR ' .. tostring(err)} end\n"
    "  if i then err['source'] = i.source; err['line'] = i.currentline end\n"
    "  return err\n"
    "end\n";

/* loadstring/load for scripts: no bytecode, and chunks get the sandbox. */
static const char *const sandbox_lua =
    "local E, rawload, rawloadstring, rawgetfenv = ...\n"
    "local function fence(f, e) if f then setfenv(f, E) end return f, e end\n"
    "return function(s, name)\n"
    "  if type(s) == 'string' and s:byte(1) == 27 then return nil, 'binary chunks are not allowed' "
    "end\n"
    "  return fence(rawloadstring(s, name))\n"
    "end, function(f, name)\n"
    "  return fence(rawload(function() local s = f() if type(s) == 'string' and s:byte(1) == 27 "
    "then return nil end return s end, name))\n"
    "end, function(f)\n"
    "  if f == nil then f = 1 end\n"
    "  if type(f) == 'number' and f > 0 then f = f + 1 end\n"
    "  local e = rawgetfenv(f)\n"
    "  if e == _G then return E end\n"
    "  return e\n"
    "end\n";

static void set_fn(lua_State *L, const char *name, lua_CFunction f) {
    lua_pushcfunction(L, f);
    lua_setfield(L, -2, name);
}

static void open_lib(lua_State *L, const char *name, lua_CFunction f) {
    lua_pushcfunction(L, f);
    lua_pushstring(L, name);
    lua_call(L, 1, 0);
}

static void register_redis(lua_State *L) {
    lua_newtable(L);
    set_fn(L, "call", l_call);
    set_fn(L, "pcall", l_pcall);
    set_fn(L, "sha1hex", l_sha1hex);
    set_fn(L, "error_reply", l_error_reply);
    set_fn(L, "status_reply", l_status_reply);
    set_fn(L, "log", l_log);
    set_fn(L, "setresp", l_setresp);
    set_fn(L, "set_repl", l_set_repl);
    set_fn(L, "replicate_commands", l_replicate_commands);
    set_fn(L, "breakpoint", l_breakpoint);
    set_fn(L, "debug", l_debug_noop);
    set_fn(L, "register_function", l_register_function);
    static const struct {
        const char *k;
        int v;
    } consts[] = {{"LOG_DEBUG", 0},   {"LOG_VERBOSE", 1},  {"LOG_NOTICE", 2},
                  {"LOG_WARNING", 3}, {"REPL_NONE", 0},    {"REPL_AOF", 1},
                  {"REPL_SLAVE", 2},  {"REPL_REPLICA", 2}, {"REPL_ALL", 3}};
    for (size_t i = 0; i < sizeof consts / sizeof *consts; i++) {
        lua_pushnumber(L, consts[i].v);
        lua_setfield(L, -2, consts[i].k);
    }
    lua_pushstring(L, "7.0.15");
    lua_setfield(L, -2, "REDIS_VERSION");
    lua_pushnumber(L, 0x07000f);
    lua_setfield(L, -2, "REDIS_VERSION_NUM");
    lua_setglobal(L, "redis");
}

/* Builds the state and its sandbox. Returns 0 or KEEL_ENOMEM. */
static int state_open(script_engine *e) {
    lua_State *L = luaL_newstate();
    if (!L) return KEEL_ENOMEM;
    open_lib(L, "", luaopen_base);
    open_lib(L, LUA_TABLIBNAME, luaopen_table);
    open_lib(L, LUA_STRLIBNAME, luaopen_string);
    open_lib(L, LUA_MATHLIBNAME, luaopen_math);
    open_lib(L, LUA_DBLIBNAME, luaopen_debug);
    /* Debian's cjson and bit return their table without setting a global. */
    lua_pushcfunction(L, luaopen_cjson);
    lua_call(L, 0, 1);
    lua_setglobal(L, "cjson");
    lua_pushcfunction(L, luaopen_bit);
    lua_call(L, 0, 1);
    lua_setglobal(L, "bit");
    lua_pushcfunction(L, script_msgpack_open);
    lua_call(L, 0, 1);
    lua_setglobal(L, "cmsgpack");
    register_redis(L);
    static const char *const removed[] = {"dofile",  "loadfile", "print", "require", "module",
                                          "package", "os",       "io",    NULL};
    for (int i = 0; removed[i]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, removed[i]);
    }
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_SCRIPTS);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_LIBS);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_RO);
    /* The error handler keeps debug as an upvalue; scripts do not see it. */
    if (luaL_loadbuffer(L, err_handler, strlen(err_handler), "@err_handler_def") ||
        lua_pcall(L, 0, 1, 0))
        goto fail;
    lua_setfield(L, LUA_REGISTRYINDEX, REG_ERRH);
    lua_pushnil(L);
    lua_setglobal(L, "debug");
    /* getmetatable() of any proxy: an empty read-only table. */
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "keel_ro_meta");
    lua_getfield(L, LUA_REGISTRYINDEX, "keel_ro_meta");
    make_proxy(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "keel_ro_meta");
    for (int i = 0; lib_names[i]; i++) {
        lua_getglobal(L, lib_names[i]);
        make_proxy(L);
        lua_setglobal(L, lib_names[i]);
    }
    lua_getglobal(L, "setmetatable");
    lua_pushcclosure(L, l_setmetatable, 1);
    lua_setglobal(L, "setmetatable");
    lua_pushcfunction(L, l_rawset);
    lua_setglobal(L, "rawset");
    /* E, the scripts' environment. */
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    make_proxy(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "keel_env");
    /* loadstring, load, getfenv that keep chunks inside E. */
    if (luaL_loadbuffer(L, sandbox_lua, strlen(sandbox_lua), "@sandbox_def")) goto fail;
    lua_insert(L, -2); /* chunk E */
    lua_getglobal(L, "load");
    lua_getglobal(L, "loadstring");
    lua_getglobal(L, "getfenv");
    if (lua_pcall(L, 4, 3, 0)) goto fail;
    lua_setglobal(L, "getfenv");
    lua_setglobal(L, "load");
    lua_setglobal(L, "loadstring");
    lua_getfield(L, LUA_REGISTRYINDEX, "keel_env");
    lua_setglobal(L, "_G");
    /* Undefined globals are an error from now on. */
    lua_newtable(L);
    lua_pushcfunction(L, l_global_missing);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, LUA_GLOBALSINDEX);
    e->L = L;
    return 0;
fail:
    keel_log(KEEL_LOG_ERROR, "lua_init_failed", "error=\"%s\"", lua_tostring(L, -1));
    lua_close(L);
    return KEEL_ENOMEM;
}

int script_is_caller(const server *s, const client *c) {
    (void)s;
    return g_engine && c == &g_engine->fake;
}

static script_engine *engine_get(server *s) {
    if (g_engine && g_engine->L) return g_engine;
    if (!g_engine) {
        script_engine *e = calloc(1, sizeof *e);
        if (!e) return NULL;
        e->busy_ms = DEFAULT_BUSY_MS;
        e->fake.authed = 1;
        e->fake.proto = 2;
        snprintf(e->fake.addr, sizeof e->fake.addr, "lua");
        kbuf_init(&e->fake.out);
        g_engine = e;
    }
    g_engine->srv = s;
    if (!g_engine->reader && !(g_engine->reader = resp_reader_new(NULL))) return NULL;
    if (state_open(g_engine)) return NULL;
    return g_engine;
}

static void state_close(script_engine *e) {
    if (e->L) lua_close(e->L);
    e->L = NULL;
    e->nscripts = 0;
}

void script_shutdown(void) {
    script_engine *e = g_engine;
    if (!e) return;
    state_close(e);
    resp_reader_free(e->reader);
    free(e->fake.user);
    kbuf_close(&e->fake.out);
    g_engine = NULL;
    free(e);
    script_msgpack_release();
}

/* ---- Time limit ---------------------------------------------------------- */

static void count_hook(lua_State *L, lua_Debug *ar);

static void kill_now(lua_State *L) {
    /* Every line from now on raises again, so pcall cannot swallow it. */
    lua_sethook(L, count_hook, LUA_MASKLINE, 0);
    raise_error(L, "Script killed by user with SCRIPT KILL...");
}

static void count_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    script_engine *e = g_engine;
    script_run *r = e ? e->run : NULL;
    if (!r) return;
    if (r->killed) kill_now(L);
    if (!r->timed_out) {
        if (e->busy_ms <= 0 || (keel_mono_us() / 1000) - r->start_ms < (uint64_t)e->busy_ms) return;
        r->timed_out = 1;
        keel_log(KEEL_LOG_WARN, "script_slow",
                 "ms=%llu action=\"serving other clients -BUSY; SCRIPT KILL allowed\"",
                 (unsigned long long)((keel_mono_us() / 1000) - r->start_ms));
    }
    if (e->srv->rs) rserver_poll_busy(e->srv->rs, r->caller->c);
    if (r->killed) kill_now(L);
}

int script_busy(const server *s) {
    (void)s;
    return g_engine && g_engine->run && g_engine->run->timed_out;
}

int script_allowed_busy(const cmd_def *parent, const cmd_def *d) {
    if (!parent) return (d->flags & CMD_ALLOW_BUSY) != 0; /* MULTI, DISCARD, WATCH, UNWATCH */
    return (!strcmp(parent->name, "script") || !strcmp(parent->name, "function")) &&
           !strcmp(d->name, "kill");
}

const char *script_busy_msg(void) {
    if (g_engine && g_engine->run && !g_engine->run->is_eval)
        return "BUSY Redis is busy running a script. You can only call FUNCTION KILL or "
               "SHUTDOWN NOSAVE.";
    return "BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
           "SHUTDOWN NOSAVE.";
}

void script_reply_busy(cmd_ctx *x) {
    reply_err(x, script_busy_msg());
}

void script_kill(cmd_ctx *x, int is_eval) {
    script_run *r = g_engine ? g_engine->run : NULL;
    if (!r) {
        reply_err(x, "NOTBUSY No scripts in execution right now.");
        return;
    }
    if (r->dirty) {
        reply_err(x, "UNKILLABLE Sorry the script already executed write commands against the "
                     "dataset. You can either wait the script termination or kill the server in "
                     "a hard way using the SHUTDOWN NOSAVE command.");
        return;
    }
    if (is_eval != r->is_eval) {
        script_reply_busy(x);
        return;
    }
    r->killed = 1;
    reply_ok(x);
}

/* ---- Running ------------------------------------------------------------- */

/* Parses a "#!lua flags=..." first line. Returns 0 (flags, *skip = bytes of
 * the line without its '\n'), or -1 with the error in err. */
static int shebang(const char *body, size_t n, int *flags, size_t *skip, char *err, size_t cap) {
    *flags = SF_COMPAT;
    *skip = 0;
    if (n < 2 || body[0] != '#' || body[1] != '!') return 0;
    const char *nl = memchr(body, '\n', n);
    if (!nl) return snprintf(err, cap, "ERR Invalid script shebang"), -1;
    *skip = (size_t)(nl - body);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)*skip, body);
    char *save = NULL, *tok = strtok_r(line, " \t\r", &save);
    if (!tok) return snprintf(err, cap, "ERR Invalid engine in script shebang"), -1;
    if (strcmp(tok, "#!lua"))
        return snprintf(err, cap, "ERR Unexpected engine in script shebang: %s", tok), -1;
    *flags = 0;
    while ((tok = strtok_r(NULL, " \t\r", &save))) {
        if (strncmp(tok, "flags=", 6))
            return snprintf(err, cap, "ERR Unknown lua shebang option: %s", tok), -1;
        char *s2 = NULL;
        for (char *f = strtok_r(tok + 6, ",", &s2); f; f = strtok_r(NULL, ",", &s2)) {
            static const struct {
                const char *name;
                int flag;
            } names[] = {{"no-writes", SF_NO_WRITES},
                         {"allow-oom", SF_ALLOW_OOM},
                         {"allow-stale", SF_ALLOW_STALE},
                         {"no-cluster", SF_NO_CLUSTER},
                         {"allow-cross-slot-keys", SF_CROSS_SLOT}};
            size_t i = 0;
            while (i < sizeof names / sizeof *names && strcmp(f, names[i].name))
                i++;
            if (i == sizeof names / sizeof *names)
                return snprintf(err, cap, "ERR Unexpected flag in script shebang: %s", f), -1;
            *flags |= names[i].flag;
        }
    }
    return 0;
}

/* Compiles body into REG_SCRIPTS[sha]. Returns 0, or -1 after replying. */
static int script_compile(script_engine *e, cmd_ctx *x, const char *body, size_t n,
                          const char *sha) {
    lua_State *L = e->L;
    int flags;
    size_t skip;
    char err[600];
    if (shebang(body, n, &flags, &skip, err, sizeof err)) {
        reply_err(x, err);
        return -1;
    }
    if (luaL_loadbuffer(L, body + skip, n - skip, "@user_script")) {
        reply_errf(x, "ERR Error compiling script (new function): %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    lua_getfield(L, LUA_REGISTRYINDEX, "keel_env");
    lua_setfenv(L, -2);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_SCRIPTS);
    lua_pushstring(L, sha);
    lua_newtable(L);
    lua_pushvalue(L, -4);
    lua_setfield(L, -2, "fn");
    lua_pushnumber(L, flags);
    lua_setfield(L, -2, "flags");
    lua_rawset(L, -3);
    lua_pop(L, 2);
    e->nscripts++;
    return 0;
}

/* Pushes REG_SCRIPTS[sha] (a table) or nil. */
static void script_find(lua_State *L, const char *sha) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_SCRIPTS);
    lua_getfield(L, -1, sha);
    lua_remove(L, -2);
}

static void set_array(lua_State *L, cmd_ctx *x, int from, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushlstring(L, x->argv[from + i], x->argvlen[from + i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* Reads numkeys at argv[2]. Returns it, or -1 after replying. */
static long long numkeys_arg(cmd_ctx *x) {
    long long nk;
    if (arg_ll(x->argv[2], x->argvlen[2], &nk)) {
        reply_not_int(x);
        return -1;
    }
    if (nk > x->argc - 3) {
        reply_err(x, "ERR Number of keys can't be greater than number of args");
        return -1;
    }
    if (nk < 0) {
        reply_err(x, "ERR Number of keys can't be negative");
        return -1;
    }
    return nk;
}

/* Calls the function under the error handler (stack: errh fn [KEYS ARGV]),
 * with the run set up, and replies. */
static void run_function(script_engine *e, cmd_ctx *x, script_run *r, int nargs) {
    lua_State *L = e->L;
    e->fake.proto = 2;
    e->run = r;
    r->start_ms = (keel_mono_us() / 1000);
    r->proto = 2;
    lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
    int err = lua_pcall(L, nargs, 1, -(nargs + 2));
    lua_sethook(L, NULL, 0, 0);
    e->run = NULL;
    if (err) {
        if (!lua_istable(L, -1)) {
            reply_errf(x, "ERR Error running script %s, %.100s", r->funcname,
                       lua_isstring(L, -1) ? lua_tostring(L, -1) : "execution failure");
        } else {
            lua_getfield(L, -1, "err");
            lua_getfield(L, -2, "source");
            lua_getfield(L, -3, "line");
            const char *m = lua_tostring(L, -3), *src = lua_tostring(L, -2),
                       *line = lua_tostring(L, -1);
            if (m && src && line)
                reply_errf(x, "%s script: %s, on %s:%s.", m, r->funcname, src, line);
            else
                reply_err(x, m ? m : "ERR execution failure");
            lua_pop(L, 3);
        }
        lua_pop(L, 1);
    } else {
        reply_from_lua(L, x->out, x->proto, r->proto);
    }
    lua_pop(L, 1); /* the error handler */
    static int gc_count;
    if (++gc_count == 50) {
        lua_gc(L, LUA_GCSTEP, 50);
        gc_count = 0;
    }
}

static void run_init(script_run *r, cmd_ctx *x, const char *name, int ro, int is_eval) {
    *r = (script_run){.caller = x, .funcname = name, .ro = ro, .is_eval = is_eval};
    if (x->argc > 2 && x->argvlen[2] && x->argv[2][0] != '0') { /* declared keys: routed */
        r->has_slot = 1;
        r->slot = x->slot;
        r->partition = x->partition;
    }
}

void script_eval(cmd_ctx *x, int by_sha, int ro) {
    long long nk = numkeys_arg(x);
    if (nk < 0) return;
    script_engine *e = engine_get(x->srv);
    if (!e) {
        reply_err(x, "ERR out of memory starting the Lua engine");
        return;
    }
    lua_State *L = e->L;
    char sha[41];
    if (by_sha) {
        if (x->argvlen[1] != 40) {
            reply_err(x, "NOSCRIPT No matching script. Please use EVAL.");
            return;
        }
        for (int i = 0; i < 40; i++)
            sha[i] = (char)tolower((unsigned char)x->argv[1][i]);
        sha[40] = 0;
    } else {
        sha1_hex(x->argv[1], x->argvlen[1], sha);
    }
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ERRH);
    script_find(L, sha);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        if (by_sha) {
            lua_pop(L, 1);
            reply_err(x, "NOSCRIPT No matching script. Please use EVAL.");
            return;
        }
        if (script_compile(e, x, x->argv[1], x->argvlen[1], sha)) {
            lua_pop(L, 1);
            return;
        }
        script_find(L, sha);
    }
    lua_getfield(L, -1, "flags");
    int flags = (int)lua_tonumber(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, -1, "fn");
    lua_remove(L, -2); /* errh fn */
    if (ro && !(flags & SF_COMPAT) && !(flags & SF_NO_WRITES)) {
        lua_pop(L, 2);
        reply_err(x, "ERR Can not execute a script with write flag using *_ro command.");
        return;
    }
    script_run r;
    run_init(&r, x, sha, ro || (flags & SF_NO_WRITES), 1);
    set_array(L, x, 3, (int)nk);
    lua_setglobal(L, "KEYS");
    set_array(L, x, 3 + (int)nk, x->argc - 3 - (int)nk);
    lua_setglobal(L, "ARGV");
    run_function(e, x, &r, 0);
}

void script_fcall(cmd_ctx *x, int ro) {
    long long nk = numkeys_arg(x);
    if (nk < 0) return;
    script_engine *e = engine_get(x->srv);
    if (!e) {
        reply_err(x, "ERR out of memory starting the Lua engine");
        return;
    }
    lua_State *L = e->L;
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ERRH);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
    lua_pushlstring(L, x->argv[1], x->argvlen[1]);
    lua_rawget(L, -2);
    lua_remove(L, -2);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        reply_err(x, "ERR Function not found");
        return;
    }
    lua_getfield(L, -1, "ro");
    int fro = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, -1, "fn");
    lua_remove(L, -2);
    if (ro && !fro) {
        lua_pop(L, 2);
        reply_err(x, "ERR Can not execute a script with write flag using *_ro command.");
        return;
    }
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)x->argvlen[1], x->argv[1]);
    script_run r;
    run_init(&r, x, name, ro || fro, 0);
    set_array(L, x, 3, (int)nk);
    set_array(L, x, 3 + (int)nk, x->argc - 3 - (int)nk);
    run_function(e, x, &r, 2);
}

/* ---- FUNCTION ------------------------------------------------------------ */

/* Drops the functions of library lib (NULL: all). */
static void funcs_drop(lua_State *L, const char *lib) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
    lua_newtable(L); /* funcs keep */
    lua_pushnil(L);
    while (lua_next(L, -3)) {
        lua_getfield(L, -1, "lib");
        int drop = !lib || (lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), lib));
        lua_pop(L, 1);
        if (!drop) {
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_rawset(L, -4);
        } else {
            lua_pop(L, 1);
        }
    }
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
    lua_pop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_LIBS);
    if (lib) {
        lua_pushnil(L);
        lua_setfield(L, -2, lib);
        lua_pop(L, 1);
    } else {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_setfield(L, LUA_REGISTRYINDEX, REG_LIBS);
    }
}

void script_function_load(cmd_ctx *x) {
    int replace = 0, i = 2;
    for (; i < x->argc - 1; i++) {
        if (arg_is(x, i, "replace"))
            replace = 1;
        else {
            reply_errf(x, "ERR Unknown option given: %s", x->argv[i]);
            return;
        }
    }
    if (i != x->argc - 1) {
        reply_err(x, "ERR Function code is missing");
        return;
    }
    const char *code = x->argv[i];
    size_t n = x->argvlen[i];
    const char *nl = memchr(code, '\n', n);
    if (n < 2 || code[0] != '#' || code[1] != '!') {
        reply_err(x, "ERR Missing library metadata");
        return;
    }
    char line[256], lib[128] = "";
    snprintf(line, sizeof line, "%.*s", (int)(nl ? nl - code : (long)n), code);
    char *save = NULL, *tok = strtok_r(line, " ", &save);
    if (!tok || strcmp(tok, "#!lua")) {
        reply_errf(x, "ERR Engine '%s' not found", tok && strlen(tok) > 2 ? tok + 2 : "");
        return;
    }
    while ((tok = strtok_r(NULL, " ", &save))) {
        if (strncmp(tok, "name=", 5)) {
            reply_errf(x, "ERR Invalid metadata value given: %s", tok);
            return;
        }
        snprintf(lib, sizeof lib, "%s", tok + 5);
    }
    if (!lib[0]) {
        reply_err(x, "ERR Library name was not given");
        return;
    }
    for (const char *p = lib; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_') {
            reply_err(x, "ERR Library names can only contain letters, numbers, or "
                         "underscores(_) and must be at least one character long");
            return;
        }
    script_engine *e = engine_get(x->srv);
    if (!e) {
        reply_err(x, "ERR out of memory starting the Lua engine");
        return;
    }
    lua_State *L = e->L;
    lua_getfield(L, LUA_REGISTRYINDEX, REG_LIBS);
    lua_getfield(L, -1, lib);
    int exists = !lua_isnil(L, -1);
    lua_pop(L, 2);
    if (exists && !replace) {
        reply_errf(x, "ERR Library '%s' already exists", lib);
        return;
    }
    /* Keep the old functions until the new body has loaded. */
    lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, -3)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lua_remove(L, -2); /* backup */
    if (exists) funcs_drop(L, lib);
    if (luaL_loadbuffer(L, code + (nl ? nl - code : 0), n - (size_t)(nl ? nl - code : 0),
                        "@user_function")) {
        reply_errf(x, "ERR Error compiling function: %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        goto restore;
    }
    lua_getfield(L, LUA_REGISTRYINDEX, "keel_env");
    lua_setfenv(L, -2);
    e->loading = 1;
    e->lib = lib;
    int rc = lua_pcall(L, 0, 0, 0);
    e->loading = 0;
    e->lib = NULL;
    if (rc) {
        const char *m = NULL;
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "err");
            m = lua_tostring(L, -1);
            lua_remove(L, -2);
        } else {
            m = lua_tostring(L, -1);
        }
        reply_errf(x, "ERR Error registering functions: %s", m ? m : "unknown error");
        lua_pop(L, 1);
        goto restore;
    }
    lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
    int any = 0;
    lua_pushnil(L);
    while (!any && lua_next(L, -2)) {
        lua_getfield(L, -1, "lib");
        any = lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), lib);
        lua_pop(L, 2);
        if (any) lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (!any) {
        reply_err(x, "ERR No functions registered");
        goto restore;
    }
    lua_pop(L, 1); /* the backup */
    lua_getfield(L, LUA_REGISTRYINDEX, REG_LIBS);
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, lib);
    lua_pop(L, 1);
    resp_w_bulkstr(x->out, lib);
    return;
restore:
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
}

void script_function_flush(cmd_ctx *x) {
    if (x->argc > 3 || (x->argc == 3 && !arg_is(x, 2, "sync") && !arg_is(x, 2, "async"))) {
        reply_err(x, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
        return;
    }
    if (g_engine && g_engine->L) funcs_drop(g_engine->L, NULL);
    reply_ok(x);
}

void script_function_delete(cmd_ctx *x) {
    script_engine *e = g_engine;
    char lib[128];
    snprintf(lib, sizeof lib, "%.*s", (int)x->argvlen[2], x->argv[2]);
    int exists = 0;
    if (e && e->L) {
        lua_getfield(e->L, LUA_REGISTRYINDEX, REG_LIBS);
        lua_getfield(e->L, -1, lib);
        exists = !lua_isnil(e->L, -1);
        lua_pop(e->L, 2);
    }
    if (!exists) {
        reply_err(x, "ERR Library not found");
        return;
    }
    funcs_drop(e->L, lib);
    reply_ok(x);
}

void script_function_list(cmd_ctx *x) {
    script_engine *e = g_engine;
    if (!e || !e->L) {
        resp_w_array(x->out, 0);
        return;
    }
    lua_State *L = e->L;
    lua_getfield(L, LUA_REGISTRYINDEX, REG_LIBS);
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        n++;
        lua_pop(L, 1);
    }
    resp_w_array(x->out, n);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        resp_w_map(x->out, x->proto, 1);
        resp_w_bulkstr(x->out, "library_name");
        resp_w_bulkstr(x->out, lua_tostring(L, -1));
    }
    lua_pop(L, 1);
}

/* ---- SCRIPT -------------------------------------------------------------- */

void script_load(cmd_ctx *x) {
    script_engine *e = engine_get(x->srv);
    if (!e) {
        reply_err(x, "ERR out of memory starting the Lua engine");
        return;
    }
    char sha[41];
    sha1_hex(x->argv[2], x->argvlen[2], sha);
    script_find(e->L, sha);
    int have = !lua_isnil(e->L, -1);
    lua_pop(e->L, 1);
    if (!have && script_compile(e, x, x->argv[2], x->argvlen[2], sha)) return;
    resp_w_bulk(x->out, sha, 40);
}

void script_exists(cmd_ctx *x) {
    script_engine *e = g_engine && g_engine->L ? g_engine : NULL;
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++) {
        int have = 0;
        if (e && x->argvlen[i] == 40) {
            char sha[41];
            for (int j = 0; j < 40; j++)
                sha[j] = (char)tolower((unsigned char)x->argv[i][j]);
            sha[40] = 0;
            script_find(e->L, sha);
            have = !lua_isnil(e->L, -1);
            lua_pop(e->L, 1);
        }
        resp_w_int(x->out, have);
    }
}

/* SCRIPT FLUSH [ASYNC|SYNC]: drops every cached script (both modes at
 * once: freeing them is quick). With no FUNCTION library loaded the whole
 * state goes, as redis' scriptingReset; otherwise the state stays, since
 * the libraries live in it and must survive a SCRIPT FLUSH. */
void script_flush(cmd_ctx *x) {
    if (x->argc > 3 || (x->argc == 3 && !arg_is(x, 2, "sync") && !arg_is(x, 2, "async"))) {
        reply_err(x, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        return;
    }
    script_engine *e = g_engine;
    if (e && e->L) {
        lua_getfield(e->L, LUA_REGISTRYINDEX, REG_LIBS);
        lua_pushnil(e->L);
        int libs = lua_next(e->L, -2);
        lua_settop(e->L, 0);
        if (!libs) { /* no FUNCTION library to keep: a fresh state, as redis */
            state_close(e);
        } else {
            lua_newtable(e->L);
            lua_setfield(e->L, LUA_REGISTRYINDEX, REG_SCRIPTS);
            e->nscripts = 0;
            lua_gc(e->L, LUA_GCCOLLECT, 0);
        }
    }
    reply_ok(x);
}

/* ---- Configuration and INFO ---------------------------------------------- */

int script_config_set(server *s, const char *name, const char *value, int *bad) {
    if (strcasecmp(name, "lua-time-limit") && strcasecmp(name, "busy-reply-threshold")) return 0;
    long long v;
    *bad = arg_ll(value, strlen(value), &v) || v < 0;
    if (*bad) return 1;
    script_engine *e = g_engine;
    if (!e) {
        if (!engine_get(s)) return *bad = 1, 1;
        e = g_engine;
    }
    e->busy_ms = v;
    return 1;
}

int script_config_get(const server *s, const char *name, char *out, size_t cap) {
    (void)s;
    if (strcasecmp(name, "lua-time-limit") && strcasecmp(name, "busy-reply-threshold")) return 0;
    snprintf(out, cap, "%lld", g_engine ? g_engine->busy_ms : (long long)DEFAULT_BUSY_MS);
    return 1;
}

void script_info_memory(const server *s, kbuf *b) {
    (void)s;
    script_engine *e = g_engine && g_engine->L ? g_engine : NULL;
    long long lua = e ? (long long)lua_gc(e->L, LUA_GCCOUNT, 0) * 1024 : 0;
    kbuf_printf(b,
                "used_memory_lua:%lld\r\nused_memory_vm_eval:%lld\r\n"
                "used_memory_scripts_eval:0\r\nnumber_of_cached_scripts:%zu\r\n",
                lua, lua, e ? e->nscripts : (size_t)0);
}
