/* A launch's grid and block: as the line gives them, or chosen from
 * n=COUNT with the kernel's occupancy answer (vy_function_info's occ_*,
 * from cuOccupancyMaxPotentialBlockSize in the launcher), and checked
 * against the device's and the kernel's limits either way. */
#ifndef VY_DIMS_H
#define VY_DIMS_H

#include "core/device.h"
#include "ctl/plan.h"

/* With n=COUNT: block = the occupancy block (a backend with no answer
 * gets the deterministic one below); grid = enough blocks for one thread
 * per element, or with grid=auto at most the occupancy grid (a
 * device-filling wave, for grid-stride kernels). */
vy_err vy_launch_dims(const vy_ctl_step *st, const vy_function_info *info, const vy_device_info *d, unsigned grid[3],
		      unsigned block[3], vy_error *e);

/* Without an occupancy answer: 256 threads (or the kernel's most, rounded
 * down to a warp), and 8 blocks per multiprocessor (at least 1 of them). */
#define VY_DIMS_FALLBACK_BLOCK 256
#define VY_DIMS_FALLBACK_BLOCKS_PER_SM 8

#endif
