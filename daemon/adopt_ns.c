/* A successor's namespace (adopt_ns.h). */
#include "daemon/adopt_ns.h"
#include "core/store_keep.h"
#include "daemon/keeper_link.h"
#include "daemon/keeper_memory.h"
#include "daemon/kept_counters.h"
#include "daemon/log.h"
#include "keeper/wire.h"
#include "fs/backed.h"
#include "fs/fs.h"
#include "fs/wbehind.h"
#include "fs/wbehind_keep.h"
#include "persist/preload.h"
#include "persist/replay.h"
#include "persist/replay_kernel.h"
#include "persist/format.h"
#include "persist/writer.h"
#include "state/state.h"

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

bool vy_adopt_namespace(struct vy_fs *fs, struct vy_state *st, struct vy_keeper_adoption *ad,
			struct vy_keeper_link *link, struct vy_keeper_memory *km, struct vy_kept_conns *conns,
			struct vy_kept_counters *counters)
{
	char why[256];
	vy_error e;
	if (vy_keeper_memory_init(km, link->sock, link->pid, &ad->memory, why, sizeof(why)) != 0) {
		vy_log(LOG_ERR, "takeover: %s; serving an empty namespace (the kept memory stays with the keeper; Fix: "
				"umount and mount again)", why);
		return false;
	}
	vy_kept_counters_claim(counters, &ad->memory); /* its slot counted in use: not settled */
	vy_err rc = VY_OK;
	for (unsigned d = 0; rc == VY_OK && d < fs->ndev; d++)
		rc = vy_store_keep(fs->dev[d].core->store, &km->sink, &e);
	if (rc != VY_OK) {
		vy_log(LOG_ERR, "takeover: %s; serving an empty namespace", e.msg);
		vy_keeper_memory_settle(km, &ad->memory);
		return true;
	}
	vy_shadow sh;
	vy_replay_counts n;
	rc = vy_replay(fs, st, &ad->memory, ad->preload, &sh, &n, &e);
	vy_preload_free(ad->preload); /* its copy is sh now, or not to be used */
	ad->preload = NULL;
	if (rc == VY_EACCES || (fs->tier && rc != VY_OK && rc != VY_ENOENT)) {
		/* backing=DIR names another directory than the kept files',
		 * or none: serving them would mix two trees or show zeros;
		 * and a backing mount made again in part has files without
		 * their items (read as zeros, never written back). Fail
		 * closed. */
		vy_log(LOG_ERR, "takeover: %s; the mount ends", e.msg);
		_exit(VY_EXIT_BROKEN);
	}
	if (rc == VY_OK && vy_replay_mapconns(&sh, &ad->memory, conns, &e) != VY_OK)
		vy_log(LOG_ERR, "takeover: %s; the clients' mappings end", e.msg);
	uint64_t wb_applied = 0, wb_skipped = 0;
	if (rc == VY_OK) /* before any request: resends read these bytes */
		vy_wbk_adopt(fs, &sh.wbehind, &ad->memory, vy_wbehind_fail, &wb_applied, &wb_skipped);
	uint32_t wb_dropped = rc == VY_OK && sh.wbehind.slot && !fs->wbk ? sh.wbehind.slot : 0;
	if (wb_dropped)
		sh.wbehind = (vy_p_wbehind){0}; /* its slot goes with what no file took */
	if (wb_applied || wb_skipped)
		vy_log(LOG_NOTICE, "takeover: %" PRIu64 " write-behind slots copied to their files (%" PRIu64
				   " of files gone or not copied)", wb_applied, wb_skipped);
	size_t due = rc == VY_OK ? vy_backed_kept_due(fs) : 0; /* after the slots: their bytes go back too */
	if (due)
		vy_log(LOG_NOTICE, "takeover: %zu files of the backing directory have bytes not yet written back: "
				   "written back from now", due);
	vy_keeper_memory_settle(km, &ad->memory); /* what no file or connection took goes */
	if (rc == VY_ENOENT) {
		vy_shadow_destroy(&sh);
		rc = vy_persist_start(fs, st, NULL, &e); /* the first daemon kept nothing yet */
	} else if (rc == VY_OK) {
		char ahead[96] = "";
		if (n.followed)
			snprintf(ahead, sizeof(ahead), " (%" PRIu64 " records of it %s)", n.followed,
				 ad->preload_how ? ad->preload_how : "loaded ahead");
		vy_log(LOG_NOTICE, "takeover: %" PRIu64 " records kept: %" PRIu64 " inodes, %" PRIu64 " names, %" PRIu64
				   " files with their memory, %" PRIu64 " files lost their bytes, %" PRIu64 " nameless inodes freed, %" PRIu64
				   " client connections with %" PRIu64 " mappings (%" PRIu64 " of no kept file), %" PRIu64
				   " modules loaded again (%" PRIu64 " lost); the state loaded in %" PRIu64 " us%s, the inodes made in %" PRIu64 " us, the names in %" PRIu64
				   " us, the memory taken back in %" PRIu64 " us",
		       n.records, n.inodes, n.names, n.files, n.lost, n.dropped, (uint64_t)conns->n, n.mappings,
		       n.mappings_lost, n.modules, n.modules_lost, n.load_us, ahead, n.inodes_us, n.names_us, n.memory_us);
		rc = vy_persist_start(fs, st, &sh, &e);
		if (rc != VY_OK)
			vy_shadow_destroy(&sh);
		else if (wb_dropped) /* the log may still name it: a later successor must not map that slot */
			vy_persist_wbehind(fs, &(vy_p_wbehind){0});
	} else {
		vy_shadow_destroy(&sh);
		vy_log(LOG_ERR, "takeover: the kept namespace cannot be made again: %s; serving what was made of it, and "
				"no longer keeping changes", e.msg);
		return true;
	}
	if (rc != VY_OK)
		vy_log(LOG_ERR, "takeover: cannot keep the namespace on: %s; this mount no longer survives the daemon's "
				"death (Fix: umount and mount again)", e.msg);
	else { /* memory not kept from now on fails closed */
		km->lost = vy_persist_memory_lost;
		atomic_store(&km->lost_fs, fs);
	}
	return true;
}
