#!/bin/sh
# ensure-deps.sh - installs from Debian what is missing for one job:
#   tests/ensure-deps.sh --demo    building and `make demo': ECL and its
#                                  headers, gcc and the C library's headers,
#                                  make, libjansson-dev, libedit-dev
#   tests/ensure-deps.sh [--check] that and everything `make check' (and CI)
#                                  needs to run every test
#   tests/ensure-deps.sh --bench   that and gnuplot, for `make bench'
# Needs root for apt-get; otherwise says what to install and fails.
# Packages are installed without their recommendations (apt-get
# --no-install-recommends): what a job needs is named here, and a
# recommended package can fail on its own (exim4, pulled in by one of
# them, stopped a fresh container at its configuration).
#
# The build: libjansson-dev is the JSON parser of the safetensors reader
# and of config.json / tokenizer.json; libedit-dev the line editing at the
# REPL; libc6-dev only a recommendation of gcc.
# The tests: FiveAM, yason (JSON) and trivial-gray-streams (under yason)
# run them.  cl-swank: `rontolisp swank' (and its test).  npm and nodejs:
# tests/fetch-llama-lib.sh fetches llama.cpp's libraries, which the tests
# compare with, and tests/fetch-tokenizer-refs.sh the tokenizer references
# (git reads llama.cpp's test cases out of a bundle).  python3: its strict
# json module reads every --json output in the tests.  python3-numpy,
# python3-tqdm and python3-yaml: llama.cpp's gguf-py scripts
# (tests/lisp/test-gguf-py.lisp) need them.  time: /usr/bin/time measures a
# command's peak memory in the converter's tests.  emacs-nox and slime
# (Emacs's side of SLIME): SLIME itself drives `rontolisp swank' in one
# test.  unicode-data: NormalizationTest.txt, the NFC conformance test of
# the tokenizer (Debian ships it compressed: bzip2 opens it).  chromium:
# the page tests open serve's page and export's bench.html in it, headless
# (tests/ref/browse.js drives it with node over the DevTools protocol; its
# recommendations, the sandbox helper among them, are not needed: the tests
# run it with --no-sandbox, as root in a container must), and it draws each
# --svg picture to a PNG in which the tests find the marks (without it those
# checks skip; under CI=true they fail).
set -e
case "${1:---check}" in
  --demo) mode=demo ;;
  --check) mode=check ;;
  --bench) mode=bench ;;
  *) echo "ensure-deps.sh: expected --demo, --check or --bench, found \"$1\"" >&2; exit 2 ;;
esac
need=""
# The build and the demo.
command -v ecl >/dev/null 2>&1 || need="$need ecl"
command -v ecl-config >/dev/null 2>&1 || need="$need libecl-dev"
[ -f /usr/include/jansson.h ] || need="$need libjansson-dev"
[ -f /usr/include/microhttpd.h ] || need="$need libmicrohttpd-dev"
[ -f /usr/include/editline/readline.h ] || need="$need libedit-dev"
command -v cc >/dev/null 2>&1 || need="$need gcc"
[ -f /usr/include/stdio.h ] || need="$need libc6-dev"
command -v make >/dev/null 2>&1 || need="$need make"
if [ "$mode" != demo ]; then
  [ -d /usr/share/common-lisp/source/fiveam ] || need="$need cl-fiveam"
  [ -d /usr/share/common-lisp/source/yason ] || need="$need cl-yason"
  [ -d /usr/share/common-lisp/source/cl-trivial-gray-streams ] || need="$need cl-trivial-gray-streams"
  [ -d /usr/share/common-lisp/source/slime ] || need="$need cl-swank"
  command -v npm >/dev/null 2>&1 || need="$need npm"
  command -v node >/dev/null 2>&1 || need="$need nodejs"
  command -v git >/dev/null 2>&1 || need="$need git"
  command -v python3 >/dev/null 2>&1 || need="$need python3"
  # Debian's python3 (/usr/bin/python3), where these install.
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need="$need python3-numpy"
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import tqdm' >/dev/null 2>&1 || need="$need python3-tqdm"
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || need="$need python3-yaml"
  [ -x /usr/bin/time ] || need="$need time"
  command -v emacs >/dev/null 2>&1 || need="$need emacs-nox"
  ls -d /usr/share/emacs/site-lisp/elpa/slime-* >/dev/null 2>&1 || need="$need slime"
  [ -f /usr/share/unicode/NormalizationTest.txt ] || [ -f /usr/share/unicode/NormalizationTest.txt.bz2 ] ||
    need="$need unicode-data"
  command -v bzip2 >/dev/null 2>&1 || need="$need bzip2"
  command -v chromium >/dev/null 2>&1 || need="$need chromium"
fi
# gnuplot only for `make bench', never for the tests.
if [ "$mode" = bench ] && ! command -v gnuplot >/dev/null 2>&1; then
  need="$need gnuplot-nox"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages:$need (install them as root: apt-get install --no-install-recommends$need)" >&2
  exit 1
fi
echo "installing Debian packages:$need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $need >/dev/null
