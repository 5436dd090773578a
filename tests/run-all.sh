#!/bin/sh
# run-all.sh - runs the C unit tests and the FiveAM suites and prints the
# final "N passed, N failed" line that sums both; exits non-zero on any
# failure, including a test program that crashed before reporting.
# RONTOLISP_EXE names the executable to test (default build/rontolisp).
# Every test program has a deadline, RL_TEST_SECONDS (default 7200 s):
# one that overruns it is killed and counts as failed.
#   tests/run-all.sh [--c-only | --lisp-only] [C-TEST-PROGRAM ...]
mode=all
case "$1" in --c-only|--lisp-only) mode=${1#--}; shift ;; esac

passed=0; failed=0; broken=0
deadline=${RL_TEST_SECONDS:-7200}
log=build/test-logs
mkdir -p "$log"

tally() { # $1 = log file; adds every "N passed, M failed" report line in it
  eval "$(sed -n 's/^\(C test\|Lisp tests\)[^:]*: \([0-9]*\) passed, \([0-9]*\) failed.*/passed=$((passed+\2)); failed=$((failed+\3));/p' "$1")"
}

overran() { # $1 = what ran, $2 = its status (timeout(1) answers 124 at the deadline)
  [ "$2" -eq 124 ] && echo "$1: killed at the deadline of $deadline s (RL_TEST_SECONDS)"
  return 0
}

if [ "$mode" != lisp-only ]; then
  for t in "$@"; do
    name=$(basename "$t")
    timeout --foreground -k 10 "$deadline" "$t" >"$log/$name.log" 2>&1
    rc=$?
    overran "$name" $rc
    cat "$log/$name.log" | grep -v '^C test' | sed "s/^/  [$name] /" | tail -n 40
    if grep '^C test' "$log/$name.log"; then
      tally "$log/$name.log"
      [ $rc -ne 0 ] && ! grep -q '^C test.*[1-9][0-9]* failed' "$log/$name.log" && broken=$((broken+1))
    else
      echo "C test $name: no report (exit $rc)"; broken=$((broken+1))
    fi
  done
fi

if [ "$mode" != c-only ]; then
  # FiveAM and its dependencies are compiled once into build/cache.
  exe=${RONTOLISP_EXE:-build/rontolisp}
  XDG_CACHE_HOME=$(pwd)/build/cache timeout --foreground -k 10 "$deadline" "$exe" script tests/lisp/run.lisp \
    >"$log/lisp.log" 2>&1
  rc=$?
  overran "the Lisp tests" $rc
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
