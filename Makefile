# rontolisp - build, tests, demo.  `make` builds build/rontolisp; `make check`
# runs every test (installing what is missing when run as root); `make demo`
# runs the main job on built-in data.  See README.org.

CC      ?= cc
CFLAGS  ?= -O2 -g
PREFIX  ?= /usr/local
ECL     ?= ecl
B       := build

RL_CFLAGS  = -std=gnu11 -Wall -Wextra -fno-strict-aliasing -fPIC -I. $(CFLAGS)
# Evaluated once; an empty answer means ecl-config is missing, and every
# target that compiles or links against ECL stops with that said.
ECL_CFLAGS := $(shell ecl-config --cflags 2>/dev/null)
ECL_LIBS   := $(shell ecl-config --libs 2>/dev/null)
ECL_CHECK   = $(if $(ECL_CFLAGS),,$(error ecl-config not found or failed: install ECL (make deps) or put ecl-config on PATH))

# Plain C: the gguf library and the kernels (never include ecl.h).
CORE_SRC  := $(wildcard gguf/*.c prims/*.c)
CORE_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(CORE_SRC))
# The ECL side: the host and the primitives (prims/ecl/, one file per concern).
HOST_SRC  := $(wildcard runtime/*.c prims/ecl/*.c)
HOST_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(HOST_SRC))
# Lisp: rontolisp.asd states the files and their order; build-lisp.lisp
# reads it (as data, with ECL's reader) both for this list of prerequisites
# and when it compiles them, so there is no second list to keep in step.
# An empty list (no ECL, or an .asd it refuses) forces the library's recipe,
# which then stops with build-lisp's reason.
LISP_SRC  := $(shell $(ECL) --norc --shell runtime/build-lisp.lisp --list rontolisp.asd)

C_TESTS   := $(patsubst tests/c/%.c,$(B)/tests/%,$(wildcard tests/c/test_*.c))

.PHONY: all check check-c check-lisp demo deps bench tools bad-corpus fuzz check-asan install uninstall clean FORCE

all: $(B)/rontolisp $(B)/rontolisp-prims.fas $(B)/swank/stamp

# Header dependencies come from the compiler (-MMD -MP), in .d files beside
# the objects and tests.
DEPFLAGS   = -MMD -MP

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(RL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(HOST_OBJ): RL_CFLAGS += $(ECL_CHECK)$(ECL_CFLAGS)

# The encoder kernels pin every f32 rounding (doc/products.md §2, doc/encoder.md): a product and
# a sum must not fuse into an fma the spec does not name.
$(B)/obj/prims/matmul.o $(B)/obj/prims/matmul_f32.o $(B)/obj/prims/matmul_narrow.o $(B)/obj/prims/matmul_q8.o \
  $(B)/obj/prims/matmul_quant.o \
  $(B)/obj/prims/nn.o $(B)/obj/prims/nn_gelu.o $(B)/obj/prims/attention.o $(B)/obj/prims/attention_avx512.o: RL_CFLAGS += -ffp-contract=off
# The legacy, K-quant and IQ4 kernels are ggml's f32 operations in ggml's order
# (doc/formats.md, doc/products.md §4): an fma would change their bytes.
$(B)/obj/prims/quants.o $(B)/obj/prims/quant_legacy.o $(B)/obj/prims/quant_k.o \
  $(B)/obj/prims/quant_k_fits.o $(B)/obj/prims/quant_iq4.o $(B)/obj/prims/quant_dot.o \
  $(B)/obj/prims/quant_act.o: \
  RL_CFLAGS += -ffp-contract=off

$(B)/librl.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/lisp/librontolisp-lisp.a: rontolisp.asd $(or $(LISP_SRC),FORCE) runtime/build-lisp.lisp
	@mkdir -p $(B)/lisp
	$(ECL) --norc --shell runtime/build-lisp.lisp $@ rontolisp.asd

$(B)/rontolisp: $(HOST_OBJ) $(B)/lisp/librontolisp-lisp.a $(B)/librl.a
	$(ECL_CHECK)$(CC) $(RL_CFLAGS) -rdynamic -o $@ $(HOST_OBJ) $(B)/lisp/librontolisp-lisp.a \
	  $(B)/librl.a $(ECL_LIBS) -ledit -ljansson -lmicrohttpd -lpthread -lm -ldl

# The objects of that library as the output of ASDF's compile-op (a .fas
# beside each .o, under $(B)/asdf/ as lisp/ is laid out), so that the test
# of a stock ECL loading the system through ASDF (test-prims-module.lisp)
# loads what the build compiled instead of compiling it all again.
$(B)/asdf/stamp: $(B)/lisp/librontolisp-lisp.a
	$(ECL) --norc --shell runtime/build-lisp.lisp --asdf-output $(B)/lisp $(B)/asdf rontolisp.asd
	@touch $@

# The primitives as a module for a stock ECL (rontolisp.asd loads it):
# the glue and the C library, linked with runtime/prims-module.lisp.
PRIM_ECL_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard prims/ecl/*.c))

$(B)/rontolisp-prims.fas: runtime/prims-module.lisp runtime/build-lisp.lisp $(PRIM_ECL_OBJ) $(B)/librl.a
	@mkdir -p $(B)/module
	$(ECL) --norc --shell runtime/build-lisp.lisp --module $(B)/module/rontolisp-prims.fas \
	  runtime/prims-module.lisp $(abspath $(PRIM_ECL_OBJ) $(B)/librl.a) -ljansson -lmicrohttpd -lpthread -lm
	mv $(B)/module/rontolisp-prims.fas $@

# Debian's cl-swank compiled for `rontolisp swank' (lisp/swank.lisp,
# BUILD-SWANK-FASLS), so that its first start compiles nothing; the file
# complete marks a full set.  Without cl-swank this says so and compiles
# nothing (the server then compiles it on first use).  `make install'
# copies them to PREFIX/lib/rontolisp/swank/.
SWANK_SRC := $(wildcard /usr/share/common-lisp/source/slime/*.lisp \
  /usr/share/common-lisp/source/slime/*/*.lisp)

