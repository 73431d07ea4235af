/* The store's memory to the keeper (daemon/keeper_memory.c) against a
 * fake keeper: the other end of a socketpair, read here. Slots from
 * VY_KEEPER_SLOT_MEMORY up, a dropped one used again after its DROP, a
 * successor's handed slots in use until settled, a dead keeper failing
 * adds with slot 0 and no hang. */
#include "daemon/keeper_memory.h"
#include "core/slab.h"
#include "keeper/wire.h"
#include "tests/unit/support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static bool same_file(int a, int b)
{
	struct stat x, y;
	return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The next message the fake keeper has, or op 0 when none waits. */
static vy_keeper_msg next_msg(int sock, int *fd)
{
	vy_keeper_msg m = {0};
	int fds[VY_KEEPER_BATCH];
	int fl = fcntl(sock, F_GETFL);
	CHECK(fl >= 0 && fcntl(sock, F_SETFL, fl | O_NONBLOCK) == 0);
	if (vy_keeper_recv(sock, &m, fds) != 1)
		m.op = 0;
	*fd = fds[0];
	for (unsigned i = 1; i < VY_KEEPER_BATCH; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return m;
}

static void adds_and_drops_reach_the_keeper(void)
{
	int sv[2], fd;
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	vy_keeper_memory m;
	char why[256];
	CHECK_EQ(vy_keeper_memory_init(&m, sv[0], getpid(), NULL, why, sizeof(why)), 0);
	int mem = memfd_create("t", MFD_CLOEXEC);
	CHECK(mem >= 0);
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), VY_KEEPER_SLOT_MEMORY);
	vy_keeper_msg got = next_msg(sv[1], &fd);
	CHECK_EQ(got.op, VY_KEEPER_ADD);
	CHECK_EQ(got.count, 1);
	CHECK_EQ(got.slot[0], VY_KEEPER_SLOT_MEMORY);
	CHECK(same_file(fd, mem));
	close(fd);
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), VY_KEEPER_SLOT_MEMORY + 1);
	close(next_msg(sv[1], &fd).op ? fd : -1);
	m.sink.drop(m.sink.ctx, VY_KEEPER_SLOT_MEMORY);
	got = next_msg(sv[1], &fd);
	CHECK_EQ(got.op, VY_KEEPER_DROP);
	CHECK_EQ(got.slot[0], VY_KEEPER_SLOT_MEMORY);
	/* A slot not held: no message, logged as a bug. */
	m.sink.drop(m.sink.ctx, VY_KEEPER_SLOT_MEMORY);
	m.sink.drop(m.sink.ctx, 3);
	CHECK_EQ(next_msg(sv[1], &fd).op, 0);
	/* The dropped slot is used again, after its DROP. */
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), VY_KEEPER_SLOT_MEMORY);
	got = next_msg(sv[1], &fd);
	CHECK_EQ(got.op, VY_KEEPER_ADD);
	CHECK_EQ(got.slot[0], VY_KEEPER_SLOT_MEMORY);
	close(fd);
	CHECK_EQ(m.adds, 3);
	CHECK_EQ(m.drops, 1);
	CHECK_EQ(m.failures, 0);
	/* The keeper gone: slot 0, at once, and never a wait again. */
	close(sv[1]);
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), 0);
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), 0);
	m.sink.drop(m.sink.ctx, VY_KEEPER_SLOT_MEMORY + 1);
	CHECK_EQ(m.failures, 1); /* the one send tried */
	CHECK_EQ(m.adds, 3);
	CHECK_EQ(m.drops, 1);
	vy_keeper_memory_destroy(&m);
	close(mem);
	close(sv[0]);
}

static void a_successor_uses_the_slots_left(void)
{
	int sv[2], fd;
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	int mem = memfd_create("t", MFD_CLOEXEC);
	vy_keep_fds handed = {.fd = malloc(16 * sizeof(int)), .n = 16};
	CHECK(mem >= 0 && handed.fd);
	for (int i = 0; i < 16; i++)
		handed.fd[i] = -1;
	handed.fd[6] = fcntl(mem, F_DUPFD_CLOEXEC, 0);
	handed.fd[9] = fcntl(mem, F_DUPFD_CLOEXEC, 0);
	vy_keeper_memory m;
	char why[256];
	CHECK_EQ(vy_keeper_memory_init(&m, sv[0], getpid(), &handed, why, sizeof(why)), 0);
	/* The store adopted slot 6; slot 9 is no file's. */
	close(handed.fd[6]);
	handed.fd[6] = -1;
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), 7);
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), 8);
	vy_keeper_memory_settle(&m, &handed);
	CHECK(handed.fd == NULL && handed.n == 0);
	for (int want = 7; want <= 8; want++) {
		vy_keeper_msg got = next_msg(sv[1], &fd);
		CHECK_EQ(got.op, VY_KEEPER_ADD);
		CHECK_EQ(got.slot[0], want);
		close(fd);
	}
	vy_keeper_msg got = next_msg(sv[1], &fd);
	CHECK_EQ(got.op, VY_KEEPER_DROP);
	CHECK_EQ(got.slot[0], 9);
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), 9);
	CHECK_EQ(m.sink.add(m.sink.ctx, mem), 10);
	m.sink.drop(m.sink.ctx, 6); /* the adopted slot, freed later: dropped */
	CHECK_EQ(m.drops, 2);
	CHECK_EQ(m.failures, 0);
	vy_keeper_memory_destroy(&m);
	close(mem);
	close(sv[0]);
	close(sv[1]);
}

