/* `vyrefs cp SRC... DST`: the subcommand (client/cp.c). */
#ifndef VY_CLIENT_CP_H
#define VY_CLIENT_CP_H

/* argv[0] is "cp". The exit status, as cp's: 0, or 1 if anything failed. */
int vy_cp_main(int argc, char **argv);

#endif
