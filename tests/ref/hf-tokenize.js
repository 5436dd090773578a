// hf-tokenize.js - Hugging Face tokenizers (the Rust library, through the
// npm package @anush008/tokenizers) as the reference of the tokenizer tests:
//
//   node tests/ref/hf-tokenize.js TOKENIZERS_DIR TOKENIZER.json [--no-special] [--offsets] < TEXTS
//   node tests/ref/hf-tokenize.js TOKENIZERS_DIR TOKENIZER.json --decode < IDS
//
// TOKENIZERS_DIR is the package's directory (build/cache/tokenizer-refs/
// tokenizers, which tests/fetch-tokenizer-refs.sh fills).  TEXTS holds one
// JSON string per line (so a text may hold newlines); for each, one line
// with the JSON array of its token ids, encoded with add_special_tokens
// true (false with --no-special); with --offsets, the JSON array of its
// tokens' offsets instead, [start, end] pairs as the library reports them
// (in characters, code points, of the text).  With --decode, IDS holds one JSON array
// of ids per line; for each, one line with the JSON string of their text
// (decoded with the special tokens kept).  A tokenizer.json the library
// refuses is one line on stderr and exit 1; bad usage exit 2.
'use strict';
const fs = require('fs');
const path = require('path');

const args = process.argv.slice(2);
const noSpecial = args.includes('--no-special');
const decode = args.includes('--decode');
const offsets = args.includes('--offsets');
const rest = args.filter((a) => a !== '--no-special' && a !== '--decode' && a !== '--offsets');
if (rest.length !== 2) {
  process.stderr.write('usage: hf-tokenize.js TOKENIZERS_DIR TOKENIZER.json [--no-special] [--offsets | --decode] < INPUT\n');
  process.exit(2);
}
const { Tokenizer } = require(path.resolve(rest[0]));

let tok;
try {
  tok = Tokenizer.fromFile(rest[1]);
} catch (e) {
  process.stderr.write(`hf-tokenize: ${rest[1]}: ${String(e.message || e).split('\n')[0]}\n`);
  process.exit(1);
}

async function main() {
  const lines = fs.readFileSync(0, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const what = decode ? 'a JSON array of ids' : 'a JSON string';
    let text;
    try {
      text = JSON.parse(lines[i]);
    } catch (e) {
      process.stderr.write(`hf-tokenize: line ${i + 1}: expected ${what}, found ${lines[i].slice(0, 40)}\n`);
      process.exit(2);
    }
    if (decode ? !(Array.isArray(text) && text.every(Number.isInteger)) : typeof text !== 'string') {
      process.stderr.write(`hf-tokenize: line ${i + 1}: expected ${what}, found ${lines[i].slice(0, 40)}\n`);
      process.exit(2);
    }
    if (decode) {
      out.push(JSON.stringify(await tok.decode(text, false)));
      continue;
    }
    const enc = await tok.encode(text, null, { addSpecialTokens: !noSpecial });
    out.push(JSON.stringify(offsets ? enc.getOffsets() : enc.getIds()));
  }
  process.stdout.write(out.map((l) => l + '\n').join(''));
}

main().catch((e) => {
  process.stderr.write(`hf-tokenize: ${String(e.message || e).split('\n')[0]}\n`);
  process.exit(1);
});
