/* test_tokenizer.c - the byte-level BPE tokenizer (prims/tokenizer.c) and
 * its Unicode data (prims/unicode.c): the GPT-2 split on tricky texts, NFC
 * against Unicode's NormalizationTest.txt, BPE on a small hand-made
 * vocabulary with known answers, special and added tokens with
 * lstrip/rstrip, threads, invalid UTF-8, decoding, bad specs, and a few
 * texts through GPT-2's real vocabulary. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/tokenizer.h"
#include "prims/unicode.h"
#include "prims/utf8.h"
#include "tests/c/check.h"
#include "tests/c/tok_gguf.h"

#define GPT2_VOCAB "tests/golden/vocab/ggml-vocab-gpt-2.gguf"

/* ---------------------------------------------------------------- split */

/* The pieces of TEXT joined by '|'. */
static void split_joined(const char *text, char *out, size_t outsz) {
    size_t n = strlen(text), i = 0, o = 0;
    out[0] = 0;
    while (i < n) {
        size_t e = rl_tok_split_next(text, n, i);
        if (e <= i || e > n) {
            snprintf(out, outsz, "<split at %zu answered %zu>", i, e);
            return;
        }
        o += (size_t)snprintf(out + o, outsz - o, "%s%.*s", i ? "|" : "", (int)(e - i), text + i);
        i = e;
    }
}

static void check_split(const char *text, const char *want) {
    char got[512];
    split_joined(text, got, sizeof got);
    CHECK_MSG(strcmp(got, want) == 0, "split of \"%s\": want \"%s\", got \"%s\"", text, want, got);
}

static void test_split(void) {
    /* contractions: lower case only, and only at the apostrophe */
    check_split("I'm he's we'll they're I've I'd don't", "I|'m| he|'s| we|'ll| they|'re| I|'ve| I|'d| don|'t");
    check_split("I'M HE'S WE'LL", "I|'|M| HE|'|S| WE|'|LL");
    check_split("'s'", "'s|'");
    check_split(" 's", " '|s");
    check_split("'", "'");
    /* white space: \s+(?!\S) leaves the last space to the next word */
    check_split("a   b", "a|  | b");
    check_split("hello  ", "hello|  ");
    check_split("   ", "   ");
    check_split("a \n\n b", "a| \n\n| b");
    check_split("x\t\ty", "x|\t|\t|y");
    check_split("\nword", "\n|word");
    check_split("a\n", "a|\n");
    check_split(" ", " ");
    /* no-break space and NEL are white space; zero-width space is not */
    check_split("a\xc2\xa0" "b", "a|\xc2\xa0|b");
    check_split("a\xc2\x85\xc2\x85 b", "a|\xc2\x85\xc2\x85| b");
    check_split("a\xe2\x80\x8b" "b", "a|\xe2\x80\x8b|b");
    check_split("a\xe3\x80\x80\xe3\x80\x80" "b", "a|\xe3\x80\x80|\xe3\x80\x80|b");
    /* numbers of every script, and other numbers (No, Nl) */
    check_split("3.14 42x", "3|.|14| 42|x");
    check_split("\xd9\xa3\xd9\xa4" "5 \xe0\xb9\x93", "\xd9\xa3\xd9\xa4" "5| \xe0\xb9\x93");
    check_split("\xc2\xbd\xc2\xb2\xe2\x85\xa0", "\xc2\xbd\xc2\xb2\xe2\x85\xa0");
    /* letters of every script run together; punctuation runs */
    check_split("\xe4\xb8\x96\xe7\x95\x8chello \xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe",
                "\xe4\xb8\x96\xe7\x95\x8chello| \xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe");
    check_split("?!... --==", "?!...| --==");
    /* an emoji with ZWJ is one run of "other" characters */
    check_split("hi \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7!",
                "hi| \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7!");
    /* a combining mark (Mn) is neither letter nor number */
    check_split("e\xcc\x81t\xc3\xa9", "e|\xcc\x81|t\xc3\xa9");
}

/* ------------------------------------------------------------------ NFC */

static int nfc_eq(const uint32_t *in, size_t nin, const uint32_t *want, size_t nwant) {
    uint8_t a[256], b[256], *out;
    size_t na = 0, nb = 0, nout;
    for (size_t i = 0; i < nin; i++)
        na += rl_utf8_encode(in[i], a + na);
    for (size_t i = 0; i < nwant; i++)
        nb += rl_utf8_encode(want[i], b + nb);
    if (rl_uni_nfc(a, na, &out, &nout))
        return 0;
    int ok = nout == nb && memcmp(out, b, nb) == 0;
    /* the quick check never calls a text NFC that is not */
    if (rl_uni_nfc_quick(a, na) == na && !(nout == na && memcmp(out, a, na) == 0))
        ok = 0;
    free(out);
    return ok;
}

/* The hex code points of s up to ';' into out (room for 32). */
static size_t parse_cps(const char *s, uint32_t *out) {
    size_t k = 0;
    while (*s && *s != ';' && k < 32) {
        char *e;
        out[k++] = (uint32_t)strtoul(s, &e, 16);
        s = e;
        while (*s == ' ')
            s++;
    }
    return k;
}

