/* tmpdir.h - fresh temporary directories for unit tests (header only).
 *
 * tmpdir_make(buf, "name") fills buf (at least TMPDIR_MAX bytes) with a new
 * directory /tmp/keel-name-XXXXXX (mkdtemp); returns 0 or -1.
 * tmpdir_remove(dir) removes it and everything under it.
 */
#ifndef KEEL_TESTS_TMPDIR_H
#define KEEL_TESTS_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define TMPDIR_MAX 64

static inline int tmpdir_rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static inline int tmpdir_make(char *buf, const char *name) {
    snprintf(buf, TMPDIR_MAX, "/tmp/keel-%s-XXXXXX", name);
    return mkdtemp(buf) ? 0 : -1;
}

static inline void tmpdir_remove(const char *dir) {
    nftw(dir, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
