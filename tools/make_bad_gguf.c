/* make_bad_gguf.c - writes the corpus of broken GGUF files in tests/bad/ and
 * its MANIFEST (one line per file: name, the status the reader must give,
 * the byte offset it must name, and what is wrong).
 *
 * Each file is a small valid GGUF file with exactly one defect, assembled
 * byte by byte here (not with the library's writer, so that a writer bug
 * cannot hide a reader bug).  Deterministic: regenerate and commit both.
 *
 *   make tools && build/tools/make_bad_gguf tests/bad
 *
 * A tool, not a test: tests/c/test_gguf.c reads the result.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    uint8_t p[1 << 16];
    size_t n;
    size_t mark;
} b;

static FILE *manifest;
static const char *outdir;
static int nfiles;

static void reset(void) {
    b.n = 0;
    b.mark = (size_t)-1;
}

static void raw(const void *s, size_t n) {
    if (b.n + n > sizeof b.p) {
        fprintf(stderr, "make_bad_gguf: buffer overflow\n");
        exit(1);
    }
    memcpy(b.p + b.n, s, n);
    b.n += n;
}

static void u8(uint8_t v) { raw(&v, 1); }
static void u32(uint32_t v) { raw(&v, 4); } /* little-endian host */
static void u64(uint64_t v) { raw(&v, 8); }
static void mark(void) { b.mark = b.n; }
static void str(const char *s) {
    u64(strlen(s));
    raw(s, strlen(s));
}
static void pad(size_t a) {
    while (b.n % a)
        u8(0);
}
static void zeros(size_t n) {
    while (n--)
        u8(0);
}

enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };
enum { G_F32 = 0, G_F16 = 1, G_Q4_2 = 4, G_Q8_0 = 8, G_Q4_K = 12, G_Q8_K = 15, G_Q4_0_4_4 = 31 };

static void hdr(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    raw("GGUF", 4);
    u32(version);
    u64(n_tensors);
    u64(n_kv);
}

static void kv_str(const char *k, const char *v) {
    str(k);
    u32(T_STR);
    str(v);
}

static void kv_u32(const char *k, uint32_t v) {
    str(k);
    u32(T_U32);
    u32(v);
}

/* Which field of a tensor info to mark. */
enum { M_NONE, M_NAME, M_NDIMS, M_DIM0, M_DIM1, M_DIM2, M_DIM3, M_TYPE, M_OFFSET };

static void ti(const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type,
               uint64_t offset, int m) {
    if (m == M_NAME)
        mark();
    str(name);
    if (m == M_NDIMS)
        mark();
    u32(n_dims);
    for (uint32_t d = 0; d < n_dims && d < 8; d++) {
        if (m == M_DIM0 + (int)d)
            mark();
        u64((uint64_t)ne[d]);
    }
    if (m == M_TYPE)
        mark();
    u32(type);
    if (m == M_OFFSET)
        mark();
    u64(offset);
}

