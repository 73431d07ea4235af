/* The protocol between the daemon and its launcher: one header for every
 * message, one struct per operation, a version agreed at HELLO.
 *
 * Shape (after the kernel's fuse_kernel.h):
 * - Every message starts with vy_msg_header: its whole length, an opcode,
 *   how many file descriptors ride with it (SCM_RIGHTS, on its first byte),
 *   and a unique id that the reply repeats.
 * - The daemon asks, the launcher answers each request with a message of the
 *   same opcode | VY_OP_REPLY whose body starts with vy_status.
 * - A minor version bump only appends fields or operations; a major bump
 *   breaks. A message before HELLO, an unknown opcode, a length over
 *   VY_PROTO_MSG_MAX or a body that does not match its operation closes the
 *   channel: the launcher exits, the daemon starts a new one.
 * - Buffers are named by (handle, generation), never by a daemon address:
 *   each process maps memory at its own address.
 *
 * fd ownership: the receiver of a message owns every fd that came with it
 * and closes it on every path, once it has used it (or not). The sender
 * keeps its own copies. */
#ifndef VY_PROTO_H
#define VY_PROTO_H

#include <stdint.h>

#include "core/device.h"

/* 2.0: a buffer is mapped as its pieces (map_in, client_map_out);
 * 2.1: kernel_out carries the occupancy answer;
 * 2.2: client_map_out names the device that holds the file;
 * 2.3: map_in and client_map_out carry the buffer's lead (its byte 0 is
 *      that far into the memory: core/store.h, placement);
 * 2.4: client_map_in's flags: VY_CLIENT_MAP_READONLY. */
#define VY_PROTO_MAJOR 2
#define VY_PROTO_MINOR 4
/* No message is larger: a sequence of 1 MiB of text fits well within. */
#define VY_PROTO_MSG_MAX (64u << 20)
/* A buffer that grew in place is up to VY_CHUNKS_MAX allocations, one fd
 * each (SCM_RIGHTS carries at most 253 per message on Linux). */
#define VY_PROTO_FDS_MAX 128
#define VY_PROTO_TEXT_MAX 512 /* a status message, as vy_error's */

typedef struct vy_msg_header {
	uint32_t len;    /* header included */
	uint16_t opcode;
	uint16_t nfds;
	uint64_t unique;
} vy_msg_header;
_Static_assert(sizeof(vy_msg_header) == 16, "vy_msg_header is 16 bytes");

enum vy_opcode {
	VY_OP_HELLO = 1,  /* hello_in -> hello_out: version, open the device */
	VY_OP_LOAD = 2,   /* load_in + name + image -> load_out + JIT log */
	VY_OP_UNLOAD = 3, /* name_in + name -> vy_status */
	VY_OP_KERNEL = 4, /* kernel_in + module + entry -> kernel_out */
	VY_OP_MAP = 5,    /* map_in + nchunks u64 sizes, nchunks fds -> vy_status */
	VY_OP_UNMAP = 6,  /* unmap_in -> vy_status */
	VY_OP_RUN = 7,    /* run_in + arrays -> run_out */
	/* A client (libvyrefs) and the daemon, over .vyre/socket: */
	VY_OP_CLIENT_HELLO = 16, /* hello_in -> client_hello_out */
	VY_OP_CLIENT_MAP = 17,   /* client_map_in, 1 fd (the file) -> client_map_out + sizes, its memory's fds */
	VY_OP_CLIENT_SYNC = 18,  /* client_ref_in -> vy_status */
	VY_OP_CLIENT_UNMAP = 19, /* client_ref_in -> vy_status */
	VY_OP_CLIENT_COPY = 20,  /* client_copy_in, 2 fds -> client_progress..., client_copy_out */
	VY_OP_CLIENT_PROGRESS = 21, /* daemon -> client during a COPY: client_progress */
	VY_OP_REPLY = 0x8000,
};

/* Every reply's body starts with this. rc is a vy_err; msg ends with the
 * "(Fix: ...)" of the error, as the daemon shows it. */
typedef struct vy_status {
	int32_t rc;
	int32_t step; /* RUN: the step that failed (plan index), or -1 */
	char msg[VY_PROTO_TEXT_MAX];
} vy_status;
_Static_assert(sizeof(vy_status) == 520, "vy_status is 520 bytes");

typedef struct vy_hello_in {
	uint32_t major, minor;
	uint32_t backend; /* vy_backend_kind */
	int32_t ordinal;
	uint64_t host_memory;
} vy_hello_in;
_Static_assert(sizeof(vy_hello_in) == 24, "vy_hello_in is 24 bytes");

