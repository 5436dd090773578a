#!/bin/sh
# demo.sh - what `make demo` runs once the build is done: the main job on
# built-in data.  Each step says what it shows.
set -e
# Each run of the executable has a deadline (RL_TEST_SECONDS, default 600 s).
R="timeout --foreground -k 10 ${RL_TEST_SECONDS:-600} build/rontolisp"
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
# Piped input ends with status 1 when a form failed, as (car 1) does here.
status=0
$R < build/demo-repl.txt 2>&1 || status=$?
echo "--- exit status $status (1: a form failed)"
[ "$status" -eq 1 ] || exit 1
echo

step "inspect a real llama.cpp vocab file and llama-quantize's Q8_0 output"
# Each file's own first lines (its name, header and first keys), then its
# tensor totals, so the two never read as one.
for f in tests/golden/vocab/ggml-vocab-gpt-2.gguf tests/golden/q8_main.q8_0.gguf; do
  $R inspect $f --max-array 3 --no-tensors | head -12
  echo "  ..."
  $R inspect $f --tensors-only | tail -3
  echo
done

step "convert a random s1-pico model to F16 and Q8_0 (rontolisp convert --random)"
$R convert --random s1-pico build/demo-pico-f16.gguf
$R convert --random s1-pico build/demo-pico-q8_0.gguf --type q8_0
step "inspect both (rontolisp inspect FILE --max-array 4), keys and totals"
for f in build/demo-pico-f16.gguf build/demo-pico-q8_0.gguf; do
  $R inspect $f --max-array 4 | grep -E '^build|blk.0.attn_qkv|token_embd.weight|^total|decision.block_count'
done
step "quantize a golden F32 file and compare with llama-quantize's output"
$R quantize tests/golden/q8_main.f32.gguf build/demo-q8_main.q8_0.gguf q8_0
$R script tests/demo/compare-tensors.lisp build/demo-q8_main.q8_0.gguf tests/golden/q8_main.q8_0.gguf
step "a short benchmark on the converted model (rontolisp bench FILE --iters N)"
if $R --help | grep -q ' bench'; then
  $R bench build/demo-pico-q8_0.gguf --iters 50
else
  echo "(skipped: rontolisp bench does not exist yet)"
fi
step "the encoder: convert a random s1-nano encoder (--encoder-only) and embed a token sequence"
$R convert --random s1-nano build/demo-nano-f32.gguf --type f32 --encoder-only
$R embed build/demo-nano-f32.gguf --tokens 2,17,9,3 --pooling mean | cut -c1-100
$R embed build/demo-nano-f32.gguf --tokens 2,17,9,3 | cut -c1-100
step "format, error against F32 and latency, against llama.cpp where its libraries are (rontolisp bench --model FILE --tokens 16)"
$R bench --model build/demo-nano-f32.gguf --tokens 16
echo "demo done."
