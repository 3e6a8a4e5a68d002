# sjkvarn — plain build: `make` builds, `make test` tests. No configure step.
#
#   make                 libsjkvarn.a, libsjkvarn.so, libsjkhost.a, libsjkplan.a, libsjkeval.a,
#                        ./sjkvarn   (in $(BUILD))
#   make test            build everything with -Werror and run the whole suite
#   make asan / ubsan    the suite under AddressSanitizer / UndefinedBehaviorSanitizer
#   make valgrind        the suite under valgrind memcheck
#   make fuzz FUZZ_SECONDS=N   build the libFuzzer targets (fuzz/fuzz_*.c, clang) and run each
#                        for N seconds (seeds: fuzz/corpus/<target>/, replayed by make test)
#   make install PREFIX=/usr/local
#
# Source layout (dependencies point one way: common <- codec <- cache <- attention;
# host depends on the library; plan on host and library; eval on the library; tools on all):
#   include/sjkvarn.h  src/common  src/codec  src/cache  src/attention  -> libsjkvarn
#   host/include/sjkhost.h  host/gguf  host/text  host/kernels  host/model -> libsjkhost
#   plan/include/sjkplan.h  plan/src                                      -> libsjkplan
#   eval/include/sjkeval.h  eval/src                                      -> libsjkeval
#   store  (the prefix store; the only code that links hiredis)          -> libsjkstore
#   tools/*.c (main.c: the command table)                                 -> sjkvarn (CLI)
#   server/*.c (sjkvarn serve; libmicrohttpd, jansson)                    -> linked into the CLI
#   tests/test_*.c                                                        -> one binary each
# Files named *_avx2.c / *_avx512.c sit beside the module they speed up, are compiled for
# that instruction set only and are reached through run-time dispatch (src/common/cpu.h).

CC      ?= cc
OPT     ?= -O2
BUILD   ?= build
PREFIX  ?= /usr/local
SAN     ?=
WERROR  ?=
ALLOC_HOOK ?= 0

VERSION := $(shell sed -n 's/^#define SJK_VERSION_STRING "\(.*\)"/\1/p' include/sjkvarn.h)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wpointer-arith -Wvla -Wno-unused-parameter
# Include folders: each library sees only what it may depend on: its own headers and the
# public headers of the libraries below it, never their private folders (the host:
# include/sjkvarn.h and host/; plan: include/sjkvarn.h, host/include/sjkhost.h and
# plan/; eval: include/sjkvarn.h and eval/). Tools, tests and benches see everything.
INCS_LIB  := -Iinclude -Isrc
INCS_HOST := -Iinclude -Ihost/include -Ihost
INCS_PLAN := -Iinclude -Ihost/include -Iplan/include
INCS_EVAL := -Iinclude -Ieval/include
INCS      := -Iinclude -Isrc -Ihost/include -Ihost -Iplan/include -Ieval/include -Istore
CPPFLAGS_ALL = $(INCS) -D_GNU_SOURCE
CFLAGS_ALL   := -std=c11 $(OPT) -g -fPIC $(WARN) $(WERROR) $(CFLAGS)
LDLIBS_ALL   := -lm -lpthread $(LDLIBS)

ifneq ($(SAN),)
CFLAGS_ALL += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS    += -fsanitize=$(SAN)
endif

AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mavx512vbmi -mavx2 -mfma -mf16c

