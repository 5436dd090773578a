/* tokenizer.c - the byte-level BPE tokenizer (prims/tokenizer.h) seen from
 * Lisp (lisp/tokenizer.lisp).
 *
 * The readers of GGUF keys and of tokenizer.json are Lisp; they hand the
 * spec over as flat arrays (every token's UTF-8 bytes one after the other
 * with their end offsets, the same for the merges), so building needs no
 * Lisp object per token on the C side.  A tokenizer is a foreign handle
 * freed by the collector (never explicitly: encode may run on another
 * thread).  Like the file glue, a failure is not signalled here: the
 * primitives answer (values nil status-keyword message) and the Lisp side
 * signals the project's condition with the file's path. */
#include <stdlib.h>
#include <string.h>

#include "prims/ecl/glue.h"
#include "prims/jsontext.h"
#include "prims/numtext.h"
#include "prims/tokenizer.h"

#define RL_TOK_MSG 512

/* (values nil status message) */
static cl_object rl_tok_failure(rl_tok_status st, const char *msg) {
    const cl_env_ptr env = ecl_process_env();
    ecl_return3(env, ECL_NIL, rl_keyword(rl_tok_status_name(st)),
                rl_string_from_utf8(msg, strlen(msg)));
}

/* The strings of BYTES cut at ENDS (each end the offset one past its
 * string; arguments POS and POS+1 of FN), checked: their data into *DATA
 * and *ENDP.  Answers the count. */
static size_t rl_tok_strings(const char *fn, int pos, cl_object bytes, cl_object ends,
                             const uint8_t **data, const uint64_t **endp) {
    cl_index nb = 0, ne = 0;
    const uint8_t *b = rl_octets(fn, pos, bytes, &nb);
    const uint64_t *e = rl_simple_data(ends, ecl_aet_b64, &ne);
    uint64_t prev = 0;
    if (!e)
        rl_type_error(fn, pos + 1, ends, RL_T_VECTOR);
    for (cl_index i = 0; i < ne; i++) {
        if (e[i] < prev || e[i] > nb)
            rl_signal(RL_C_ERROR, "%s: end %llu of string %lu is outside %llu..%lu", fn,
                      (unsigned long long)e[i], (unsigned long)i, (unsigned long long)prev,
                      (unsigned long)nb);
        prev = e[i];
    }
    *data = b;
    *endp = e;
    return ne;
}

/* Pointer and length arrays of those strings, malloc'd into *PTRS and
 * *LENS; 0 on out-of-memory. */
static int rl_tok_split(const uint8_t *data, const uint64_t *ends, size_t n, const char ***ptrs,
                        size_t **lens) {
    *ptrs = malloc((n ? n : 1) * sizeof **ptrs);
    *lens = malloc((n ? n : 1) * sizeof **lens);
    if (!*ptrs || !*lens)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t start = i ? ends[i - 1] : 0;
        (*ptrs)[i] = (const char *)data + start;
        (*lens)[i] = (size_t)(ends[i] - start);
    }
    return 1;
}

static const int32_t *rl_tok_i32s(const char *fn, int pos, cl_object v, cl_index *n) {
    const int32_t *p = rl_simple_data(v, ecl_aet_i32, n);
    if (!p)
        rl_type_error(fn, pos, v, RL_T_VECTOR);
    return p;
}

/* (%tok-new token-bytes token-ends types merge-bytes merge-ends params
 *           lstrip-ids rstrip-ids)
 * -> handle, or (values nil status message).  TYPES, PARAMS and the id
 * lists are (signed-byte 32) vectors, the ends (unsigned-byte 64); PARAMS
 * is #(unk bos eos add-bos add-eos nfc ignore-merges), -1 for no id and 0
 * or 1 for the flags. */
