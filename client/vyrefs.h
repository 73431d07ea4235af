/* libvyrefs: map a file of a vyrefs mount into this process's CUDA context,
 * with no byte copied.
 *
 *     vy_mapping *m;
 *     if (vy_map("/mnt/gpu/weights", 0, &m) != 0)
 *             fprintf(stderr, "%s\n", vy_last_error());
 *     float *w = (float *)vy_mapping_ptr(m);   // a device pointer
 *     ... launch kernels over w[0 .. vy_mapping_size(m) / 4) ...
 *     vy_sync(m);    // your device work is done; `cat` shows it
 *     vy_unmap(m);
 *
 * The file is opened for writing (a mapping can write it), so you need
 * write permission; with VY_MAP_READONLY it is opened for reading only,
 * and the mapping can only be read: a write through it faults in this
 * process, and the file never changes. A read-only mapping needs a mount
 * of protocol 2.4 on the host backend; a GPU cannot keep a program from
 * writing memory it was handed (the importer sets its own access), so on
 * the cuda backend the daemon refuses it, with a Fix (docs/client.md).
 * The mapping is the file's device memory itself: what the GPU program
 * writes is the file. It lasts until vy_unmap or the end of the
 * process; meanwhile the file cannot be resized (EBUSY) and unlinking it
 * frees it only at the last unmap. On a mount with the host backend the
 * pointer is host memory, mapped the same way.
 *
 * Functions return 0 or a negative errno; vy_last_error() says what went
 * wrong on this thread, ending with "(Fix: ...)". Thread-safe. The driver
 * (libcuda.so.1) is loaded at run time: nothing links against it. */
#ifndef VYREFS_H
#define VYREFS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vy_mapping vy_mapping;

/* Map the file at `path` (flags: 0, or VY_MAP_READONLY). */
#define VY_MAP_READONLY 1
int vy_map(const char *path, int flags, vy_mapping **out);
/* The device address (a CUdeviceptr; a host address on the host backend). */
uint64_t vy_mapping_ptr(const vy_mapping *m);
/* The file's size in bytes when it was mapped. */
uint64_t vy_mapping_size(const vy_mapping *m);
/* The CUDA device ordinal of the GPU that holds the file (a mount may
 * serve several), or -1 on the host backend. */
int vy_mapping_device(const vy_mapping *m);
/* Wait for this process's device work, then drop the kernel's cached pages
 * of the file, so readers through the mount see what the GPU wrote. */
int vy_sync(vy_mapping *m);
/* Sync, end the mapping and free `m`. */
int vy_unmap(vy_mapping *m);
/* What the last failing call of this thread said. */
const char *vy_last_error(void);

/* Copy one regular file into, out of or within a vyrefs mount, at the
 * speed of the other side: into a mount, `dst` is created through the mount
 * (so its permissions are checked there) with src's mode bits and sized;
 * then the daemon reads src through the fd this passes it, with `threads`
 * threads (0: one per core, at most 16), pinned memory and its streams;
 * holes in a sparse src are not read (the file reads zeros there). Out of
 * a mount the reverse. Within one mount it is copy_file_range (device to
 * device). With no mount on either side, or a mount too old to copy, it
 * reads and writes. `progress` (may be NULL) is called now and then with
 * bytes done and total. *how (may be NULL) says which way it went. */
enum vy_copy_how { VY_COPY_DAEMON = 1, VY_COPY_IN_MOUNT = 2, VY_COPY_PLAIN = 3 };
int vy_copy_file(const char *src, const char *dst, int threads, void (*progress)(uint64_t done, uint64_t total, void *ctx),
	    void *ctx, int *how);

#ifdef __cplusplus
}
#endif

#endif
