#!/bin/sh
# ensure-deps.sh - installs what the build and the tests need from Debian
# when it is missing: ECL and its headers, FiveAM and yason (JSON, for the
# tests).  Needs root for apt-get; otherwise says what to
# install and fails.  libjansson-dev: the JSON parser of the safetensors
# reader and of config.json / tokenizer.json.  libedit-dev: line editing
# at the REPL.  cl-swank: `rontolisp swank' (and its test).  npm and
# nodejs: tests/fetch-llama-lib.sh fetches llama.cpp's libraries, which the
# tests compare with, through npm.  python3: its strict json module reads
# every --json output in the tests.  python3-numpy, python3-tqdm and python3-yaml:
# llama.cpp's gguf-py scripts (tests/lisp/test-gguf-py.lisp) need them.
# time: /usr/bin/time measures a command's peak memory in the converter's
# tests.  emacs-nox and slime (Emacs's side of SLIME): SLIME itself drives
# `rontolisp swank' in one test.
set -e
need=""
command -v ecl >/dev/null 2>&1 || need="$need ecl"
command -v ecl-config >/dev/null 2>&1 || need="$need libecl-dev"
[ -d /usr/share/common-lisp/source/fiveam ] || need="$need cl-fiveam"
[ -d /usr/share/common-lisp/source/yason ] || need="$need cl-yason"
[ -d /usr/share/common-lisp/source/cl-trivial-gray-streams ] || need="$need cl-trivial-gray-streams"
[ -f /usr/include/jansson.h ] || need="$need libjansson-dev"
[ -f /usr/include/microhttpd.h ] || need="$need libmicrohttpd-dev"
[ -f /usr/include/editline/readline.h ] || need="$need libedit-dev"
[ -d /usr/share/common-lisp/source/slime ] || need="$need cl-swank"
command -v npm >/dev/null 2>&1 || need="$need npm"
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v python3 >/dev/null 2>&1 || need="$need python3"
# Debian's python3 (/usr/bin/python3), where these two install.
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need="$need python3-numpy"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import tqdm' >/dev/null 2>&1 || need="$need python3-tqdm"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || need="$need python3-yaml"
[ -x /usr/bin/time ] || need="$need time"
command -v emacs >/dev/null 2>&1 || need="$need emacs-nox"
ls -d /usr/share/emacs/site-lisp/elpa/slime-* >/dev/null 2>&1 || need="$need slime"
# unicode-data: NormalizationTest.txt, the NFC conformance test of the tokenizer
# (Debian ships it compressed: bzip2 opens it).
[ -f /usr/share/unicode/NormalizationTest.txt ] || [ -f /usr/share/unicode/NormalizationTest.txt.bz2 ] ||
  need="$need unicode-data"
command -v bzip2 >/dev/null 2>&1 || need="$need bzip2"
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v make >/dev/null 2>&1 || need="$need make"
# gnuplot only for `make bench' (ensure-deps.sh --bench), never for the tests.
if [ "$1" = --bench ] && ! command -v gnuplot >/dev/null 2>&1; then
  need="$need gnuplot-nox"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages:$need (install them as root: apt-get install$need)" >&2
  exit 1
fi
echo "installing Debian packages:$need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $need >/dev/null
