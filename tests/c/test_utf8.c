/* test_utf8.c - the UTF-8 codec (prims/utf8.c): every scalar value round
 * trips, each kind of invalid input decodes to U+FFFD one byte at a time,
 * and encoding replaces surrogates and values above U+10FFFF. */
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
    long bad = 0;
    for (uint32_t c = 0; c <= 0x10ffff; c++) {
        uint8_t y[4];
        size_t n, i = 0;
        if (c >= 0xd800 && c <= 0xdfff)
            continue;
        n = rl_utf8_encode(c, y);
        if (n != rl_utf8_length(c) || rl_utf8_next(y, n, &i) != c || i != n)
            bad++;
    }
    CHECK_MSG(bad == 0, "%ld scalar values do not round trip", bad);
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
}

static void test_encode_replaces(void) {
    uint8_t y[4];
    CHECK_EQ_U(rl_utf8_encode(0xdc00, y), 3);
    CHECK(!memcmp(y, "\xef\xbf\xbd", 3));
    CHECK_EQ_U(rl_utf8_encode(0x7fffffff, y), 3);
    CHECK(!memcmp(y, "\xef\xbf\xbd", 3));
    CHECK_EQ_U(rl_utf8_encode(0x20ac, y), 3);
    CHECK(!memcmp(y, "\xe2\x82\xac", 3));
}

static void test_decode_invalid(void) {
    uint32_t out[16];
    /* a stray continuation byte, then ASCII */
    CHECK_EQ_U(decode("\x80" "a", 2, out), 2);
    CHECK_EQ_U(out[0], RL_UTF8_REPLACEMENT);
    CHECK_EQ_U(out[1], 'a');
    /* overlong '/' (C0 AF): both bytes are replaced, one at a time */
    CHECK_EQ_U(decode("\xc0\xaf", 2, out), 2);
    CHECK_EQ_U(out[0], RL_UTF8_REPLACEMENT);
    CHECK_EQ_U(out[1], RL_UTF8_REPLACEMENT);
    /* an encoded surrogate (ED A0 80) */
    CHECK_EQ_U(decode("\xed\xa0\x80", 3, out), 3);
    CHECK_EQ_U(out[0], RL_UTF8_REPLACEMENT);
    /* above U+10FFFF (F4 90 80 80) */
    CHECK_EQ_U(decode("\xf4\x90\x80\x80", 4, out), 4);
    CHECK_EQ_U(out[0], RL_UTF8_REPLACEMENT);
    /* a sequence cut by the end: the lead byte only is replaced */
    CHECK_EQ_U(decode("x\xe2\x82", 3, out), 3);
    CHECK_EQ_U(out[0], 'x');
    CHECK_EQ_U(out[1], RL_UTF8_REPLACEMENT);
    CHECK_EQ_U(out[2], RL_UTF8_REPLACEMENT);
    /* a bad continuation: the lead is replaced, the next byte read afresh */
    CHECK_EQ_U(decode("\xe2" "ab", 3, out), 3);
    CHECK_EQ_U(out[0], RL_UTF8_REPLACEMENT);
    CHECK_EQ_U(out[1], 'a');
    /* 0xff never starts a sequence */
    CHECK_EQ_U(decode("\xff", 1, out), 1);
    CHECK_EQ_U(out[0], RL_UTF8_REPLACEMENT);
    /* valid four-byte sequence */
    CHECK_EQ_U(decode("\xf0\x9f\x98\x80", 4, out), 1);
    CHECK_EQ_U(out[0], 0x1f600);
}

static void test_ascii_p(void) {
    CHECK(rl_utf8_ascii_p((const uint8_t *)"plain", 5));
    CHECK(rl_utf8_ascii_p((const uint8_t *)"", 0));
    CHECK(!rl_utf8_ascii_p((const uint8_t *)"caf\xc3\xa9", 5));
}

int main(void) {
    test_round_trip();
    test_lengths();
    test_encode_replaces();
    test_decode_invalid();
    test_ascii_p();
    return check_report("utf8");
}
