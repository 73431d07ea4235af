/* .vyre/log: the last VY_SEQLOG_KEEP sequences written to .vyre/ctl, one
 * line each (number, time, pid, outcome), and their numbering. The control
 * file adds to it; .vyre/log shows it. */
#ifndef VY_SEQLOG_H
#define VY_SEQLOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"

#define VY_SEQLOG_KEEP 256

typedef struct vy_seqlog {
	pthread_mutex_t lock; /* the lines and the numbering */
	char *line[VY_SEQLOG_KEEP]; /* a ring, oldest at head */
	size_t head, count;
	uint64_t next_seq;
	_Atomic uint64_t running; /* sequences running now (.vyre/stats sequences_running) */
} vy_seqlog;

vy_err vy_seqlog_init(vy_seqlog *log, vy_error *e);
void vy_seqlog_destroy(vy_seqlog *log);
/* The next sequence's number (from 1). */
uint64_t vy_seqlog_next(vy_seqlog *log);
/* Number the next sequence after `seq` at least (a successor, after the
 * dead daemon's sequences). */
void vy_seqlog_after(vy_seqlog *log, uint64_t seq);
/* Log sequence `seq` of `pid`: `outcome` is the rest of its line. */
void vy_seqlog_add(vy_seqlog *log, uint64_t seq, pid_t pid, const char *outcome);
/* The log's text (malloc'd), newest last; NULL without memory. */
char *vy_seqlog_text(vy_seqlog *log, size_t *len);

#endif