static cl_object rl_prim_tok_new(cl_object tbytes, cl_object tends, cl_object types,
                                 cl_object mbytes, cl_object mends, cl_object params,
                                 cl_object lstrip, cl_object rstrip) {
    static const char fn[] = "%TOK-NEW";
    const uint8_t *td, *md;
    const uint64_t *te, *me;
    cl_index ntypes = 0, nparams = 0, nl = 0, nr = 0;
    size_t nt = rl_tok_strings(fn, 1, tbytes, tends, &td, &te);
    const int32_t *ty = rl_tok_i32s(fn, 3, types, &ntypes);
    size_t nm = rl_tok_strings(fn, 4, mbytes, mends, &md, &me);
    const int32_t *pa = rl_tok_i32s(fn, 6, params, &nparams);
    const int32_t *ls = rl_tok_i32s(fn, 7, lstrip, &nl);
    const int32_t *rs = rl_tok_i32s(fn, 8, rstrip, &nr);
    const char **tp = NULL, **mp = NULL;
    size_t *tl = NULL, *ml = NULL;
    char msg[RL_TOK_MSG] = "";
    rl_tok *t = NULL;
    rl_tok_status st;
    rl_tok_spec spec;
    if (ntypes != nt)
        rl_signal(RL_C_ERROR, "%s: expected %lu token types, found %lu", fn, (unsigned long)nt,
                  (unsigned long)ntypes);
    if (nparams != 7)
        rl_signal(RL_C_ERROR, "%s: expected 7 parameters, found %lu", fn, (unsigned long)nparams);
    /* validated: allocate, build, free, then answer */
    if (!rl_tok_split(td, te, nt, &tp, &tl) || !rl_tok_split(md, me, nm, &mp, &ml)) {
        st = RL_TOK_NOMEM;
        snprintf(msg, sizeof msg, "expected memory for %lu tokens and %lu merges, found none",
                 (unsigned long)nt, (unsigned long)nm);
    } else {
        memset(&spec, 0, sizeof spec);
        spec.n_tokens = nt;
        spec.tokens = tp;
        spec.token_lens = tl;
        spec.token_types = ty;
        spec.n_merges = nm;
        spec.merges = mp;
        spec.merge_lens = ml;
        spec.unk_id = pa[0];
        spec.bos_id = pa[1];
        spec.eos_id = pa[2];
        spec.add_bos = pa[3] != 0;
        spec.add_eos = pa[4] != 0;
        spec.nfc = pa[5] != 0;
        spec.ignore_merges = pa[6] != 0;
        spec.lstrip_ids = ls;
        spec.n_lstrip = nl;
        spec.rstrip_ids = rs;
        spec.n_rstrip = nr;
        st = rl_tok_new(&spec, &t, msg, sizeof msg);
    }
    free(tp);
    free(tl);
    free(mp);
    free(ml);
    if (st != RL_TOK_OK)
        return rl_tok_failure(st, msg);
    ecl_return1(ecl_process_env(), rl_make_handle(RL_H_TOKENIZER, t));
}

static rl_tok *rl_tok_arg(const char *fn, cl_object h) {
    return rl_handle(fn, h, RL_H_TOKENIZER, RL_C_ERROR, "tokenizer");
}

/* The ids of TEXT, and with WANT_OFFSETS their offsets (see below). */
static cl_object tok_encode(const char *fn, cl_object h, cl_object text, cl_object add_special,
                            cl_object parse_special, int want_offsets) {
    rl_tok *t = rl_tok_arg(fn, h);
    cl_index n = 0;
    const uint8_t *p = rl_octets(fn, 2, text, &n);
    int32_t *ids = NULL;
    size_t nids = 0, *offs = NULL;
    char msg[RL_TOK_MSG] = "";
    rl_tok_status st = rl_tok_encode_offsets(t, (const char *)p, n, add_special != ECL_NIL,
                                             parse_special != ECL_NIL, &ids,
                                             want_offsets ? &offs : NULL, &nids, msg,
                                             sizeof msg);
    RL_KEEP_LIVE(h);
    cl_object out, where = ECL_NIL;
    if (st != RL_TOK_OK) {
        free(ids);
        free(offs);
        return rl_tok_failure(st, msg);
    }
    /* Only allocation happens while IDS is live, and ECL treats running
     * out of heap as fatal. */
    out = ecl_alloc_simple_vector((cl_index)nids, ecl_aet_fix);
    for (size_t i = 0; i < nids; i++)
        out->vector.self.fix[i] = ids[i];
    free(ids);
    if (want_offsets) {
        where = ecl_alloc_simple_vector((cl_index)(2 * nids), ecl_aet_fix);
        for (size_t i = 0; i < 2 * nids; i++)
            where->vector.self.fix[i] = (cl_fixnum)offs[i];
        free(offs);
        ecl_return2(ecl_process_env(), out, where);
    }
    ecl_return1(ecl_process_env(), out);
}

