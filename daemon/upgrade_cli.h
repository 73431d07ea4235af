/* `vyrefs --upgrade MOUNTPOINT`: the mount's daemon hands over to the
 * binary now installed (daemon/upgrade.h), and this waits until the
 * successor serves. 0, or 1 with a message that says what to do. */
#ifndef VY_DAEMON_UPGRADE_CLI_H
#define VY_DAEMON_UPGRADE_CLI_H

int vy_upgrade_cli(const char *mountpoint);

#endif
