#!/bin/sh
# build-llama-server.sh - builds llama.cpp's own HTTP server, llama-server,
# into build/cache/llama-server/ for the tests that hold `rontolisp serve`
# to its request and response shapes (tests/lisp/test-serve.lisp).
#
# The source is the one the other llama.cpp references come from: the git
# bundle inside the npm package node-llama-cpp@3.22.1
# (llama/gitRelease.bundle, one commit, pinned below).  Only the server is
# compiled: tools/server/*.cpp, tools/mtmd/ (the server links the
# multimodal library) and vendor/hash/, with -DLLAMA_SUBPROCESS, against the
# prebuilt libraries tests/fetch-llama-lib.sh puts in build/cache/llama/
# (run it first; libllama-common.so already holds common/ and cpp-httplib).
# The web UI's
# assets are left out (an empty asset table).  The libraries are copied
# beside the binary, which finds them through its $ORIGIN run path and loads
# the CPU backends libggml-cpu-*.so from its own directory.
#
# Objects are kept between runs (make decides what to rebuild), so a second
# run is quick; a finished binary is reused as it is.  Compiled with -O1 and
# make -j2 (the machine the tests run on may have two cores); every step has
# a timeout.
#
# Prints one line: where llama-server is, or why it is not there (no npm, no
# compiler, a timeout, a compile error with its log).  A missing server makes
# the tests that compare with it skip, and this script exit 0; with CI=true in
# the environment those tests fail instead, and so does this script (exit 1).
# Run from the repository root.
LLAMA=node-llama-cpp@3.22.1
LLAMA_SHA512=6e5b488a9b9699cd76dc7eed30880318a4ac4ab866865418795502e3c5d38d55bb5c624988927209d95333343f2e25a83e4183a5c2f816f883a60c3ba9f4e20f
LLAMA_COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6
LIBDIR=build/cache/llama
DIR=build/cache/llama-server
BIN=$DIR/llama-server
# The source paths taken from the bundle.
PATHS="tools/server tools/mtmd vendor common include ggml/include src/llama-ext.h"
COMPILE_TIMEOUT=${RL_LLAMA_SERVER_TIMEOUT:-1800}

