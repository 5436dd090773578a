/* tokenizer.h - byte-level BPE (GPT-2's family): text to token ids and
 * back, as Hugging Face tokenizers encodes with a tokenizer.json of model
 * BPE, pre-tokenizer ByteLevel and normalizer NFC or none (the contract is
 * written out in doc/tokenizer.md).
 *
 * A tokenizer is built once from an rl_tok_spec (the readers of GGUF keys
 * and of tokenizer.json fill one in) and is immutable afterwards but for
 * its cache of pieces, which is safe to share: any number of threads may
 * call rl_tok_encode and rl_tok_decode on one tokenizer at once.
 *
 * Plain C, no ECL.  Every function that can fail answers an rl_tok_status
 * and writes a one-line message (what was expected, what was found, and
 * where: a byte offset of the text, a token id, a merge index) into
 * msg[msgsz] (always NUL-terminated when msgsz > 0).
 */
#ifndef RL_PRIMS_TOKENIZER_H
#define RL_PRIMS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    RL_TOK_OK = 0,
    RL_TOK_BAD_UTF8,     /* text (or a token or merge of the spec) is not UTF-8 */
    RL_TOK_BAD_SPEC,     /* the spec: duplicate token, merge naming an unknown token, bad id... */
    RL_TOK_UNKNOWN,      /* a symbol not in the vocabulary and no unknown token */
    RL_TOK_BAD_ID,       /* decode: an id outside the vocabulary */
    RL_TOK_NOMEM
} rl_tok_status;

/* The status's name as the Lisp keyword it becomes: "ok", "bad-utf-8",
 * "bad-spec", "unknown-symbol", "bad-id", "out-of-memory". */
const char *rl_tok_status_name(rl_tok_status st);

/* GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type
 * but its 0, undefined, which no converter writes); the builder refuses
 * any other. */
enum {
    RL_TOK_TYPE_NORMAL = 1,
    RL_TOK_TYPE_UNKNOWN = 2,
    RL_TOK_TYPE_CONTROL = 3,       /* special: matched in raw text, decoded as its text */
    RL_TOK_TYPE_USER_DEFINED = 4,  /* added token: matched in raw text */
    RL_TOK_TYPE_UNUSED = 5,
    RL_TOK_TYPE_BYTE = 6
};

/* What a tokenizer is built from.  Strings are UTF-8 with explicit lengths
 * (they may hold NUL); the builder copies what it keeps, so the caller's
 * arrays may be freed once rl_tok_new returns. */
typedef struct {
    size_t n_tokens;
    const char *const *tokens;     /* token id -> its text, in GPT-2's byte-to-unicode form */
    const size_t *token_lens;
    const int32_t *token_types;    /* RL_TOK_TYPE_*, or NULL: every token normal */
    size_t n_merges;               /* merges in rank order, each "left right" (one space) */
    const char *const *merges;
    const size_t *merge_lens;
    int32_t unk_id, bos_id, eos_id;    /* -1: none */
    int add_bos, add_eos;              /* add-special adds them (bos first, eos last) */
    int nfc;                           /* normalizer NFC (else none) */
    int ignore_merges;                 /* a piece that is a token is that token */
    const int32_t *lstrip_ids;         /* added tokens that take the whitespace before them */
    size_t n_lstrip;
    const int32_t *rstrip_ids;         /* ... and after them */
    size_t n_rstrip;
} rl_tok_spec;

typedef struct rl_tok rl_tok;

/* Build a tokenizer from SPEC into *OUT (free with rl_tok_free). */
rl_tok_status rl_tok_new(const rl_tok_spec *spec, rl_tok **out, char *msg, size_t msgsz);
void rl_tok_free(rl_tok *t);

size_t rl_tok_vocab_size(const rl_tok *t);

/* The token ids of TEXT (LEN bytes of UTF-8; anything else is
 * RL_TOK_BAD_UTF8 naming the byte offset).  ADD_SPECIAL adds bos/eos as the
 * spec says; PARSE_SPECIAL matches control and user-defined tokens in the
 * raw text (leftmost-longest, with lstrip/rstrip), else they are plain
 * text.  *IDS is malloc'd (free it), *N its length. */
rl_tok_status rl_tok_encode(const rl_tok *t, const char *text, size_t len, int add_special,
                            int parse_special, int32_t **ids, size_t *n, char *msg,
                            size_t msgsz);

/* As rl_tok_encode, and when OFFSETS is not NULL *OFFSETS (malloc'd, free
 * it) the bytes of TEXT each id stands for: id k is bytes
 * [(*OFFSETS)[2k], (*OFFSETS)[2k+1]), whole characters; an added token
 * with the white space it strips, a token of some bytes of a character the
 * whole character, a character NFC composed the first of those it was made
 * of, bos and eos [0, 0) (Hugging Face tokenizers' offsets, in bytes). */
rl_tok_status rl_tok_encode_offsets(const rl_tok *t, const char *text, size_t len,
                                    int add_special, int parse_special, int32_t **ids,
                                    size_t **offsets, size_t *n, char *msg, size_t msgsz);

/* The bytes of IDS: each token's text back through the byte-to-unicode
 * table (control and user-defined tokens, and a token with a character
 * outside the table, as their text), whether or not they form UTF-8.
 * *BYTES is malloc'd (free it), *LEN its length. */
rl_tok_status rl_tok_decode_bytes(const rl_tok *t, const int32_t *ids, size_t n, uint8_t **bytes,
                                  size_t *len, char *msg, size_t msgsz);

/* The text of IDS: rl_tok_decode_bytes's bytes as UTF-8, each maximal
 * subpart that is not UTF-8 as U+FFFD, as Hugging Face's decoder has it.
 * *TEXT is malloc'd and NUL-terminated (free it), *LEN its length. */
rl_tok_status rl_tok_decode(const rl_tok *t, const int32_t *ids, size_t n, char **text,
                            size_t *len, char *msg, size_t msgsz);

/* Token ID's text as stored (byte-to-unicode form), or NULL when out of
 * range; *LEN its length. */
const char *rl_tok_piece(const rl_tok *t, int32_t id, size_t *len);

/* The end of the pre-tokenizer's piece (GPT-2's expression, written out in
 * doc/tokenizer.md) that starts at byte AT of TEXT (LEN bytes of valid
 * UTF-8, AT < LEN, AT the end of the previous piece or 0). */
size_t rl_tok_split_next(const char *text, size_t len, size_t at);

#endif
