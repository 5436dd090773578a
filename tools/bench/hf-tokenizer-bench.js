// hf-tokenizer-bench.js - Hugging Face tokenizers' throughput on the lines of
// a text file, the reference figure of `rontolisp bench --tokenizer':
//
//   RAYON_NUM_THREADS=1 node tools/bench/hf-tokenizer-bench.js TOKENIZERS_DIR TOKENIZER.json TEXT-FILE
//
// TOKENIZERS_DIR is the npm package @anush008/tokenizers (the Rust library;
// tests/fetch-tokenizer-refs.sh puts it in build/cache/tokenizer-refs/
// tokenizers).  Every non-empty line is one text, encoded without special
// tokens by encodeBatch in batches of 10,000 (RAYON_NUM_THREADS=1: one
// thread, as the benchmark compares).  Prints one line: bytes, tokens,
// seconds inside encodeBatch, MB/s, tokens/s.
'use strict';
const fs = require('fs');
const path = require('path');

if (process.argv.length !== 5) {
  process.stderr.write('usage: hf-tokenizer-bench.js TOKENIZERS_DIR TOKENIZER.json TEXT-FILE\n');
  process.exit(2);
}
const [dir, json, textFile] = process.argv.slice(2);
const { Tokenizer } = require(path.resolve(dir));
const tok = Tokenizer.fromFile(json);
const lines = fs.readFileSync(textFile, 'utf8').split('\n').filter((l) => l.length > 0);
const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l, 'utf8'), 0);

async function main() {
  let tokens = 0;
  let ns = 0n;
  for (let i = 0; i < lines.length; i += 10000) {
    const batch = lines.slice(i, i + 10000);
    const t0 = process.hrtime.bigint();
    const encodings = await tok.encodeBatch(batch, { addSpecialTokens: false });
    ns += process.hrtime.bigint() - t0;
    for (const e of encodings) tokens += e.getIds().length;
  }
  const s = Number(ns) / 1e9;
  console.log(`${bytes} bytes, ${tokens} tokens, ${s.toFixed(4)} s: ${(bytes / s / 1e6).toFixed(2)} MB/s, ${Math.round(tokens / s)} tokens/s`);
}
main().catch((e) => { process.stderr.write(`hf-tokenizer-bench: ${e.message || e}\n`); process.exit(1); });
