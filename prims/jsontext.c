/* jsontext.c - JSON strings from C (jsontext.h). */
#include "prims/jsontext.h"

#include <string.h>

#include "prims/utf8.h"

int rl_json_escaped_char_p(uint32_t c) {
    return c < 32 || (c >= 127 && c <= 159) || c == 0x061c || (c >= 0x200e && c <= 0x200f) ||
           (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) ||
           (c >= 0xd800 && c <= 0xdfff);
}

size_t rl_json_escape(const uint8_t *s, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    size_t len = 0, i = 0, start = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t at = i;
        uint32_t c;
        /* the common case: printable ASCII, copied with the run it is in */
        if (b >= 32 && b < 127 && b != '"' && b != '\\') {
            i++;
            continue;
        }
        c = b < 128 ? (i++, b) : rl_utf8_next(s, n, &i);
        if (c != '"' && c != '\\' && !rl_json_escaped_char_p(c))
            continue;
        memcpy(out + len, s + start, at - start);
        len += at - start;
        start = i;
        out[len++] = '\\';
        switch (c) {
        case '"': out[len++] = '"'; break;
        case '\\': out[len++] = '\\'; break;
        case '\n': out[len++] = 'n'; break;
        case '\r': out[len++] = 'r'; break;
        case '\t': out[len++] = 't'; break;
        default:
            out[len++] = 'u';
            out[len++] = hex[(c >> 12) & 15];
            out[len++] = hex[(c >> 8) & 15];
            out[len++] = hex[(c >> 4) & 15];
            out[len++] = hex[c & 15];
        }
    }
    memcpy(out + len, s + start, n - start);
    return len + n - start;
}
