#!/bin/sh
# make_quant_goldens.sh - rewrites tests/golden/quants/: the inputs
# (tools/make_golden_inputs.py --quants), their quantization by llama.cpp's
# own llama_model_quantize to every ftype llama-quantize makes without an
# importance matrix (tools/llama_quantize.c, which is llama-quantize's
# command line over the fetched libllama), the JSON dumps
# (tools/gguf_dump_json.py) and one log per run, ending with the exit status.
# Each output is made with 2 threads and again with 1; the two must be
# byte-identical, or the script stops.  Commit the result.
#
#   sh tools/make_quant_goldens.sh [OUTDIR]     (default tests/golden/quants)
#
# Needs: make tools (build/tools/llama_quantize), the llama.cpp libraries
# of tests/fetch-llama-lib.sh (or RL_LLAMA_LIB), gguf-py (GGUF_PY, default
# build/cache/gguf-py, which tests/fetch-tokenizer-refs.sh fetches) and
# Debian's /usr/bin/python3 with python3-numpy.  Run from the repository
# root.  tests/golden/quants/README.md says what the files are.
set -eu

OUT=${1:-tests/golden/quants}
GGUF_PY=$(cd "${GGUF_PY:-build/cache/gguf-py}" 2>/dev/null && pwd) || GGUF_PY=/nonexistent
PY=/usr/bin/python3
ROOT=$(pwd)
TOOL=$ROOT/build/tools/llama_quantize
FTYPES="q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs"
INPUTS="quant_main quant_odd"

die() { echo "make_quant_goldens: $*" >&2; exit 1; }
[ -x "$TOOL" ] || die "$TOOL not built (make tools)"
[ -d "$GGUF_PY/gguf" ] || die "no gguf-py in $GGUF_PY (sh tests/fetch-tokenizer-refs.sh, or set GGUF_PY)"
[ -n "${RL_LLAMA_LIB:-}" ] || RL_LLAMA_LIB=$(pwd)/build/cache/llama
export RL_LLAMA_LIB

mkdir -p "$OUT"
PYTHONPATH=$GGUF_PY $PY tools/make_golden_inputs.py --quants "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$OUT"
for in in $INPUTS; do
  for ft in $FTYPES; do
    out=$in.$ft.gguf
    log=$in.$ft.quantize.log
    rm -f "$out"
    # the golden run: relative names, so the log names no machine path
    set +e
    "$TOOL" "$in.f32.gguf" "$out" "$ft" 2 >"$log" 2>&1
    rc=$?
    set -e
    echo "exit status: $rc" >>"$log"
    [ $rc -eq 0 ] || die "$in to $ft failed, see $OUT/$log"
    "$TOOL" "$in.f32.gguf" "$tmp/$out" "$ft" 1 >"$tmp/$log" 2>&1 ||
      die "$in to $ft with 1 thread failed: $(tail -n 1 "$tmp/$log")"
    cmp -s "$out" "$tmp/$out" || die "$in to $ft: 1 thread and 2 threads wrote different files"
    echo "$out: $(wc -c <"$out") bytes, same with 1 and 2 threads"
  done
done
PYTHONPATH=$GGUF_PY $PY "$ROOT/tools/gguf_dump_json.py" ./*.gguf
