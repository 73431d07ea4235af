/* A validated sequence in the form both processes run: flat arrays of the
 * wire structs (proto/proto.h) and the names they point into. The daemon
 * builds one (ctl/exec.c), the launcher decodes one from a RUN message, and
 * ctl/run_local.c runs one over device pointers. */
#ifndef VY_SEQ_H
#define VY_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "proto/proto.h"

typedef struct vy_seq {
	vy_wire_buffer *buffers;
	vy_wire_kernel *kernels;
	vy_wire_step *steps;
	vy_wire_arg *args;
	vy_wire_group *groups;
	char *strings;
	uint32_t nbuffers, nkernels, nsteps, nargs, ngroups, strings_len;
} vy_seq;

/* The RUN body for `s` (malloc'd), and its length. */
vy_err vy_seq_encode(const vy_seq *s, void **body, size_t *len, vy_error *e);

/* Point `s` into a RUN body of `len` bytes (which must outlive it), after
 * checking that every count, index and name fits. */
vy_err vy_seq_decode(void *body, size_t len, vy_seq *s, vy_error *e);

/* Kernel k's module and entry names. */
const char *vy_seq_module(const vy_seq *s, uint32_t k);
const char *vy_seq_entry(const vy_seq *s, uint32_t k);

#endif