static void test_nfc_conformance(void) {
    const char *plain = "/usr/share/unicode/NormalizationTest.txt";
    FILE *f = fopen(plain, "r");
    int piped = 0;
    if (!f && access(plain, R_OK) != 0 && access("/usr/share/unicode/NormalizationTest.txt.bz2", R_OK) == 0) {
        f = popen("timeout 60 bzip2 -dc /usr/share/unicode/NormalizationTest.txt.bz2", "r");
        piped = 1;
    }
    if (!f) {
        printf("test_tokenizer: NormalizationTest.txt not found (Debian package unicode-data): "
               "NFC conformance skipped\n");
        return;
    }
    static char line[4096];
    static uint8_t listed[0x110000];
    long lines = 0, bad = 0;
    int part1 = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        if (line[0] == '@') {
            part1 = strncmp(line, "@Part1", 6) == 0;
            continue;
        }
        uint32_t c[5][32];
        size_t n[5];
        const char *p = line;
        for (int k = 0; k < 5; k++) {
            n[k] = parse_cps(p, c[k]);
            p = strchr(p, ';');
            if (!p)
                break;
            p++;
        }
        if (!p)
            continue;
        lines++;
        if (part1 && n[0] == 1)
            listed[c[0][0]] = 1;
        /* c2 == NFC(c1) == NFC(c2) == NFC(c3), c4 == NFC(c4) == NFC(c5) */
        int ok = nfc_eq(c[0], n[0], c[1], n[1]) && nfc_eq(c[1], n[1], c[1], n[1]) &&
                 nfc_eq(c[2], n[2], c[1], n[1]) && nfc_eq(c[3], n[3], c[3], n[3]) &&
                 nfc_eq(c[4], n[4], c[3], n[3]);
        if (!ok && bad++ < 5)
            fprintf(stderr, "NFC differs on: %s", line);
    }
    int st = piped ? pclose(f) : fclose(f);
    CHECK_MSG(st == 0, "reading NormalizationTest.txt failed (%d)", st);
    CHECK_MSG(lines > 15000, "NormalizationTest.txt: only %ld lines read", lines);
    CHECK_MSG(bad == 0, "NFC: %ld of %ld NormalizationTest.txt lines differ", bad, lines);
    /* every character not in part 1 is its own NFC */
    long unlisted_bad = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (listed[c] || (c >= 0xd800 && c <= 0xdfff))
            continue;
        if (!nfc_eq(&c, 1, &c, 1))
            unlisted_bad++;
    }
    CHECK_MSG(unlisted_bad == 0, "NFC changed %ld characters that part 1 does not list", unlisted_bad);
}

static void test_classes(void) {
    CHECK(rl_uni_letter_p('a') && rl_uni_letter_p(0x4e16) && rl_uni_letter_p(0xac00));
    CHECK(rl_uni_number_p('7') && rl_uni_number_p(0x0663) && rl_uni_number_p(0x2160));
    CHECK(rl_uni_space_p(' ') && rl_uni_space_p(0x85) && rl_uni_space_p(0xa0) &&
          rl_uni_space_p(0x3000) && rl_uni_space_p(0x2029));
    CHECK(!rl_uni_space_p(0x200b) && !rl_uni_space_p(0x180e) && !rl_uni_letter_p(0x301));
    CHECK_EQ_U(rl_uni_ccc(0x301), 230);
    CHECK(strcmp(rl_uni_version, "15.0.0") == 0);
}

/* -------------------------------------------------- a hand-made vocabulary */

/* GPT-2's byte-to-unicode character of byte b, as UTF-8 into y. */
static size_t byte_char(int b, char *y) {
    int k = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff)))
            k++;
    uint32_t c = ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
                     ? (uint32_t)b
                     : 256u + (uint32_t)k;
    return rl_utf8_encode(c, (uint8_t *)y);
}

/* Tokens 0..255: the byte characters (id = byte); then these. */
enum { T_AB = 256, T_BC, T_ABC, T_GA, T_AA, T_CAB, T_BOS, T_EOS, T_UNK, T_M, T_R, T_MASK, T_Q,
       T_TT, T_ET, T_XY, T_N };
static const char *extra[] = {"ab", "bc", "abc", ("\xc4\xa0" "a"), "aa", "cab", "<s>", "</s>",
                              "<unk>", "<m>", "<r>", "<mask>", " q", "\t\t", "\xc3\xa9t", "x y"};
static const int32_t extra_type[] = {1, 1, 1, 1, 1, 1, 3, 3, 2, 4, 4, 3, 4, 4, 4, 1};
static const char *small_merges[] = {"b c", "a b", "a bc", "\xc4\xa0 a", "a a"};

typedef struct {
    char bytes[256][3];
    const char *tok[T_N];
    size_t len[T_N];
    int32_t type[T_N];
    const char *mer[5];
    size_t mlen[5];
    rl_tok_spec spec;
} small_vocab;

