/* Set-id bits after a change: the kernel's rule, kept in one place for
 * FUSE requests (daemon/session.c) and daemon copies (sock/copysrv.c). A
 * header alone: bench/nullfs links the session without the namespace. */
#ifndef VY_SETID_H
#define VY_SETID_H

#include <stdbool.h>
#include <sys/stat.h>

/* A file's mode after a change of its bytes (chown false: write,
 * truncate, fallocate, a copy into it) or of its owner (chown true), by a
 * caller with CAP_FSETID (`privileged`) or not: the kernel's rule
 * (setattr_should_drop_suidgid, chown_common). A write by anyone else
 * drops set-user-ID, and set-group-ID where group execute is set or the
 * caller is not in the file's group (in_group, asked only then); a chown
 * of anything but a directory drops set-user-ID whoever asks, and
 * set-group-ID by the same group rule. */
static inline mode_t vy_mode_kill_suid(mode_t mode, bool privileged, bool chown, bool (*in_group)(void *ctx),
					void *ctx)
{
	if (chown ? S_ISDIR(mode) : (!S_ISREG(mode) || privileged))
		return mode;
	mode_t kill = S_ISUID;
	if ((mode & S_ISGID) && ((mode & S_IXGRP) || (!privileged && !in_group(ctx))))
		kill |= S_ISGID;
	return mode & ~kill;
}

#endif
