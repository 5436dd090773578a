#!/bin/sh
# run-all.sh - runs the C unit tests and the FiveAM suites and prints the
# final "N passed, N failed" line that sums both; exits non-zero on any
# failure, including a test program that crashed before reporting.
# RONTOLISP_EXE names the executable to test (default build/rontolisp).
# Every test program has a deadline, RL_TEST_SECONDS (default 7200 s):
# one that overruns it is killed and counts as failed.  The tests' temporary
# files go to a directory of the run's own (TMPDIR), removed when all passed.
# The counts are of test cases (C test functions, FiveAM tests); each
# program and run also says how many checks (compared values) it made, on
# a line of its own that is not summed.
# SUITE=NAME runs one suite: the Lisp suite NAME (tests/lisp/test-NAME.lisp,
# loaded alone with the fixtures) and the C test program test_NAME, either
# or both as they exist (and as --c-only or --lisp-only allow); TEST=NAME
# only the C program (make check SUITE=NAME, make check-c TEST=NAME).
#   tests/run-all.sh [--c-only | --lisp-only] [C-TEST-PROGRAM ...]
mode=all
case "$1" in --c-only|--lisp-only) mode=${1#--}; shift ;; esac

lisp_suite=
one=${SUITE:-$TEST}
if [ -n "$one" ]; then
  program=
  [ "$mode" != lisp-only ] &&
    for t in "$@"; do [ "$(basename "$t")" = "test_$one" ] && program=$t; done
  [ -z "$TEST" ] && [ "$mode" != c-only ] && [ -f "tests/lisp/test-$one.lisp" ] &&
    lisp_suite="=$one"
  if [ -n "$program" ] && [ -n "$lisp_suite" ]; then
    set -- "$program"
  elif [ -n "$program" ]; then
    mode=c-only; set -- "$program"
  elif [ -n "$lisp_suite" ]; then
    mode=lisp-only
  else
    echo "No test suite named $one.  The Lisp suites:" \
      $(ls tests/lisp/test-*.lisp | sed 's,.*/test-,,; s,\.lisp$,,')
    echo "The C test programs:" $(for t in "$@"; do basename "$t" | sed 's/^test_//'; done)
    exit 2
  fi
fi

passed=0; failed=0; broken=0
deadline=${RL_TEST_SECONDS:-7200}
log=build/test-logs
mkdir -p "$log"

# Every test program and every child of one makes its temporary files in a
# directory of this run's own (TMPDIR), removed at the end when everything
# passed and kept, and named, when something failed: a test that does not
# delete what it made leaves nothing behind in the system's directory.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-check.XXXXXX") ||
  { echo "run-all.sh: cannot make a temporary directory in ${TMPDIR:-/tmp}"; exit 2; }
# as /tmp is: tests run some commands as a user without privileges
chmod 1777 "$run_tmp"
export TMPDIR="$run_tmp"

tally() { # $1 = log file; adds every "N passed, M failed" report line in it
  eval "$(sed -n 's/^\(C test\|Lisp tests\)[^:]*: \([0-9]*\) passed, \([0-9]*\) failed.*/passed=$((passed+\2)); failed=$((failed+\3));/p' "$1")"
}

overran() { # $1 = what ran, $2 = its status (timeout(1) answers 124 at the deadline)
  [ "$2" -eq 124 ] && echo "$1: killed at the deadline of $deadline s (RL_TEST_SECONDS)"
  return 0
}

# The C test programs run one after the other in the background, beside
# the Lisp runs below (they share nothing but the file system); their
# reports are read once they are all done.
if [ "$mode" != lisp-only ]; then
  for t in "$@"; do rm -f "$log/$(basename "$t").rc"; done
  for t in "$@"; do
    name=$(basename "$t")
    timeout --foreground -k 10 "$deadline" "$t" >"$log/$name.log" 2>&1
    echo $? >"$log/$name.rc"
  done &
  c_tests=$!
fi

report_c_tests() {
  for t in "$@"; do
    name=$(basename "$t")
    rc=$(cat "$log/$name.rc" 2>/dev/null || echo 1)
    overran "$name" "$rc"
    cat "$log/$name.log" | grep -v '^C test' | sed "s/^/  [$name] /" | tail -n 40
    if grep '^C test' "$log/$name.log"; then
      tally "$log/$name.log"
      [ $rc -ne 0 ] && ! grep -q '^C test.*[1-9][0-9]* failed' "$log/$name.log" && broken=$((broken+1))
    else
      echo "C test $name: no report (exit $rc)"; broken=$((broken+1))
    fi
  done
}

if [ "$mode" != c-only ]; then
  # FiveAM and its dependencies are compiled once into build/cache, by a
  # first run that only loads the test system, so the parallel runs below
  # never compile into the cache at the same time.
  exe=${RONTOLISP_EXE:-build/rontolisp}
  export XDG_CACHE_HOME
  XDG_CACHE_HOME=$(pwd)/build/cache
  timeout --foreground -k 10 "$deadline" "$exe" script tests/lisp/run.lisp --load-only \
    >"$log/lisp-load.log" 2>&1 || { cat "$log/lisp-load.log"; broken=$((broken+1)); }
  # The suites are spread over RL_TEST_JOBS runs (default: one per core),
  # longest first onto the least loaded run, by the seconds each took in
  # the last full run (tests/lisp/suite-seconds.txt; 10 for a suite it
  # does not list).  Each run is its own process, so suites that share
  # nothing but the file system run side by side.
  jobs=${RL_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
  groups=$lisp_suite
  [ -n "$groups" ] || groups=$(ls tests/lisp/test-*.lisp | sed 's,.*/test-,,; s,\.lisp$,,' |
    awk 'FILENAME != "-" { if ($1 !~ /^#/) w[$1] = $2; next }
         { print (($1 in w) ? w[$1] : 10), $1 }' \
      tests/lisp/suite-seconds.txt - | sort -k1,1nr -k2 |
    awk -v jobs="$jobs" '{ best = 0
        for (i = 1; i < jobs; i++) if (t[i] < t[best]) best = i
        t[best] += $1; g[best] = g[best] " =" $2 }
      END { for (i = 0; i < jobs; i++) if (g[i] != "") print g[i] }')
  rm -f "$log"/lisp-[0-9]*.log "$log"/lisp-[0-9]*.rc
  echo "$groups" | {
    i=0
    while IFS= read -r group; do
      i=$((i+1))
      # shellcheck disable=SC2086  # the group is a list of words
      ( timeout --foreground -k 10 "$deadline" "$exe" script tests/lisp/run.lisp $group \
          >"$log/lisp-$i.log" 2>&1; echo $? >"$log/lisp-$i.rc" ) &
    done
    wait
  }
  for f in "$log"/lisp-[0-9]*.log; do
    n=${f%.log}; rc=$(cat "$n.rc" 2>/dev/null || echo 1)
    overran "the Lisp tests (${f##*/})" "$rc"
    cat "$f"
    if grep -q '^Lisp tests' "$f"; then
      tally "$f"
      [ "$rc" -ne 0 ] && ! grep -q '^Lisp tests.*[1-9][0-9]* failed' "$f" && broken=$((broken+1))
    else
      echo "Lisp tests (${f##*/}): no report (exit $rc)"; broken=$((broken+1))
    fi
  done
fi

if [ "$mode" != lisp-only ]; then
  wait "$c_tests"
  report_c_tests "$@"
fi

failed=$((failed+broken))
if [ "$failed" -eq 0 ]; then
  rm -rf "$run_tmp"
else
  echo "The tests' temporary files are kept in $run_tmp."
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