/* (%tok-encode handle octets add-special parse-special) -> a simple vector
 * of fixnum ids, or (values nil status message). */
static cl_object rl_prim_tok_encode(cl_object h, cl_object text, cl_object add_special,
                                    cl_object parse_special) {
    return tok_encode("%TOK-ENCODE", h, text, add_special, parse_special, 0);
}

/* (%tok-encode-offsets handle octets add-special parse-special) -> the ids
 * and a fixnum vector of two byte offsets per id (start, end), or (values
 * nil status message). */
static cl_object rl_prim_tok_encode_offsets(cl_object h, cl_object text, cl_object add_special,
                                            cl_object parse_special) {
    return tok_encode("%TOK-ENCODE-OFFSETS", h, text, add_special, parse_special, 1);
}

/* (%tok-encode-into handle string out add-special parse-special) -> the
 * number of ids of STRING (its characters as UTF-8, as %UTF8-OCTETS makes
 * them), the first min(count, capacity) of them stored in OUT, a fixnum
 * vector of that capacity (its fill pointer left alone); or (values nil
 * status message).  The text's bytes and the ids are C memory for the
 * call, so nothing is consed: a question's tokens go into its scratch. */
static cl_object rl_prim_tok_encode_into(cl_object h, cl_object str, cl_object out,
                                         cl_object add_special, cl_object parse_special) {
    static const char fn[] = "%TOK-ENCODE-INTO";
    rl_tok *t = rl_tok_arg(fn, h);
    if (!ECL_STRINGP(str))
        rl_type_error(fn, 2, str, RL_T_STRING);
    if (!rl_fixnum_vector_p(out))
        rl_type_error(fn, 3, out, RL_T_ARRAY);
    /* a question's text fits the stack; a longer one is given the heap */
    uint8_t small[4096];
    const size_t len = rl_string_utf8_length(str);
    uint8_t *bytes = len <= sizeof small ? small : malloc(len);
    if (!bytes)
        return rl_tok_failure(RL_TOK_NOMEM, "expected memory for the text's bytes, found none");
    rl_string_to_utf8(str, bytes);
    int32_t *ids = NULL;
    size_t nids = 0;
    char msg[RL_TOK_MSG] = "";
    rl_tok_status st = rl_tok_encode_offsets(t, (const char *)bytes, len, add_special != ECL_NIL,
                                             parse_special != ECL_NIL, &ids, NULL, &nids, msg,
                                             sizeof msg);
    RL_KEEP_LIVE(h);
    if (bytes != small)
        free(bytes);
    if (st != RL_TOK_OK) {
        free(ids);
        return rl_tok_failure(st, msg);
    }
    for (size_t j = 0; j < nids && j < (size_t)out->vector.dim; j++)
        out->vector.self.fix[j] = ids[j];
    free(ids);
    ecl_return1(ecl_process_env(), ecl_make_fixnum((cl_fixnum)nids));
}

/* (%tok-decode handle ids) -> the text of IDS (a (signed-byte 32) vector)
 * as a string, bytes that are not UTF-8 as U+FFFD (rl_tok_decode); or
 * (values nil status message). */
static cl_object rl_prim_tok_decode(cl_object h, cl_object ids) {
    static const char fn[] = "%TOK-DECODE";
    rl_tok *t = rl_tok_arg(fn, h);
    cl_index n = 0;
    const int32_t *p = rl_tok_i32s(fn, 2, ids, &n);
    char *text = NULL;
    size_t len = 0;
    char msg[RL_TOK_MSG] = "";
    rl_tok_status st = rl_tok_decode(t, p, n, &text, &len, msg, sizeof msg);
    RL_KEEP_LIVE(h);
    cl_object out;
    if (st != RL_TOK_OK) {
        free(text);
        return rl_tok_failure(st, msg);
    }
    out = rl_string_from_utf8(text, len); /* as in %tok-encode */
    free(text);
    ecl_return1(ecl_process_env(), out);
}

/* (%tok-decode-octets handle ids) -> the bytes of IDS as an (unsigned-byte
 * 8) vector, UTF-8 or not (rl_tok_decode_bytes); or (values nil status
 * message). */
