/* A successor's namespace (survive=on, docs/survive.md): made again from
 * the state region and the memory the keeper held, before the successor
 * answers its first request. */
#ifndef VY_ADOPT_NS_H
#define VY_ADOPT_NS_H

#include <stdbool.h>

/* The kept namespace and file memory into `fs` (fresh, nothing served
 * yet), then keeping both on: changes in `st`, memory through `km` (made
 * here over the keeper's link). What cannot be taken back is said in the
 * log; the mount serves on either way. Whether `km` was made (the caller
 * destroys it after its stores). `conns`: the client connections that map
 * files, for the map server (the caller frees what it does not take).
 * `counters`: the .vyre/stats counters adopted already (or NULL). */
struct vy_fs;
struct vy_state;
struct vy_keeper_adoption;
struct vy_keeper_link;
struct vy_keeper_memory;
struct vy_kept_conns;
struct vy_kept_counters;
bool vy_adopt_namespace(struct vy_fs *fs, struct vy_state *st, struct vy_keeper_adoption *ad,
			struct vy_keeper_link *link, struct vy_keeper_memory *km, struct vy_kept_conns *conns,
			struct vy_kept_counters *counters);

#endif