# What say and missing print (tests/npm-fetch.sh, from this directory).
SUBJECT="llama-server" NOT_THERE="not built"
SKIPPED="the llama-server comparisons will skip"
NEEDED="the llama-server comparisons need it"
# shellcheck source=tests/npm-fetch.sh
case $0 in */*) . "${0%/*}/npm-fetch.sh" ;; *) . ./npm-fetch.sh ;; esac

[ -x "$BIN" ] && say "$BIN (cached)"
for f in libllama-common.so libllama.v0.5.0.so libggml.v0.5.0.so libggml-base.so; do
  [ -f "$LIBDIR/$f" ] || missing "not built (no $LIBDIR/$f: run sh tests/fetch-llama-lib.sh first)"
done
for c in npm git timeout make g++ gcc; do
  command -v $c >/dev/null 2>&1 || missing "not built (no $c)"
done
mkdir -p "$DIR" || missing "not built (cannot create $DIR)"
DIR=$(cd "$DIR" && pwd)
LIBDIR=$(cd "$LIBDIR" && pwd)
BIN=$DIR/llama-server
start=$(date +%s)

# The source, once: the bundle's commit, only the paths the server needs.
if [ ! -f "$DIR/src/.complete" ]; then
  fetch_tmp "$DIR"
  npm_fetch "$LLAMA" "$LLAMA_SHA512" "$tmp" 180 package/llama/gitRelease.bundle
  git init -q --bare "$tmp/git" >/dev/null 2>&1 || missing "not built (git init failed)"
  timeout 120 git -C "$tmp/git" fetch -q "$tmp/package/llama/gitRelease.bundle" "$LLAMA_COMMIT" \
    >"$tmp/git.log" 2>&1 ||
    missing "not built (the bundle of $LLAMA: $(tail -n 1 "$tmp/git.log"))"
  rm -rf "$DIR/src"
  # shellcheck disable=SC2086
  git -C "$tmp/git" archive --prefix=src/ "$LLAMA_COMMIT" $PATHS >"$tmp/src.tar" 2>"$tmp/git.log" &&
    tar -xf "$tmp/src.tar" -C "$DIR" 2>>"$tmp/git.log" ||
    missing "not built ($LLAMA's bundle lacks a source path at $LLAMA_COMMIT: $(tail -n 1 "$tmp/git.log"))"
  touch "$DIR/src/.complete"
  rm -rf "$tmp"
  trap - EXIT
fi

# The generated headers: no UI assets.
mkdir -p "$DIR/gen" "$DIR/obj" || missing "not built (cannot create $DIR/obj)"
cat >"$DIR/gen/ui.h" <<'EOF'
#pragma once
#include <array>
#include <string>
struct llama_ui_asset {
    std::string           name;
    const unsigned char * data;
    std::size_t           size;
    std::string           etag;
    std::string           type;
};
const llama_ui_asset * llama_ui_find_asset(const std::string & name);
bool llama_ui_use_gzip();
const std::array<llama_ui_asset, 0> & llama_ui_get_assets();
EOF
cat >"$DIR/gen/ui.cpp" <<'EOF'
#include "ui.h"
const llama_ui_asset * llama_ui_find_asset(const std::string &) { return nullptr; }
bool llama_ui_use_gzip() { return false; }
const std::array<llama_ui_asset, 0> & llama_ui_get_assets() {
    static const std::array<llama_ui_asset, 0> none{};
    return none;
}
EOF

S=$DIR/src
# The server's and mtmd's sources but mtmd's command-line tools.
srcs=$(cd "$DIR" && for f in src/tools/server/*.cpp src/tools/mtmd/*.cpp src/tools/mtmd/models/*.cpp \
         src/vendor/hash/hash.cpp src/vendor/hash/xxhash/xxhash.c src/vendor/hash/sha256/sha256.c \
         src/vendor/hash/sha1/sha1.c gen/ui.cpp; do
         case $f in *mtmd-cli.cpp|*deprecation-warning.cpp) ;; *) echo "$f" ;; esac
       done)
objs=""
for s in $srcs; do objs="$objs obj/$(echo "$s" | tr '/' '_').o"; done
{
  echo "CXXFLAGS = -std=c++17 -O1 -g0 -fPIC -pthread -w -DLLAMA_SUBPROCESS -DMTMD_VIDEO -DLLAMA_SHARED \\"
  echo "  -I$S/include -I$S/ggml/include -I$S/common -I$S/vendor -I$S/vendor/hash -I$S/tools/mtmd \\"
  echo "  -I$S/tools/server -I$S -I$DIR/gen"
  echo "llama-server.new:$objs"
  printf '\tg++ -o $@ $^ -pthread -L%s -l:libllama-common.so -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,'"'"'$$ORIGIN'"'"'\n' "$LIBDIR"
  for s in $srcs; do
    # sha1.c is compiled as C++ (it lives in a namespace), the other .c files as C.
    case $s in
      *xxhash.c|*sha256.c) cc="gcc -O1 -fPIC -w -I$S/vendor/hash" ;;
      *) cc="g++ \$(CXXFLAGS)" ;;
    esac
    case $s in *sha1.c) cc="g++ \$(CXXFLAGS) -x c++" ;; esac
    printf 'obj/%s.o: %s\n\t%s -c -o $@ $<\n' "$(echo "$s" | tr '/' '_')" "$s" "$cc"
  done
} >"$DIR/Makefile" || missing "not built (cannot write $DIR/Makefile)"

timeout "$COMPILE_TIMEOUT" make -C "$DIR" -j2 llama-server.new >"$DIR/build.log" 2>&1
rc=$?
[ $rc -eq 124 ] && missing "not built (the compile took over $COMPILE_TIMEOUT s; run again to go on, log $DIR/build.log)"
[ $rc -ne 0 ] && missing "not built (the compile failed: $(grep -m1 -e 'error' "$DIR/build.log" || tail -n 1 "$DIR/build.log"); log $DIR/build.log)"

# The libraries beside the binary: it finds them and the CPU backends there.
for f in "$LIBDIR"/*.so; do
  ln -f "$f" "$DIR/" 2>/dev/null || cp -f "$f" "$DIR/" || missing "not built (cannot copy $(basename "$f") into $DIR)"
done
timeout 60 "$DIR/llama-server.new" --version >"$DIR/version.log" 2>&1 ||
  missing "not built (the binary does not run: $(tail -n 1 "$DIR/version.log"))"
mv -f "$DIR/llama-server.new" "$BIN" || missing "not built (cannot move the binary to $BIN)"
say "$BIN (built from $LLAMA in $(($(date +%s) - start)) s)"
