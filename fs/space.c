/* statfs's space (see space.h). */
#include "fs/space.h"

void vy_space_get(vy_fs *fs, vy_space *out)
{
	*out = (vy_space){0};
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_store_usage u;
		vy_store_usage_get(fs->dev[d].core->store, &u);
		uint64_t used = u.resident < u.budget ? u.resident : u.budget;
		out->total += u.budget;
		out->free += u.budget - used;
		/* Never more than free: the driver's view may be larger. */
		uint64_t room = vy_store_room(fs->dev[d].core->store);
		out->avail += room < u.budget - used ? room : u.budget - used;
	}
}
