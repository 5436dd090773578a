/* test_jsontext.c - JSON strings from C (prims/jsontext.c): the escapes,
 * runs copied as they are, bytes that are not UTF-8 as \udcHH, and the
 * bound on the output's length.  The tokenizer suite holds the same bytes
 * to the Lisp writer's (WRITE-JSON) for every character. */
#include <string.h>

#include "prims/jsontext.h"
#include "prims/utf8.h"
#include "tests/c/check.h"

/* S escaped, NUL-terminated, into OUT (room for RL_JSON_ESCAPED_MAX). */
static const char *escaped(const char *s, size_t n, char *out) {
    out[rl_json_escape((const uint8_t *)s, n, out)] = 0;
    return out;
}

#define CHECK_ESCAPED(in, want)                                                   \
    do {                                                                          \
        char out_[RL_JSON_ESCAPED_MAX(sizeof in - 1) + 1];                        \
        const char *got_ = escaped(in, sizeof in - 1, out_);                      \
        CHECK_MSG(!strcmp(got_, want), "%s: got %s, expected %s", #in, got_, want); \
    } while (0)

static void test_escapes(void) {
    CHECK_ESCAPED("", "");
    CHECK_ESCAPED("plain text", "plain text");
    CHECK_ESCAPED("a\"b\\c", "a\\\"b\\\\c");
    CHECK_ESCAPED("\t\n\r", "\\t\\n\\r");
    CHECK_ESCAPED("\x01\x1b\x1f\x7f", "\\u0001\\u001b\\u001f\\u007f");
    CHECK_ESCAPED("\xc2\x80\xc2\x9b\xc2\x9f\xc2\xa0", "\\u0080\\u009b\\u009f\xc2\xa0");
    /* bidirectional controls escaped; U+2028 and U+FEFF as they are */
    CHECK_ESCAPED("\xd8\x9c\xe2\x80\x8e\xe2\x80\xae\xe2\x81\xa9", "\\u061c\\u200e\\u202e\\u2069");
    CHECK_ESCAPED("\xe2\x80\xa8\xef\xbb\xbf", "\xe2\x80\xa8\xef\xbb\xbf");
    CHECK_ESCAPED("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x99\x82", "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x99\x82");
    CHECK_ESCAPED("x\0y", "x\\u0000y");
}

static void test_bytes_not_utf8(void) {
    CHECK_ESCAPED("\xff", "\\udcff");
    CHECK_ESCAPED("a\xc3", "a\\udcc3");                /* cut by the end */
    CHECK_ESCAPED("\xc0\xaf", "\\udcc0\\udcaf");       /* overlong */
    CHECK_ESCAPED("\xed\xa0\x80", "\\udced\\udca0\\udc80"); /* an encoded surrogate */
    CHECK_ESCAPED("\xc3(\xc3\xa9", "\\udcc3(\xc3\xa9");
}

/* Every one-byte input and the worst case meet RL_JSON_ESCAPED_MAX. */
static void test_bound(void) {
    char out[RL_JSON_ESCAPED_MAX(64)];
    uint8_t s[64];
    for (int b = 0; b < 256; b++) {
        memset(s, b, sizeof s);
        size_t n = rl_json_escape(s, sizeof s, out);
        CHECK_EACH(n <= sizeof out, "byte %02x: %zu bytes for 64", b, n);
    }
}

int main(void) {
    CHECK_CASE(test_escapes());
    CHECK_CASE(test_bytes_not_utf8());
    CHECK_CASE(test_bound());
    return check_report("jsontext");
}
