/* CUDA C source to PTX with NVRTC, so the shell needs no nvcc: a `.cu`
 * copied into .vyre/modules/ is compiled when it is closed, then loaded
 * like PTX. NVRTC is loaded at run time (libnvrtc.so.13, .12, ... under
 * CUDA_HOME/lib64 or where the loader finds it; VYREFS_NVRTC=PATH names
 * one and only it), like the driver, so the
 * daemon builds and runs without it. Compiling runs no user code, so it
 * happens in the daemon; loading and running stay in the launcher. */
#ifndef VY_NVRTC_H
#define VY_NVRTC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

typedef struct vy_nvrtc_job {
	const char *name;     /* for messages: NAME.cu */
	const char *src;      /* NUL-terminated CUDA C */
	const char *cflags;   /* kernel_cflags: options for every compile (may be NULL) */
	int cc_major, cc_minor; /* the target; 0.0: compute_75 */
	const char *cache_dir; /* where compiled PTX is kept (NULL: no cache) */
} vy_nvrtc_job;

/* Compile (or find in the cache) *ptx (malloc'd, NUL-terminated) and its
 * log (malloc'd, maybe empty; it has the compiler's line and column). A
 * source that does not compile is VY_EINVAL; no NVRTC here is VY_ENOTSUP
 * with a Fix naming what to install. Options come from the source's first
 * line (`// vyrefs: -DN=4 -use_fast_math`), then cflags. */
vy_err vy_nvrtc_compile(const vy_nvrtc_job *job, char **ptx, size_t *ptx_len, char **log, bool *cache_hit,
			vy_error *e);

#endif