static void small_init(small_vocab *v) {
    memset(v, 0, sizeof *v);
    for (int b = 0; b < 256; b++) {
        v->len[b] = byte_char(b, v->bytes[b]);
        v->tok[b] = v->bytes[b];
        v->type[b] = 1;
    }
    for (int i = 0; i < T_N - 256; i++) {
        v->tok[256 + i] = extra[i];
        v->len[256 + i] = strlen(extra[i]);
        v->type[256 + i] = extra_type[i];
    }
    for (int i = 0; i < 5; i++) {
        v->mer[i] = small_merges[i];
        v->mlen[i] = strlen(small_merges[i]);
    }
    static const int32_t lstrip[] = {T_M, T_MASK}, rstrip[] = {T_R};
    v->spec = (rl_tok_spec){.n_tokens = T_N, .tokens = v->tok, .token_lens = v->len,
                            .token_types = v->type, .n_merges = 5, .merges = v->mer,
                            .merge_lens = v->mlen, .unk_id = -1, .bos_id = T_BOS,
                            .eos_id = T_EOS, .lstrip_ids = lstrip, .n_lstrip = 2,
                            .rstrip_ids = rstrip, .n_rstrip = 1};
}

/* Encode TEXT and compare with the -1-terminated WANT. */
static void check_ids(const rl_tok *t, const char *text, int add, int parse, const int32_t *want) {
    int32_t *ids;
    size_t n, nw = 0;
    char msg[256];
    while (want[nw] >= 0)
        nw++;
    rl_tok_status st = rl_tok_encode(t, text, strlen(text), add, parse, &ids, &n, msg, sizeof msg);
    int ok = st == RL_TOK_OK && n == nw && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!ok) {
        char got[512] = "";
        size_t o = 0;
        for (size_t i = 0; st == RL_TOK_OK && i < n && o < 400; i++)
            o += (size_t)snprintf(got + o, sizeof got - o, " %d", ids[i]);
        CHECK_MSG(0, "encode \"%s\" (add %d parse %d): %s %s;%s", text, add, parse,
                  rl_tok_status_name(st), msg, got);
    } else
        CHECK(ok);
    if (st == RL_TOK_OK)
        free(ids);
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__, -1})

static void test_small_bpe(void) {
    small_vocab v;
    rl_tok *t;
    char msg[256];
    small_init(&v);
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    CHECK_EQ_U(rl_tok_vocab_size(t), T_N);
    check_ids(t, "abc", 0, 1, IDS(T_ABC));                /* b c (rank 0) first, then a bc */
    check_ids(t, "ab", 0, 1, IDS(T_AB));
    check_ids(t, "aaa", 0, 1, IDS(T_AA, 'a'));            /* leftmost of equal ranks */
    check_ids(t, "aaaa", 0, 1, IDS(T_AA, T_AA));
    check_ids(t, " abc", 0, 1, IDS(' ', T_ABC));           /* Ġ a waits for rank 3 */
    check_ids(t, " ab", 0, 1, IDS(' ', T_AB));
    check_ids(t, " a", 0, 1, IDS(T_GA));
    check_ids(t, "cab", 0, 1, IDS('c', T_AB));
    check_ids(t, "ab", 1, 1, IDS(T_AB));                 /* add_bos/add_eos off in the spec */
    check_ids(t, "", 0, 1, (const int32_t[]){-1});
    rl_tok_free(t);

    v.spec.ignore_merges = 1;
    v.spec.add_bos = v.spec.add_eos = 1;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    check_ids(t, "cab", 0, 1, IDS(T_CAB));                /* the piece is a token */
    check_ids(t, "cab", 1, 1, IDS(T_BOS, T_CAB, T_EOS));
    check_ids(t, "", 1, 1, IDS(T_BOS, T_EOS));
    rl_tok_free(t);
}

static void test_special(void) {
    small_vocab v;
    rl_tok *t;
    char msg[256];
    small_init(&v);
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    check_ids(t, "<s>ab</s>", 0, 1, IDS(T_BOS, T_AB, T_EOS));
    check_ids(t, "<s>ab", 0, 0, IDS('<', 's', '>', T_AB));  /* not parsed: plain text */
    /* leftmost-longest: <mask> over <m> */
    check_ids(t, "<mask><m>", 0, 1, IDS(T_MASK, T_M));
    /* lstrip takes the white space before, rstrip the white space after */
    check_ids(t, "x  <m>", 0, 1, IDS('x', T_M));
    check_ids(t, "x \n<mask>", 0, 1, IDS('x', T_MASK));
    check_ids(t, "x <s>", 0, 1, IDS('x', ' ', T_BOS));
    check_ids(t, "<r>  y", 0, 1, IDS(T_R, 'y'));
    check_ids(t, "<r>\xc2\xa0y", 0, 1, IDS(T_R, 'y'));    /* any Unicode white space */
    check_ids(t, "<r>  <m>", 0, 1, IDS(T_R, T_M));
    check_ids(t, "<r>  ", 0, 1, IDS(T_R));
    /* a match the rstrip's white space reaches into is still emitted */
    check_ids(t, "<r> q", 0, 1, IDS(T_R, T_Q));
    check_ids(t, "a q", 0, 1, IDS('a', T_Q));
    /* control tokens are found first, in the raw text; user-defined ones
     * then, in the (normalized) text between */
    check_ids(t, "a\t\t<mask>", 0, 1, IDS('a', T_MASK));
    check_ids(t, "a\t\t<m>", 0, 1, IDS('a', T_TT, T_M));
    check_ids(t, "e\xcc\x81t", 0, 1, IDS('e', 0xcc, 0x81, 't'));
    rl_tok_free(t);
    v.spec.nfc = 1;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    check_ids(t, "e\xcc\x81t", 0, 1, IDS(T_ET));
    check_ids(t, "e\xcc\x81t", 0, 0, IDS(0xc3, 0xa9, 't'));
    rl_tok_free(t);
}

