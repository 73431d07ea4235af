/* The daemon and the OOM killer (issue "survive 2", item 4). Killing the
 * daemon frees none of the files' memory (the keeper, or nobody, holds
 * it: survive=off loses every file, as killing tmpfs would), yet the host
 * backend's file memory counts in its RSS, so it was the killer's first
 * choice. Like tmpfs's pages, it is exempt: oom_score_adj -1000, which
 * the keeper and a successor inherit. Its launchers, which run users'
 * kernels, go back to 0 (launcher/launcher.c). */
#ifndef VY_OOM_H
#define VY_OOM_H

#include <stdbool.h>

/* -1000 for this process (root, or CAP_SYS_RESOURCE); 0 or the errno why
 * not, said in the log with its Fix when `say` (once the mount is there:
 * never on the mount command's terminal). */
int vy_oom_exempt(bool say);

#endif
