/* cmd_table.c - every command keel serves, with redis' arity, flags and key
 * positions (COMMAND reports these, and cluster clients route with them). */
#include "node/cmd.h"
#include "node/multi.h"
#include "node/getkeys.h"

/* clang-format off */
#define H(name) void cmd_##name(cmd_ctx *x);
H(get) H(set) H(setnx) H(getset) H(getdel) H(mget) H(mset) H(del) H(exists)
H(incr) H(incrby) H(decr) H(decrby) H(append) H(strlen)
H(expire) H(pexpire) H(ttl) H(pttl) H(persist)
H(ping) H(echo) H(ok) H(quit) H(auth) H(hello) H(select) H(dbsize) H(info)
H(client) H(client_id) H(client_getname) H(client_setname) H(config) H(config_get)
H(command) H(command_count) H(command_info) H(command_docs) H(command_getkeys)
H(command_list) H(command_getkeysandflags) H(command_help) H(monitor)
H(client_list) H(client_info) H(client_kill) H(client_reply) H(client_setinfo)
H(client_no_evict) H(client_getredir) H(client_help)
H(config_resetstat) H(config_rewrite) H(config_help) H(cluster_help)
H(cluster) H(cluster_slots) H(cluster_shards) H(cluster_nodes) H(cluster_info)
H(cluster_myid) H(cluster_keyslot) H(cluster_countkeysinslot) H(cluster_getkeysinslot)
H(setex) H(psetex) H(getex) H(getrange) H(setrange) H(incrbyfloat) H(msetnx)
H(setbit) H(getbit) H(bitcount) H(bitpos) H(lcs)
H(expireat) H(pexpireat) H(expiretime) H(pexpiretime)
H(config_set) H(function) H(memory) H(memory_usage) H(flushall) H(keys) H(scan) H(randomkey) H(type) H(touch) H(object) H(time)
H(rename) H(renamenx) H(copy) H(sort) H(sort_ro) H(dump) H(restore)
H(slowlog) H(slowlog_get) H(slowlog_len) H(slowlog_reset) H(slowlog_help)
H(latency) H(latency_latest) H(latency_history) H(latency_reset) H(latency_doctor)
H(latency_histogram) H(latency_help)
H(hset) H(hmset) H(hsetnx) H(hget) H(hmget) H(hdel) H(hlen) H(hstrlen) H(hexists)
H(hincrby) H(hincrbyfloat) H(hkeys) H(hvals) H(hgetall) H(hscan) H(hrandfield)
H(sadd) H(srem) H(scard) H(sismember) H(smismember) H(smembers) H(sscan)
H(srandmember) H(spop) H(smove) H(sinter) H(sunion) H(sdiff)
H(sinterstore) H(sunionstore) H(sdiffstore) H(sintercard)
H(lpush) H(rpush) H(lpushx) H(rpushx) H(lpop) H(rpop) H(llen) H(lindex) H(lset) H(lrange)
H(ltrim) H(lrem) H(linsert) H(rpoplpush) H(lmove) H(lpos) H(lmpop)
H(blpop) H(brpop) H(brpoplpush) H(blmove) H(blmpop) H(client_unblock)
H(zadd) H(zincrby) H(zcard) H(zscore) H(zmscore) H(zrem) H(zrange) H(zrevrange)
H(zrangebyscore) H(zrevrangebyscore) H(zcount) H(zrank) H(zrevrank) H(zscan)
H(zrangebylex) H(zrevrangebylex) H(zrangestore) H(zlexcount) H(zremrangebyrank)
H(zremrangebyscore) H(zremrangebylex) H(zpopmin) H(zpopmax) H(zmpop) H(zrandmember)
H(zunion) H(zinter) H(zdiff) H(zunionstore) H(zinterstore) H(zdiffstore) H(zintercard)
H(bzpopmin) H(bzpopmax) H(bzmpop)
H(xadd) H(xlen) H(xrange) H(xrevrange) H(xdel) H(xtrim) H(xsetid) H(xread) H(xreadgroup)
H(xgroup) H(xgroup_create) H(xgroup_setid) H(xgroup_destroy) H(xgroup_createconsumer)
H(xgroup_delconsumer) H(xgroup_help) H(xack) H(xpending) H(xclaim) H(xautoclaim)
H(xinfo) H(xinfo_stream) H(xinfo_groups) H(xinfo_consumers) H(xinfo_help)
H(readonly) H(readwrite)
H(eval) H(evalsha) H(eval_ro) H(evalsha_ro) H(fcall) H(fcall_ro) H(script) H(script_load)
H(script_exists) H(script_flush) H(script_kill) H(function_load) H(function_flush)
H(function_delete) H(function_kill) H(function_list)
H(save) H(bgsave) H(lastsave) H(shutdown) H(migrate)
H(geoadd) H(geopos) H(geodist) H(geohash) H(georadius) H(georadius_ro) H(georadiusbymember)
H(georadiusbymember_ro) H(geosearch) H(geosearchstore)
#undef H
/* clang-format on */

#define W (CMD_WRITE)
#define R (CMD_READONLY)
#define F (CMD_FAST)
#define NA (CMD_NOAUTH)
#define END                                                                                        \
    { 0 }

                                                                                                                    static const
    cmd_def client_subs[] = {{"id", 2, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_client_id, "connection",
                              "Returns the client ID"},
                             {"getname", 2, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_client_getname,
                              "connection", "Returns the connection name"},
                             {"setname", 3, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_client_setname,
                              "connection", "Sets the connection name"},
                             {"list", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_client_list, "connection",
                              "Lists open connections"},
                             {"info", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_client_info, "connection",
                              "Returns information about the connection"},
                             {"kill", -3, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_client_kill,
                              "connection", "Terminates open connections"},
                             {"reply", 3, 0, 0, 0, 0, CLASS_ADMIN, cmd_client_reply, "connection",
                              "Instructs the server whether to reply to commands"},
                             {"setinfo", 4, 0, 0, 0, 0, CLASS_ADMIN, cmd_client_setinfo,
                              "connection", "Sets information specific to the client"},
                             {"no-evict", 3, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_client_no_evict,
                              "connection", "Sets the client eviction mode of the connection"},
                             {"getredir", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_client_getredir,
                              "connection",
                              "Returns the client ID to which the connection's "
                              "tracking notifications are redirected"},
                             {"help", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_client_help, "connection",
                              "Returns helpful text about the different subcommands"},
                             {"unblock", -3, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_client_unblock,
                              "connection", "Unblocks a client blocked by a blocking command"},
                             END};