LIB_SRC  := $(sort $(shell find src -name '*.c'))
HOST_SRC := $(sort $(shell find host -name '*.c'))
PLAN_SRC := $(sort $(shell find plan -name '*.c'))
EVAL_SRC := $(sort $(shell find eval -name '*.c'))
STORE_SRC := $(sort $(wildcard store/*.c))
TOOL_SRC := $(sort $(wildcard tools/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_HELPER_SRC := $(sort $(wildcard tests/support/*.c))
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))

# `sjkvarn serve` (server/) links libmicrohttpd and jansson, the CLI's only dependencies
# beyond libc/libm/pthreads (Debian: libmicrohttpd-dev libjansson-dev). Without them the
# CLI is built without the server (`sjkvarn serve` then says what to install).
SERVER_OK := $(shell printf '\043include <microhttpd.h>\n\043include <jansson.h>\nint main(void){return 0;}\n' | \
  $(CC) -x c - -o /dev/null -lmicrohttpd -ljansson >/dev/null 2>&1 && echo 1)
ifeq ($(SERVER_OK),1)
SERVER_SRC  := $(sort $(wildcard server/*.c))
SERVER_LIBS := -lmicrohttpd -ljansson
else
SERVER_SRC  :=
SERVER_LIBS :=
$(warning sjkvarn serve is not built: it needs libmicrohttpd and jansson (apt-get install libmicrohttpd-dev libjansson-dev))
endif

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o)
HOST_OBJ := $(HOST_SRC:%.c=$(BUILD)/obj/%.o)
PLAN_OBJ := $(PLAN_SRC:%.c=$(BUILD)/obj/%.o)
EVAL_OBJ := $(EVAL_SRC:%.c=$(BUILD)/obj/%.o)
STORE_OBJ := $(STORE_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_HELPER_OBJ := $(TEST_HELPER_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

# ALLOC_HOOK=1 (what `make test` and the sanitizer and valgrind runs build with) routes
# every library allocation and thread creation through the failure-injection hook
# (src/common/alloc_hook.h; tests/test_alloc_fail.c). A plain `make` does not: the
# libraries call malloc and pthread_create directly.
ifeq ($(ALLOC_HOOK),1)
HOOK_FLAGS := -DSJK_ALLOC_HOOK=1 -include src/common/alloc_hook.h
endif
$(LIB_OBJ):  INCS := $(INCS_LIB) $(HOOK_FLAGS)
$(HOST_OBJ): INCS := $(INCS_HOST) $(HOOK_FLAGS)
$(PLAN_OBJ): INCS := $(INCS_PLAN) $(HOOK_FLAGS)
$(EVAL_OBJ): INCS := $(INCS_EVAL) $(HOOK_FLAGS)

LIB_A   := $(BUILD)/libsjkvarn.a
LIB_SO  := $(BUILD)/libsjkvarn.so
HOST_A  := $(BUILD)/libsjkhost.a
PLAN_A  := $(BUILD)/libsjkplan.a
EVAL_A  := $(BUILD)/libsjkeval.a
STORE_A := $(BUILD)/libsjkstore.a
# The prefix store (store/) is the only part that talks to Redis: hiredis links into it,
# the CLI and the tests of the store; libsjkvarn and libsjkhost stay libc/libm/pthreads.
HIREDIS_LIBS := -lhiredis
# Link order: a library before the ones it depends on.
ALL_A   := $(PLAN_A) $(EVAL_A) $(HOST_A) $(LIB_A)
CLI     := $(BUILD)/sjkvarn
# The CLI's objects but main, for the tests of its parsers and file writers (test_cli_*).
CLI_A   := $(BUILD)/libsjkcli.a
CLI_LIB_OBJ := $(filter-out $(BUILD)/obj/tools/main.o,$(TOOL_OBJ))

.PHONY: all test check asan ubsan valgrind install clean tests examples benches fuzz fuzz-build
all: $(LIB_A) $(LIB_SO) $(ALL_A) $(STORE_A) $(CLI)
	@ln -sf $(CLI) sjkvarn 2>/dev/null || true

# Objects depend on a stamp of the compiler and flags, so a build directory rebuilds what
# a change of CC, OPT, SAN, WERROR, ALLOC_HOOK or CFLAGS affects instead of linking stale objects.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(CPPFLAGS_ALL) $(HOOK_FLAGS) $(CFLAGS_ALL) $(LDFLAGS)
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' > $@
.PHONY: FORCE
FORCE:

$(LIB_OBJ) $(HOST_OBJ) $(PLAN_OBJ) $(EVAL_OBJ) $(STORE_OBJ) $(TOOL_OBJ) $(SERVER_OBJ) $(TEST_HELPER_OBJ): $(FLAGS_STAMP)
ifeq ($(SERVER_OK),1)
$(TOOL_OBJ) $(SERVER_OBJ): CPPFLAGS_ALL += -Iserver -DSJK_HAVE_SERVER
endif

$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $(AVX512_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(LIB_SO): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libsjkvarn.so $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

$(HOST_A): $(HOST_OBJ)
	@rm -f $@
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(STORE_A): $(STORE_OBJ)
	@rm -f $@
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(CLI_A): $(CLI_LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(PLAN_A): $(PLAN_OBJ)
	@rm -f $@
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(EVAL_A): $(EVAL_OBJ)
	@rm -f $@
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(CLI): $(TOOL_OBJ) $(SERVER_OBJ) $(STORE_A) $(ALL_A)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(SERVER_OBJ) $(STORE_A) $(ALL_A) $(HIREDIS_LIBS) $(LDLIBS_ALL) $(SERVER_LIBS)

# tests of the prefix store link it and hiredis (the more specific pattern wins)
$(BUILD)/tests/test_store_%: tests/test_store_%.c tests/harness.h $(FLAGS_STAMP) $(TEST_HELPER_OBJ) $(STORE_A) $(ALL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) -Itests $(CFLAGS_ALL) -MMD -MP $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJ) $(STORE_A) $(ALL_A) $(HIREDIS_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/%: tests/%.c tests/harness.h $(FLAGS_STAMP) $(TEST_HELPER_OBJ) $(CLI_A) $(STORE_A) $(ALL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) -Itools -Itests -Ieval/src $(CFLAGS_ALL) -MMD -MP $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJ) $(CLI_A) $(STORE_A) $(ALL_A) $(HIREDIS_LIBS) $(LDLIBS_ALL)

$(BUILD)/examples/%: examples/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(LIB_A) $(LDLIBS_ALL)

# The in-process A/B benchmarks of bench/ (docs/benchmarks/*.md say how to run them);
# the suite builds them so that they keep compiling.
# the prefix-store benchmark links the store, hiredis and the test helper that starts redis-server
$(BUILD)/bench/store_%: bench/store_%.c $(FLAGS_STAMP) $(STORE_A) $(ALL_A) $(BUILD)/obj/tests/support/redis_proc.o
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -MMD -MP $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/support/redis_proc.o $(STORE_A) $(ALL_A) $(HIREDIS_LIBS) $(LDLIBS_ALL)

$(BUILD)/bench/%: bench/%.c $(FLAGS_STAMP) $(ALL_A)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -MMD -MP $(LDFLAGS) -o $@ $< $(ALL_A) $(LDLIBS_ALL)

# The peer of `sjkvarn bench attn`: ggml's CPU flash attention (bench/ggml/attn_peer.c),
# built only where an installed ggml is found (the llama.cpp oracle venv of
# tests/oracle/build-llama-cpp.sh, or GGML_INCLUDE / GGML_LIBDIR); nothing else links ggml.
# `make benches` builds it when ggml is there and says so when it is not.
GGML_VENV    ?= $(HOME)/.cache/sjkvarn/oracle-venv
GGML_SITE    := $(firstword $(wildcard $(GGML_VENV)/lib/python3*/site-packages))
GGML_INCLUDE ?= $(GGML_SITE)/include
GGML_LIBDIR  ?= $(GGML_SITE)/llama_cpp/lib
GGML_PEER    := $(BUILD)/bench/ggml_attn_peer
HAVE_GGML    := $(and $(wildcard $(GGML_INCLUDE)/ggml.h),$(wildcard $(GGML_INCLUDE)/ggml-cpu.h),$(wildcard $(GGML_LIBDIR)/libggml-cpu.so))

