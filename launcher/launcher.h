/* The launcher process: `vyrefs --launcher` with its channel to the daemon
 * on fd 3. It opens a device context of its own, maps the buffers the
 * daemon exports to it, loads modules and runs sequences, answering each
 * request in order. A kernel fault or a kill ends this process only. */
#ifndef VY_LAUNCHER_H
#define VY_LAUNCHER_H

#define VY_LAUNCHER_FD 3

/* Serve the channel until the daemon closes it; the process's exit status. */
int vy_launcher_main(int sock);

#endif
