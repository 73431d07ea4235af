# vyrefs: one Makefile. `make` builds, `make test` installs what is missing,
# builds and runs every suite on the host backend, `make test-gpu` runs them
# on the cuda backend plus the GPU-only suites.

CC        ?= cc
CUDA_HOME ?= /usr/local/cuda
BUILD     ?= build

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c17 -Wall -Wextra -Werror -pthread
# -fms-extensions (GCC and Clang): a struct may embed another without a
# member name, its fields reached as its own. The filesystem's state embeds
# the namespace's so (fs/fs.h), as the Linux kernel builds with it.
CFLAGS   += -fms-extensions
# Clang warns of that extension by name; GCC has no such warning.
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),)
CFLAGS   += -Wno-microsoft-anon-tag
endif
# `make SANITIZE=1 BUILD=build-san`: AddressSanitizer and UBSan, in a build
# folder of their own.
ifeq ($(SANITIZE),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
# One version for the binary, the library and the Python module.
VERSION  := $(shell cat VERSION)
CPPFLAGS += -I. -D_GNU_SOURCE -DVY_VERSION='"$(VERSION)"' $(PKG_CFLAGS)
LDLIBS   += -ldl -pthread

# The cuda backend needs only cuda.h and cudaTypedefs.h at build time; the
# driver is loaded at run time. Without the headers it reports itself absent
# (`vyrefs --build-info` says `cuda_backend no`), and the top-level make says
# so once.
HAVE_CUDA_H := $(wildcard $(CUDA_HOME)/include/cuda.h)
ifneq ($(HAVE_CUDA_H),)
CPPFLAGS += -DVY_HAVE_CUDA_H -isystem $(CUDA_HOME)/include
else ifeq ($(MAKELEVEL),0)
ifneq ($(filter-out clean uninstall deps test-deps,$(or $(MAKECMDGOALS),all)),)
$(info vyrefs: building without the cuda backend: no $(CUDA_HOME)/include/cuda.h (the host backend works; Fix: install the CUDA toolkit or set CUDA_HOME to one, then make clean all))
endif
endif

CORE_SRC   := $(wildcard core/*.c) $(wildcard config/*.c) $(wildcard ctl/*.c) $(wildcard proto/*.c)
CORE_OBJ   := $(CORE_SRC:%.c=$(BUILD)/%.o)
# The state region a keeper holds for the daemon's successor (state/): no
# FUSE, no device; the daemon's, its unit suites' and statebench's.
STATE_SRC  := $(wildcard state/*.c)
STATE_OBJ  := $(STATE_SRC:%.c=$(BUILD)/%.o)
# The daemon: the namespace (ns/), the FUSE operations and file data (fs/),
# the client socket's servers (sock/) and the process (daemon/).
FS_SRC     := $(wildcard ns/*.c) $(wildcard tier/*.c) $(wildcard fs/*.c) $(wildcard persist/*.c) $(wildcard sock/*.c) $(wildcard daemon/*.c) $(STATE_SRC) keeper/wire.c keeper/trust.c
FS_OBJ     := $(FS_SRC:%.c=$(BUILD)/%.o)
# The launcher process: the same binary, run as `vyrefs --launcher`.
LAUNCHER_SRC := $(wildcard launcher/*.c)
LAUNCHER_OBJ := $(LAUNCHER_SRC:%.c=$(BUILD)/%.o)
# `vyrefs cp` is the client library at work: linked into the binary too.
CLIENT_SRC := client/libvyrefs.c client/fail.c client/daemon.c client/mountinfo.c client/copy.c client/cp.c client/tier_cli.c core/place.c
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/%.o)
# libvyrefs.so, the client library (client/): its own code, and the core's
# device backends and the channel it imports memory and talks with, built
# position-independent with everything but client/vyrefs.h hidden.
LIB_SRC    := client/libvyrefs.c client/fail.c client/daemon.c client/mountinfo.c client/copy.c core/place.c core/device.c core/device_cuda.c core/cuda_driver.c core/cuda_vmm.c core/cuda_alloc.c core/device_host.c core/slab.c core/host_slab.c core/host_keep.c core/cuda_keep.c core/err.c core/span.c core/u64map.c \
	      proto/channel.c
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
LIB        := $(BUILD)/libvyrefs.so
PKGS       := fuse3 inih libxxhash
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:%.c=$(BUILD)/%)
GPU_SRC    := $(wildcard tests/gpu/test_*.c)
GPU_BIN    := $(GPU_SRC:%.c=$(BUILD)/%)
UNIT_LIB   := $(BUILD)/tests/unit/support.o $(BUILD)/ns/dir.o $(BUILD)/ns/xattr.o $(BUILD)/ns/acl.o \
              $(BUILD)/ns/handles.o $(BUILD)/ns/inode.o $(BUILD)/ns/open.o
CORE_LIB   := $(BUILD)/libvycore.a
# bench/: the null FUSE fs, the timed loops, the store's pool figures, and
# (with cuda.h) the raw driver program.
BENCH_BIN  := $(BUILD)/bench/nullfs $(BUILD)/bench/vybench $(BUILD)/bench/poolbench $(BUILD)/bench/statebench
ifneq ($(HAVE_CUDA_H),)
BENCH_BIN  += $(BUILD)/bench/cudaraw
endif

.PHONY: all deps test-deps test test-gpu bench fuzz man install install-python uninstall clean
.SECONDARY:
all: $(BUILD)/vyrefs $(BUILD)/vyrefs-keeper $(LIB) $(BUILD)/vyrefs.pc $(BUILD)/tests/client/vymap $(BUILD)/tests/client/vyattack $(UNIT_BIN) $(GPU_BIN) $(BUILD)/tests/fs/renameat2 $(BUILD)/tests/fs/idmapped $(BUILD)/tests/fs/posix_probe $(BUILD)/tests/ctl/chanrace.so $(BUILD)/tests/client/copygate.so $(BUILD)/tests/survive/killshim.so $(BUILD)/tests/survive/residentshim.so $(BUILD)/tests/survive/devicegate.so $(BENCH_BIN) $(BUILD)/tools/man_options

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

# What prints the version is rebuilt when it changes.
$(BUILD)/fs/main.o $(BUILD)/tools/man_options.o: VERSION

# The std module's source is built into the binary (ctl/std.c).
$(BUILD)/ctl/std.o: kernels/std.cu

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c -o $@ $<

$(LIB): $(LIB_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libvyrefs.so -o $@ $^ $(LDLIBS)

$(BUILD)/vyrefs.pc: client/vyrefs.pc.in
	@mkdir -p $(dir $@)
	sed 's|@PREFIX@|$(PREFIX)|' $< >$@

$(CORE_LIB): $(CORE_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/vyrefs: $(FS_OBJ) $(LAUNCHER_OBJ) $(CLIENT_OBJ) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# The keeper (keeper/): libc only, no CUDA, no libfuse.
KEEPER_OBJ := $(BUILD)/keeper/keeper.o $(BUILD)/keeper/wire.o $(BUILD)/keeper/leader.o $(BUILD)/keeper/trust.o $(BUILD)/keeper/say.o
$(BUILD)/vyrefs-keeper: $(KEEPER_OBJ)
	$(CC) $(CFLAGS) -o $@ $^

$(BUILD)/tests/unit/test_%: $(BUILD)/tests/unit/test_%.o $(UNIT_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# The state region's suites (test_state_*): the library and core's errors.
$(BUILD)/tests/unit/test_state_%: $(BUILD)/tests/unit/test_state_%.o $(UNIT_LIB) $(STATE_OBJ) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/unit/test_keeper: $(BUILD)/tests/unit/test_keeper.o $(UNIT_LIB) $(BUILD)/keeper/wire.o $(CORE_LIB) $(BUILD)/vyrefs-keeper
	$(CC) $(CFLAGS) -o $@ $(filter %.o %.a,$^) $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/unit/test_trust: $(BUILD)/tests/unit/test_trust.o $(UNIT_LIB) $(BUILD)/keeper/trust.o $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# The keeper's memory sink (daemon/) against a fake keeper.
$(BUILD)/tests/unit/test_keeper_memory: $(BUILD)/tests/unit/test_keeper_memory.o $(UNIT_LIB) $(BUILD)/daemon/keeper_memory.o \
		$(BUILD)/daemon/log.o $(BUILD)/keeper/wire.o $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# The .vyre/stats counters a successor finds (daemon/), over a real region.
$(BUILD)/tests/unit/test_kept_counters: $(BUILD)/tests/unit/test_kept_counters.o $(UNIT_LIB) \
		$(BUILD)/daemon/kept_counters.o $(BUILD)/daemon/log.o $(STATE_OBJ) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# The kept namespace's groups and answers (persist/).
$(BUILD)/tests/unit/test_shadow: $(BUILD)/tests/unit/test_shadow.o $(UNIT_LIB) $(BUILD)/persist/shadow.o \
		$(BUILD)/persist/answers.o $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/unit/test_tier_units: $(BUILD)/tests/unit/test_tier_units.o $(UNIT_LIB) $(BUILD)/tier/units.o $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/unit/test_statx: $(BUILD)/tests/unit/test_statx.o $(UNIT_LIB) $(BUILD)/fs/statx.o $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# The daemon's files with the counting device: every daemon object but main's.
$(BUILD)/tests/unit/test_fsfile $(BUILD)/tests/unit/test_fileplace $(BUILD)/tests/unit/test_replay_ns $(BUILD)/tests/unit/test_ctlfile: $(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(UNIT_LIB) \
		$(BUILD)/tests/unit/fs_fixture.o \
		$(filter-out $(UNIT_LIB) $(BUILD)/daemon/main.o,$(FS_OBJ)) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/gpu/test_%: $(BUILD)/tests/gpu/test_%.o $(UNIT_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# A C program of the client library's, linked as users link it.
$(BUILD)/tests/client/vymap: tests/client/vymap.c client/vyrefs.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< -L$(BUILD) -lvyrefs -Wl,-rpath,$(abspath $(BUILD))

# A hostile client that speaks the socket's framing by hand (trust_test):
# libc only, plus core/err.c to name the daemon's error codes.
$(BUILD)/tests/client/vyattack: tests/client/vyattack.c core/err.c proto/proto.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/client/vyattack.c core/err.c

$(BUILD)/tests/fs/%: tests/fs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDLIBS)

# LD_PRELOAD shims: a GPU's channel timing (launcher_test), a copy source
# that waits for its client to go (cp_test), kills at chosen points, the
# read buffers' pages and a standby's devices held shut (survive suites). They define libc's own calls
# (pread): without fortify's inline wrappers, which a compiler that turns
# _FORTIFY_SOURCE on by default (Ubuntu's gcc) would put in their way.
$(BUILD)/tests/%.so: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -shared -fPIC -o $@ $< -ldl
$(BUILD)/tests/survive/killshim.so $(BUILD)/tests/survive/devicegate.so: tests/survive/shim_adopt.h
$(BUILD)/tests/survive/killshim.so: keeper/wire.h

$(BUILD)/bench/nullfs: $(BUILD)/bench/nullfs.o $(BUILD)/daemon/session.o $(BUILD)/daemon/session_loop.o $(BUILD)/fs/statx.o \
		$(BUILD)/daemon/adopt_io.o $(BUILD)/daemon/log.o $(BUILD)/core/u64map.o \
		$(STATE_OBJ) $(BUILD)/core/err.o
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/bench/poolbench: $(BUILD)/bench/poolbench.o $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench/statebench: $(BUILD)/bench/statebench.o $(STATE_OBJ) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The man page: docs/vyrefs.8 is made from docs/vyrefs.8.in and the settings
# table (config/options.c) that --help and .vyre/config use, and so is the
# settings table of docs/manual.md (between its @SETTINGS@ lines); commit
# both after `make man`. docs_test fails when either is not what this makes.
$(BUILD)/tools/man_options: $(BUILD)/tools/man_options.o $(BUILD)/config/options.o
	$(CC) $(CFLAGS) -o $@ $^

man: $(BUILD)/tools/man_options
	$(BUILD)/tools/man_options <docs/vyrefs.8.in >docs/vyrefs.8.tmp && mv docs/vyrefs.8.tmp docs/vyrefs.8
	$(BUILD)/tools/man_options --markdown <docs/manual.md >docs/manual.md.tmp && mv docs/manual.md.tmp docs/manual.md

# On the GPU machine: every figure beside its baseline, into bench/out/
# (BENCH_BACKEND=host BENCH_QUICK=1 for a smoke check anywhere).
bench: all
	@bench/run.sh

# The parsers under libFuzzer (clang), with AddressSanitizer and UBSan, each
# for FUZZ_SECONDS: the control language, the client socket's receive
# side (issue 25's attacks in tests/fuzz/corpus_proto), and the survive=on
# writer with a successor's load and replay of what it wrote (issue
# "survive 2"; tests/fuzz/corpus_writer holds the inputs that found its
# bugs); any crash, leak, sanitizer report or broken invariant fails.
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   := -std=c17 -g -O1 -I. -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC     := ctl/parse.c config/size.c core/err.c
PROTO_FUZZ_SRC := proto/channel.c core/err.c
$(BUILD)/fuzz/fuzz_ctl_parse: tests/fuzz/fuzz_ctl_parse.c $(FUZZ_SRC) ctl/parse.h ctl/plan.h
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_ctl_parse.c $(FUZZ_SRC)

$(BUILD)/fuzz/fuzz_client_proto: tests/fuzz/fuzz_client_proto.c $(PROTO_FUZZ_SRC) proto/channel.h proto/proto.h
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_client_proto.c $(PROTO_FUZZ_SRC)

# The survive=on writer and a successor's load and replay of what it wrote
# (persist/): every daemon object but main's and the log's (the target
# keeps the log's lines), built under the same sanitizers with libFuzzer's
# coverage, in a folder of their own.
WRITER_FUZZ_SRC   := $(filter-out daemon/main.c daemon/log.c,$(FS_SRC)) $(CORE_SRC)
WRITER_FUZZ_OBJ   := $(WRITER_FUZZ_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
WRITER_FUZZ_FLAGS := $(CPPFLAGS) -std=c17 -g -O1 -pthread -fms-extensions -Wno-microsoft-anon-tag \
		     -fsanitize=address,undefined -fno-sanitize-recover=undefined
$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(WRITER_FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(BUILD)/fuzz/obj/ctl/std.o: kernels/std.cu

$(BUILD)/fuzz/fuzz_persist_writer: tests/fuzz/fuzz_persist_writer.c $(WRITER_FUZZ_OBJ)
	clang $(WRITER_FUZZ_FLAGS) -Wall -Wextra -Werror -fsanitize=fuzzer -MMD -MP -o $@ tests/fuzz/fuzz_persist_writer.c \
		$(WRITER_FUZZ_OBJ) $(PKG_LIBS) $(LDLIBS)

# fuzz_run NAME SEEDS MAX_LEN: one fuzzer, its log in $(BUILD)/fuzz/NAME.log.
define fuzz_run
	@mkdir -p $(BUILD)/fuzz/corpus_$(1)
	@echo "fuzz: $(1) for $(FUZZ_SECONDS) s"; \
		$(BUILD)/fuzz/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) -max_len=$(3) -timeout=10 \
		-artifact_prefix=$(BUILD)/fuzz/$(1)- -print_final_stats=1 $(BUILD)/fuzz/corpus_$(1) $(2) \
		>$(BUILD)/fuzz/$(1).log 2>&1; rc=$$?; tail -n 6 $(BUILD)/fuzz/$(1).log; \
		if [ $$rc != 0 ]; then echo "fuzz: $(1) FAILED (exit $$rc); see $(BUILD)/fuzz/$(1).log and $(BUILD)/fuzz/$(1)-crash-*"; fi; \
		exit $$rc
endef

fuzz: $(BUILD)/fuzz/fuzz_ctl_parse $(BUILD)/fuzz/fuzz_client_proto $(BUILD)/fuzz/fuzz_persist_writer
	$(call fuzz_run,ctl_parse,tests/fuzz/corpus,4096)
	$(call fuzz_run,client_proto,tests/fuzz/corpus_proto,8192)
	$(call fuzz_run,persist_writer,tests/fuzz/corpus_writer,4096)

# Install what is missing (apt-get as root, or through sudo; without sudo
# it names the packages): `deps` to build and mount, `test-deps` also for
# the suites and the fuzzer.
deps:
	@scripts/install-deps.sh build

test-deps:
	@scripts/install-deps.sh test

# make test runs suites side by side, one a core up to four (VY_TEST_JOBS=1:
# one at a time).
TEST_JOBS := $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; [ "$$n" -lt 1 ] && n=1; echo $$n)
test: test-deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) VY_TEST_JOBS=$${VY_TEST_JOBS:-$(TEST_JOBS)} tests/run.sh host

test-gpu:
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) VY_TEST_JOBS=$${VY_TEST_JOBS:-6} tests/run.sh cuda

# /usr/local/bin is on the PATH mount(8) gives mount.fuse3, so fstab's
# `fuse.vyrefs` entries find it there.
PREFIX ?= /usr/local
# systemd looks for units in /usr/local/lib/systemd/system too (docs/manual.md
# "Under systemd"; systemd/README.md).
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
install: $(BUILD)/vyrefs $(BUILD)/vyrefs-keeper $(LIB) $(BUILD)/vyrefs.pc
	install -D -m 755 $(BUILD)/vyrefs $(DESTDIR)$(PREFIX)/bin/vyrefs
	install -D -m 755 $(BUILD)/vyrefs-keeper $(DESTDIR)$(PREFIX)/bin/vyrefs-keeper
	install -D -m 755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libvyrefs.so
	install -D -m 644 client/vyrefs.h $(DESTDIR)$(PREFIX)/include/vyrefs.h
	install -D -m 644 $(BUILD)/vyrefs.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/vyrefs.pc
	install -D -m 644 docs/vyrefs.8 $(DESTDIR)$(PREFIX)/share/man/man8/vyrefs.8
	install -D -m 644 kernels/std.cu $(DESTDIR)$(PREFIX)/share/vyrefs/std.cu
	sed 's|@PREFIX@|$(PREFIX)|g' systemd/vyrefs@.service.in >$(BUILD)/vyrefs@.service
	install -D -m 644 $(BUILD)/vyrefs@.service $(DESTDIR)$(SYSTEMD_UNIT_DIR)/vyrefs@.service
	-[ -n "$(DESTDIR)" ] || ldconfig
	-[ -n "$(DESTDIR)" ] || [ ! -d /run/systemd/system ] || systemctl daemon-reload
	@$(MAKE) --no-print-directory install-python

# The Python module (client/python/vyrefs, plain .py files over
# libvyrefs.so) into PYTHON's site directory: for Debian's and Ubuntu's
# python3, /usr/local/lib/python3.X/dist-packages; for a venv's python, the
# venv. Nothing to build or download, no pip. The system's python3 by
# default, not whichever is first on PATH (pyenv's, say).
PYTHON ?= /usr/bin/python3
PYTHON_SITE = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("purelib"))' 2>/dev/null)
install-python:
	@if [ -z "$(PYTHON_SITE)" ]; then \
		echo "vyrefs: no $(PYTHON): the Python module is not installed (Fix: apt-get install python3, or make install-python PYTHON=/path/to/python3)"; \
	else \
		install -d $(DESTDIR)$(PYTHON_SITE)/vyrefs && \
		install -m 644 client/python/vyrefs/*.py $(DESTDIR)$(PYTHON_SITE)/vyrefs/ && \
		echo "installed the Python module vyrefs $(VERSION) in $(DESTDIR)$(PYTHON_SITE)/vyrefs (for $(PYTHON))"; \
	fi

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/vyrefs $(DESTDIR)$(PREFIX)/bin/vyrefs-keeper $(DESTDIR)$(PREFIX)/lib/libvyrefs.so $(DESTDIR)$(PREFIX)/include/vyrefs.h \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig/vyrefs.pc $(DESTDIR)$(PREFIX)/share/man/man8/vyrefs.8 \
		$(DESTDIR)$(PREFIX)/share/vyrefs/std.cu $(DESTDIR)$(SYSTEMD_UNIT_DIR)/vyrefs@.service
	[ -z "$(PYTHON_SITE)" ] || rm -rf $(DESTDIR)$(PYTHON_SITE)/vyrefs
	-[ -n "$(DESTDIR)" ] || [ ! -d /run/systemd/system ] || systemctl daemon-reload

clean:
	rm -rf $(BUILD)

-include $(WRITER_FUZZ_OBJ:.o=.d) $(BUILD)/fuzz/fuzz_persist_writer.d
-include $(KEEPER_OBJ:.o=.d) $(CORE_OBJ:.o=.d) $(FS_OBJ:.o=.d) $(LAUNCHER_OBJ:.o=.d) $(CLIENT_OBJ:.o=.d) $(LIB_OBJ:.o=.d) $(BUILD)/tools/man_options.d $(BENCH_BIN:%=%.d) $(UNIT_SRC:%.c=$(BUILD)/%.d) $(GPU_SRC:%.c=$(BUILD)/%.d) $(UNIT_LIB:.o=.d) $(BUILD)/tests/unit/fs_fixture.d