static cl_object rl_prim_tok_decode_octets(cl_object h, cl_object ids) {
    static const char fn[] = "%TOK-DECODE-OCTETS";
    rl_tok *t = rl_tok_arg(fn, h);
    cl_index n = 0;
    const int32_t *p = rl_tok_i32s(fn, 2, ids, &n);
    uint8_t *bytes = NULL;
    size_t len = 0;
    char msg[RL_TOK_MSG] = "";
    rl_tok_status st = rl_tok_decode_bytes(t, p, n, &bytes, &len, msg, sizeof msg);
    RL_KEEP_LIVE(h);
    cl_object out;
    if (st != RL_TOK_OK) {
        free(bytes);
        return rl_tok_failure(st, msg);
    }
    out = ecl_alloc_simple_vector((cl_index)len, ecl_aet_b8);
    if (len)
        memcpy(out->vector.self.b8, bytes, len);
    free(bytes);
    ecl_return1(ecl_process_env(), out);
}

/* (%tok-piece handle id) -> token ID's text as stored, or NIL. */
static cl_object rl_prim_tok_piece(cl_object h, cl_object id) {
    static const char fn[] = "%TOK-PIECE";
    rl_tok *t = rl_tok_arg(fn, h);
    cl_fixnum i = rl_arg_fixnum(fn, 2, id, 0, INT32_MAX);
    size_t len = 0;
    const char *p = rl_tok_piece(t, (int32_t)i, &len);
    cl_object out = p ? rl_string_from_utf8(p, len) : ECL_NIL; /* P points into T */
    RL_KEEP_LIVE(h);
    ecl_return1(ecl_process_env(), out);
}

/* Append the JSON string of S[0..N) (quotes included) at OUT + *LEN. */
static void json_string(char *out, size_t *len, const char *s, size_t n) {
    out[(*len)++] = '"';
    *len += rl_json_escape((const uint8_t *)s, n, out + *len);
    out[(*len)++] = '"';
}

/* (%write-tokens-json handle octets ids offsets count stream) writes to
 * STREAM the line of `tokenize --json', newline included, for the text
 * OCTETS (its UTF-8 bytes) and what %TOK-ENCODE-OFFSETS made of it, IDS
 * and OFFSETS (simple fixnum vectors, two offsets an id):
 * {"text":..,"ids":[..],"pieces":[..],"offsets":[[s,e],..]}, with
 * ,"count":COUNT before the brace unless COUNT is NIL.  The bytes are
 * those WRITE-JSON writes for the same values (the tokenizer suite holds
 * the two to that), made in one buffer and written at once: a Lisp
 * string per piece and a write per piece were nearly all of the time. */
