/* getkeys.c - key positions that depend on the arguments (getkeys.h). Each
 * function follows the redis 7.0 function or key spec named in the header,
 * so COMMAND GETKEYS answers as redis-server does and routing sees every
 * key a command will touch. */
#include "node/getkeys.h"
#include "node/cmd.h"

#include <strings.h>

int getkeys_store_numkeys(int argc, char *const *argv, const size_t *argvlen, int *pos) {
    long long nk;
    if (argc < 3 || arg_ll(argv[2], argvlen[2], &nk) || nk < 1 || nk > argc - 3) return -1;
    int n = 0;
    pos[n++] = 1;
    for (long long i = 0; i < nk; i++)
        pos[n++] = 3 + (int)i;
    return n;
}

/* The key after the first `word` at or after argv[from], or 0. */
static int keyword_key(int argc, char *const *argv, int from, const char *word) {
    for (int i = from; i + 1 < argc; i++)
        if (!strcasecmp(argv[i], word)) return i + 1;
    return 0;
}

static int georadius_keys(int argc, char *const *argv, int from, int *pos) {
    if (argc < 2) return -1;
    int n = 0;
    pos[n++] = 1;
    int s = keyword_key(argc, argv, from, "store");
    int d = keyword_key(argc, argv, from, "storedist");
    if (s) pos[n++] = s;
    if (d) pos[n++] = d;
    return n;
}

int getkeys_georadius(int argc, char *const *argv, const size_t *argvlen, int *pos) {
    (void)argvlen;
    return georadius_keys(argc, argv, 6, pos);
}

int getkeys_georadiusbymember(int argc, char *const *argv, const size_t *argvlen, int *pos) {
    (void)argvlen;
    return georadius_keys(argc, argv, 5, pos);
}

int getkeys_migrate(int argc, char *const *argv, const size_t *argvlen, int *pos) {
    if (argc < 6) return -1;
    int first = 3, num = 1;
    for (int i = 6; i < argc; i++) {
        if (!strcasecmp(argv[i], "auth")) {
            i++;
        } else if (!strcasecmp(argv[i], "auth2")) {
            i += 2;
        } else if (!strcasecmp(argv[i], "keys")) {
            if (argvlen[3] > 0) return 0; /* the handler's error */
            first = i + 1;
            num = argc - first;
            break;
        }
    }
    for (int i = 0; i < num; i++)
        pos[i] = first + i;
    return num;
}
