/* test_pool.c - the thread pool (prims/pool.c): the splitting rule covers
 * every index once on any thread count, every worker runs its share, a task
 * started from inside a task runs inline, more chunks than threads each run
 * once on no more workers than asked, and the pool restarts after a
 * shutdown. */
#include <string.h>

#include "prims/pool.h"
#include "tests/c/check.h"

static int pool_hits[64];
static void pool_count(void *ctx, int ith, int nth) {
    (void)ctx;
    __atomic_add_fetch(&pool_hits[ith], nth, __ATOMIC_RELAXED);
}
static void pool_reenter(void *ctx, int ith, int nth) {
    (void)nth;
    if (ith == 0)
        rl_pool_run(3, pool_count, ctx); /* must not deadlock: runs inline */
}

static void test_pool(void) {
    for (size_t n = 0; n < 200; n++) {
        for (int nth = 1; nth <= 9; nth++) {
            for (size_t mult = 1; mult <= 4; mult += 3) {
                size_t covered = 0, prev = 0;
                for (int i = 0; i < nth; i++) {
                    size_t a, b;
                    rl_pool_chunk(n, i, nth, mult, &a, &b);
                    CHECK_EACH(!(a > b || b > n || (a != prev && a < b) || (a % mult && a < n)),
                               "rl_pool_chunk(%zu, %d, %d, %zu): [%zu, %zu) after %zu", n, i,
                               nth, mult, a, b, prev);
                    if (a < b)
                        prev = b;
                    covered += b - a;
                }
                CHECK_EACH(covered == n, "rl_pool_chunk(%zu, *, %d, %zu): chunks cover %zu", n,
                           nth, mult, covered);
            }
        }
    }
    memset(pool_hits, 0, sizeof pool_hits);
    for (int rep = 0; rep < 200; rep++)
        rl_pool_run(1 + rep % 6, pool_count, NULL);
    int want[64] = {0};
    for (int rep = 0; rep < 200; rep++)
        for (int i = 0; i < 1 + rep % 6; i++)
            want[i] += 1 + rep % 6;
    for (int i = 0; i < 64; i++)
        CHECK_EACH(pool_hits[i] == want[i], "thread %d: %d hits, want %d", i, pool_hits[i],
                   want[i]);
    memset(pool_hits, 0, sizeof pool_hits);
    rl_pool_run(2, pool_reenter, NULL);
    CHECK(pool_hits[0] == 3 && pool_hits[1] == 3 && pool_hits[2] == 3);
    rl_pool_shutdown();
    CHECK(rl_pool_workers() == 0);
    memset(pool_hits, 0, sizeof pool_hits);
    rl_pool_run(4, pool_count, NULL);
    CHECK(pool_hits[3] == 4 && rl_pool_workers() == 3);
}

static void test_split(void) {
    rl_pool_shutdown();
    memset(pool_hits, 0, sizeof pool_hits);
    int want[64] = {0};
    for (int rep = 0; rep < 300; rep++) {
        int chunks = 1 + rep % 40, threads = 1 + rep % 3;
        rl_pool_run_split(chunks, threads, pool_count, NULL);
        if (threads == 1 || chunks == 1)
            want[0] += 1; /* one chunk of one */
        else
            for (int i = 0; i < chunks; i++)
                want[i] += chunks;
    }
    for (int i = 0; i < 64; i++)
        CHECK_EACH(pool_hits[i] == want[i], "thread %d: %d hits, want %d", i, pool_hits[i],
                   want[i]);
    CHECK_MSG(rl_pool_workers() <= 2, "split: %d workers for at most 3 threads",
              rl_pool_workers());
    CHECK(rl_pool_split_chunks(1, 100) == 1 && rl_pool_split_chunks(2, 100) == 8);
    CHECK(rl_pool_split_chunks(2, 5) == 5 && rl_pool_split_chunks(4, 0) == 1);
}

int main(void) {
    CHECK_CASE(test_pool());
    CHECK_CASE(test_split());
    rl_pool_shutdown();
    return check_report("pool");
}