static cl_object rl_prim_write_tokens_json(cl_object h, cl_object text, cl_object ids,
                                           cl_object offsets, cl_object count,
                                           cl_object stream) {
    static const char fn[] = "%WRITE-TOKENS-JSON";
    rl_tok *t = rl_tok_arg(fn, h);
    cl_index n = 0, nids, noffs;
    const uint8_t *p = rl_octets(fn, 2, text, &n);
    if (!rl_fixnum_vector_p(ids))
        rl_type_error(fn, 3, ids, RL_T_VECTOR);
    if (!rl_fixnum_vector_p(offsets))
        rl_type_error(fn, 4, offsets, RL_T_VECTOR);
    const cl_fixnum *id = ids->vector.self.fix, *off = offsets->vector.self.fix;
    nids = ids->vector.fillp;
    noffs = offsets->vector.fillp;
    cl_fixnum total = Null(count) ? -1 : rl_arg_fixnum(fn, 5, count, 0, MOST_POSITIVE_FIXNUM);
    /* the line's fixed text and count, the text escaped, and per id its
     * number and comma and its pair "[start,end]," (its piece below) */
    static const char frame[] = "{\"text\":\"\",\"ids\":[],\"pieces\":[],\"offsets\":[],\"count\":}\n";
    size_t cap = sizeof frame + RL_NUMTEXT_MAX + RL_JSON_ESCAPED_MAX(n) +
                 (size_t)nids * (3 * RL_NUMTEXT_MAX + 5),
           len = 0;
    if (noffs != 2 * nids)
        rl_signal(RL_C_INDEX, "%s: expected %lu offsets (two for each of %lu ids), found %lu", fn,
                  (unsigned long)(2 * nids), (unsigned long)nids, (unsigned long)noffs);
    for (cl_index i = 0; i < nids; i++) {
        size_t plen = 0;
        if (id[i] < 0 || id[i] > INT32_MAX || !rl_tok_piece(t, (int32_t)id[i], &plen))
            rl_signal(RL_C_INDEX, "%s: expected token ids below %lu, found %ld at index %lu", fn,
                      (unsigned long)rl_tok_vocab_size(t), (long)id[i], (unsigned long)i);
        cap += RL_JSON_ESCAPED_MAX(plen) + 3; /* quotes and comma */
    }
    char *out = malloc(cap);
    if (!out)
        rl_signal(RL_C_ERROR, "%s: out of memory for a line of %lu ids", fn, (unsigned long)nids);
#define PUT(lit) (memcpy(out + len, lit, sizeof lit - 1), len += sizeof lit - 1)
    PUT("{\"text\":");
    json_string(out, &len, (const char *)p, n);
    PUT(",\"ids\":[");
    for (cl_index i = 0; i < nids; i++) {
        if (i)
            out[len++] = ',';
        len += rl_int_text(id[i], out + len);
    }
    PUT("],\"pieces\":[");
    for (cl_index i = 0; i < nids; i++) {
        size_t plen = 0;
        const char *piece = rl_tok_piece(t, (int32_t)id[i], &plen);
        if (i)
            out[len++] = ',';
        json_string(out, &len, piece, plen);
    }
    PUT("],\"offsets\":[");
    for (cl_index i = 0; i < nids; i++) {
        if (i)
            out[len++] = ',';
        out[len++] = '[';
        len += rl_int_text(off[2 * i], out + len);
        out[len++] = ',';
        len += rl_int_text(off[2 * i + 1], out + len);
        out[len++] = ']';
    }
    out[len++] = ']';
    if (total >= 0) {
        PUT(",\"count\":");
        len += rl_int_text(total, out + len);
    }
    out[len++] = '}';
    out[len++] = '\n';
#undef PUT
    RL_KEEP_LIVE(h);
    /* the bytes copied to collected memory, so that OUT is not lost when
     * writing signals (a closed pipe) */
    cl_object buf = ecl_alloc_simple_vector((cl_index)len, ecl_aet_b8);
    memcpy(buf->vector.self.b8, out, len);
    free(out);
    rl_write_utf8(stream, (const char *)buf->vector.self.b8, len);
    ecl_return1(ecl_process_env(), ecl_make_fixnum((cl_fixnum)nids));
}

/* (%tok-vocab-size handle) -> the number of tokens. */
static cl_object rl_prim_tok_vocab_size(cl_object h) {
    rl_tok *t = rl_tok_arg("%TOK-VOCAB-SIZE", h);
    size_t n = rl_tok_vocab_size(t);
    RL_KEEP_LIVE(h);
    ecl_return1(ecl_process_env(), ecl_make_uint64_t(n));
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%TOK-NEW", rl_prim_tok_new, 8),
    RL_PRIM("%TOK-ENCODE", rl_prim_tok_encode, 4),
    RL_PRIM("%TOK-ENCODE-OFFSETS", rl_prim_tok_encode_offsets, 4),
    RL_PRIM("%TOK-ENCODE-INTO", rl_prim_tok_encode_into, 5),
    RL_PRIM("%TOK-DECODE", rl_prim_tok_decode, 2),
    RL_PRIM("%TOK-DECODE-OCTETS", rl_prim_tok_decode_octets, 2),
    RL_PRIM("%TOK-PIECE", rl_prim_tok_piece, 2),
    RL_PRIM("%TOK-VOCAB-SIZE", rl_prim_tok_vocab_size, 1),
};
RL_PRIM_TABLE(rl_tokenizer_prims, "MODEL", rl_defs);

/* The command line's own (commands/tokenize.lisp). */
static const rl_prim_def rl_command_defs[] = {
    RL_PRIM("%WRITE-TOKENS-JSON", rl_prim_write_tokens_json, 6),
};
RL_PRIM_TABLE(rl_tokenizer_command_prims, "COMMAND-LINE", rl_command_defs);
