/* The backends (cuda, host) and the choice between them (backend.c):
 * apart from core/device.h, whose helpers the backends use, so the
 * selection sits above them. */
#ifndef VY_BACKEND_H
#define VY_BACKEND_H

#include "core/device.h"

/* Open the backend `opt` asks for. With VY_BACKEND_AUTO, a machine without a
 * usable CUDA driver or device gets the host backend, and `note` (if given)
 * receives one line saying why, for the caller to print once; otherwise note
 * is set to "". */
vy_err vy_device_open(const vy_device_options *opt, vy_device **out, char *note, size_t note_cap, vy_error *e);
/* The backends, for vy_device_open and for tests that name one. */
vy_err vy_device_cuda_open(int ordinal, vy_device **out, vy_error *e);
vy_err vy_device_host_open(uint64_t capacity, vy_device **out, vy_error *e);
/* How many GPUs the CUDA driver sees (VY_ENODEV: none, or no driver). */
vy_err vy_device_cuda_count(int *count, vy_error *e);

/* "auto" | "cuda" | "host" -> kind; false for anything else. */
int vy_backend_parse(const char *s, vy_backend_kind *out);
const char *vy_backend_name(vy_backend_kind k);

#endif
