/* utf8.c - the UTF-8 codec of utf8.h: short strings (keys, names, JSON,
 * arguments), so a plain byte loop. */
#include "prims/utf8.h"

uint32_t rl_utf8_next(const uint8_t *s, size_t n, size_t *i) {
    size_t at = *i;
    uint32_t c = s[at], need, min = 0, j;
    if (c < 0x80) need = 0;
    else if ((c & 0xe0) == 0xc0) need = 1, c &= 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) need = 2, c &= 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) need = 3, c &= 0x07, min = 0x10000;
    else {
        *i = at + 1; /* a stray continuation byte or 0xf8..0xff */
        return RL_UTF8_ESCAPE_BASE + s[at];
    }
    if (need > 0 && at + need >= n) {
        *i = at + 1; /* a sequence cut by the end */
        return RL_UTF8_ESCAPE_BASE + s[at];
    }
    for (j = 1; j <= need; j++) {
        if ((s[at + j] & 0xc0) != 0x80)
            break;
        c = (c << 6) | (s[at + j] & 0x3f);
    }
    if (j <= need || c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
        *i = at + 1; /* bad continuation, overlong, or not a scalar value */
        return RL_UTF8_ESCAPE_BASE + s[at];
    }
    *i = at + need + 1;
    return c;
}

int rl_utf8_ascii_p(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return 0;
    return 1;
}

static uint32_t rl_utf8_scalar(uint32_t c) {
    return c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) ? RL_UTF8_REPLACEMENT : c;
}

int rl_utf8_escaped_byte_p(uint32_t c) {
    return c >= RL_UTF8_ESCAPE_BASE + 0x80 && c <= RL_UTF8_ESCAPE_BASE + 0xff;
}

size_t rl_utf8_chars(const uint8_t *s, size_t n) {
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += (s[i] & 0xc0) != 0x80;
    return chars;
}

size_t rl_utf8_length(uint32_t c) {
    if (rl_utf8_escaped_byte_p(c))
        return 1;
    c = rl_utf8_scalar(c);
    return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

size_t rl_utf8_encode(uint32_t c, uint8_t *y) {
    if (rl_utf8_escaped_byte_p(c)) {
        y[0] = (uint8_t)(c - RL_UTF8_ESCAPE_BASE);
        return 1;
    }
    c = rl_utf8_scalar(c);
    if (c < 0x80) {
        y[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        y[0] = (uint8_t)(0xc0 | (c >> 6));
        y[1] = (uint8_t)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        y[0] = (uint8_t)(0xe0 | (c >> 12));
        y[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        y[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    y[0] = (uint8_t)(0xf0 | (c >> 18));
    y[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
    y[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
    y[3] = (uint8_t)(0x80 | (c & 0x3f));
    return 4;
}
