// hf-tokenize.js - Hugging Face tokenizers (the Rust library, through the
// npm package @anush008/tokenizers) as the reference of the tokenizer tests:
//
//   node tests/ref/hf-tokenize.js TOKENIZERS_DIR TOKENIZER.json [--no-special] < TEXTS
//
// TOKENIZERS_DIR is the package's directory (build/cache/tokenizer-refs/
// tokenizers, which tests/fetch-tokenizer-refs.sh fills).  TEXTS holds one
// JSON string per line (so a text may hold newlines); for each, one line
// with the JSON array of its token ids, encoded with add_special_tokens
// true (false with --no-special).  A tokenizer.json the library refuses is
// one line on stderr and exit 1; bad usage exit 2.
'use strict';
const fs = require('fs');
const path = require('path');

const args = process.argv.slice(2);
const noSpecial = args.includes('--no-special');
const rest = args.filter((a) => a !== '--no-special');
if (rest.length !== 2) {
  process.stderr.write('usage: hf-tokenize.js TOKENIZERS_DIR TOKENIZER.json [--no-special] < TEXTS\n');
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
    let text;
    try {
      text = JSON.parse(lines[i]);
    } catch (e) {
      process.stderr.write(`hf-tokenize: line ${i + 1}: expected a JSON string, found ${lines[i].slice(0, 40)}\n`);
      process.exit(2);
    }
    if (typeof text !== 'string') {
      process.stderr.write(`hf-tokenize: line ${i + 1}: expected a JSON string, found ${typeof text}\n`);
      process.exit(2);
    }
    const enc = await tok.encode(text, null, { addSpecialTokens: !noSpecial });
    out.push(JSON.stringify(enc.getIds()));
  }
  process.stdout.write(out.map((l) => l + '\n').join(''));
}

main().catch((e) => {
  process.stderr.write(`hf-tokenize: ${String(e.message || e).split('\n')[0]}\n`);
  process.exit(1);
});
