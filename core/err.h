/* Error codes and messages shared by every layer.
 *
 * Every fallible call returns a vy_err and, on failure, fills a vy_error whose
 * message reads "WHAT WENT WRONG (Fix: WHAT TO DO)". Nothing in vyrefs aborts on
 * bad input: callers get a code to map (vy_err_errno) and a message to show. */
#ifndef VY_ERR_H
#define VY_ERR_H

#include <stddef.h>

typedef enum vy_err {
	VY_OK = 0,
	VY_EINVAL,    /* bad input: wrong length, bad argument, zero-length buffer */
	VY_ERANGE,    /* an offset or length outside a buffer */
	VY_ENOENT,    /* unknown handle */
	VY_ENOSPC,    /* budget or device memory exhausted */
	VY_EBUSY,     /* bound to running work */
	VY_EOVERFLOW, /* a size, offset or id does not fit its type */
	VY_ENOMEM,    /* host memory exhausted */
	VY_ENODEV,    /* no driver, no device, or backend not built in */
	VY_EDEVICE,   /* the driver reported a failure */
	VY_ENOTSUP,   /* this backend cannot do that */
	VY_EINTERNAL, /* an internal invariant broke (accounting drift) */
	VY_ETIMEDOUT, /* work ran past its time limit and was stopped */
	VY_EACCES,    /* not permitted: e.g. a file opened read-only to map */
	VY_EINTR,     /* stopped on request: the caller got a signal */
	VY_EPERM,     /* refused whoever asks: an append-only or immutable file, a pseudo file */
	VY_EMFILE,    /* this process has no file descriptor left */
	VY_EXDEV,     /* the other file's filesystem is out of sight: copy it the plain way */
} vy_err;

#define VY_ERR_LAST VY_EXDEV /* codes that cross a process boundary are checked against it */

#define VY_ERROR_MSG_MAX 512

typedef struct vy_error {
	vy_err code;
	char msg[VY_ERROR_MSG_MAX];
} vy_error;

/* Fill `e` (may be NULL) with "<fmt...> (Fix: <fix>)" and return `code`. */
vy_err vy_fail(vy_error *e, vy_err code, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Put context in front of an error's message ("FILE line 3: ..."), cutting
 * the old text (never its Fix hint) if the whole would not fit. */
void vy_error_prefix(vy_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For cleanups that go on after a failure: the first failure wins. If `rc`
 * failed and *first is still VY_OK, record rc in *first and copy `src` into
 * `dst` (may be NULL). */
void vy_error_keep_first(vy_err *first, vy_err rc, vy_error *dst, const vy_error *src);

/* Reset `e` to VY_OK with an empty message. */
void vy_error_clear(vy_error *e);

/* Stable lower-case name of a code, e.g. "enospc". */
const char *vy_err_name(vy_err code);

/* The errno a filesystem operation should return for `code` (EINVAL, ENOSPC,
 * EBUSY, EIO for device failures, ...). */
int vy_err_errno(vy_err code);

#endif
