#!/bin/sh
# make-markdown-golden.sh - regenerate tests/golden/markdown/: the fixture
# the test suite's builder writes, and what gguf-py's gguf_dump.py prints of
# it with --markdown (and with --markdown --no-tensors), the reference of
# `rontolisp inspect --markdown'.
#
#   sh tools/make-markdown-golden.sh LLAMA_CPP_SOURCE_DIR
#
# from the repository root after `make'.  LLAMA_CPP_SOURCE_DIR is the
# llama.cpp v0.5.0 source tree (its gguf-py/); gguf_dump needs numpy
# (Debian's python3-numpy); PYTHON names the interpreter (default python3).
set -eu
src=${1:?usage: sh tools/make-markdown-golden.sh LLAMA_CPP_SOURCE_DIR}
py=${PYTHON:-python3}
dir=tests/golden/markdown
mkdir -p "$dir"
build/rontolisp script tools/markdown-fixture.lisp "$dir/fixture.gguf"
# gguf_dump prints the path as given: keep it relative to the root.
PYTHONPATH="$src/gguf-py" "$py" "$src/gguf-py/gguf/scripts/gguf_dump.py" --markdown \
    "$dir/fixture.gguf" > "$dir/fixture.md"
PYTHONPATH="$src/gguf-py" "$py" "$src/gguf-py/gguf/scripts/gguf_dump.py" --markdown --no-tensors \
    "$dir/fixture.gguf" > "$dir/fixture.no-tensors.md"
