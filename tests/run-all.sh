#!/bin/sh
# run-all.sh - runs the C unit tests and the FiveAM suites and prints the
# final "N passed, N failed" line that sums both; exits non-zero on any
# failure, including a test program that crashed before reporting.
# RONTOLISP_EXE names the executable to test (default build/rontolisp).
#   tests/run-all.sh [--c-only | --lisp-only] [C-TEST-PROGRAM ...]
mode=all
case "$1" in --c-only|--lisp-only) mode=${1#--}; shift ;; esac

passed=0; failed=0; broken=0
log=build/test-logs
mkdir -p "$log"

tally() { # $1 = log file; adds every "N passed, M failed" report line in it
  eval "$(sed -n 's/^\(C test\|Lisp tests\)[^:]*: \([0-9]*\) passed, \([0-9]*\) failed.*/passed=$((passed+\2)); failed=$((failed+\3));/p' "$1")"
}

if [ "$mode" != lisp-only ]; then
  for t in "$@"; do
    name=$(basename "$t")
    "$t" >"$log/$name.log" 2>&1
    rc=$?
    cat "$log/$name.log" | grep -v '^C test' | sed "s/^/  [$name] /" | tail -n 40
    grep '^C test' "$log/$name.log" || { echo "C test $name: no report (exit $rc)"; broken=$((broken+1)); }
    tally "$log/$name.log"
    [ $rc -ne 0 ] && ! grep -q '^C test.*[1-9][0-9]* failed' "$log/$name.log" && broken=$((broken+1))
  done
fi

if [ "$mode" != c-only ]; then
  # FiveAM and its dependencies are compiled once into build/cache.
  exe=${RONTOLISP_EXE:-build/rontolisp}
  XDG_CACHE_HOME=$(pwd)/build/cache "$exe" script tests/lisp/run.lisp \
    >"$log/lisp.log" 2>&1
  rc=$?
  cat "$log/lisp.log"
  if grep -q '^Lisp tests' "$log/lisp.log"; then
    tally "$log/lisp.log"
    [ $rc -ne 0 ] && ! grep -q '^Lisp tests.*[1-9][0-9]* failed' "$log/lisp.log" && broken=$((broken+1))
  else
    echo "Lisp tests: no report (exit $rc)"; broken=$((broken+1))
  fi
fi

failed=$((failed+broken))
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