static const cmd_def config_subs[] = {
    {"get", -3, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_config_get, "server",
     "Returns configuration parameters"},
    {"set", -4, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_config_set, "server",
     "Sets configuration parameters in-flight"},
    {"resetstat", 2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_config_resetstat, "server",
     "Resets the server's statistics"},
    {"rewrite", 2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_config_rewrite, "server",
     "Persists the effective configuration to file"},
    {"help", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_config_help, "server",
     "Returns helpful text about the different subcommands"},
    END};

static const cmd_def slowlog_subs[] = {
    {"get", -2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_slowlog_get, "server",
     "Returns the slow log's entries"},
    {"len", 2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_slowlog_len, "server",
     "Returns the number of entries in the slow log"},
    {"reset", 2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_slowlog_reset, "server",
     "Clears all entries from the slow log"},
    {"help", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_slowlog_help, "server",
     "Show helpful text about the different subcommands"},
    END};

static const cmd_def latency_subs[] = {
    {"latest", 2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_latency_latest, "server",
     "Returns the latest latency samples for all events"},
    {"history", 3, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_latency_history, "server",
     "Returns timestamp-latency samples for an event"},
    {"reset", -2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_latency_reset, "server",
     "Resets the latency data for one or more events"},
    {"doctor", 2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_latency_doctor, "server",
     "Returns a human-readable latency analysis report"},
    {"histogram", -2, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_latency_histogram, "server",
     "Returns the cumulative distribution of latencies of a subset or all commands"},
    {"help", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_latency_help, "server",
     "Returns helpful text about the different subcommands"},
    END};

/* keel has no functions: FUNCTION FLUSH has nothing to do (the test
 * harness sends it before every block). */
static const cmd_def memory_subs[] = {{"usage", -3, R, 0, 0, 0, CLASS_READ, cmd_memory_usage,
                                       "server", "Estimates the memory usage of a key"},
                                      END};

static const cmd_def function_subs[] = {
    {"flush", -2, W | CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_function_flush, "scripting",
     "Deletes all library definitions"},
    {"load", -3, W | CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_function_load, "scripting",
     "Creates a library"},
    {"delete", 3, W | CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_function_delete, "scripting",
     "Deletes a library and its functions"},
    {"kill", 2, CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_function_kill, "scripting",
     "Terminates a function during execution"},
    {"list", -2, CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_function_list, "scripting",
     "Returns information about all libraries"},
    END};

static const cmd_def script_subs[] = {
    {"load", 3, CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_script_load, "scripting",
     "Loads a server-side Lua script to the script cache"},
    {"exists", -3, CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_script_exists, "scripting",
     "Determines whether server-side Lua scripts exist in the script cache"},
    {"flush", -2, CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_script_flush, "scripting",
     "Removes all server-side Lua scripts from the script cache"},
    {"kill", 2, CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_script_kill, "scripting",
     "Terminates a server-side Lua script during execution"},
    END};

static const cmd_def command_subs[] = {
    {"count", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_count, "server",
     "Returns a count of commands"},
    {"info", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_info, "server",
     "Returns information about commands"},
    {"docs", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_docs, "server",
     "Returns documentary information about commands"},
    {"getkeys", -4, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_getkeys, "server",
     "Extracts the key names from an arbitrary command"},
    {"getkeysandflags", -4, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_getkeysandflags, "server",
     "Extracts the key names and access flags for an arbitrary command"},
    {"list", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_list, "server",
     "Returns a list of command names"},
    {"help", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_help, "server",
     "Returns helpful text about the different subcommands"},
    END};

static const cmd_def cluster_subs[] = {
    {"slots", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_slots, "cluster",
     "Returns the mapping of cluster slots to nodes"},
    {"shards", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_shards, "cluster",
     "Returns the mapping of cluster slots to shards"},
    {"nodes", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_nodes, "cluster",
     "Returns the cluster configuration for a node"},
    {"info", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_info, "cluster",
     "Returns information about the state of a node"},
    {"myid", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_myid, "cluster", "Returns the ID of a node"},
    {"keyslot", 3, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_keyslot, "cluster",
     "Returns the hash slot for a key"},
    {"countkeysinslot", 3, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_countkeysinslot, "cluster",
     "Returns the number of keys in a hash slot"},
    {"getkeysinslot", 4, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_getkeysinslot, "cluster",
     "Returns the key names in a hash slot"},
    {"help", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster_help, "cluster",
     "Returns helpful text about the different subcommands"},
    END};

/* streams (cmd_xgroup.c): the container and each subcommand's key at argv[2] */
static const cmd_def xgroup_subs[] = {
    {"create", -5, W, 2, 2, 1, CLASS_WRITE, cmd_xgroup_create, "stream",
     "Creates a consumer group"},
    {"setid", -5, W, 2, 2, 1, CLASS_WRITE, cmd_xgroup_setid, "stream",
     "Sets the last-delivered ID of a consumer group"},
    {"destroy", 4, W, 2, 2, 1, CLASS_WRITE, cmd_xgroup_destroy, "stream",
     "Destroys a consumer group"},
    {"createconsumer", 5, W, 2, 2, 1, CLASS_WRITE, cmd_xgroup_createconsumer, "stream",
     "Creates a consumer in a consumer group"},
    {"delconsumer", 5, W, 2, 2, 1, CLASS_WRITE, cmd_xgroup_delconsumer, "stream",
     "Deletes a consumer from a consumer group"},
    {"help", 2, CMD_LOADING | CMD_STALE, 0, 0, 0, CLASS_READ, cmd_xgroup_help, "stream",
     "Returns helpful text about the different subcommands"},
    END};