.PHONY: ggml-peer
ifneq ($(HAVE_GGML),)
ggml-peer: $(GGML_PEER)
$(GGML_PEER): bench/ggml/attn_peer.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -D_GNU_SOURCE -isystem $(GGML_INCLUDE) -o $@ $< \
	  -L$(GGML_LIBDIR) -Wl,-rpath,$(GGML_LIBDIR) -lggml-cpu -lggml-base -lggml -lm -lpthread
else
ggml-peer:
	@echo "ggml-peer: no ggml found (GGML_INCLUDE=$(GGML_INCLUDE), GGML_LIBDIR=$(GGML_LIBDIR)); run tests/oracle/build-llama-cpp.sh; bench attn runs without its peer column"
endif

# The server's test (tests/server/): a launcher that the runner starts like the C tests;
# it runs the Python client tests against the real server (scripts/server-venv).
$(BUILD)/tests/test_server: tests/server/run.sh tests/server/test_server.py $(CLI)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh tests/server/run.sh "%s"\n' "$(abspath $(CLI))" > $@
	@chmod +x $@
TEST_BIN += $(BUILD)/tests/test_server
# The prefix store between two servers (real redis-server processes on loopback).
$(BUILD)/tests/test_store_server: tests/server/run.sh tests/server/test_store_server.py tests/server/test_server.py $(CLI)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh tests/server/run.sh "%s" test_store_server\n' "$(abspath $(CLI))" > $@
	@chmod +x $@
