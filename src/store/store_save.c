/* store_save.c - SAVE's meaning in keel (store.h, "Snapshots on demand"):
 * every committed write made durable now and moved out of the memtables
 * into SST files, so the data no longer depends on replaying the WAL.
 * Keel never needs this for safety (the WAL is the durability; see the
 * fsync modes at the top of store.h); SAVE, BGSAVE and SHUTDOWN SAVE ask
 * for it because applications and operators do. */
#include "store/store_int.h"
#include "core/err.h"

#include <stdlib.h>

int store_save_wal(store *s) {
    int rc = store_sync(s, NULL); /* the turn so far, to RocksDB */
    if (!rc) rc = store_sync_wal(s, NULL);
    return rc;
}

int store_flush_memtables(store *s) {
    char *rerr = NULL;
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    if (!fo) return KEEL_ENOMEM;
    rocksdb_flushoptions_set_wait(fo, 1);
    rocksdb_flush_cf(s->db, fo, s->cf_data, &rerr);
    if (!rerr) rocksdb_flush_cf(s->db, fo, s->cf_meta, &rerr);
    rocksdb_flushoptions_destroy(fo);
    return rerr ? store__rerr_log("store_flush_memtables", rerr) : 0;
}

int store_save(store *s) {
    int rc = store_save_wal(s);
    return rc ? rc : store_flush_memtables(s);
}
