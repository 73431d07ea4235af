/* Open files: their state (vy_open) and their ids in the handle table. */
#include "ns/ns.h"

#include <stdlib.h>

vy_open *vy_open_new(vy_inode *in)
{
	vy_open *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	if (pthread_mutex_init(&o->ctl, NULL) != 0) {
		free(o);
		return NULL;
	}
	o->in = in;
	o->next_line = 1;
	return o;
}

int vy_open_add(vy_ns *ns, vy_open *o)
{
	return vy_handles_add_file(&ns->handles, o, &o->fh);
}

vy_open *vy_open_of(vy_ns *ns, uint64_t fh)
{
	return vy_handles_file(&ns->handles, fh);
}

void vy_open_discard(vy_open *o)
{
	pthread_mutex_destroy(&o->ctl);
	free(o->text);
	free(o->pending);
	free(o->reply);
	free(o);
}

void vy_open_free(vy_ns *ns, vy_open *o)
{
	if (o->fh)
		vy_handles_free(&ns->handles, o->fh, VY_HANDLE_FILE);
	vy_open_discard(o);
}