/* Encode TEXT with offsets and compare them with WANT: two per id. */
static void check_offsets(const rl_tok *t, const char *text, int add, const size_t *want,
                          size_t nwant) {
    int32_t *ids;
    size_t *off, n;
    char msg[256];
    rl_tok_status st = rl_tok_encode_offsets(t, text, strlen(text), add, 1, &ids, &off, &n, msg,
                                             sizeof msg);
    CHECK_MSG(st == RL_TOK_OK, "encode \"%s\" with offsets: %s", text, msg);
    if (st != RL_TOK_OK)
        return;
    int ok = 2 * n == nwant && (nwant == 0 || memcmp(off, want, nwant * sizeof *off) == 0);
    char got[512] = "";
    size_t o = 0;
    for (size_t i = 0; i < 2 * n && o < 400; i += 2)
        o += (size_t)snprintf(got + o, sizeof got - o, " %zu-%zu", off[i], off[i + 1]);
    CHECK_MSG(ok, "offsets of \"%s\":%s", text, got);
    free(ids);
    free(off);
}

#define OFFS(...) ((const size_t[]){__VA_ARGS__}), sizeof((const size_t[]){__VA_ARGS__}) / sizeof(size_t)

static void test_offsets(void) {
    small_vocab v;
    rl_tok *t;
    char msg[256];
    small_init(&v);
    v.spec.add_bos = v.spec.add_eos = 1;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    check_offsets(t, "cab", 0, OFFS(0, 1, 1, 3));                  /* c, ab */
    check_offsets(t, "cab", 1, OFFS(0, 0, 0, 1, 1, 3, 0, 0));      /* bos and eos: 0, 0 */
    check_offsets(t, "<s>ab</s>", 0, OFFS(0, 3, 3, 5, 5, 9));
    check_offsets(t, "x  <m>", 0, OFFS(0, 1, 1, 6));               /* lstrip's white space */
    check_offsets(t, "<r>  y", 0, OFFS(0, 5, 5, 6));               /* rstrip's */
    check_offsets(t, "\xc3\xbc", 0, OFFS(0, 2, 0, 2));            /* two bytes of one character */
    check_offsets(t, "", 0, NULL, 0);
    rl_tok_free(t);
    v.spec.nfc = 1;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    /* e + U+0301 composed: stands for the e; et from the e to the t */
    check_offsets(t, "e\xcc\x81t", 0, OFFS(0, 4));
    check_offsets(t, "a e\xcc\x81", 0, OFFS(0, 1, 1, 2, 2, 3, 2, 3));
    /* a mark canonical ordering moved (U+0316 below, before U+0301 above)
     * stands for itself; the composed character for the first it took */
    check_offsets(t, "e\xcc\x81\xcc\x96", 0, OFFS(0, 1, 0, 1, 3, 5, 3, 5));
    rl_tok_free(t);
}

static void test_unknown(void) {
    small_vocab v;
    rl_tok *t;
    char msg[256];
    int32_t *ids;
    size_t n;
    small_init(&v);
    v.spec.n_tokens = 256;           /* the bytes only... */
    v.spec.n_merges = 0;
    v.spec.n_lstrip = v.spec.n_rstrip = 0;
    v.spec.bos_id = v.spec.eos_id = -1;
    v.tok['z'] = "\xc4\xa0\xc4\xa0"; /* ...but z missing */
    v.len['z'] = 4;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    CHECK(rl_tok_encode(t, "abz", 3, 0, 1, &ids, &n, msg, sizeof msg) == RL_TOK_UNKNOWN);
    CHECK_MSG(strstr(msg, "\"z\"") && strstr(msg, "offset 2"), "message: %s", msg);
    rl_tok_free(t);
    v.spec.unk_id = 0;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    check_ids(t, "azb", 0, 1, IDS('a', 0, 'b'));
    rl_tok_free(t);
}

