/* json.h - the one JSON reader of the C tests: jansson, with a loader for
 * the files under tests/golden/ and the lookups several tests share.
 *
 * gguf-py writes u64 metadata up to 2^64 - 1 as plain integers, and
 * jansson's integers are int64, so jansson refuses such a file.  The loader
 * then turns each literal it refused into the string "#DIGITS" ('#' marks a
 * number, never a string gguf-py wrote) and reads again, so the values stay
 * exact; rl_test_json_u64 reads both forms. */
#ifndef RL_TEST_JSON_H
#define RL_TEST_JSON_H

#include <jansson.h>
#include <stdint.h>

/* The JSON document in the file at PATH (decref it), or NULL after saying
 * on stderr why it could not be read. */
json_t *rl_test_json_load(const char *path);

/* 1 and the value in *out when J is a non-negative integer (or a literal
 * too large for jansson, see above); 0 otherwise. */
int rl_test_json_u64(const json_t *j, uint64_t *out);

/* The entry of a gguf-py dump's "tensors" array whose "name" is NAME, or
 * NULL. */
const json_t *rl_test_json_tensor(const json_t *dump, const char *name);

#endif
