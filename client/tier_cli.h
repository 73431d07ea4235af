/* `vyrefs prefetch` and `vyrefs evict` (client/tier_cli.c): argv[0] is the
 * subcommand. The exit status: 0, 1 if a file failed, 2 for bad usage. */
#ifndef VY_CLIENT_TIER_CLI_H
#define VY_CLIENT_TIER_CLI_H

int vy_prefetch_main(int argc, char **argv);
int vy_evict_main(int argc, char **argv);

#endif
