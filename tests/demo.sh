#!/bin/sh
# demo.sh - what `make demo` runs once the build is done: the main job on
# built-in data.  Each step says what it shows.
set -e
R=build/rontolisp
step() { printf '\n== %s\n' "$*"; }

step "start-up: rontolisp --version"
$R --version

step "number formats, from a script (rontolisp script tests/demo/numbers.lisp)"
$R script tests/demo/numbers.lisp

step "a REPL session driven by a pipe (input echoed with '>')"
cat > build/demo-repl.txt <<'LISP'
(package-name *package*)
(rontolisp:f16-bits 0.333)
(rontolisp:f16-value *)
(car 1)
(list (rontolisp:simd) (rontolisp:threads))
LISP
sed 's/^/> /' build/demo-repl.txt
echo "--- output:"
$R < build/demo-repl.txt 2>&1
echo
echo "demo done."
