/* survive=on: the session's hooks (daemon/session.h) into the kept state's
 * requests (persist/request.h): which requests keep their changes with
 * their answer, and the kept answer to a resent one. */
#ifndef VY_DAEMON_RESEND_H
#define VY_DAEMON_RESEND_H

struct vy_fs;

/* Hook the session to `fs`'s writer; before the session serves. */
void vy_resend_hook(struct vy_fs *fs);

#endif
