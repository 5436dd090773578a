# rontolisp - build, tests, demo.  `make` builds build/rontolisp; `make check`
# runs every test (installing what is missing when run as root); `make demo`
# runs the main job on built-in data.  See README.org.

CC      ?= cc
CFLAGS  ?= -O2 -g
PREFIX  ?= /usr/local
ECL     ?= ecl
B       := build

RL_CFLAGS  = -std=gnu11 -Wall -Wextra -fno-strict-aliasing -fPIC -I. $(CFLAGS)
ECL_CFLAGS = $(shell ecl-config --cflags 2>/dev/null)
ECL_LIBS   = $(shell ecl-config --libs 2>/dev/null)

# Plain C: the gguf library and the kernels (never include ecl.h).
CORE_SRC  := $(wildcard gguf/*.c) $(filter-out prims/register.c,$(wildcard prims/*.c))
CORE_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(CORE_SRC))
CORE_HDR  := $(wildcard gguf/*.h prims/*.h)
# The ECL side: the host and the primitive registration.
HOST_SRC  := runtime/main.c prims/register.c
HOST_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(HOST_SRC))
# Lisp, in dependency order.
LISP_SRC  := lisp/packages.lisp lisp/conditions.lisp lisp/runtime.lisp lisp/formats.lisp \
             lisp/halfarrays.lisp lisp/qmatrix.lisp

C_TESTS   := $(patsubst tests/c/%.c,$(B)/tests/%,$(wildcard tests/c/test_*.c))

.PHONY: all check check-c check-lisp demo deps bench fuzz check-asan install clean

all: $(B)/rontolisp

$(B)/obj/%.o: %.c $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(RL_CFLAGS) -c $< -o $@

$(B)/obj/runtime/%.o $(B)/obj/prims/register.o: RL_CFLAGS += $(ECL_CFLAGS)

$(B)/librl.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/lisp/librontolisp-lisp.a: $(LISP_SRC) runtime/build-lisp.lisp
	@mkdir -p $(B)/lisp
	$(ECL) --norc --shell runtime/build-lisp.lisp $@ $(LISP_SRC)

$(B)/rontolisp: $(HOST_OBJ) $(B)/lisp/librontolisp-lisp.a $(B)/librl.a
	$(CC) $(RL_CFLAGS) -rdynamic -o $@ $(HOST_OBJ) $(B)/lisp/librontolisp-lisp.a \
	  $(B)/librl.a $(ECL_LIBS) -lpthread -lm -ldl

$(B)/tests/%: tests/c/%.c $(B)/librl.a tests/c/check.h
	@mkdir -p $(B)/tests
	$(CC) $(RL_CFLAGS) -o $@ $< $(B)/librl.a -lpthread -lm -ldl

# Installs ECL, FiveAM and friends from Debian when they are missing.
deps:
	@sh tests/ensure-deps.sh

check: deps
	@$(MAKE) --no-print-directory all $(C_TESTS)
	@sh tests/run-all.sh $(C_TESTS)

check-c: $(C_TESTS)
	@sh tests/run-all.sh --c-only $(C_TESTS)

check-lisp: all
	@sh tests/run-all.sh --lisp-only

demo: deps
	@$(MAKE) --no-print-directory all
	@sh tests/demo.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(B)/rontolisp $(DESTDIR)$(PREFIX)/bin/rontolisp

clean:
	rm -rf $(B)