$(B)/swank/stamp: $(SWANK_SRC) | $(B)/rontolisp
	rm -rf $(B)/swank
	@mkdir -p $(B)/swank
	$(B)/rontolisp --eval '(command-line::build-swank-fasls "$(B)/swank/")' --eval '(rontolisp:exit 0)' </dev/null
	@touch $@

# What several C tests share (the JSON loader, SHA-256), linked into each.
TEST_SUPPORT_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard tests/c/support/*.c))
TEST_HDR := tests/c/check.h tests/c/testutil.h $(wildcard tests/c/support/*.h)

$(TEST_SUPPORT_OBJ): $(TEST_HDR)

$(B)/tests/%: tests/c/%.c $(TEST_SUPPORT_OBJ) $(B)/librl.a
	@mkdir -p $(B)/tests
	$(CC) $(RL_CFLAGS) $(DEPFLAGS) -o $@ $< $(TEST_SUPPORT_OBJ) $(B)/librl.a -ljansson -lmicrohttpd -lpthread -lm -ldl

# Helper programs that are not tests: the generator of the bad-file corpus
# and a speed report for the C kernels (see the head of each file).
TOOLS := $(patsubst tools/%.c,$(B)/tools/%,$(wildcard tools/*.c))

tools: $(TOOLS)

$(B)/tools/%: tools/%.c $(B)/librl.a
	@mkdir -p $(B)/tools
	$(CC) $(RL_CFLAGS) $(DEPFLAGS) -o $@ $< $(B)/librl.a -lpthread -lm -ldl

# Rewrites tests/bad/ and its MANIFEST; commit the result.
bad-corpus: $(B)/tools/make_bad_gguf
	$(B)/tools/make_bad_gguf tests/bad

-include $(CORE_OBJ:.o=.d) $(HOST_OBJ:.o=.d) $(TEST_SUPPORT_OBJ:.o=.d) $(C_TESTS:=.d) $(TOOLS:=.d)

# Installs from Debian what the build and every test need when it is
# missing (`make demo' installs only what the build and the demo need).
deps:
	@sh tests/ensure-deps.sh --check

# SUITE=NAME runs one suite instead of all: the Lisp suite NAME and/or the
# C test program test_NAME (check-c: TEST=NAME); tests/run-all.sh reads them.
check: deps
	@$(MAKE) --no-print-directory all $(C_TESTS) tools $(B)/asdf/stamp
	@sh tests/fetch-llama-lib.sh
	@sh tests/fetch-tokenizer-refs.sh
	@sh tests/build-llama-server.sh
	@sh tests/run-all.sh $(C_TESTS)

check-c: $(if $(TEST),$(filter $(B)/tests/test_$(TEST),$(C_TESTS)),$(C_TESTS))
	@sh tests/run-all.sh --c-only $(C_TESTS)

check-lisp: all $(B)/asdf/stamp
	@sh tests/run-all.sh --lisp-only

demo:
	@sh tests/ensure-deps.sh --demo
	@$(MAKE) --no-print-directory all tools
	@sh tests/fetch-llama-lib.sh
	@sh tests/demo.sh

# The benchmark (not a test): `rontolisp bench' on the standard shapes, or
# on what BENCH_ARGS names (make bench BENCH_ARGS="model.gguf --iters 50");
# the table in build/bench.txt, the numbers in build/bench.json and the plot
# build/bench.png (gnuplot, installed only here when missing, with what
# `make check' installs).  Then
# `rontolisp quantize' against llama.cpp's quantizer on a 512 MiB file, to Q8_0,
# Q4_K_M and Q6_K
# (tools/bench_quantize.c; build/bench-quantize.txt), when the llama.cpp
# library could be fetched.
BENCH_ARGS ?=
bench:
	@sh tests/ensure-deps.sh --bench
	@$(MAKE) --no-print-directory all $(B)/tools/bench_quantize
	@sh tests/fetch-llama-lib.sh
	@if [ -f $(B)/cache/llama/libllama.v0.5.0.so ]; then \
	  $(B)/tools/bench_quantize $(B)/cache/llama $(B)/rontolisp $(B) | tee $(B)/bench-quantize.txt; \
	else echo "bench_quantize: skipped, no llama.cpp library in $(B)/cache/llama"; fi
	$(B)/rontolisp bench $(BENCH_ARGS) --json $(B)/bench.json > $(B)/bench.txt
	@cat $(B)/bench.txt
	@$(B)/rontolisp script tools/bench/plot-data.lisp $(B)/bench.json $(B)/bench.dat \
	  $(B)/bench-vars.gp
	gnuplot -e "data='$(B)/bench.dat'; vars='$(B)/bench-vars.gp'; out='$(B)/bench.png'" \
	  tools/bench/plot.gp
	@echo "wrote $(B)/bench.txt, $(B)/bench.json and $(B)/bench.png"

# The executable, its manual, the licence, the Lisp sources (where M-. in
# SLIME leads: the program points its RONTOLISP logical host at them) with
# rontolisp.asd, the primitives module that system loads in a stock ECL,
# and cl-swank compiled (timestamps kept: newer than its sources).
SHARE_DIR := $(DESTDIR)$(PREFIX)/share/rontolisp
MODULE_DIR := $(DESTDIR)$(PREFIX)/lib/rontolisp

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(SHARE_DIR)/lisp $(MODULE_DIR) \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/doc/rontolisp
	install -m 755 $(B)/rontolisp $(DESTDIR)$(PREFIX)/bin/rontolisp
	for f in $(LISP_SRC); do install -D -m 644 $$f $(SHARE_DIR)/$$f || exit 1; done
	install -m 644 rontolisp.asd $(SHARE_DIR)/rontolisp.asd
	install -m 644 $(B)/rontolisp-prims.fas $(MODULE_DIR)/rontolisp-prims.fas
	install -m 644 rontolisp.1 $(DESTDIR)$(PREFIX)/share/man/man1/rontolisp.1
	install -m 644 LICENSE $(DESTDIR)$(PREFIX)/share/doc/rontolisp/LICENSE
	if [ -f $(B)/swank/complete ]; then rm -rf $(MODULE_DIR)/swank && cp -pR $(B)/swank $(MODULE_DIR)/swank; fi

# Removes exactly what install put there, and the directories it made
# when they are left empty.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/rontolisp $(addprefix $(SHARE_DIR)/,$(LISP_SRC)) \
	  $(SHARE_DIR)/rontolisp.asd $(MODULE_DIR)/rontolisp-prims.fas \
	  $(DESTDIR)$(PREFIX)/share/man/man1/rontolisp.1 $(DESTDIR)$(PREFIX)/share/doc/rontolisp/LICENSE
	rm -rf $(MODULE_DIR)/swank
	-rmdir $(filter-out $(SHARE_DIR)/lisp/,$(sort $(dir $(addprefix $(SHARE_DIR)/,$(LISP_SRC))))) 2>/dev/null
	-rmdir $(SHARE_DIR)/lisp $(SHARE_DIR) $(MODULE_DIR) $(DESTDIR)$(PREFIX)/share/doc/rontolisp 2>/dev/null

clean:
	rm -rf $(B)

# Fuzzing: every tests/fuzz/fuzz_*.c is a libFuzzer target over the plain C
# file readers, run FUZZ_SECONDS each on its corpus, the golden and bad files.
FUZZ_SECONDS ?= 60
FUZZ_LIBS ?= -ljansson
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))

$(B)/fuzz/%: tests/fuzz/%.c $(wildcard gguf/*.c gguf/*.h)
	@mkdir -p $(B)/fuzz
	clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -o $@ $< $(wildcard gguf/*.c) $(FUZZ_LIBS)

fuzz: $(FUZZ_TARGETS)
	@mkdir -p tests/fuzz/corpus
	@for t in $(FUZZ_TARGETS); do \
	  echo "== $$t for $(FUZZ_SECONDS) s"; \
	  $$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    tests/fuzz/corpus tests/golden tests/bad || exit 1; \
	done

# The C unit tests and the FiveAM suites with our C code built under
# AddressSanitizer and UBSan (ECL itself is not instrumented; its collector
# keeps memory on purpose, so leak detection is off; ECL's headers read
# tagged pointers through object types, which UBSan's alignment check
# flags, so that one check is off).  cl-swank is compiled beside that
# executable too (build/asan/swank/), as `make' does for build/rontolisp,
# so that no test compiles it into a cache.
check-asan: deps
	@ASAN_OPTIONS=detect_leaks=0 $(MAKE) --no-print-directory B=build/asan \
	  CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize=alignment -fno-sanitize-recover=undefined" \
	  build/asan/rontolisp build/asan/swank/stamp $(patsubst $(B)/%,build/asan/%,$(C_TESTS))
	@$(MAKE) --no-print-directory tools $(B)/asdf/stamp
	@ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  RONTOLISP_EXE=build/asan/rontolisp RONTOLISP_BUILD=build/asan \
	  sh tests/run-all.sh $(patsubst $(B)/%,build/asan/%,$(C_TESTS))