/* A successor handed a slot past what this daemon may use is refused. */
static void a_slot_past_the_table_is_refused(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	vy_keep_fds handed = {.fd = malloc((1u << 20) * sizeof(int)), .n = 1u << 20};
	CHECK(handed.fd != NULL);
	for (uint32_t i = 0; i < handed.n; i++)
		handed.fd[i] = -1;
	handed.fd[handed.n - 1] = dup(sv[0]);
	vy_keeper_memory m;
	char why[256] = "";
	CHECK_EQ(vy_keeper_memory_init(&m, sv[0], getpid(), &handed, why, sizeof(why)), (uint64_t)-1);
	CHECK(strstr(why, "(Fix: ") != NULL);
	close(handed.fd[handed.n - 1]);
	free(handed.fd);
	close(sv[0]);
	close(sv[1]);
}

/* Slots for the whole budget (a slot a MiB, a slab a class, the fds
 * beside them); a limit under 512 is refused before a mount, a lower one
 * than the budget needs mounts and refuses allocations past it: room()
 * says no once only the others' share (a quarter of a small table, 320
 * at least) is left. */
static void the_open_file_limit_bounds_the_slots_memory_takes(void)
{
	uint64_t one[1] = {1ull << 30}, two[2] = {1ull << 30, 512ull << 20};
	CHECK_EQ(vy_keeper_memory_slots_for(one, 1), VY_KEEPER_SLOT_MEMORY + VY_KEEPER_OTHER_FDS + 1024 + 1 + VY_SLAB_CLASSES);
	CHECK_EQ(vy_keeper_memory_slots_for(two, 2),
		 VY_KEEPER_SLOT_MEMORY + VY_KEEPER_OTHER_FDS + 1024 + 512 + 2 * (1 + VY_SLAB_CLASSES));
	struct rlimit was, low;
	CHECK(getrlimit(RLIMIT_NOFILE, &was) == 0);
	low = was;
	low.rlim_cur = 400;
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
	char why[512] = "";
	CHECK_EQ(vy_keeper_memory_reserve(300, why, sizeof(why)), (uint64_t)-1);
	CHECK(strstr(why, "needs an open-file limit of 512 or more, and it is 400 (Fix: raise it") != NULL);
	low.rlim_cur = 600;
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
	CHECK_EQ(vy_keeper_memory_reserve(2000, why, sizeof(why)), 0);
	CHECK(strstr(why, "the open-file limit (600) lets the keeper hold 210 pieces of file memory") != NULL);
	CHECK(strstr(why, "may take up to 970: past them, new allocations (a file's memory, made or grown) get ENOSPC (Fix: raise the limit to 1386") != NULL);
	CHECK_EQ(vy_keeper_memory_reserve(600, why, sizeof(why)), 0);
	CHECK_EQ(why[0], '\0');

	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	vy_keeper_memory m;
	CHECK_EQ(vy_keeper_memory_init(&m, sv[0], getpid(), NULL, why, sizeof(why)), 0);
	CHECK_EQ(m.limit, 600 - 64);
	CHECK_EQ(m.others, 320); /* a quarter (150) is under the map server's 256 connections */
	CHECK(m.sink.room(m.sink.ctx, why, sizeof(why)));
	m.next = m.limit - 321; /* 209 held, 321 left */
	CHECK(m.sink.room(m.sink.ctx, why, sizeof(why)));
	m.next++;
	CHECK(!m.sink.room(m.sink.ctx, why, sizeof(why)));
	CHECK(strstr(why, "the keeper holds 210 fds, all that the open-file limit (600) leaves") != NULL);
	vy_keeper_memory_destroy(&m);
	close(sv[0]);
	close(sv[1]);
	CHECK(setrlimit(RLIMIT_NOFILE, &was) == 0);
}

/* The keeper's NOT_HELD: counted as failures, and the mount fails closed
 * through the lost hook; before the sink is set, nothing happens. */
static int lost_calls;
static void lost_hook(struct vy_fs *fs, const char *why)
{
	(void)fs;
	CHECK(strstr(why, "keeper") != NULL);
	lost_calls++;
}

static void what_the_keeper_could_not_hold_fails_closed(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	vy_keeper_memory m;
	char why[256];
	CHECK_EQ(vy_keeper_memory_init(&m, sv[0], getpid(), NULL, why, sizeof(why)), 0);
	vy_keeper_memory_not_held(NULL, 3); /* no sink yet: nothing */
	m.lost = lost_hook;
	atomic_store(&m.lost_fs, (struct vy_fs *)&m); /* any non-NULL fs: the hook ignores it */
	vy_keeper_memory_not_held(&m, 3);
	CHECK_EQ(m.failures, 3);
	CHECK_EQ(lost_calls, 1);
	vy_keeper_memory_not_held(&m, 0); /* it could not tell how many: one */
	CHECK_EQ(m.failures, 4);
	CHECK_EQ(lost_calls, 2);
	int fd = memfd_create("t", MFD_CLOEXEC); /* a later allocation is not handed: it failed closed already */
	CHECK(fd >= 0);
	CHECK_EQ(m.sink.add(m.sink.ctx, fd), 0);
	CHECK_EQ(lost_calls, 3);
	close(fd);
	vy_keeper_memory_destroy(&m);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(adds_and_drops_reach_the_keeper),
		TEST_CASE(a_successor_uses_the_slots_left),
		TEST_CASE(a_slot_past_the_table_is_refused),
		TEST_CASE(the_open_file_limit_bounds_the_slots_memory_takes),
		TEST_CASE(what_the_keeper_could_not_hold_fails_closed),
	};
	return vy_test_main("keeper_memory", cases, sizeof(cases) / sizeof(cases[0]));
}