typedef struct vy_hello_out {
	vy_status st;
	uint32_t major, minor;
	uint64_t share_granularity;
} vy_hello_out;
_Static_assert(sizeof(vy_hello_out) == 536, "vy_hello_out is 536 bytes");

/* Followed by the name (name_len bytes, no NUL) and the image. */
typedef struct vy_load_in {
	uint32_t name_len;
	uint32_t pad;
	uint64_t image_len;
} vy_load_in;
_Static_assert(sizeof(vy_load_in) == 16, "vy_load_in is 16 bytes");

/* Followed by the JIT log (log_len bytes, no NUL). */
typedef struct vy_load_out {
	vy_status st;
	uint32_t log_len;
	uint32_t pad;
} vy_load_out;
_Static_assert(sizeof(vy_load_out) == 528, "vy_load_out is 528 bytes");

/* Followed by the name. */
typedef struct vy_name_in {
	uint32_t name_len;
	uint32_t pad;
} vy_name_in;
_Static_assert(sizeof(vy_name_in) == 8, "vy_name_in is 8 bytes");

/* Followed by the module name, then the entry name. */
typedef struct vy_kernel_in {
	uint32_t module_len, entry_len;
} vy_kernel_in;
_Static_assert(sizeof(vy_kernel_in) == 8, "vy_kernel_in is 8 bytes");

#define VY_PROTO_PARAMS_MAX 256
typedef struct vy_kernel_out {
	vy_status st;
	uint32_t nparams;
	int32_t max_threads, static_shared, max_dynamic_shared;
	uint32_t param_size[VY_PROTO_PARAMS_MAX];
	int32_t occ_block, occ_grid; /* minor 1: vy_function_info's */
} vy_kernel_out;
_Static_assert(sizeof(vy_kernel_out) == 520 + 16 + 4 * 256 + 8, "vy_kernel_out layout");

/* Followed by nchunks uint64_t sizes, with one fd each: the exported
 * allocations, to be mapped back to back (core/span.h); `bytes` is their
 * sum, and the buffer's byte 0 is `lead` bytes into them (2.3). */
typedef struct vy_map_in {
	uint64_t handle, gen, bytes;
	uint32_t nchunks;
	uint32_t lead;
} vy_map_in;
_Static_assert(sizeof(vy_map_in) == 32, "vy_map_in is 32 bytes");
_Static_assert(VY_PROTO_FDS_MAX >= VY_CHUNKS_MAX, "a buffer's fds fit one message");

typedef struct vy_unmap_in {
	uint64_t handle;
} vy_unmap_in;
_Static_assert(sizeof(vy_unmap_in) == 8, "vy_unmap_in is 8 bytes");

/* ---- clients ---------------------------------------------------------------
 * A client opens a file of the mount for writing (the kernel checks its
 * permissions there) and passes that fd; the daemon answers with an fd of
 * the file's device memory, which only ever holds that file's bytes. The
 * mapping lasts until CLIENT_UNMAP or the connection's end. A reader
 * (2.4) opens it for reading and asks VY_CLIENT_MAP_READONLY: its fds let
 * it read only, where the backend can enforce that (host); elsewhere
 * (cuda) the request is refused (docs/client.md "Reading a file you
 * cannot write"). */

typedef struct vy_client_hello_out {
	vy_status st;
	uint32_t major, minor;
	uint32_t backend; /* vy_backend_kind: how to import the memory */
	int32_t ordinal;
	uint64_t share_granularity;
} vy_client_hello_out;
_Static_assert(sizeof(vy_client_hello_out) == 544, "vy_client_hello_out layout");

#define VY_CLIENT_MAP_READONLY 1u /* 2.4: the fd is open for reading (writing is not needed) */
typedef struct vy_client_map_in {
	uint32_t flags; /* VY_CLIENT_MAP_*; an unknown bit is refused */
	uint32_t pad;
} vy_client_map_in;
_Static_assert(sizeof(vy_client_map_in) == 8, "vy_client_map_in is 8 bytes");

/* Followed by nchunks uint64_t sizes, with one fd each, as vy_map_in. A
 * client of 2.2 or before gets the first VY_CLIENT_MAP_OUT_V22 bytes, and
 * only files whose lead is 0 (it would take byte 0 for the memory's). */
typedef struct vy_client_map_out {
	vy_status st;
	uint64_t id;    /* names the mapping in SYNC and UNMAP */
	uint64_t size;  /* the file's bytes */
	uint64_t bytes; /* the memory to map: the sum of the sizes */
	uint32_t nchunks;
	int32_t ordinal; /* the device that holds the file (2.2; before: HELLO's) */
	uint64_t lead;   /* the file's byte 0 is this far into the memory (2.3) */
} vy_client_map_out;
#define VY_CLIENT_MAP_OUT_V22 552u
_Static_assert(sizeof(vy_client_map_out) == 560, "vy_client_map_out layout");

