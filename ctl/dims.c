/* Launch dimensions: written, or chosen from an element count. */
#include "ctl/dims.h"

#include <string.h>

/* The block and the device-filling grid for n=COUNT. */
static void occupancy(const vy_function_info *info, const vy_device_info *d, unsigned *block, uint64_t *wave)
{
	if (info->occ_block > 0 && info->occ_grid > 0) {
		*block = (unsigned)info->occ_block;
		*wave = (uint64_t)info->occ_grid;
		return;
	}
	/* No answer from the backend: a fixed one, the same on every run. */
	int most = info->max_threads > 0 ? info->max_threads : VY_DIMS_FALLBACK_BLOCK;
	unsigned b = most < VY_DIMS_FALLBACK_BLOCK ? (unsigned)most : VY_DIMS_FALLBACK_BLOCK;
	*block = b >= 32 ? b / 32 * 32 : b;
	*wave = (uint64_t)(d->multiprocessors > 0 ? d->multiprocessors : 1) * VY_DIMS_FALLBACK_BLOCKS_PER_SM;
}

vy_err vy_launch_dims(const vy_ctl_step *st, const vy_function_info *info, const vy_device_info *d, unsigned grid[3],
		      unsigned block[3], vy_error *e)
{
	memcpy(grid, st->grid, 3 * sizeof(*grid));
	memcpy(block, st->block, 3 * sizeof(*block));
	if (st->has_count) {
		unsigned b;
		uint64_t wave;
		occupancy(info, d, &b, &wave);
		uint64_t blocks = st->count / b + (st->count % b != 0); /* no overflow: b >= 1 */
		if (st->grid_auto && blocks > wave)
			blocks = wave;
		if (blocks > (uint64_t)(d->max_grid[0] > 0 ? d->max_grid[0] : 0))
			return vy_fail(e, VY_EINVAL,
				       "add grid=auto for a grid-stride kernel, or split the work into launches over PATH+OFFSET",
				       "n=%llu needs %llu blocks of %u threads, over the device's %d", (unsigned long long)st->count,
				       (unsigned long long)blocks, b, d->max_grid[0]);
		grid[0] = (unsigned)blocks;
		grid[1] = grid[2] = 1;
		block[0] = b;
		block[1] = block[2] = 1;
	}
	for (int k = 0; k < 3; k++) {
		if (grid[k] > (unsigned)d->max_grid[k])
			return vy_fail(e, VY_EINVAL, "split the work into more blocks or launches",
				       "grid dimension %c=%u is over the device's %d", "xyz"[k], grid[k], d->max_grid[k]);
		if (block[k] > (unsigned)d->max_block[k])
			return vy_fail(e, VY_EINVAL, "use a smaller block", "block dimension %c=%u is over the device's %d",
				       "xyz"[k], block[k], d->max_block[k]);
	}
	uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
	if (threads > (uint64_t)info->max_threads)
		return vy_fail(e, VY_EINVAL, "use fewer threads per block", "a block of %llu threads is over this kernel's %d",
			       (unsigned long long)threads, info->max_threads);
	if (st->shared > (uint32_t)info->max_dynamic_shared)
		return vy_fail(e, VY_EINVAL, "ask for less shared memory", "shared=%u is over this kernel's %d bytes",
			       st->shared, info->max_dynamic_shared);
	return VY_OK;
}