static void test_bad_spec(void) {
    small_vocab v;
    rl_tok *t = NULL;
    char msg[256];
    small_init(&v);
    v.tok[T_AA] = "ab"; /* a duplicate */
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_SPEC && !t);
    CHECK_MSG(strstr(msg, "token 260") != NULL, "message: %s", msg);
    small_init(&v);
    v.mer[2] = "a zz";
    v.mlen[2] = 4;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_SPEC);
    CHECK_MSG(strstr(msg, "merge 2") != NULL, "message: %s", msg);
    small_init(&v);
    v.mer[1] = "ab";
    v.mlen[1] = 2;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_SPEC);
    small_init(&v);
    v.mer[4] = "c c"; /* "cc" is no token */
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_SPEC);
    CHECK_MSG(strstr(msg, "merge 4") != NULL, "message: %s", msg);
    small_init(&v);
    v.tok[T_CAB] = "c\xff";
    v.len[T_CAB] = 2;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_UTF8);
    small_init(&v);
    v.spec.eos_id = T_N;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_SPEC);
    small_init(&v);
    static const int32_t bad_strip[] = {-3};
    v.spec.lstrip_ids = bad_strip;
    v.spec.n_lstrip = 1;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_SPEC);
    CHECK(strcmp(rl_tok_status_name(RL_TOK_UNKNOWN), "unknown-symbol") == 0);
    /* a token type outside llama.cpp's 1..6 (0 is its "undefined") */
    static const int32_t bad_types[] = {99, -1, 0, 7};
    for (size_t k = 0; k < sizeof bad_types / sizeof *bad_types; k++) {
        char want[64];
        small_init(&v);
        v.type[T_CAB] = bad_types[k];
        snprintf(want, sizeof want, "found %d", (int)bad_types[k]);
        CHECK_MSG(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_BAD_SPEC && !t &&
                      strstr(msg, "token 261") && strstr(msg, want),
                  "type %d: %s", (int)bad_types[k], msg);
    }
}

static void test_bad_utf8(void) {
    small_vocab v;
    rl_tok *t;
    char msg[256];
    int32_t *ids;
    size_t n;
    static const struct {
        const char *s;
        size_t len, at;
    } cases[] = {{"ab\xff" "cd", 5, 2},          {"abc\xe2\x82", 5, 3},
                 {"\xc0\xaf", 2, 0},             {"x\xed\xa0\x80", 4, 1},
                 {"\xf4\x90\x80\x80", 4, 0},     {"ok \x80", 4, 3},
                 {"\xc3\xa9\xe2\x82" "a", 5, 2}, {"<s>\xfe", 4, 3}};
    small_init(&v);
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char want[32];
        snprintf(want, sizeof want, "offset %zu", cases[k].at);
        rl_tok_status st = rl_tok_encode(t, cases[k].s, cases[k].len, 0, 1, &ids, &n, msg, sizeof msg);
        CHECK_MSG(st == RL_TOK_BAD_UTF8 && strstr(msg, want), "case %zu: %s %s", k,
                  rl_tok_status_name(st), msg);
    }
    rl_tok_free(t);
}

static void test_decode(void) {
    small_vocab v;
    rl_tok *t;
    char msg[256], *text;
    size_t len;
    small_init(&v);
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    const int32_t ids[] = {T_BOS, T_GA, T_BC, ' ', T_MASK};
    CHECK(rl_tok_decode(t, ids, 5, &text, &len, msg, sizeof msg) == RL_TOK_OK);
    CHECK(len == 14 && strcmp(text, "<s> abc <mask>") == 0);
    free(text);
    /* half a character: U+FFFD; a complete one */
    const int32_t half[] = {'a', 0xc3}, whole[] = {0xc3, 0xa9};
    CHECK(rl_tok_decode(t, half, 2, &text, &len, msg, sizeof msg) == RL_TOK_OK);
    CHECK(len == 4 && memcmp(text, "a\xef\xbf\xbd", 4) == 0);
    free(text);
    CHECK(rl_tok_decode(t, whole, 2, &text, &len, msg, sizeof msg) == RL_TOK_OK);
    CHECK(len == 2 && memcmp(text, "\xc3\xa9", 2) == 0);
    free(text);
    /* the bytes before the replacement: half a character is that half */
    CHECK(rl_tok_decode_bytes(t, half, 2, &text, &len, msg, sizeof msg) == RL_TOK_OK);
    CHECK(len == 2 && memcmp(text, "a\xc3", 3) == 0);
    free(text);
    CHECK(rl_tok_decode_bytes(t, ids, 5, &text, &len, msg, sizeof msg) == RL_TOK_OK);
    CHECK(len == 14 && strcmp(text, "<s> abc <mask>") == 0);
    free(text);
    /* a token with a character outside the byte table: its text as it is */
    const int32_t xy[] = {T_XY, T_GA};
    CHECK(rl_tok_decode(t, xy, 2, &text, &len, msg, sizeof msg) == RL_TOK_OK);
    CHECK(len == 5 && strcmp(text, "x y a") == 0);
    free(text);
    const int32_t bad[] = {'a', T_N};
    CHECK(rl_tok_decode(t, bad, 2, &text, &len, msg, sizeof msg) == RL_TOK_BAD_ID);
    CHECK_MSG(strstr(msg, "position 1") != NULL, "message: %s", msg);
    CHECK(rl_tok_decode(t, NULL, 0, &text, &len, msg, sizeof msg) == RL_TOK_OK && len == 0 &&
          text[0] == 0);
    free(text);
    size_t pl;
    CHECK(rl_tok_piece(t, T_GA, &pl) && pl == 3 && rl_tok_piece(t, T_N, &pl) == NULL);
    rl_tok_free(t);
}

