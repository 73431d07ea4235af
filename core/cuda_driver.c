/* The cuda backend's driver helpers: error text and the current context. */
#include "core/cuda.h"

#ifdef VY_HAVE_CUDA_H

/* Each open gets a new generation; a thread sets the context current once
 * per generation instead of once per call. */
static _Atomic uint64_t cuda_generation;
static _Thread_local uint64_t cuda_thread_generation;

uint64_t vy_cuda_next_generation(void)
{
	return atomic_fetch_add(&cuda_generation, 1) + 1;
}

vy_err vy_cuda_fail(cuda_device *c, CUresult rc, const char *call, vy_error *e)
{
	const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";
	if (c->api.GetErrorName)
		c->api.GetErrorName(rc, &name);
	if (c->api.GetErrorString)
		c->api.GetErrorString(rc, &text);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY)
		return vy_fail(e, VY_ENOSPC, "free device buffers (delete or truncate files) or lower resident_budget",
			       "%s: %s (%s)", call, name, text);
	if (rc == CUDA_ERROR_INVALID_VALUE)
		return vy_fail(e, VY_EINVAL, "report this bug with the command that caused it",
			       "%s: %s (%s)", call, name, text);
	return vy_fail(e, VY_EDEVICE, "check `nvidia-smi` and the kernel log; if the GPU is healthy, remount",
		       "%s: %s (%s)", call, name, text);
}

vy_err vy_cuda_current(cuda_device *c, vy_error *e)
{
	if (cuda_thread_generation == c->generation)
		return VY_OK;
	CU_CALL(c, e, CtxSetCurrent, (c->ctx));
	cuda_thread_generation = c->generation;
	return VY_OK;
}

#endif
