/* json.c - loading the golden JSON files for the C tests (see json.h). */
#include "tests/c/support/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/c/testutil.h"

/* Each round quotes the one literal jansson stopped at; a dump holds a
 * handful of u64 values, so this bound only stops a loop on a bad file. */
#define MAX_BIG_LITERALS 64

json_t *rl_test_json_load(const char *path) {
    uint64_t len;
    char *text = slurp(path, &len);
    if (!text) {
        fprintf(stderr, "%s: cannot read: %s\n", path, strerror(errno));
        return NULL;
    }
    json_t *doc = NULL;
    json_error_t err;
    for (int round = 0; round <= MAX_BIG_LITERALS; round++) {
        doc = json_loadb(text, len, JSON_ALLOW_NUL, &err);
        if (doc || strncmp(err.text, "too big integer", 15) || err.position <= 0 ||
            (uint64_t)err.position > len)
            break;
        /* err.position is just past the digits jansson refused. */
        size_t end = (size_t)err.position, start = end;
        while (start > 0 && text[start - 1] >= '0' && text[start - 1] <= '9')
            start--;
        char *wider = realloc(text, len + 4);
        if (!wider || start == end)
            break;
        text = wider;
        memmove(text + end + 3, text + end, len - end + 1);
        memmove(text + start + 2, text + start, end - start);
        text[start] = '"';
        text[start + 1] = '#';
        text[end + 2] = '"';
        len += 3;
    }
    if (!doc)
        fprintf(stderr, "%s: not JSON: %s at line %d, column %d\n", path, err.text, err.line,
                err.column);
    free(text);
    return doc;
}

int rl_test_json_u64(const json_t *j, uint64_t *out) {
    if (json_is_integer(j) && json_integer_value(j) >= 0) {
        *out = (uint64_t)json_integer_value(j);
        return 1;
    }
    const char *s = json_string_value(j);
    if (!s || s[0] != '#' || s[1] < '0' || s[1] > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s + 1, &end, 10);
    if (*end || errno)
        return 0;
    *out = v;
    return 1;
}

const json_t *rl_test_json_tensor(const json_t *dump, const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(dump, "tensors"), i, t) {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n && !strcmp(n, name))
            return t;
    }
    return NULL;
}
