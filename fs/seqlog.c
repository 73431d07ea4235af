/* The sequence log: a ring of the last lines (seqlog.h). */
#include "fs/seqlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

vy_err vy_seqlog_init(vy_seqlog *log, vy_error *e)
{
	memset(log, 0, sizeof(*log));
	if (pthread_mutex_init(&log->lock, NULL) != 0)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot create the log's lock");
	return VY_OK;
}

void vy_seqlog_destroy(vy_seqlog *log)
{
	for (size_t i = 0; i < log->count; i++)
		free(log->line[(log->head + i) % VY_SEQLOG_KEEP]);
	log->count = 0;
	pthread_mutex_destroy(&log->lock);
}

uint64_t vy_seqlog_next(vy_seqlog *log)
{
	pthread_mutex_lock(&log->lock);
	uint64_t seq = ++log->next_seq;
	pthread_mutex_unlock(&log->lock);
	return seq;
}

void vy_seqlog_after(vy_seqlog *log, uint64_t seq)
{
	pthread_mutex_lock(&log->lock);
	if (log->next_seq < seq)
		log->next_seq = seq;
	pthread_mutex_unlock(&log->lock);
}

void vy_seqlog_add(vy_seqlog *log, uint64_t seq, pid_t pid, const char *outcome)
{
	char when[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	char *line = NULL;
	if (asprintf(&line, "seq=%" PRIu64 " time=%s pid=%d %s\n", seq, when, (int)pid, outcome) < 0)
		return;
	pthread_mutex_lock(&log->lock);
	size_t slot = (log->head + log->count) % VY_SEQLOG_KEEP;
	if (log->count == VY_SEQLOG_KEEP) { /* full: the oldest goes */
		free(log->line[log->head]);
		log->head = (log->head + 1) % VY_SEQLOG_KEEP;
		log->count--;
	}
	log->line[slot] = line;
	log->count++;
	pthread_mutex_unlock(&log->lock);
}

char *vy_seqlog_text(vy_seqlog *log, size_t *len)
{
	pthread_mutex_lock(&log->lock);
	size_t total = 0;
	for (size_t i = 0; i < log->count; i++)
		total += strlen(log->line[(log->head + i) % VY_SEQLOG_KEEP]);
	char *text = malloc(total + 1);
	if (text) {
		size_t at = 0;
		for (size_t i = 0; i < log->count; i++) {
			const char *line = log->line[(log->head + i) % VY_SEQLOG_KEEP];
			memcpy(text + at, line, strlen(line));
			at += strlen(line);
		}
		text[at] = '\0';
		*len = at;
	}
	pthread_mutex_unlock(&log->lock);
	return text;
}
