/* tokenizer_split.c - the GPT-2 pre-tokenization, written out by hand (no
 * regular expression engine): the ASCII character classes and the
 * splitter (tok_split_next, and rl_tok_split_next of prims/tokenizer.h).
 * Shared declarations: prims/tokenizer_internal.h. */
#include "prims/tokenizer_internal.h"

uint8_t tok_ascii_class[128];
pthread_once_t tok_ascii_once = PTHREAD_ONCE_INIT;
void tok_ascii_init(void) {
    for (uint32_t c = 0; c < 128; c++)
        tok_ascii_class[c] = rl_uni_letter_p(c)   ? C_LETTER
                         : rl_uni_number_p(c) ? C_NUMBER
                         : rl_uni_space_p(c)  ? C_SPACE
                                              : C_OTHER;
}

/* The end of the GPT-2 expression's match at s[i] (i < n):
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * tried in that order at i, as a backtracking engine does. */
size_t tok_split_next(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t b = s[i + 1];
        if (b == 's' || b == 't' || b == 'm' || b == 'd')
            return i + 2;
        if (i + 2 < n && ((b == 'r' && s[i + 2] == 'e') || (b == 'v' && s[i + 2] == 'e') ||
                          (b == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    size_t nx, j;
    int c = char_class(s, n, i, &nx);
    if (s[i] == ' ' && nx < n) {
        size_t nx2;
        int c2 = char_class(s, n, nx, &nx2);
        if (c2 != C_SPACE) {
            c = c2;
            nx = nx2;
        }
    }
    if (c != C_SPACE) {
        j = nx;
        while (j < n) {
            size_t k;
            if (char_class(s, n, j, &k) != c)
                break;
            j = k;
        }
        return j;
    }
    /* \s+(?!\S) takes the run of white space but its last character when
     * something follows it; \s+ takes a run of one. */
    size_t last = i;
    j = nx;
    while (j < n) {
        size_t k;
        if (char_class(s, n, j, &k) != C_SPACE)
            break;
        last = j;
        j = k;
    }
    if (j == n || last == i)
        return j;
    return last;
}

size_t rl_tok_split_next(const char *text, size_t len, size_t at) {
    pthread_once(&tok_ascii_once, tok_ascii_init);
    return tok_split_next((const uint8_t *)text, len, at);
}
