# vyrefs: one Makefile. `make` builds, `make test` installs what is missing,
# builds and runs every suite on the host backend, `make test-gpu` runs them
# on the cuda backend plus the GPU-only suites.

CC        ?= cc
CUDA_HOME ?= /usr/local/cuda
BUILD     ?= build

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c17 -Wall -Wextra -Werror -pthread
# `make SANITIZE=1 BUILD=build-san`: AddressSanitizer and UBSan, in a build
# folder of their own.
ifeq ($(SANITIZE),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
CPPFLAGS += -I. -D_GNU_SOURCE $(PKG_CFLAGS)
LDLIBS   += -ldl -pthread

# The cuda backend needs only cuda.h and cudaTypedefs.h at build time; the
# driver is loaded at run time. Without the headers it reports itself absent.
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
CPPFLAGS += -DVY_HAVE_CUDA_H -isystem $(CUDA_HOME)/include
endif

CORE_SRC   := $(wildcard core/*.c) $(wildcard config/*.c) $(wildcard ctl/*.c)
CORE_OBJ   := $(CORE_SRC:%.c=$(BUILD)/%.o)
FS_SRC     := $(wildcard fs/*.c)
FS_OBJ     := $(FS_SRC:%.c=$(BUILD)/%.o)
PKGS       := fuse3 inih libxxhash
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:%.c=$(BUILD)/%)
GPU_SRC    := $(wildcard tests/gpu/test_*.c)
GPU_BIN    := $(GPU_SRC:%.c=$(BUILD)/%)
UNIT_LIB   := $(BUILD)/tests/unit/support.o $(BUILD)/fs/dir.o $(BUILD)/fs/xattr.o
CORE_LIB   := $(BUILD)/libvycore.a
# bench/: the null FUSE fs, the timed loops, the store's pool figures, and
# (with cuda.h) the raw driver program.
BENCH_BIN  := $(BUILD)/bench/nullfs $(BUILD)/bench/vybench $(BUILD)/bench/poolbench
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
BENCH_BIN  += $(BUILD)/bench/cudaraw
endif

.PHONY: all deps test test-gpu bench fuzz install uninstall clean
.SECONDARY:
all: $(BUILD)/vyrefs $(UNIT_BIN) $(GPU_BIN) $(BUILD)/tests/fs/renameat2 $(BUILD)/tests/fs/posix_probe $(BENCH_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(CORE_LIB): $(CORE_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/vyrefs: $(FS_OBJ) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/unit/test_%: $(BUILD)/tests/unit/test_%.o $(UNIT_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# The fs layer's files with the counting device: every fs object but main's.
$(BUILD)/tests/unit/test_fsfile: $(BUILD)/tests/unit/test_fsfile.o $(UNIT_LIB) \
		$(filter-out $(UNIT_LIB) $(BUILD)/fs/main.o,$(FS_OBJ)) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/gpu/test_%: $(BUILD)/tests/gpu/test_%.o $(UNIT_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/fs/%: tests/fs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDLIBS)

$(BUILD)/bench/nullfs: $(BUILD)/bench/nullfs.o $(BUILD)/fs/session.o $(BUILD)/fs/session_loop.o
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/bench/poolbench: $(BUILD)/bench/poolbench.o $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# On the GPU machine: every figure beside its baseline, into bench/out/
# (BENCH_BACKEND=host BENCH_QUICK=1 for a smoke check anywhere).
bench: all
	@bench/run.sh

# The parser under libFuzzer (clang), with AddressSanitizer and UBSan, for
# FUZZ_SECONDS; any crash, leak or sanitizer report fails.
FUZZ_SECONDS ?= 60
FUZZ_SRC     := ctl/parse.c config/size.c core/err.c
$(BUILD)/fuzz/fuzz_ctl_parse: tests/fuzz/fuzz_ctl_parse.c $(FUZZ_SRC) ctl/parse.h ctl/plan.h
	@mkdir -p $(dir $@)
	clang -std=c17 -g -O1 -I. -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-o $@ tests/fuzz/fuzz_ctl_parse.c $(FUZZ_SRC)

fuzz: $(BUILD)/fuzz/fuzz_ctl_parse
	@mkdir -p $(BUILD)/fuzz/corpus
	@$(BUILD)/fuzz/fuzz_ctl_parse -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-artifact_prefix=$(BUILD)/fuzz/ -print_final_stats=1 $(BUILD)/fuzz/corpus tests/fuzz/corpus \
		>$(BUILD)/fuzz/log 2>&1; rc=$$?; tail -n 6 $(BUILD)/fuzz/log; \
		if [ $$rc != 0 ]; then echo "fuzz: FAILED (exit $$rc); see $(BUILD)/fuzz/log and $(BUILD)/fuzz/crash-*"; fi; \
		exit $$rc

# Install what is missing (apt, as root), once per machine.
deps:
	@scripts/install-deps.sh

test: deps
	@$(MAKE) --no-print-directory all
	@tests/run.sh host

test-gpu:
	@$(MAKE) --no-print-directory all
	@tests/run.sh cuda

# /usr/local/bin is on the PATH mount(8) gives mount.fuse3, so fstab's
# `fuse.vyrefs` entries find it there.
PREFIX ?= /usr/local
install: $(BUILD)/vyrefs
	install -D -m 755 $(BUILD)/vyrefs $(DESTDIR)$(PREFIX)/bin/vyrefs

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/vyrefs

clean:
	rm -rf $(BUILD)

-include $(CORE_OBJ:.o=.d) $(FS_OBJ:.o=.d) $(BENCH_BIN:%=%.d) $(UNIT_SRC:%.c=$(BUILD)/%.d) $(GPU_SRC:%.c=$(BUILD)/%.d) $(UNIT_LIB:.o=.d)
