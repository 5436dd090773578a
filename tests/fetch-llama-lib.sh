#!/bin/sh
# fetch-llama-lib.sh - puts llama.cpp's own shared libraries in
# build/cache/llama/ for the differential and interop tests, which dlopen
# them: libggml-base.so (the GGUF reader and the quantizer,
# tests/c/test_llama_interop.c), libllama.v0.5.0.so with libggml.v0.5.0.so
# (the model loader and its graphs) and the CPU backends libggml-cpu-*.so
# (loaded with ggml_backend_load_all_from_path).
#
# The libraries are the ones inside the npm package
# @node-llama-cpp/linux-x64@3.22.1: llama.cpp v0.5.0 (ggml 0.25.1), the
# release that made tests/golden/.  They need only the system's libstdc++,
# libm, libgcc_s and libc, and find each other through their $ORIGIN run
# path.  The Node.js addon is not taken.  The tarball's SHA-512 is pinned
# below.
#
# Prints one line: where the library is, or why it is not there (no npm, no
# network, a timeout).  A missing library makes the tests that compare with
# llama.cpp skip, and this script exit 0; with CI=true in the environment
# those tests fail instead, and so does this script (exit 1), so a CI run
# always compares with llama.cpp.  Run from the repository root.
PKG=@node-llama-cpp/linux-x64@3.22.1
SHA512=e6e0820cda9608d7da026f1a47f533c5ba381c1a4a80d17dd640873dea4a86032057638099ab6879f6ce94c8a1b2a0a21f639ddf913f7941d00856df44126e3a
BINS=package/bins/linux-x64
DIR=build/cache/llama
LIB=$DIR/libggml-base.so
# The last library moved in: present only when every one is.
LAST=$DIR/libllama.v0.5.0.so

# What say and missing print (tests/npm-fetch.sh, from this directory).
SUBJECT="llama.cpp library" NOT_THERE="not available"
SKIPPED="the interop test will skip"
NEEDED="the llama.cpp comparisons need it"
# shellcheck source=tests/npm-fetch.sh
case $0 in */*) . "${0%/*}/npm-fetch.sh" ;; *) . ./npm-fetch.sh ;; esac

[ -n "$RL_LLAMA_LIB" ] && say "RL_LLAMA_LIB=$RL_LLAMA_LIB (not fetched)"
[ -f "$LIB" ] && [ -f "$LAST" ] && say "$DIR (cached)"
command -v npm >/dev/null 2>&1 || missing "not available (no npm)"
command -v timeout >/dev/null 2>&1 || missing "not available (no timeout command)"

fetch_tmp "$DIR"
start=$(date +%s)
npm_fetch "$PKG" "$SHA512" "$tmp" 120 --wildcards "$BINS/*.so"
[ -f "$tmp/$BINS/libllama.v0.5.0.so" ] || missing "not available ($PKG has no libllama.v0.5.0.so)"
for f in "$tmp/$BINS"/*.so; do
  [ "$f" = "$tmp/$BINS/libllama.v0.5.0.so" ] && continue
  mv "$f" "$DIR/" || missing "not available (cannot move $(basename "$f") into $DIR)"
done
mv "$tmp/$BINS/libllama.v0.5.0.so" "$LAST" || missing "not available (cannot move libllama.v0.5.0.so into $DIR)"
say "$DIR (fetched $PKG in $(($(date +%s) - start)) s)"
