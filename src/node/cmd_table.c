/* cmd_table.c - every command keel serves, with redis' arity, flags and key
 * positions (COMMAND reports these, and cluster clients route with them). */
#include "node/cmd.h"

/* clang-format off */
#define H(name) void cmd_##name(cmd_ctx *x);
H(get) H(set) H(setnx) H(getset) H(getdel) H(mget) H(mset) H(del) H(exists)
H(incr) H(incrby) H(decr) H(decrby) H(append) H(strlen)
H(expire) H(pexpire) H(ttl) H(pttl) H(persist)
H(ping) H(echo) H(ok) H(quit) H(auth) H(hello) H(select) H(dbsize) H(info)
H(client) H(client_id) H(client_getname) H(client_setname) H(config) H(config_get)
H(command) H(command_count) H(command_info) H(command_docs) H(command_getkeys)
H(cluster) H(cluster_slots) H(cluster_shards) H(cluster_nodes) H(cluster_info)
H(cluster_myid) H(cluster_keyslot) H(cluster_countkeysinslot) H(cluster_getkeysinslot)
#undef H
/* clang-format on */

#define W (CMD_WRITE)
#define R (CMD_READONLY)
#define F (CMD_FAST)
#define NA (CMD_NOAUTH)
#define END                                                                                        \
    { 0 }

                            static const cmd_def client_subs[] = {
                                {"id", 2, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_client_id, "connection",
                                 "Returns the client ID"},
                                {"getname", 2, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_client_getname,
                                 "connection", "Returns the connection name"},
                                {"setname", 3, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_client_setname,
                                 "connection", "Sets the connection name"},
                                END};

static const cmd_def config_subs[] = {{"get", -3, CMD_ADMIN, 0, 0, 0, CLASS_ADMIN, cmd_config_get,
                                       "server", "Returns configuration parameters"},
                                      END};

static const cmd_def command_subs[] = {{"count", 2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_count,
                                        "server", "Returns a count of commands"},
                                       {"info", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_info,
                                        "server", "Returns information about commands"},
                                       {"docs", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_docs,
                                        "server", "Returns documentary information about commands"},
                                       {"getkeys", -3, 0, 0, 0, 0, CLASS_ADMIN, cmd_command_getkeys,
                                        "server",
                                        "Extracts the key names from an arbitrary command"},
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
    /* connection and server */
    {"ping", -1, F, 0, 0, 0, CLASS_ADMIN, cmd_ping, "connection",
     "Returns the server's liveness response"},
    {"echo", 2, F, 0, 0, 0, CLASS_ADMIN, cmd_echo, "connection", "Returns the given string"},
    {"auth", -2, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_auth, "connection",
     "Authenticates the connection"},
    {"hello", -1, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_hello, "connection",
     "Handshakes with the server"},
    {"quit", -1, NA | F, 0, 0, 0, CLASS_ADMIN, cmd_quit, "connection", "Closes the connection"},
    {"select", 2, F, 0, 0, 0, CLASS_ADMIN, cmd_select, "connection",
     "Changes the selected database"},
    {"readonly", 1, F, 0, 0, 0, CLASS_ADMIN, cmd_ok, "cluster",
     "Enables read-only queries for a connection"},
    {"readwrite", 1, F, 0, 0, 0, CLASS_ADMIN, cmd_ok, "cluster",
     "Enables read-write queries for a connection"},
    {"asking", 1, F, 0, 0, 0, CLASS_ADMIN, cmd_ok, "cluster",
     "Signals that a cluster client is following a redirection"},
    {"client", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_client, "connection",
     "A container for client connection commands", client_subs},
    {"dbsize", 1, R | F, 0, 0, 0, CLASS_ADMIN, cmd_dbsize, "server", "Returns the number of keys"},
    {"info", -1, 0, 0, 0, 0, CLASS_ADMIN, cmd_info, "server",
     "Returns information and statistics about the server"},
    {"config", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_config, "server",
     "A container for server configuration commands", config_subs},
    {"command", -1, 0, 0, 0, 0, CLASS_ADMIN, cmd_command, "server",
     "Returns detailed information about all commands", command_subs},
    {"cluster", -2, 0, 0, 0, 0, CLASS_ADMIN, cmd_cluster, "cluster",
     "A container for Redis Cluster commands", cluster_subs},
};

const size_t cmd_table_len = sizeof cmd_table / sizeof *cmd_table;
