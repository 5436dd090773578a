/* test_utf8.c - the UTF-8 codec (prims/utf8.c): every scalar value round
 * trips, each kind of invalid input decodes one byte at a time to
 * U+DC80..U+DCFF, decode then encode gives every byte string back, and
 * encoding replaces other surrogates and values above U+10FFFF. */
#include <string.h>

#include "prims/utf8.h"
#include "tests/c/check.h"

/* Decode s (n bytes) into out; answers the code point count. */
static size_t decode(const char *s, size_t n, uint32_t *out) {
    size_t i = 0, k = 0;
    while (i < n)
        out[k++] = rl_utf8_next((const uint8_t *)s, n, &i);
    return k;
}

static void test_round_trip(void) {
    for (uint32_t c = 0; c <= 0x10ffff; c++) {
        uint8_t y[4];
        size_t n, i = 0;
        if (c >= 0xd800 && c <= 0xdfff)
            continue;
        n = rl_utf8_encode(c, y);
        uint32_t back = rl_utf8_next(y, n, &i);
        CHECK_EACH(n == rl_utf8_length(c) && back == c && i == n && rl_utf8_chars(y, n) == 1,
                   "U+%04X: %zu bytes (length says %zu), decoded U+%04X in %zu bytes, %zu chars",
                   c, n, rl_utf8_length(c), back, i, rl_utf8_chars(y, n));
    }
}

static void test_lengths(void) {
    CHECK_EQ_U(rl_utf8_length(0x7f), 1);
    CHECK_EQ_U(rl_utf8_length(0x80), 2);
    CHECK_EQ_U(rl_utf8_length(0x7ff), 2);
    CHECK_EQ_U(rl_utf8_length(0x800), 3);
    CHECK_EQ_U(rl_utf8_length(0xffff), 3);
    CHECK_EQ_U(rl_utf8_length(0x10000), 4);
    CHECK_EQ_U(rl_utf8_length(0xd800), 3); /* becomes U+FFFD */
    CHECK_EQ_U(rl_utf8_length(0x110000), 3);
    CHECK_EQ_U(rl_utf8_length(0xdc80), 1); /* the byte 0x80 */
    CHECK_EQ_U(rl_utf8_length(0xdcff), 1);
    CHECK_EQ_U(rl_utf8_length(0xdc7f), 3); /* not a byte: U+FFFD */
}

static void test_encode_replaces(void) {
    uint8_t y[4];
    CHECK_EQ_U(rl_utf8_encode(0xdc00, y), 3);
    CHECK(!memcmp(y, "\xef\xbf\xbd", 3));
    CHECK_EQ_U(rl_utf8_encode(0x7fffffff, y), 3);
    CHECK(!memcmp(y, "\xef\xbf\xbd", 3));
    CHECK_EQ_U(rl_utf8_encode(0x20ac, y), 3);
    CHECK(!memcmp(y, "\xe2\x82\xac", 3));
    CHECK_EQ_U(rl_utf8_encode(0xdcff, y), 1);
    CHECK_EQ_U(y[0], 0xff);
    CHECK_EQ_U(rl_utf8_encode(0xdc7f, y), 3);
    CHECK(!memcmp(y, "\xef\xbf\xbd", 3));
}

#define ESC(b) (RL_UTF8_ESCAPE_BASE + (b))

