/* The map server: client programs (libvyrefs, client/) map a file's device
 * memory through it, with no byte copied.
 *
 * It listens on a unix socket whose name `.vyre/socket` holds (a path
 * under /run/vyrefs/ or $XDG_RUNTIME_DIR, or an abstract name), so the
 * mount path alone finds it, for any user who can reach the mount. It
 * trusts nothing a client says about itself: a client proves it may write a
 * file by passing an fd of it, opened for writing, on which the kernel
 * checked the permissions. The fd must be of this mount (its device number)
 * and name a regular file. The reply is an fd of that file's device memory,
 * memory of its own that holds no other file's bytes (a smaller file moves
 * to such memory first). A mapping lasts until the client unmaps it or its
 * connection ends (the client exits or is killed). While a file is mapped
 * its memory cannot move: resizing it is refused (EBUSY), and unlinking it
 * frees it at the last unmap. */
#ifndef VY_MAPSRV_H
#define VY_MAPSRV_H

#include "fs/fs.h"

typedef struct vy_mapsrv vy_mapsrv;

/* Listen for clients of the mount on `mountpoint` (sets fs->mapsrv). */
vy_err vy_mapsrv_start(vy_fs *fs, const char *mountpoint, vy_error *e);
/* Close every connection (ending its mappings) and stop listening, waiting
 * on no client. False when a copy's worker is still stuck in a client's
 * fd: the process must then exit without freeing what it may touch. */
bool vy_mapsrv_stop(vy_fs *fs);
/* survive=on, a successor: serve on the client connections the dead
 * daemon kept (their mappings counted again; persist/replay_kernel.h).
 * Each one taken is cleared from `kc`; one that cannot be is let go, its
 * record forgotten. With no server running, every one is let go. */
struct vy_kept_conns;
void vy_mapsrv_adopt(vy_fs *fs, struct vy_kept_conns *kc);

/* "@NAME" (an abstract socket) or the socket's path, as .vyre/socket
 * shows it. */
const char *vy_mapsrv_name(vy_fs *fs);
/* The mount's device number, as mountinfo listed it when the server
 * started (0: no server). */
dev_t vy_mapsrv_dev(vy_fs *fs);

#endif