TEST_BIN += $(BUILD)/tests/test_store_server

tests: $(TEST_BIN) $(EXAMPLE_BIN) $(BENCH_BIN) $(CLI)
examples: $(EXAMPLE_BIN)
benches: $(BENCH_BIN) ggml-peer

# The suite: every tests/test_* binary, run by tests/run_tests.sh, which ends with
# "N passed, N failed".
test: export WERROR := -Werror
test:
	@$(MAKE) --no-print-directory WERROR=-Werror ALLOC_HOOK=1 all tests
	@BUILD=$(BUILD) SJK_TEST_WRAP="$(SJK_TEST_WRAP)" sh tests/run_tests.sh
check: test

# Each builds in build/<name> unless BUILD is given on the command line (make valgrind BUILD=...).
# The instrumented runs set SJK_TEST_LIGHT=1 (unless it is given: SJK_TEST_LIGHT=0 runs them
# at full size): the heavy tests run every code path on less data (tests/harness.h,
# test_light(); docs/RELIABILITY.md). `make test` (gcc, clang) always runs at full size.
san_build = $(if $(filter command line,$(origin BUILD)),$(BUILD),build/$(1))
asan:
	@SJK_TEST_LIGHT=$${SJK_TEST_LIGHT:-1} $(MAKE) --no-print-directory test BUILD=$(call san_build,asan) SAN=address,leak OPT=-O1
ubsan:
	@SJK_TEST_LIGHT=$${SJK_TEST_LIGHT:-1} $(MAKE) --no-print-directory test BUILD=$(call san_build,ubsan) SAN=undefined OPT=-O1
valgrind:
	@SJK_TEST_LIGHT=$${SJK_TEST_LIGHT:-1} $(MAKE) --no-print-directory test BUILD=$(call san_build,valgrind) OPT=-O1 \
	  SJK_TEST_WRAP="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"

# libFuzzer: the libraries built with clang, ASan + UBSan and fuzzer coverage in their own
# build dir; one binary per fuzz/fuzz_<target>.c. New inputs go to $(FUZZ_BUILD)/corpus,
# crashes to $(FUZZ_BUILD)/artifacts; the committed seeds are read, never written.
FUZZ_BUILD   ?= build/fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := $(patsubst fuzz/fuzz_%.c,%,$(sort $(wildcard fuzz/fuzz_*.c)))
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang SAN=address,undefined OPT=-O1 \
	  CFLAGS=-fsanitize=fuzzer-no-link $(FUZZ_BUILD)/libsjkvarn.a $(FUZZ_BUILD)/libsjkhost.a
	@for t in $(FUZZ_TARGETS); do \
	  clang $(CPPFLAGS_ALL) -std=c11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    fuzz/fuzz_$$t.c $(FUZZ_BUILD)/libsjkhost.a $(FUZZ_BUILD)/libsjkvarn.a -lm -lpthread \
	    -o $(FUZZ_BUILD)/fuzz_$$t || exit 1; done
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/artifacts; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- $(FUZZ_BUILD)/corpus/$$t fuzz/corpus/$$t || exit 1; \
	done

install: $(LIB_A) $(LIB_SO)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/sjkvarn.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' sjkvarn.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/sjkvarn.pc

clean:
	rm -rf build sjkvarn

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
