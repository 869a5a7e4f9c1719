/* getkeys.h - key positions of commands whose keys depend on their
 * arguments in a way a table row (first, last, step, keynum) cannot state:
 * redis' getkeys_proc functions, as cmd_def.getkeys (cmd.h). Dispatch
 * routes with them (every key in one slot, -CROSSSLOT otherwise), COMMAND
 * GETKEYS lists them and COMMAND INFO reports such commands "movablekeys".
 *
 * Each takes the request argv[0..argc) (argv[0] the command), writes the
 * argv indexes of its keys to pos (the caller gives room for argc entries;
 * no function writes more than argc) and returns how many, or -1 when the
 * arguments do not name keys validly (a bad numkeys: the handler replies
 * its own error). Pure functions over the arguments: any thread.
 */
#ifndef KEEL_NODE_GETKEYS_H
#define KEEL_NODE_GETKEYS_H

#include <stddef.h>

/* ZUNIONSTORE / ZINTERSTORE / ZDIFFSTORE dst numkeys key...: the
 * destination, then the numkeys sources (redis' zunionInterDiffStoreGetKeys;
 * any number of them: no cap). */
int getkeys_store_numkeys(int argc, char *const *argv, const size_t *argvlen, int *pos);
/* GEORADIUS key lon lat radius unit ... [STORE k] [STOREDIST k]: the key,
 * then the key after the first STORE and the first STOREDIST from argv[6]
 * (redis 7.0's keyword key specs). */
int getkeys_georadius(int argc, char *const *argv, const size_t *argvlen, int *pos);
/* GEORADIUSBYMEMBER key member radius unit ...: the same from argv[5]. */
int getkeys_georadiusbymember(int argc, char *const *argv, const size_t *argvlen, int *pos);
/* MIGRATE host port key db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 u pw]
 * [KEYS k...]: argv[3], or the keys after KEYS (none when argv[3] is not
 * empty then: the handler's error), as redis' migrateGetKeys. */
int getkeys_migrate(int argc, char *const *argv, const size_t *argvlen, int *pos);

#endif