static const cmd_def xinfo_subs[] = {
    {"stream", -3, R, 2, 2, 1, CLASS_READ, cmd_xinfo_stream, "stream",
     "Returns information about a stream"},
    {"groups", 3, R, 2, 2, 1, CLASS_READ, cmd_xinfo_groups, "stream",
     "Returns a list of the consumer groups of a stream"},
    {"consumers", 4, R, 2, 2, 1, CLASS_READ, cmd_xinfo_consumers, "stream",
     "Returns a list of the consumers in a consumer group"},
    {"help", 2, CMD_LOADING | CMD_STALE, 0, 0, 0, CLASS_READ, cmd_xinfo_help, "stream",
     "Returns helpful text about the different subcommands"},
    END};

const cmd_def cmd_table[] = {
    /* strings */
    {"get", 2, R | F, 1, 1, 1, CLASS_READ, cmd_get, "string", "Returns the string value of a key"},
    {"set", -3, W, 1, 1, 1, CLASS_WRITE, cmd_set, "string", "Sets the string value of a key"},
    {"setnx", 3, W | F, 1, 1, 1, CLASS_WRITE, cmd_setnx, "string",
     "Sets a key only when it does not exist"},
    {"getset", 3, W | F, 1, 1, 1, CLASS_WRITE, cmd_getset, "string",
     "Sets a key and returns its old value"},
    {"getdel", 2, W | F, 1, 1, 1, CLASS_WRITE, cmd_getdel, "string",
     "Returns a key's value and deletes it"},
    {"mget", -2, R | F, 1, -1, 1, CLASS_READ, cmd_mget, "string", "Returns the values of keys"},
    {"mset", -3, W, 1, -1, 2, CLASS_WRITE, cmd_mset, "string", "Sets several keys atomically"},
    {"del", -2, W, 1, -1, 1, CLASS_WRITE, cmd_del, "keyspace", "Deletes keys"},
    {"unlink", -2, W | F, 1, -1, 1, CLASS_WRITE, cmd_del, "keyspace", "Deletes keys"},
    {"exists", -2, R | F, 1, -1, 1, CLASS_READ, cmd_exists, "keyspace",
     "Counts the keys that exist"},
    {"incr", 2, W | F, 1, 1, 1, CLASS_WRITE, cmd_incr, "string",
     "Increments an integer value by one"},
    {"incrby", 3, W | F, 1, 1, 1, CLASS_WRITE, cmd_incrby, "string", "Increments an integer value"},
    {"decr", 2, W | F, 1, 1, 1, CLASS_WRITE, cmd_decr, "string",
     "Decrements an integer value by one"},
    {"decrby", 3, W | F, 1, 1, 1, CLASS_WRITE, cmd_decrby, "string", "Decrements an integer value"},
    {"append", 3, W, 1, 1, 1, CLASS_WRITE, cmd_append, "string", "Appends to a string value"},
    {"strlen", 2, R | F, 1, 1, 1, CLASS_READ, cmd_strlen, "string",
     "Returns the length of a string"},
    /* expiry */
    {"expire", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_expire, "keyspace",
     "Sets a key's time to live in seconds"},
    {"pexpire", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_pexpire, "keyspace",
     "Sets a key's time to live in milliseconds"},
    {"ttl", 2, R | F, 1, 1, 1, CLASS_READ, cmd_ttl, "keyspace",
     "Returns a key's time to live in seconds"},
    {"pttl", 2, R | F, 1, 1, 1, CLASS_READ, cmd_pttl, "keyspace",
     "Returns a key's time to live in milliseconds"},
    {"persist", 2, W | F, 1, 1, 1, CLASS_WRITE, cmd_persist, "keyspace", "Removes a key's expiry"},
    {"setex", 4, W, 1, 1, 1, CLASS_WRITE, cmd_setex, "string",
     "Sets the string value and expiration time of a key"},
    {"psetex", 4, W, 1, 1, 1, CLASS_WRITE, cmd_psetex, "string",
     "Sets both string value and expiration time in milliseconds of a key"},
    {"getex", -2, W | F, 1, 1, 1, CLASS_WRITE, cmd_getex, "string",
     "Returns the string value of a key after setting its expiration time"},
    {"getrange", 4, R, 1, 1, 1, CLASS_READ, cmd_getrange, "string",
     "Returns a substring of the string stored at a key"},
    {"substr", 4, R, 1, 1, 1, CLASS_READ, cmd_getrange, "string",
     "Returns a substring from a string value"},
    {"setrange", 4, W, 1, 1, 1, CLASS_WRITE, cmd_setrange, "string",
     "Overwrites a part of a string value with another by an offset"},
    {"incrbyfloat", 3, W | F, 1, 1, 1, CLASS_WRITE, cmd_incrbyfloat, "string",
     "Increment the floating point value of a key by a number"},
    {"msetnx", -3, W, 1, -1, 2, CLASS_WRITE, cmd_msetnx, "string",
     "Atomically modifies the string values of one or more keys only when all keys don't exist"},
    {"lcs", -3, R, 1, 2, 1, CLASS_READ, cmd_lcs, "string", "Finds the longest common substring"},
    {"setbit", 4, W, 1, 1, 1, CLASS_WRITE, cmd_setbit, "bitmap",
     "Sets or clears the bit at offset of the string value"},
    {"getbit", 3, R | F, 1, 1, 1, CLASS_READ, cmd_getbit, "bitmap",
     "Returns a bit value by offset"},
    {"bitcount", -2, R, 1, 1, 1, CLASS_READ, cmd_bitcount, "bitmap",
     "Counts the number of set bits (population counting) in a string"},
    {"bitpos", -3, R, 1, 1, 1, CLASS_READ, cmd_bitpos, "bitmap",
     "Finds the first set (1) or clear (0) bit in a string"},
    {"expireat", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_expireat, "keyspace",
     "Sets the expiration time of a key to a Unix timestamp"},
    {"pexpireat", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_pexpireat, "keyspace",
     "Sets the expiration time of a key to a Unix milliseconds timestamp"},
    {"expiretime", 2, R | F, 1, 1, 1, CLASS_READ, cmd_expiretime, "keyspace",
     "Returns the expiration time of a key as a Unix timestamp"},
    {"pexpiretime", 2, R | F, 1, 1, 1, CLASS_READ, cmd_pexpiretime, "keyspace",
     "Returns the expiration time of a key as a Unix milliseconds timestamp"},
    /* keyspace */
    {"flushall", -1, W, 0, 0, 0, CLASS_ADMIN, cmd_flushall, "server",
     "Removes all keys from all databases"},
    {"flushdb", -1, W, 0, 0, 0, CLASS_ADMIN, cmd_flushall, "server",
     "Remove all keys from the current database"},
    {"keys", 2, R, 0, 0, 0, CLASS_READ, cmd_keys, "keyspace",
     "Returns all key names that match a pattern"},
    {"scan", -2, R, 0, 0, 0, CLASS_READ, cmd_scan, "keyspace",
     "Iterates over the key names in the database"},
    {"randomkey", 1, R, 0, 0, 0, CLASS_READ, cmd_randomkey, "keyspace",
     "Returns a random key name from the database"},
    {"type", 2, R | F, 1, 1, 1, CLASS_READ, cmd_type, "keyspace",
     "Determines the type of value stored at a key"},
    {"touch", -2, R | F, 1, -1, 1, CLASS_READ, cmd_touch, "keyspace",
     "Returns the number of existing keys out of those specified after updating the time they "
     "were last accessed"},
    {"object", -2, R, 0, 0, 0, CLASS_READ, cmd_object, "keyspace",
     "A container for object introspection commands"},
    {"dump", 2, R, 1, 1, 1, CLASS_READ, cmd_dump, "keyspace",
     "Returns a serialized representation of the value stored at a key"},
    {"restore", -4, W, 1, 1, 1, CLASS_WRITE, cmd_restore, "keyspace",
     "Creates a key from the serialized representation of a value"},
    {"restore-asking", -4, W, 1, 1, 1, CLASS_WRITE, cmd_restore, "keyspace",
     "An internal command for migrating keys in a cluster"},
    /* MIGRATE (cmd_migrate.c, migrate.h): the network part off the loop */
    {"migrate", -6, W, 3, 3, 1, CLASS_WRITE, cmd_migrate, "keyspace",
     "Atomically transfers a key from one Redis instance to another", NULL, 0, getkeys_migrate},
    {"sort", -2, W, 1, 1, 1, CLASS_WRITE, cmd_sort, "keyspace",
     "Sorts the elements in a list, a set, or a sorted set, optionally storing the result"},
    {"sort_ro", -2, R, 1, 1, 1, CLASS_READ, cmd_sort_ro, "keyspace",
     "Returns the sorted elements of a list, a set, or a sorted set"},
    {"time", 1, F, 0, 0, 0, CLASS_ADMIN, cmd_time, "server", "Returns the server time"},
    {"memory", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_memory, "server",
     "A container for memory diagnostics commands", memory_subs},
    {"function", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_function, "scripting",
     "A container for function commands", function_subs},
    {"rename", 3, W, 1, 2, 1, CLASS_WRITE, cmd_rename, "keyspace", "Renames a key"},
    {"renamenx", 3, W | F, 1, 2, 1, CLASS_WRITE, cmd_renamenx, "keyspace",
     "Renames a key only when the target key name doesn't exist"},
    {"copy", -3, W, 1, 2, 1, CLASS_WRITE, cmd_copy, "keyspace", "Copies the value of a key"},
    /* hashes */
    {"hset", -4, W | F, 1, 1, 1, CLASS_WRITE, cmd_hset, "hash",
     "Creates or modifies the value of a field in a hash"},
    {"hmset", -4, W | F, 1, 1, 1, CLASS_WRITE, cmd_hmset, "hash",
     "Sets the values of multiple fields"},
    {"hsetnx", 4, W | F, 1, 1, 1, CLASS_WRITE, cmd_hsetnx, "hash",
     "Sets the value of a field in a hash only when the field doesn't exist"},
    {"hget", 3, R | F, 1, 1, 1, CLASS_READ, cmd_hget, "hash",
     "Returns the value of a field in a hash"},
    {"hmget", -3, R | F, 1, 1, 1, CLASS_READ, cmd_hmget, "hash",
     "Returns the values of all fields in a hash"},
    {"hdel", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_hdel, "hash",
     "Deletes one or more fields and their values from a hash"},
    {"hlen", 2, R | F, 1, 1, 1, CLASS_READ, cmd_hlen, "hash",
     "Returns the number of fields in a hash"},
    {"hstrlen", 3, R | F, 1, 1, 1, CLASS_READ, cmd_hstrlen, "hash",
     "Returns the length of the value of a field"},
    {"hexists", 3, R | F, 1, 1, 1, CLASS_READ, cmd_hexists, "hash",
     "Determines whether a field exists in a hash"},
    {"hincrby", 4, W | F, 1, 1, 1, CLASS_WRITE, cmd_hincrby, "hash",
     "Increments the integer value of a field in a hash by a number"},
    {"hincrbyfloat", 4, W | F, 1, 1, 1, CLASS_WRITE, cmd_hincrbyfloat, "hash",
     "Increments the floating point value of a field by a number"},
    {"hkeys", 2, R, 1, 1, 1, CLASS_READ, cmd_hkeys, "hash", "Returns all fields in a hash"},
    {"hvals", 2, R, 1, 1, 1, CLASS_READ, cmd_hvals, "hash", "Returns all values in a hash"},
    {"hgetall", 2, R, 1, 1, 1, CLASS_READ, cmd_hgetall, "hash",
     "Returns all fields and values in a hash"},
    {"hscan", -3, R, 1, 1, 1, CLASS_READ, cmd_hscan, "hash",
     "Iterates over fields and values of a hash"},
    {"hrandfield", -2, R, 1, 1, 1, CLASS_READ, cmd_hrandfield, "hash",
     "Returns one or more random fields from a hash"},
    /* sets */
    {"sadd", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_sadd, "set", "Adds one or more members to a set"},
    {"srem", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_srem, "set",
     "Removes one or more members from a set"},
    {"scard", 2, R | F, 1, 1, 1, CLASS_READ, cmd_scard, "set",
     "Returns the number of members in a set"},
    {"sismember", 3, R | F, 1, 1, 1, CLASS_READ, cmd_sismember, "set",
     "Determines whether a member belongs to a set"},
    {"smismember", -3, R | F, 1, 1, 1, CLASS_READ, cmd_smismember, "set",
     "Determines whether multiple members belong to a set"},
    {"smembers", 2, R, 1, 1, 1, CLASS_READ, cmd_smembers, "set", "Returns all members of a set"},
    {"sscan", -3, R, 1, 1, 1, CLASS_READ, cmd_sscan, "set", "Iterates over members of a set"},
    {"srandmember", -2, R, 1, 1, 1, CLASS_READ, cmd_srandmember, "set",
     "Get one or multiple random members from a set"},
    {"spop", -2, W | F, 1, 1, 1, CLASS_WRITE, cmd_spop, "set",
     "Returns one or more random members from a set after removing them"},
    {"smove", 4, W | F, 1, 2, 1, CLASS_WRITE, cmd_smove, "set",
     "Moves a member from one set to another"},
    {"sinter", -2, R, 1, -1, 1, CLASS_READ, cmd_sinter, "set",
     "Returns the intersect of multiple sets"},
    {"sunion", -2, R, 1, -1, 1, CLASS_READ, cmd_sunion, "set",
     "Returns the union of multiple sets"},
    {"sdiff", -2, R, 1, -1, 1, CLASS_READ, cmd_sdiff, "set",
     "Returns the difference of multiple sets"},
    {"sinterstore", -3, W, 1, -1, 1, CLASS_WRITE, cmd_sinterstore, "set",
     "Stores the intersect of multiple sets in a key"},
    {"sunionstore", -3, W, 1, -1, 1, CLASS_WRITE, cmd_sunionstore, "set",
     "Stores the union of multiple sets in a key"},
    {"sdiffstore", -3, W, 1, -1, 1, CLASS_WRITE, cmd_sdiffstore, "set",
     "Stores the difference of multiple sets in a key"},
    {"sintercard", -3, R, 0, 0, 0, CLASS_READ, cmd_sintercard, "set",
     "Returns the number of members of the intersect of multiple sets", NULL, 1},
    /* lists */
    {"lpush", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_lpush, "list",
     "Prepends one or more elements to a list"},
    {"rpush", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_rpush, "list",
     "Appends one or more elements to a list"},
    {"lpushx", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_lpushx, "list",
     "Prepends one or more elements to a list only when the list exists"},
    {"rpushx", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_rpushx, "list",
     "Appends an element to a list only when the list exists"},
    {"lpop", -2, W | F, 1, 1, 1, CLASS_WRITE, cmd_lpop, "list",
     "Returns the first elements in a list after removing it"},
    {"rpop", -2, W | F, 1, 1, 1, CLASS_WRITE, cmd_rpop, "list",
     "Returns and removes the last elements of a list"},
    {"llen", 2, R | F, 1, 1, 1, CLASS_READ, cmd_llen, "list", "Returns the length of a list"},
    {"lindex", 3, R, 1, 1, 1, CLASS_READ, cmd_lindex, "list",
     "Returns an element from a list by its index"},
    {"lset", 4, W, 1, 1, 1, CLASS_WRITE, cmd_lset, "list",
     "Sets the value of an element in a list by its index"},
    {"lrange", 4, R, 1, 1, 1, CLASS_READ, cmd_lrange, "list",
     "Returns a range of elements from a list"},
    {"ltrim", 4, W, 1, 1, 1, CLASS_WRITE, cmd_ltrim, "list",
     "Removes elements from both ends a list"},
    {"lrem", 4, W, 1, 1, 1, CLASS_WRITE, cmd_lrem, "list", "Removes elements from a list"},
    {"linsert", 5, W, 1, 1, 1, CLASS_WRITE, cmd_linsert, "list",
     "Inserts an element before or after another element in a list"},
    {"rpoplpush", 3, W, 1, 2, 1, CLASS_WRITE, cmd_rpoplpush, "list",
     "Returns the last element of a list after removing and pushing it to another list"},
    {"lmove", 5, W, 1, 2, 1, CLASS_WRITE, cmd_lmove, "list",
     "Returns an element after popping it from one list and pushing it to another"},
    {"lpos", -3, R, 1, 1, 1, CLASS_READ, cmd_lpos, "list",
     "Returns the index of matching elements in a list"},
    {"lmpop", -4, W, 0, 0, 0, CLASS_WRITE, cmd_lmpop, "list",
     "Returns multiple elements from a list after removing them", NULL, 1},
    /* blocking lists (cmd_blocking.c, blocking.h) */
    {"blpop", -3, W, 1, -2, 1, CLASS_WRITE, cmd_blpop, "list",
     "Removes and returns the first element in a list. Blocks until an element is available "
     "otherwise"},
    {"brpop", -3, W, 1, -2, 1, CLASS_WRITE, cmd_brpop, "list",
     "Removes and returns the last element in a list. Blocks until an element is available "
     "otherwise"},
    {"brpoplpush", 4, W, 1, 2, 1, CLASS_WRITE, cmd_brpoplpush, "list",
     "Pops an element from a list, pushes it to another list and returns it. Block until an "
     "element is available otherwise"},
    {"blmove", 6, W, 1, 2, 1, CLASS_WRITE, cmd_blmove, "list",
     "Pops an element from a list, pushes it to another list and returns it. Blocks until an "
     "element is available otherwise"},
    {"blmpop", -5, W, 0, 0, 0, CLASS_WRITE, cmd_blmpop, "list",
     "Pops the first element from one of multiple lists. Blocks until an element is available "
     "otherwise",
     NULL, 2},
    /* sorted sets (cmd_zset.c, zset.h) */
    {"zadd", -4, W | F, 1, 1, 1, CLASS_WRITE, cmd_zadd, "sorted_set",
     "Adds one or more members to a sorted set, or updates their scores"},
    {"zincrby", 4, W | F, 1, 1, 1, CLASS_WRITE, cmd_zincrby, "sorted_set",
     "Increments the score of a member in a sorted set"},
    {"zcard", 2, R | F, 1, 1, 1, CLASS_READ, cmd_zcard, "sorted_set",
     "Returns the number of members in a sorted set"},
    {"zscore", 3, R | F, 1, 1, 1, CLASS_READ, cmd_zscore, "sorted_set",
     "Returns the score of a member in a sorted set"},
    {"zmscore", -3, R | F, 1, 1, 1, CLASS_READ, cmd_zmscore, "sorted_set",
     "Returns the score of one or more members in a sorted set"},
    {"zrem", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_zrem, "sorted_set",
     "Removes one or more members from a sorted set"},
    {"zrange", -4, R, 1, 1, 1, CLASS_READ, cmd_zrange, "sorted_set",
     "Returns members in a sorted set within a range of indexes"},
    {"zrevrange", -4, R, 1, 1, 1, CLASS_READ, cmd_zrevrange, "sorted_set",
     "Returns members in a sorted set within a range of indexes in reverse order"},
    {"zrangebyscore", -4, R, 1, 1, 1, CLASS_READ, cmd_zrangebyscore, "sorted_set",
     "Returns members in a sorted set within a range of scores"},
    {"zrevrangebyscore", -4, R, 1, 1, 1, CLASS_READ, cmd_zrevrangebyscore, "sorted_set",
     "Returns members in a sorted set within a range of scores in reverse order"},
    {"zcount", 4, R | F, 1, 1, 1, CLASS_READ, cmd_zcount, "sorted_set",
     "Returns the count of members in a sorted set that have scores within a range"},
    {"zrank", 3, R | F, 1, 1, 1, CLASS_READ, cmd_zrank, "sorted_set",
     "Returns the index of a member in a sorted set ordered by ascending scores"},
    {"zrevrank", 3, R | F, 1, 1, 1, CLASS_READ, cmd_zrevrank, "sorted_set",
     "Returns the index of a member in a sorted set ordered by descending scores"},
    {"zscan", -3, R, 1, 1, 1, CLASS_READ, cmd_zscan, "sorted_set",
     "Iterates over members and scores of a sorted set"},
    {"zrangebylex", -4, R, 1, 1, 1, CLASS_READ, cmd_zrangebylex, "sorted_set",
     "Returns members in a sorted set within a lexicographical range"},
    {"zrevrangebylex", -4, R, 1, 1, 1, CLASS_READ, cmd_zrevrangebylex, "sorted_set",
     "Returns members in a sorted set within a lexicographical range in reverse order"},
    {"zrangestore", -5, W, 1, 2, 1, CLASS_WRITE, cmd_zrangestore, "sorted_set",
     "Stores a range of members from sorted set in a key"},
    {"zlexcount", 4, R | F, 1, 1, 1, CLASS_READ, cmd_zlexcount, "sorted_set",
     "Returns the number of members in a sorted set within a lexicographical range"},
    {"zremrangebyrank", 4, W, 1, 1, 1, CLASS_WRITE, cmd_zremrangebyrank, "sorted_set",
     "Removes members in a sorted set within a range of indexes"},
    {"zremrangebyscore", 4, W, 1, 1, 1, CLASS_WRITE, cmd_zremrangebyscore, "sorted_set",
     "Removes members in a sorted set within a range of scores"},
    {"zremrangebylex", 4, W, 1, 1, 1, CLASS_WRITE, cmd_zremrangebylex, "sorted_set",
     "Removes members in a sorted set within a lexicographical range"},
    {"zpopmin", -2, W | F, 1, 1, 1, CLASS_WRITE, cmd_zpopmin, "sorted_set",
     "Returns the lowest-scoring members from a sorted set after removing them"},
    {"zpopmax", -2, W | F, 1, 1, 1, CLASS_WRITE, cmd_zpopmax, "sorted_set",
     "Returns the highest-scoring members from a sorted set after removing them"},
    {"zmpop", -4, W, 0, 0, 0, CLASS_WRITE, cmd_zmpop, "sorted_set",
     "Returns the highest- or lowest-scoring members from one or more sorted sets after "
     "removing them",
     NULL, 1},
    {"zrandmember", -2, R, 1, 1, 1, CLASS_READ, cmd_zrandmember, "sorted_set",
     "Returns one or more random members from a sorted set"},
    {"zunion", -3, R, 0, 0, 0, CLASS_READ, cmd_zunion, "sorted_set",
     "Returns the union of multiple sorted sets", NULL, 1},
    {"zinter", -3, R, 0, 0, 0, CLASS_READ, cmd_zinter, "sorted_set",
     "Returns the intersect of multiple sorted sets", NULL, 1},
    {"zdiff", -3, R, 0, 0, 0, CLASS_READ, cmd_zdiff, "sorted_set",
     "Returns the difference between multiple sorted sets", NULL, 1},
    {"zunionstore", -4, W, 1, 1, 1, CLASS_WRITE, cmd_zunionstore, "sorted_set",
     "Stores the union of multiple sorted sets in a key", NULL, 2, getkeys_store_numkeys},
    {"zinterstore", -4, W, 1, 1, 1, CLASS_WRITE, cmd_zinterstore, "sorted_set",
     "Stores the intersect of multiple sorted sets in a key", NULL, 2, getkeys_store_numkeys},
    {"zdiffstore", -4, W, 1, 1, 1, CLASS_WRITE, cmd_zdiffstore, "sorted_set",
     "Stores the difference of multiple sorted sets in a key", NULL, 2, getkeys_store_numkeys},
    {"zintercard", -3, R, 0, 0, 0, CLASS_READ, cmd_zintercard, "sorted_set",
     "Returns the number of members of the intersect of multiple sorted sets", NULL, 1},
    /* blocking sorted-set pops (cmd_zblocking.c over blocking.h) */
    {"bzpopmin", -3, W, 1, -2, 1, CLASS_WRITE, cmd_bzpopmin, "sorted_set",
     "Removes and returns the member with the lowest score from one or more sorted sets. "
     "Blocks until a member is available otherwise"},
    {"bzpopmax", -3, W, 1, -2, 1, CLASS_WRITE, cmd_bzpopmax, "sorted_set",
     "Removes and returns the member with the highest score from one or more sorted sets. "
     "Blocks until a member available otherwise"},
    {"bzmpop", -5, W, 0, 0, 0, CLASS_WRITE, cmd_bzmpop, "sorted_set",
     "Removes and returns a member by score from one or more sorted sets. Blocks until a "
     "member is available otherwise",
     NULL, 2},
    /* geo, over sorted sets (cmd_geo.c, geohash.h) */
    {"geoadd", -5, W, 1, 1, 1, CLASS_WRITE, cmd_geoadd, "geo",
     "Adds one or more members to a geospatial index. The key is created if it doesn't exist"},
    {"geopos", -2, R, 1, 1, 1, CLASS_READ, cmd_geopos, "geo",
     "Returns the longitude and latitude of members from a geospatial index"},
    {"geodist", -4, R, 1, 1, 1, CLASS_READ, cmd_geodist, "geo",
     "Returns the distance between two members of a geospatial index"},
    {"geohash", -2, R, 1, 1, 1, CLASS_READ, cmd_geohash, "geo",
     "Returns members from a geospatial index as geohash strings"},
    {"georadius", -6, W, 1, 1, 1, CLASS_WRITE, cmd_georadius, "geo",
     "Queries a geospatial index for members within a distance from a coordinate, optionally "
     "stores the result",
     NULL, 0, getkeys_georadius},
    {"georadius_ro", -6, R, 1, 1, 1, CLASS_READ, cmd_georadius_ro, "geo",
     "Returns members from a geospatial index that are within a distance from a coordinate"},
    {"georadiusbymember", -5, W, 1, 1, 1, CLASS_WRITE, cmd_georadiusbymember, "geo",
     "Queries a geospatial index for members within a distance from a member, optionally "
     "stores the result",
     NULL, 0, getkeys_georadiusbymember},
    {"georadiusbymember_ro", -5, R, 1, 1, 1, CLASS_READ, cmd_georadiusbymember_ro, "geo",
     "Returns members from a geospatial index that are within a distance from a member"},
    {"geosearch", -7, R, 1, 1, 1, CLASS_READ, cmd_geosearch, "geo",
     "Queries a geospatial index for members inside an area of a box or a circle"},
    {"geosearchstore", -8, W, 1, 2, 1, CLASS_WRITE, cmd_geosearchstore, "geo",
     "Queries a geospatial index for members inside an area of a box or a circle, optionally "
     "stores the result"},
    /* streams (cmd_stream.c, cmd_xread.c, cmd_xgroup.c; stream.h) */
    {"xadd", -5, W | F, 1, 1, 1, CLASS_WRITE, cmd_xadd, "stream",
     "Appends a new entry to a stream"},
    {"xlen", 2, R | F, 1, 1, 1, CLASS_READ, cmd_xlen, "stream",
     "Return the number of entries in a stream"},
    {"xrange", -4, R, 1, 1, 1, CLASS_READ, cmd_xrange, "stream",
     "Returns the messages from a stream within a range of IDs"},
    {"xrevrange", -4, R, 1, 1, 1, CLASS_READ, cmd_xrevrange, "stream",
     "Returns the messages from a stream within a range of IDs in reverse order"},
    {"xdel", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_xdel, "stream",
     "Returns the number of messages after removing them from a stream"},
    {"xtrim", -4, W, 1, 1, 1, CLASS_WRITE, cmd_xtrim, "stream",
     "Deletes messages from the beginning of a stream"},
    {"xsetid", -3, W | F, 1, 1, 1, CLASS_WRITE, cmd_xsetid, "stream",
     "An internal command for replicating stream values"},
    {"xread", -4, R, 0, 0, 0, CLASS_READ, cmd_xread, "stream",
     "Returns messages from multiple streams with IDs greater than the ones requested. Blocks "
     "until a message is available otherwise",
     NULL, 0, getkeys_xread},
    {"xreadgroup", -7, W, 0, 0, 0, CLASS_WRITE, cmd_xreadgroup, "stream",
     "Returns new or historical messages from a stream for a consumer in a group. Blocks "
     "until a message is available otherwise",
     NULL, 0, getkeys_xread},
    {"xgroup", -2, 0, 0, 0, 0, CLASS_WRITE, cmd_xgroup, "stream",
     "A container for consumer groups commands", xgroup_subs},
    {"xack", -4, W | F, 1, 1, 1, CLASS_WRITE, cmd_xack, "stream",
     "Returns the number of messages that were successfully acknowledged by the consumer group "
     "member of a stream"},
    {"xpending", -3, R, 1, 1, 1, CLASS_READ, cmd_xpending, "stream",
     "Returns the information and entries from a stream consumer group's pending entries list"},
    {"xclaim", -6, W | F, 1, 1, 1, CLASS_WRITE, cmd_xclaim, "stream",
     "Changes, or acquires, ownership of a message in a consumer group, as if the message was "
     "delivered a consumer group member"},
    {"xautoclaim", -6, W | F, 1, 1, 1, CLASS_WRITE, cmd_xautoclaim, "stream",
     "Changes, or acquires, ownership of messages in a consumer group, as if the messages were "
     "delivered to as consumer group member"},
    {"xinfo", -2, 0, 0, 0, 0, CLASS_READ, cmd_xinfo, "stream",
     "A container for stream introspection commands", xinfo_subs},
    /* scripting (script.h); numkeys at argv[2] */
    {"eval", -3, CMD_NOSCRIPT, 0, 0, 0, CLASS_WRITE, cmd_eval, "scripting",
     "Executes a server-side Lua script", NULL, 2},
    {"evalsha", -3, CMD_NOSCRIPT, 0, 0, 0, CLASS_WRITE, cmd_evalsha, "scripting",
     "Executes a server-side Lua script by SHA1 digest", NULL, 2},
    {"eval_ro", -3, R | CMD_NOSCRIPT, 0, 0, 0, CLASS_READ, cmd_eval_ro, "scripting",
     "Executes a read-only server-side Lua script", NULL, 2},
    {"evalsha_ro", -3, R | CMD_NOSCRIPT, 0, 0, 0, CLASS_READ, cmd_evalsha_ro, "scripting",
     "Executes a read-only server-side Lua script by SHA1 digest", NULL, 2},
    {"fcall", -3, CMD_NOSCRIPT, 0, 0, 0, CLASS_WRITE, cmd_fcall, "scripting", "Invokes a function",
     NULL, 2},
    {"fcall_ro", -3, R | CMD_NOSCRIPT, 0, 0, 0, CLASS_READ, cmd_fcall_ro, "scripting",
     "Invokes a read-only function", NULL, 2},
    {"script", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_script, "scripting",
     "A container for Lua scripts management commands", script_subs},
    /* transactions */
    {"multi", 1, F | CMD_NOQUEUE | CMD_ALLOW_BUSY, 0, 0, 0, CLASS_ADMIN, cmd_multi, "transactions",
     "Starts a transaction"},
    {"exec", 1, CMD_NOQUEUE, 0, 0, 0, CLASS_ADMIN, cmd_exec, "transactions",
     "Executes all commands in a transaction"},
    {"discard", 1, F | CMD_NOQUEUE | CMD_ALLOW_BUSY, 0, 0, 0, CLASS_ADMIN, cmd_discard,
     "transactions", "Discards a transaction"},
    {"watch", -2, F | CMD_NOQUEUE | CMD_ALLOW_BUSY, 1, -1, 1, CLASS_ADMIN, cmd_watch,
     "transactions", "Monitors changes to keys to determine the execution of a transaction"},
    {"unwatch", 1, F | CMD_ALLOW_BUSY, 0, 0, 0, CLASS_ADMIN, cmd_unwatch, "transactions",
     "Forgets about watched keys of a transaction"},
    /* connection and server */
    {"ping", -1, F, 0, 0, 0, CLASS_ADMIN, cmd_ping, "connection",
     "Returns the server's liveness response"},
    {"echo", 2, F, 0, 0, 0, CLASS_ADMIN, cmd_echo, "connection", "Returns the given string"},
    {"auth", -2, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_auth, "connection",
     "Authenticates the connection"},
    {"hello", -1, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_hello, "connection",
     "Handshakes with the server"},
    {"quit", -1, NA | F | CMD_NOQUEUE, 0, 0, 0, CLASS_ADMIN, cmd_quit, "connection",
     "Closes the connection"},
    {"select", 2, F, 0, 0, 0, CLASS_ADMIN, cmd_select, "connection",
     "Changes the selected database"},
    {"readonly", 1, F, 0, 0, 0, CLASS_ADMIN, cmd_readonly, "cluster",
     "Enables read-only queries for a connection"},
    {"readwrite", 1, F, 0, 0, 0, CLASS_ADMIN, cmd_readwrite, "cluster",
     "Enables read-write queries for a connection"},
    {"asking", 1, F, 0, 0, 0, CLASS_ADMIN, cmd_ok, "cluster",
     "Signals that a cluster client is following a redirection"},
    {"client", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_client, "connection",
     "A container for client connection commands", client_subs},
    {"dbsize", 1, R | F, 0, 0, 0, CLASS_ADMIN, cmd_dbsize, "server", "Returns the number of keys"},
    {"monitor", 1, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_monitor, "server",
     "Listens for all requests received by the server in real-time"},
    {"info", -1, 0, 0, 0, 0, CLASS_ADMIN, cmd_info, "server",
     "Returns information and statistics about the server"},
    /* persistence and stop (cmd_save.c, save.h) */
    {"save", 1, CMD_ADMIN | CMD_NOSCRIPT | CMD_NOMULTI, 0, 0, 0, CLASS_ADMIN, cmd_save, "server",
     "Synchronously saves the database(s) to disk"},
    {"bgsave", -1, CMD_ADMIN | CMD_NOSCRIPT, 0, 0, 0, CLASS_ADMIN, cmd_bgsave, "server",
     "Asynchronously saves the database(s) to disk"},
    {"lastsave", 1, CMD_LOADING | CMD_STALE | F, 0, 0, 0, CLASS_ADMIN, cmd_lastsave, "server",
     "Returns the Unix timestamp of the last successful save to disk"},
    {"shutdown", -1, CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOMULTI, 0, 0, 0,
     CLASS_ADMIN, cmd_shutdown, "server",
     "Synchronously saves the database(s) to disk and shuts "
     "down the Redis server"},
    {"latency", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_latency, "server",
     "A container for latency diagnostics commands", latency_subs},
    {"slowlog", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_slowlog, "server",
     "A container for slow log commands", slowlog_subs},
    {"config", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_config, "server",
     "A container for server configuration commands", config_subs},
    {"command", -1, 0, 0, 0, 0, CLASS_ADMIN, cmd_command, "server",
     "Returns detailed information about all commands", command_subs},
    {"cluster", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster, "cluster",
     "A container for Redis Cluster commands", cluster_subs},
};

const size_t cmd_table_len = sizeof cmd_table / sizeof *cmd_table;
