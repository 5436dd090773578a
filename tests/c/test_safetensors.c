/* test_safetensors.c - the safetensors reader: a good file reads back every
 * field, and each kind of bad file is refused with its own status and a
 * message "at byte N: ..." -- never a crash. */
#include <stdlib.h>
#include <string.h>

#include "gguf/safetensors.h"
#include "tests/c/check.h"

/* 8-byte length, HEADER, then DATALEN bytes of DATA (or zeros). */
static uint8_t *make_file(const char *header, const void *data, size_t datalen, size_t *size) {
    size_t n = strlen(header);
    uint8_t *b = calloc(1, 8 + n + datalen + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, n);
    if (data)
        memcpy(b + 8 + n, data, datalen);
    *size = 8 + n + datalen;
    return b;
}

static rl_st_status parse(const char *header, size_t datalen, char *msg) {
    size_t size;
    uint8_t *b = make_file(header, NULL, datalen, &size);
    rl_st_file *f = NULL;
    uint64_t off = 0;
    rl_st_status st = rl_st_parse(b, size, &f, msg, RL_ST_MSG_SIZE, &off);
    if (st != RL_ST_OK) {
        CHECK(f == NULL);
        CHECK_MSG(!strncmp(msg, "at byte ", 8), "message %s", msg);
        CHECK(off <= size);
    }
    rl_st_close(f);
    free(b);
    return st;
}

/* A file with three tensors and metadata, read back. */
static void test_parse(void) {
    char msg[RL_ST_MSG_SIZE];
    float vals[3] = {1.0f, -2.5f, 3.0f};
    uint16_t halves[2] = {0x3c00, 0xc000};
    uint8_t data[16];
    size_t size;
    memcpy(data, vals, 12);
    memcpy(data + 12, halves, 4);
    {
        uint8_t *b = make_file("{\"__metadata__\":{\"format\":\"pt\"},"
                               "\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                               "\"h\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[12,16]},"
                               "\"e\":{\"dtype\":\"F16\",\"shape\":[0,4],\"data_offsets\":[16,16]}}   ",
                               data, 16, &size);
        rl_st_file *f = NULL;
        CHECK_EQ_U(rl_st_parse(b, size, &f, msg, sizeof msg, NULL), RL_ST_OK);
        CHECK_EQ_U(rl_st_tensor_count(f), 3);
        CHECK(!strcmp(rl_st_tensor_at(f, 0)->name, "w"));
        CHECK_EQ_U(rl_st_tensor_at(f, 0)->dtype, RL_ST_F32);
        CHECK(!memcmp(rl_st_tensor_data(f, 0), vals, 12));
        CHECK_EQ_U(rl_st_tensor_at(f, 1)->n_dims, 2);
        CHECK_EQ_U(rl_st_tensor_at(f, 1)->shape[1], 2);
        CHECK_EQ_U(rl_st_tensor_at(f, 1)->dtype, RL_ST_BF16);
        CHECK(!memcmp(rl_st_tensor_data(f, 1), halves, 4));
        CHECK_EQ_U(rl_st_tensor_at(f, 2)->nbytes, 0);
        CHECK(rl_st_tensor_at(f, 3) == NULL);
        CHECK_EQ_U(rl_st_metadata_count(f), 1);
        CHECK(!strcmp(rl_st_metadata_key(f, 0), "format"));
        CHECK(!strcmp(rl_st_metadata_value(f, 0), "pt"));
        rl_st_close(f);
        free(b);
    }
}

/* Bad files, one per status. */
static void test_bad_files(void) {
    char msg[RL_ST_MSG_SIZE];
    {
        rl_st_file *f = NULL;
        CHECK_EQ_U(rl_st_parse("\1\0\0", 3, &f, msg, sizeof msg, NULL), RL_ST_E_TRUNCATED);
    }
    {
        size_t sz;
        uint8_t *b = make_file("{}", NULL, 0, &sz);
        rl_st_file *f = NULL;
        b[6] = 1; /* length 2^48 + 2 */
        CHECK_EQ_U(rl_st_parse(b, sz, &f, msg, sizeof msg, NULL), RL_ST_E_HEADER_LENGTH);
        free(b);
    }
    CHECK_EQ_U(parse("{\"a\":", 0, msg), RL_ST_E_JSON);
    CHECK_EQ_U(parse("{\"a\":{},\"a\":{}}", 0, msg), RL_ST_E_JSON); /* duplicate key */
    CHECK_EQ_U(parse("[1,2]", 0, msg), RL_ST_E_HEADER);
    CHECK_EQ_U(parse("{\"t\":[]}", 0, msg), RL_ST_E_HEADER);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, msg), RL_ST_E_HEADER);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, msg), RL_ST_E_DTYPE);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,4]}}", 4, msg), RL_ST_E_SHAPE);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, msg),
               RL_ST_E_SHAPE);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, msg),
               RL_ST_E_SHAPE);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, msg), RL_ST_E_OFFSETS);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, msg), RL_ST_E_OFFSETS);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, msg), RL_ST_E_OFFSETS);
    CHECK_EQ_U(parse("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, msg), RL_ST_E_SIZE);
    CHECK_EQ_U(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[6,10]}}", 12, msg),
               RL_ST_E_OVERLAP);
    CHECK_EQ_U(parse("{\"__metadata__\":{\"k\":1}}", 0, msg), RL_ST_E_METADATA);
    CHECK_EQ_U(parse("{\"__metadata__\":[]}", 0, msg), RL_ST_E_METADATA);
    {
        rl_st_file *f = NULL;
        CHECK_EQ_U(rl_st_open("/nonexistent/model.safetensors", &f, msg, sizeof msg, NULL), RL_ST_E_IO);
        CHECK(f == NULL);
    }
    CHECK(!strcmp(rl_st_status_name(RL_ST_E_OVERLAP), "overlap"));
    rl_st_close(NULL);
}

int main(void) {
    CHECK_CASE(test_parse());
    CHECK_CASE(test_bad_files());
    return check_report("safetensors");
}