static void emit(const char *name, const char *status, const char *what) {
    if (b.mark == (size_t)-1) {
        fprintf(stderr, "make_bad_gguf: %s has no marked offset\n", name);
        exit(1);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.p, 1, b.n, f) != b.n || fclose(f) != 0) {
        fprintf(stderr, "make_bad_gguf: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fprintf(manifest, "%-36s %-24s %6zu  %s\n", name, status, b.mark, what);
    nfiles++;
}

/* The usual start: version 3, one string key. */
static void start(uint64_t n_tensors, uint64_t n_kv) {
    reset();
    hdr(3, n_tensors, n_kv);
    kv_str("general.architecture", "llama");
}

static void header_cases(void) {
    reset();
    mark();
    emit("empty.gguf", "truncated", "a file of 0 bytes");

    reset();
    raw("GGUF", 4);
    u32(3);
    mark();
    u64(1);
    b.n -= 4; /* the tensor count cut in half */
    emit("truncated-header.gguf", "truncated", "ends inside the tensor count");

    reset();
    mark();
    raw("GGML", 4);
    u32(3);
    u64(0);
    u64(0);
    emit("bad-magic.gguf", "bad-magic", "magic GGML");

    reset();
    mark();
    raw("FUGG", 4);
    u32(3);
    u64(0);
    u64(0);
    emit("byte-swapped-magic.gguf", "bad-magic", "magic byte-swapped (big-endian?)");

    reset();
    raw("GGUF", 4);
    mark();
    u32(1);
    u32(0);
    u32(0);
    emit("version-1.gguf", "unsupported-version", "GGUF v1 (32-bit counts)");

    reset();
    raw("GGUF", 4);
    mark();
    u32(0x03000000u);
    u64(0);
    u64(0);
    emit("version-big-endian.gguf", "unsupported-version", "version 3 byte-swapped");

    reset();
    raw("GGUF", 4);
    mark();
    u32(99);
    u64(0);
    u64(0);
    emit("version-99.gguf", "unsupported-version", "a future version");

    reset();
    raw("GGUF", 4);
    u32(3);
    u64(0);
    mark();
    u64(1ull << 40);
    emit("kv-count-cap.gguf", "bad-kv-count", "2^40 keys");

    start(0, 1000);
    b.mark = 16;
    emit("kv-count-eof.gguf", "bad-kv-count", "1000 keys in a 69-byte file");

    reset();
    raw("GGUF", 4);
    u32(3);
    mark();
    u64(1ull << 62);
    u64(0);
    emit("tensor-count-cap.gguf", "bad-tensor-count", "2^62 tensors");

    start(5000, 1);
    b.mark = 8;
    emit("tensor-count-eof.gguf", "bad-tensor-count", "5000 tensors in a 69-byte file");
}

static void kv_cases(void) {
    start(0, 2);
    str("test.u32");
    u32(T_U32);
    mark();
    u8(7);
    u8(0); /* two of the four bytes */
    emit("truncated-kv.gguf", "truncated", "ends inside a u32 value");

    start(0, 2);
    mark();
    u64(70000);
    zeros(64);
    emit("key-length-cap.gguf", "bad-key-length", "key length 70000, above 65535");

    start(0, 2);
    mark();
    u64(500);
    raw("test.short", 10);
    emit("key-length-eof.gguf", "bad-key-length", "key length 500 past the end");

    start(0, 2);
    mark();
    u64(1ull << 63);
    raw("x", 1);
    emit("key-length-huge.gguf", "bad-key-length", "key length 2^63");

    start(0, 2);
    mark();
    u64(0);
    u32(T_U8);
    u8(1);
    emit("empty-key.gguf", "empty-key", "a key of 0 bytes");

    start(0, 3);
    kv_u32("test.a", 1);
    mark();
    kv_u32("general.architecture", 2);
    emit("duplicate-key.gguf", "duplicate-key", "general.architecture twice");

    start(0, 2);
    str("test.x");
    mark();
    u32(13);
    u32(0);
    emit("value-type-unknown.gguf", "bad-value-type", "value type 13");

    start(0, 2);
    str("test.x");
    u32(T_ARR);
    mark();
    u32(0xffffffffu);
    u64(1);
    u32(0);
    emit("array-elem-type-unknown.gguf", "bad-value-type", "array of value type 2^32-1");

    start(0, 2);
    str("test.s");
    u32(T_STR);
    mark();
    u64(1000);
    raw("abc", 3);
    emit("string-length-eof.gguf", "bad-string-length", "string length 1000 past the end");

    start(0, 2);
    str("test.s");
    u32(T_STR);
    mark();
    u64(UINT64_MAX);
    raw("abc", 3);
    emit("string-length-huge.gguf", "bad-string-length", "string length 2^64-1");

    start(0, 2);
    str("test.arr");
    u32(T_ARR);
    u32(T_STR);
    u64(3);
    str("one");
    str("two");
    mark();
    u64(40);
    raw("three", 5);
    emit("string-in-array-eof.gguf", "bad-string-length",
         "the third string of an array runs past the end");

    start(0, 2);
    str("test.arr");
    u32(T_ARR);
    u32(T_U8);
    mark();
    u64(1ull << 40);
    zeros(8);
    emit("array-length-cap.gguf", "bad-array-length", "2^40 elements");

    start(0, 2);
    str("test.arr");
    u32(T_ARR);
    u32(T_U32);
    mark();
    u64(1000);
    zeros(10);
    emit("array-length-eof.gguf", "bad-array-length", "1000 u32 in 10 bytes");

    start(0, 2);
    str("test.arr");
    u32(T_ARR);
    u32(T_U64);
    mark();
    u64(1ull << 29);
    zeros(16);
    emit("array-length-u64-eof.gguf", "bad-array-length", "2^29 u64 (4 GiB) in 16 bytes");

    start(0, 2);
    str("test.arr");
    u32(T_ARR);
    u32(T_ARR);
    mark();
    u64(1ull << 28);
    zeros(24);
    emit("array-of-arrays-eof.gguf", "bad-array-length", "2^28 nested arrays in 24 bytes");

    /* Nine levels of arrays: the ninth level is one too many. */
    start(0, 2);
    str("test.deep");
    u32(T_ARR);
    for (int level = 1; level <= 9; level++) {
        if (level == 8)
            mark(); /* the 8th array's element type says "array" */
        u32(level < 9 ? T_ARR : T_U8);
        u64(1);
    }
    u8(1);
    emit("array-too-deep.gguf", "array-too-deep", "arrays nested 9 deep");

    start(0, 2);
    str("test.bool");
    u32(T_BOOL);
    mark();
    u8(2);
    emit("bad-bool.gguf", "bad-bool", "a bool of 2");

    start(0, 2);
    str("test.bools");
    u32(T_ARR);
    u32(T_BOOL);
    u64(4);
    u8(1);
    u8(0);
    mark();
    u8(0xff);
    u8(1);
    emit("bad-bool-array.gguf", "bad-bool", "a bool array element of 255");

    start(0, 2);
    str("general.alignment");
    mark();
    u32(T_U64);
    u64(32);
    emit("alignment-u64.gguf", "bad-alignment-type", "general.alignment as u64");

    start(0, 2);
    str("general.alignment");
    mark();
    u32(T_STR);
    str("32");
    emit("alignment-string.gguf", "bad-alignment-type", "general.alignment as a string");

    start(0, 2);
    str("general.alignment");
    u32(T_U32);
    mark();
    u32(0);
    emit("alignment-zero.gguf", "bad-alignment", "general.alignment 0");

    start(0, 2);
    str("general.alignment");
    u32(T_U32);
    mark();
    u32(48);
    emit("alignment-48.gguf", "bad-alignment", "general.alignment 48, not a power of two");
}

static void tensor_cases(void) {
    int64_t ne8[1] = {8}, ne2x4[2] = {4, 2};

    start(1, 1);
    str("blk.0.attn_q.weight");
    u32(2);
    mark();
    u64(4);
    u32(7); /* half of the second dimension */
    emit("truncated-tensor-info.gguf", "truncated", "ends inside the dimensions");

    start(1, 1);
    ti("t.weight", 1, ne8, G_F32, 0, M_NONE);
    b.n -= 3; /* the offset cut short */
    b.mark = b.n - 5;
    emit("truncated-tensor-offset.gguf", "truncated", "ends inside the tensor offset");

    start(1, 1);
    ti("", 1, ne8, G_F32, 0, M_NAME);
    pad(32);
    zeros(32);
    emit("tensor-name-empty.gguf", "empty-tensor-name", "a tensor named ''");

    char name64[65];
    memset(name64, 'x', 64);
    name64[64] = 0;
    start(1, 1);
    ti(name64, 1, ne8, G_F32, 0, M_NAME);
    pad(32);
    zeros(32);
    emit("tensor-name-64.gguf", "tensor-name-too-long", "a 64-byte tensor name");

    start(1, 1);
    mark();
    u64(1ull << 63);
    raw("t", 1);
    zeros(40);
    emit("tensor-name-huge.gguf", "tensor-name-too-long", "tensor name length 2^63");

    start(2, 1);
    ti("t.weight", 1, ne8, G_F32, 0, M_NONE);
    ti("t.weight", 1, ne8, G_F32, 32, M_NAME);
    pad(32);
    zeros(64);
    emit("tensor-name-duplicate.gguf", "duplicate-tensor-name", "two tensors t.weight");

    start(1, 1);
    ti("t.weight", 0, ne8, G_F32, 0, M_NDIMS);
    pad(32);
    emit("n-dims-0.gguf", "bad-n-dims", "n_dims 0");

    int64_t ne5[5] = {8, 1, 1, 1, 1};
    start(1, 1);
    ti("t.weight", 5, ne5, G_F32, 0, M_NDIMS);
    pad(32);
    zeros(32);
    emit("n-dims-5.gguf", "bad-n-dims", "n_dims 5");

    int64_t neneg[2] = {8, -1};
    start(1, 1);
    ti("t.weight", 2, neneg, G_F32, 0, M_DIM1);
    pad(32);
    zeros(32);
    emit("dim-negative.gguf", "negative-dimension", "ne[1] = -1");

    int64_t neov[2] = {1ll << 32, 1ll << 32};
    start(1, 1);
    ti("t.weight", 2, neov, G_F32, 0, M_DIM1);
    pad(32);
    emit("dim-overflow.gguf", "dimension-overflow", "2^32 x 2^32 elements");

    /* The product overflows at ne[1]; a later 0 must not excuse it. */
    int64_t neov0[3] = {1ll << 40, 1ll << 30, 0};
    start(1, 1);
    ti("t.weight", 3, neov0, G_F32, 0, M_DIM1);
    pad(32);
    emit("dim-overflow-then-zero.gguf", "dimension-overflow", "2^40 x 2^30 x 0");

    start(1, 1);
    ti("t.weight", 1, ne8, 43, 0, M_TYPE);
    pad(32);
    zeros(32);
    emit("ggml-type-43.gguf", "unknown-ggml-type", "ggml type 43");

    start(1, 1);
    ti("t.weight", 1, ne8, 0xffffffffu, 0, M_TYPE);
    pad(32);
    zeros(32);
    emit("ggml-type-huge.gguf", "unknown-ggml-type", "ggml type 2^32-1");

    int64_t ne32[1] = {32};
    start(1, 1);
    ti("t.weight", 1, ne32, G_Q4_2, 0, M_TYPE);
    pad(32);
    zeros(32);
    emit("ggml-type-q4_2.gguf", "removed-ggml-type", "Q4_2 (id 4), removed");

    start(1, 1);
    ti("t.weight", 1, ne32, G_Q4_0_4_4, 0, M_TYPE);
    pad(32);
    zeros(32);
    emit("ggml-type-q4_0_4_4.gguf", "removed-ggml-type", "Q4_0_4_4 (id 31), removed");

    int64_t ne48[2] = {48, 2};
    start(1, 1);
    ti("t.weight", 2, ne48, G_Q8_0, 0, M_DIM0);
    pad(32);
    zeros(128);
    emit("partial-block-q8_0.gguf", "partial-block", "Q8_0 row of 48");

    int64_t ne128[1] = {128};
    start(1, 1);
    ti("t.weight", 1, ne128, G_Q4_K, 0, M_DIM0);
    pad(32);
    zeros(96);
    emit("partial-block-q4_k.gguf", "partial-block", "Q4_K row of 128 (block 256)");

    int64_t nebig[1] = {1ll << 62};
    start(1, 1);
    ti("t.weight", 1, nebig, G_F32, 0, M_TYPE);
    pad(32);
    emit("size-overflow-f32.gguf", "size-overflow", "2^62 F32 = 2^64 bytes");

    int64_t nek[1] = {INT64_MAX & ~(int64_t)255};
    start(1, 1);
    ti("t.weight", 1, nek, G_Q8_K, 0, M_TYPE);
    pad(32);
    emit("size-overflow-q8_k.gguf", "size-overflow", "2^55-1 Q8_K blocks of 292 bytes");

    start(1, 1);
    ti("t.weight", 1, ne8, G_F32, 16, M_OFFSET);
    pad(32);
    zeros(64);
    emit("misaligned-tensor.gguf", "misaligned-tensor", "offset 16 with alignment 32");

    reset();
    hdr(3, 2, 1);
    kv_u32("general.alignment", 64);
    ti("a.weight", 1, ne8, G_F32, 0, M_NONE);
    ti("b.weight", 1, ne8, G_F32, 32, M_OFFSET);
    pad(64);
    zeros(128);
    emit("misaligned-tensor-align64.gguf", "misaligned-tensor",
         "offset 32 with alignment 64 (the llama-quantize bug)");

    start(1, 1);
    ti("t.weight", 2, ne2x4, G_F32, 0, M_OFFSET);
    pad(32);
    zeros(16); /* 32 bytes needed */
    emit("tensor-past-eof.gguf", "tensor-past-eof", "32 bytes of data, 16 in the file");

    start(1, 1);
    ti("t.weight", 1, ne8, G_F32, UINT64_MAX - 31, M_OFFSET);
    pad(32);
    zeros(32);
    emit("tensor-offset-huge.gguf", "tensor-past-eof", "offset 2^64-32: the end overflows");

    start(1, 1);
    ti("t.weight", 1, ne8, G_F32, 0, M_OFFSET);
    emit("tensor-no-data-section.gguf", "tensor-past-eof",
         "a tensor but the file ends after the infos");

    start(2, 1);
    ti("a.weight", 1, ne8, G_F32, 0, M_NONE);
    ti("b.weight", 1, ne8, G_F32, 0, M_OFFSET);
    pad(32);
    zeros(64);
    emit("overlap-same-offset.gguf", "overlapping-tensors", "two tensors at offset 0");

    int64_t ne32f[1] = {32};
    start(3, 1);
    ti("big.weight", 1, ne32f, G_F32, 0, M_NONE); /* [0, 128) */
    ti("c.weight", 1, ne8, G_F32, 160, M_NONE);
    ti("inner.weight", 1, ne8, G_F32, 64, M_OFFSET); /* [64, 96) inside big */
    pad(32);
    zeros(192);
    emit("overlap-contained.gguf", "overlapping-tensors", "a tensor inside another");
}

int main(int argc, char **argv) {
    outdir = argc > 1 ? argv[1] : "tests/bad";
    char path[4096];
    snprintf(path, sizeof path, "%s/MANIFEST", outdir);
    manifest = fopen(path, "w");
    if (!manifest) {
        fprintf(stderr, "make_bad_gguf: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(manifest,
            "# Broken GGUF files, written by tools/make_bad_gguf.c (do not edit).\n"
            "# file  expected-status  byte-offset-the-message-names  what is wrong\n");
    header_cases();
    kv_cases();
    tensor_cases();
    if (fclose(manifest) != 0) {
        fprintf(stderr, "make_bad_gguf: %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("make_bad_gguf: %d files in %s\n", nfiles, outdir);
    return 0;
}
