/* Whether a binary may be run as the mount's next daemon by an upgrade
 * (issue "survive 2"): as sshd's StrictModes judges a user's files. The
 * file and every directory above it belong to root or to `owner` (the
 * mounting user), and nobody else may write any of them (a directory with
 * the sticky bit, as /tmp, may be: no one else can replace an entry of
 * ours there); else someone
 * else could put their program where the keeper (root, for a root mount)
 * runs it. Deaths never ask: they run the binary that serves (slot 3). */
#ifndef VY_KEEPER_TRUST_H
#define VY_KEEPER_TRUST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* True when `path` is such a binary; else false, with why (and its Fix). */
bool vy_trusted_binary(const char *path, uid_t owner, char *why, size_t cap);

#endif