/* ------------------------------------------------ GPT-2's real vocabulary */

static const char *texts[] = {
    "Hello world", " the", "<|endoftext|>", "I'M here, aren't you?  \n\n  Fine.\t\tOK",
    "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",
    "3.14159 \xd9\xa3\xd9\xa4\xd9\xa5 1,000,000", "    indented code();\n\treturn x;\n",
    "e\xcc\x81\xcc\xa3 \xea\xb0\x80\xea\xb0\x81 \xe1\x84\x80\xe1\x85\xa1",
};
#define N_TEXTS (sizeof texts / sizeof *texts)

typedef struct {
    const rl_tok *t;
    int32_t *ids[N_TEXTS];
    size_t n[N_TEXTS];
    int rounds, failed;
} thread_job;

static void *encode_all(void *arg) {
    thread_job *j = arg;
    char msg[256];
    for (int r = 0; r < j->rounds; r++)
        for (size_t k = 0; k < N_TEXTS; k++) {
            int32_t *ids;
            size_t n;
            if (rl_tok_encode(j->t, texts[k], strlen(texts[k]), 0, 1, &ids, &n, msg, sizeof msg) !=
                RL_TOK_OK) {
                j->failed++;
                continue;
            }
            if (r == 0) {
                j->ids[k] = ids;
                j->n[k] = n;
            } else {
                if (n != j->n[k] || memcmp(ids, j->ids[k], n * sizeof *ids))
                    j->failed++;
                free(ids);
            }
        }
    return NULL;
}