static void test_decode_invalid(void) {
    uint32_t out[16];
    /* a stray continuation byte, then ASCII */
    CHECK_EQ_U(decode("\x80" "a", 2, out), 2);
    CHECK_EQ_U(out[0], ESC(0x80));
    CHECK_EQ_U(out[1], 'a');
    /* overlong '/' (C0 AF): both bytes are kept, one at a time */
    CHECK_EQ_U(decode("\xc0\xaf", 2, out), 2);
    CHECK_EQ_U(out[0], ESC(0xc0));
    CHECK_EQ_U(out[1], ESC(0xaf));
    /* an overlong three-byte form (E0 80 AF) */
    CHECK_EQ_U(decode("\xe0\x80\xaf", 3, out), 3);
    CHECK_EQ_U(out[0], ESC(0xe0));
    CHECK_EQ_U(out[2], ESC(0xaf));
    /* an encoded surrogate (ED A0 80), the very range escapes use (ED B2 80) */
    CHECK_EQ_U(decode("\xed\xa0\x80", 3, out), 3);
    CHECK_EQ_U(out[0], ESC(0xed));
    CHECK_EQ_U(out[1], ESC(0xa0));
    CHECK_EQ_U(out[2], ESC(0x80));
    CHECK_EQ_U(decode("\xed\xb2\x80", 3, out), 3);
    CHECK_EQ_U(out[0], ESC(0xed));
    /* above U+10FFFF (F4 90 80 80) */
    CHECK_EQ_U(decode("\xf4\x90\x80\x80", 4, out), 4);
    CHECK_EQ_U(out[0], ESC(0xf4));
    /* a sequence cut by the end: each byte kept */
    CHECK_EQ_U(decode("x\xe2\x82", 3, out), 3);
    CHECK_EQ_U(out[0], 'x');
    CHECK_EQ_U(out[1], ESC(0xe2));
    CHECK_EQ_U(out[2], ESC(0x82));
    /* a bad continuation: the lead is kept, the next byte read afresh */
    CHECK_EQ_U(decode("\xe2" "ab", 3, out), 3);
    CHECK_EQ_U(out[0], ESC(0xe2));
    CHECK_EQ_U(out[1], 'a');
    /* 0xff never starts a sequence */
    CHECK_EQ_U(decode("\xff", 1, out), 1);
    CHECK_EQ_U(out[0], ESC(0xff));
    /* valid four-byte sequence */
    CHECK_EQ_U(decode("\xf0\x9f\x98\x80", 4, out), 1);
    CHECK_EQ_U(out[0], 0x1f600);
}

/* Decode then encode gives back every byte string: all strings of up to
 * three bytes over a set of bytes that covers every class of lead and
 * continuation byte, and random longer ones. */
static void test_bytes_round_trip(void) {
    static const uint8_t pick[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
                                   0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
    const size_t np = sizeof pick;
    uint32_t seed = 12345;
    for (size_t a = 0; a < np; a++)
        for (size_t b = 0; b <= np; b++)
            for (size_t c = 0; c <= np; c++) {
                uint8_t s[3], y[12];
                uint32_t cps[3];
                size_t n = 1, i = 0, k = 0, m = 0;
                s[0] = pick[a];
                if (b < np) s[n++] = pick[b];
                if (b < np && c < np) s[n++] = pick[c];
                while (i < n)
                    cps[k++] = rl_utf8_next(s, n, &i);
                for (size_t j = 0; j < k; j++)
                    m += rl_utf8_encode(cps[j], y + m);
                CHECK_EACH(m == n && !memcmp(s, y, n),
                           "bytes %02x %02x %02x (%zu of them): %zu bytes back", s[0],
                           n > 1 ? s[1] : 0, n > 2 ? s[2] : 0, n, m);
            }
    for (int t = 0; t < 2000; t++) {
        uint8_t s[24], y[96];
        size_t n = 1 + t % 24, i = 0, m = 0;
        for (size_t j = 0; j < n; j++) {
            seed = seed * 1103515245u + 12345u;
            s[j] = (uint8_t)(seed >> 16);
        }
        while (i < n)
            m += rl_utf8_encode(rl_utf8_next(s, n, &i), y + m);
        CHECK_EACH(m == n && !memcmp(s, y, n),
                   "random string %d (%zu bytes from %02x): %zu bytes back", t, n, s[0], m);
    }
}

static void test_ascii_p(void) {
    CHECK(rl_utf8_ascii_p((const uint8_t *)"plain", 5));
    CHECK(rl_utf8_ascii_p((const uint8_t *)"", 0));
    CHECK(!rl_utf8_ascii_p((const uint8_t *)"caf\xc3\xa9", 5));
}

int main(void) {
    CHECK_CASE(test_round_trip());
    CHECK_CASE(test_lengths());
    CHECK_CASE(test_encode_replaces());
    CHECK_CASE(test_decode_invalid());
    CHECK_CASE(test_bytes_round_trip());
    CHECK_CASE(test_ascii_p());
    return check_report("utf8");
}