typedef struct vy_client_ref_in {
	uint64_t id;
} vy_client_ref_in;
_Static_assert(sizeof(vy_client_ref_in) == 8, "vy_client_ref_in is 8 bytes");

/* COPY: the daemon copies between a file of the mount (fd 0) and any other
 * regular file (fd 1) with its own threads, pinned memory and streams, so
 * a copy costs the client no CUDA context. Into the mount, fd 0 must be
 * open for writing and fd 1 for reading; out of it, the reverse. */
enum vy_copy_direction { VY_COPY_INTO = 0, VY_COPY_OUT = 1 };
typedef struct vy_client_copy_in {
	uint32_t direction;
	uint32_t threads; /* 0: the daemon's choice */
	uint64_t size;    /* into: the bytes to copy (the file was sized to them) */
} vy_client_copy_in;
_Static_assert(sizeof(vy_client_copy_in) == 16, "vy_client_copy_in is 16 bytes");

typedef struct vy_client_progress {
	uint64_t done, total; /* bytes of data; holes are not counted in done */
} vy_client_progress;
_Static_assert(sizeof(vy_client_progress) == 16, "vy_client_progress is 16 bytes");

typedef struct vy_client_copy_out {
	vy_status st;
	uint64_t done, total;
} vy_client_copy_out;
_Static_assert(sizeof(vy_client_copy_out) == 536, "vy_client_copy_out layout");

/* ---- a sequence, as it crosses ------------------------------------------
 * run_in, then nbuffers vy_wire_buffer, nkernels vy_wire_kernel, nsteps
 * vy_wire_step, nargs vy_wire_arg, ngroups vy_wire_group, and strings_len
 * bytes of NUL-terminated names that kernels point into. */

typedef struct vy_wire_buffer {
	uint64_t handle, gen;
	uint64_t len; /* the file's bytes the sequence may touch */
} vy_wire_buffer;
_Static_assert(sizeof(vy_wire_buffer) == 24, "vy_wire_buffer is 24 bytes");

typedef struct vy_wire_kernel {
	uint32_t module, entry; /* offsets into the strings */
} vy_wire_kernel;
_Static_assert(sizeof(vy_wire_kernel) == 8, "vy_wire_kernel is 8 bytes");

enum vy_wire_step_kind { VY_WIRE_LAUNCH = 0, VY_WIRE_FILL = 1, VY_WIRE_COPY = 2 };

typedef struct vy_wire_step {
	uint32_t kind;
	int32_t line;
	uint32_t a, b;       /* buffers: fill's target; copy's source and target */
	uint64_t off_a, off_b, length;
	uint32_t byte;       /* fill */
	uint32_t kernel;     /* launch */
	uint32_t grid[3], block[3];
	uint32_t shared;
	uint32_t first_arg, nargs;
	uint32_t pad;
} vy_wire_step;
_Static_assert(sizeof(vy_wire_step) == 88, "vy_wire_step is 88 bytes");

enum vy_wire_arg_kind { VY_WIRE_ARG_BYTES = 0, VY_WIRE_ARG_BUFFER = 1 };

typedef struct vy_wire_arg {
	uint32_t kind;
	uint32_t size;  /* bytes the parameter takes (a pointer: 8) */
	uint32_t buf;   /* VY_WIRE_ARG_BUFFER: which buffer */
	uint32_t pad;
	uint64_t value; /* the bytes, little-endian; or the offset into buf */
} vy_wire_arg;
_Static_assert(sizeof(vy_wire_arg) == 24, "vy_wire_arg is 24 bytes");

typedef struct vy_wire_group {
	uint64_t times;
	uint32_t first, count; /* steps[first .. first+count) */
} vy_wire_group;
_Static_assert(sizeof(vy_wire_group) == 16, "vy_wire_group is 16 bytes");

typedef struct vy_run_in {
	uint32_t nbuffers, nkernels, nsteps, nargs, ngroups;
	uint32_t strings_len;
} vy_run_in;
_Static_assert(sizeof(vy_run_in) == 24, "vy_run_in is 24 bytes");

typedef struct vy_run_out {
	vy_status st;
	uint64_t steps;        /* steps queued, repeats counted */
	uint64_t launches;
	uint64_t memset_ops, memset_bytes;
	uint64_t d2d_ops, d2d_bytes;
	uint64_t syncs;
	uint64_t device_ns;    /* by the sequence's timing events */
} vy_run_out;
_Static_assert(sizeof(vy_run_out) == 520 + 64, "vy_run_out layout");

#endif
