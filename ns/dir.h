/* Directory entries: name -> inode, in creation order for readdir.
 *
 * Lookups go through a hash of the name (xxHash); readdir walks entries in
 * the order they were made, by a cookie that never changes while the entry
 * lives, so a readdir resumed at an offset neither skips nor repeats
 * entries that stayed. Not locked: the namespace lock covers it. */
#ifndef VY_DIR_H
#define VY_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vy_dirent {
	char *name;
	uint64_t ino;
	uint64_t cookie; /* readdir offset of the entry after this one - 1 */
	struct vy_dirent *next_in_bucket;
} vy_dirent;

/* A place in creation order; a removed entry leaves its cookie and NULL. */
typedef struct vy_dirslot {
	uint64_t cookie;
	vy_dirent *e;
} vy_dirslot;

typedef struct vy_dir {
	vy_dirent **buckets;
	size_t nbuckets;
	vy_dirslot *order; /* sorted by cookie */
	size_t norder, cap_order, holes;
	size_t count;
	uint64_t next_cookie;
} vy_dir;

void vy_dir_init(vy_dir *d);
void vy_dir_destroy(vy_dir *d);
vy_dirent *vy_dir_find(const vy_dir *d, const char *name);
/* Add name -> ino (the name must be absent). False when memory runs out. */
bool vy_dir_add(vy_dir *d, const char *name, uint64_t ino);
/* The same at `cookie` (a successor making a kept directory again, so a
 * readdir resumed at an offset goes on where it was): false also when the
 * name is there, or a live entry has that cookie, or it is 0. */
bool vy_dir_add_at(vy_dir *d, const char *name, uint64_t ino, uint64_t cookie);
/* Remove name; false if absent. */
bool vy_dir_remove(vy_dir *d, const char *name);
/* The first entry with cookie > after, or NULL. */
const vy_dirent *vy_dir_next(const vy_dir *d, uint64_t after);
/* The first entry (in readdir order) that names inode `ino`, or NULL: a
 * walk of the whole directory, for small ones. */
const vy_dirent *vy_dir_naming(const vy_dir *d, uint64_t ino);

#endif