static void test_gpt2(void) {
    tok_gguf g;
    rl_tok *t;
    char msg[256];
    if (tok_gguf_load(&g, GPT2_VOCAB)) {
        CHECK_MSG(0, "cannot read %s", GPT2_VOCAB);
        return;
    }
    CHECK(rl_tok_new(&g.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    check_ids(t, "Hello world", 0, 1, IDS(15496, 995));
    check_ids(t, " the", 0, 1, IDS(262));
    check_ids(t, "<|endoftext|>", 0, 1, IDS(50256));
    check_ids(t, "Hello<|endoftext|> world", 0, 1, IDS(15496, 50256, 995));
    /* decode(encode(x)) == x for every text */
    for (size_t k = 0; k < N_TEXTS; k++) {
        int32_t *ids;
        size_t n, len;
        char *text;
        CHECK(rl_tok_encode(t, texts[k], strlen(texts[k]), 0, 1, &ids, &n, msg, sizeof msg) ==
              RL_TOK_OK);
        CHECK(rl_tok_decode(t, ids, n, &text, &len, msg, sizeof msg) == RL_TOK_OK);
        CHECK_MSG(len == strlen(texts[k]) && memcmp(text, texts[k], len) == 0,
                  "round trip of text %zu", k);
        free(ids);
        free(text);
    }
    /* threads: several at once give what one alone gives (the cache is
     * shared); the reference is computed by one thread on a fresh tokenizer */
    thread_job one = {.t = t, .rounds = 1};
    encode_all(&one);
    rl_tok_free(t);
    CHECK(rl_tok_new(&g.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    enum { NT = 4 };
    thread_job jobs[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        jobs[i] = (thread_job){.t = t, .rounds = 200};
        CHECK(pthread_create(&th[i], NULL, encode_all, &jobs[i]) == 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(jobs[i].failed == 0, "thread %d: %d encodings differ or failed", i, jobs[i].failed);
        for (size_t k = 0; k < N_TEXTS; k++) {
            CHECK_MSG(jobs[i].n[k] == one.n[k] &&
                          memcmp(jobs[i].ids[k], one.ids[k], one.n[k] * sizeof(int32_t)) == 0,
                      "thread %d, text %zu: ids differ from one thread's", i, k);
            free(jobs[i].ids[k]);
        }
    }
    for (size_t k = 0; k < N_TEXTS; k++)
        free(one.ids[k]);
    rl_tok_free(t);
    /* NFC: e + acute is é (233 = "é" in GPT-2's vocabulary: 2634) */
    g.spec.nfc = 1;
    CHECK(rl_tok_new(&g.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    check_ids(t, "e\xcc\x81", 0, 1, IDS(2634));
    check_ids(t, "\xc3\xa9", 0, 1, IDS(2634));
    rl_tok_free(t);
    tok_gguf_free(&g);
}

/* Many added tokens sharing a first byte, against a naive matcher: the
 * tries find what trying every token at every position finds
 * (leftmost-longest per class, control tokens first, lstrip and rstrip),
 * on random texts.  Tokens 0..255 are the bytes and there are no merges,
 * so the text between matches is one id a byte. */
enum { MANY = 3000, MANY_TEXTS = 2000 };

typedef struct {
    char *tok[256 + MANY];
    size_t len[256 + MANY];
    int32_t type[256 + MANY];
    uint8_t strip[256 + MANY];
} many_vocab;

static uint32_t many_rand(uint32_t *state) {
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* The longest token of class CLS (3 control, 4 user-defined) at s[i], or
 * -1; *e its end. */
static int32_t naive_at(const many_vocab *v, int32_t cls, const char *s, size_t n, size_t i,
                        size_t *e) {
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 256; id < 256 + MANY; id++)
        if (v->type[id] == cls && v->len[id] > best_len && v->len[id] <= n - i &&
            memcmp(v->tok[id], s + i, v->len[id]) == 0) {
            best = id;
            best_len = v->len[id];
        }
    *e = i + best_len;
    return best;
}

/* The ids of s[0..n) by the naive matcher, appended at out[*no]. */
static void naive_encode(const many_vocab *v, int32_t cls, const char *s, size_t n,
                         int32_t *out, size_t *no) {
    size_t from = 0, i = 0;
    while (i <= n) {
        size_t e = i, start = i, stop = i;
        int32_t id = i < n ? naive_at(v, cls, s, n, i, &e) : -1;
        if (i < n && id < 0) {
            i++;
            continue;
        }
        if (id >= 0) {
            while ((v->strip[id] & 1) && start > from && s[start - 1] == ' ')
                start--;
            stop = e;
            while ((v->strip[id] & 2) && stop < n && s[stop] == ' ')
                stop++;
        }
        if (from < start) {
            if (cls == 3)
                naive_encode(v, 4, s + from, start - from, out, no);
            else
                for (size_t k = from; k < start; k++)
                    out[(*no)++] = (uint8_t)s[k];
        }
        if (id < 0)
            break;
        out[(*no)++] = id;
        from = stop;
        i = e;
    }
}

static void test_many_added_tokens(void) {
    static many_vocab v;
    static const char alphabet[] = "<<<ab >";
    char bytes[256][3], msg[256], text[256];
    int32_t want[256], *ids;
    uint32_t rng = 36;
    size_t n;
    static int32_t lstrip[MANY], rstrip[MANY];
    size_t nl = 0, nr = 0;
    for (int b = 0; b < 256; b++) {
        v.len[b] = byte_char(b, bytes[b]);
        v.tok[b] = bytes[b];
        v.type[b] = 1;
    }
    for (int32_t id = 256; id < 256 + MANY;) {
        size_t len = 2 + many_rand(&rng) % 6;
        char *tok = malloc(len);
        tok[0] = many_rand(&rng) % 8 ? '<' : 'a'; /* most share their first byte */
        for (size_t k = 1; k < len; k++)
            tok[k] = alphabet[many_rand(&rng) % (sizeof alphabet - 1)];
        int dup = 0;
        for (int32_t j = 256; j < id && !dup; j++)
            dup = v.len[j] == len && memcmp(v.tok[j], tok, len) == 0;
        if (dup) {
            free(tok);
            continue;
        }
        v.tok[id] = tok;
        v.len[id] = len;
        v.type[id] = many_rand(&rng) % 3 ? 3 : 4;
        v.strip[id] = (uint8_t)(many_rand(&rng) % 8 == 0 ? many_rand(&rng) % 4 : 0);
        if (v.strip[id] & 1)
            lstrip[nl++] = id;
        if (v.strip[id] & 2)
            rstrip[nr++] = id;
        id++;
    }
    rl_tok_spec spec = {.n_tokens = 256 + MANY, .tokens = (const char *const *)v.tok,
                        .token_lens = v.len, .token_types = v.type, .unk_id = -1,
                        .bos_id = -1, .eos_id = -1, .lstrip_ids = lstrip, .n_lstrip = nl,
                        .rstrip_ids = rstrip, .n_rstrip = nr};
    rl_tok *t;
    CHECK_MSG(rl_tok_new(&spec, &t, msg, sizeof msg) == RL_TOK_OK, "%s", msg);
    long mismatches = 0, matched = 0;
    for (int k = 0; k < MANY_TEXTS; k++) {
        size_t len = many_rand(&rng) % 200, nw = 0;
        for (size_t i = 0; i < len; i++)
            text[i] = alphabet[many_rand(&rng) % (sizeof alphabet - 1)];
        naive_encode(&v, 3, text, len, want, &nw);
        for (size_t i = 0; i < nw; i++)
            matched += want[i] >= 256;
        if (rl_tok_encode(t, text, len, 0, 1, &ids, &n, msg, sizeof msg) != RL_TOK_OK) {
            CHECK_MSG(0, "encoding text %d: %s", k, msg);
            continue;
        }
        if (n != nw || memcmp(ids, want, n * sizeof *ids) != 0) {
            if (mismatches++ < 3)
                CHECK_MSG(0, "text %d \"%.*s\": %zu ids, the naive matcher %zu", k, (int)len,
                          text, n, nw);
        }
        free(ids);
    }
    CHECK_MSG(mismatches == 0, "%ld of %d texts differ", mismatches, MANY_TEXTS);
    CHECK_MSG(matched > 10 * MANY_TEXTS, "only %ld added tokens matched", matched);
    rl_tok_free(t);
    for (int32_t id = 256; id < 256 + MANY; id++)
        free(v.tok[id]);
}

/* A long piece without white space costs time about linear in it (the BPE
 * is not quadratic): 1 MiB takes less than 40 times as long as 128 KiB, 8
 * times the bytes (measured: 10 to 26, the caches' share growing; quadratic
 * would be 64), and decodes back to itself. */
struct long_piece {
    rl_tok *t;
    const char *s;
};

static double encode_piece_seconds(void *ctx, long n) {
    struct long_piece *p = ctx;
    char msg[256];
    int32_t *ids = NULL;
    size_t nid = 0;
    double t0 = check_cpu_seconds();
    int ok = rl_tok_encode(p->t, p->s, (size_t)n, 0, 1, &ids, &nid, msg, sizeof msg) == RL_TOK_OK;
    double sec = check_cpu_seconds() - t0;
    CHECK_MSG(ok, "encoding a piece of %ld bytes: %s", n, msg);
    free(ids);
    return sec;
}

static void test_long_piece(void) {
    tok_gguf g;
    rl_tok *t;
    char msg[256];
    if (tok_gguf_load(&g, GPT2_VOCAB))
        return;
    CHECK(rl_tok_new(&g.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    size_t n = 1 << 20;
    char *s = malloc(n);
    for (size_t i = 0; i < n; i++)
        s[i] = "abcdefghijklmnopqrstuvwxyz"[(i * 7 + i / 3) % 26];
    struct long_piece p = {t, s};
    CHECK_GROWTH("encoding one long piece (bytes)", encode_piece_seconds, &p, (long)n / 8,
                 (long)n, 40);
    int32_t *ids;
    size_t nid;
    char *text;
    size_t len;
    CHECK(rl_tok_encode(t, s, n, 0, 1, &ids, &nid, msg, sizeof msg) == RL_TOK_OK);
    CHECK(rl_tok_decode(t, ids, nid, &text, &len, msg, sizeof msg) == RL_TOK_OK && len == n &&
          memcmp(text, s, n) == 0);
    free(text);
    free(ids);
    free(s);
    rl_tok_free(t);
    tok_gguf_free(&g);
}

/* Offsets on random texts of characters NFC recomposes, reorders and
 * expands (marks, jamo, Tibetan, precomposed letters), with the added
 * tokens between: every pair inside the text, in order of start, on
 * character boundaries. */
static void test_offsets_random(void) {
    static const uint32_t pool[] = {'a', 'b', 'c', ' ', 'e', 't', 0x301, 0x316, 0x308, 0x304,
                                    0x1100, 0x1161, 0x11a8, 0xac00, 0xf57, 0xfb7, 0x362, 0xe9,
                                    0x1d5, 0x212b, 0x344, 0x4e2d, 0x1f600, '<', 'm', '>', '\t'};
    small_vocab v;
    rl_tok *t;
    char msg[256];
    uint32_t rng = 37;
    int bad = 0;
    small_init(&v);
    v.spec.nfc = 1;
    v.spec.add_bos = 1;
    CHECK(rl_tok_new(&v.spec, &t, msg, sizeof msg) == RL_TOK_OK);
    for (int k = 0; k < 3000 && !bad; k++) {
        uint8_t text[128];
        size_t len = 0, n;
        for (size_t c = many_rand(&rng) % 24; c > 0; c--)
            len += rl_utf8_encode(pool[many_rand(&rng) % (sizeof pool / sizeof *pool)], text + len);
        int32_t *ids;
        size_t *off;
        if (rl_tok_encode_offsets(t, (const char *)text, len, 1, 1, &ids, &off, &n, msg,
                                  sizeof msg) != RL_TOK_OK) {
            CHECK_MSG(0, "random text %d: %s", k, msg);
            break;
        }
        for (size_t i = 1; i < n && !bad; i++) {
            size_t a = off[2 * i], b = off[2 * i + 1];
            bad = !(a <= b && b <= len && a >= off[2 * i - 2] &&
                    (a == len || (text[a] & 0xc0) != 0x80) && (b == len || (text[b] & 0xc0) != 0x80));
            if (bad)
                CHECK_MSG(0, "random text %d: id %zu has offsets %zu-%zu in %zu bytes", k, i, a, b,
                          len);
        }
        free(ids);
        free(off);
    }
    CHECK(!bad);
    rl_tok_free(t);
}

int main(void) {
    CHECK_CASE(test_classes());
    CHECK_CASE(test_split());
    CHECK_CASE(test_nfc_conformance());
    CHECK_CASE(test_small_bpe());
    CHECK_CASE(test_special());
    CHECK_CASE(test_offsets());
    CHECK_CASE(test_offsets_random());
    CHECK_CASE(test_unknown());
    CHECK_CASE(test_bad_spec());
    CHECK_CASE(test_bad_utf8());
    CHECK_CASE(test_decode());
    CHECK_CASE(test_many_added_tokens());
    CHECK_CASE(test_gpt2());
    CHECK_CASE(test_long_piece());
    return check_report("tokenizer");
}
