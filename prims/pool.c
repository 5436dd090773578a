/* pool.c - the persistent worker pool (see pool.h).
 *
 * Workload: matrix-vector products of tens of microseconds to tens of
 * milliseconds, called back to back by benchmarks and model code, on
 * machines where other processes may hold some of the cores.
 *
 * Chunks are claimed, not assigned: the job's chunks (fixed by
 * rl_pool_chunk, so results cannot depend on who runs them) are taken one
 * by one from an atomic counter by the caller and by every worker it woke.
 * A worker that is slow to wake (its core busy elsewhere) finds the chunks
 * gone and goes back to sleep, instead of holding the caller up.  A worker
 * that just ran a chunk spins briefly (RL_POOL_SPIN_NS) before it sleeps,
 * since waking a sleeping thread costs several microseconds, and the caller
 * spins briefly while the last claimed chunks finish.
 *
 * The counter packs (job id : 32 | chunks : 16 | next chunk : 16), so a
 * claim is one compare-and-swap that fails for a stale job.  The job fields
 * (fn, ctx) are written before the counter (release) and read only after a
 * successful claim (acquire); the caller rewrites them only after every
 * chunk is done, so a claimed job's fields are always the right ones.
 * Sleepers wait on condition variables under one mutex, and every wake-up
 * takes that mutex before signalling, so none is lost.
 */
#include "prims/pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "prims/cpu.h"

#define RL_POOL_SPIN_NS 200000 /* 0.2 ms */

static pthread_mutex_t rl_pool_run_lock_ = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t rl_pool_mu_ = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rl_pool_start_ = PTHREAD_COND_INITIALIZER;
static pthread_cond_t rl_pool_done_ = PTHREAD_COND_INITIALIZER;
static pthread_once_t rl_pool_once_ = PTHREAD_ONCE_INIT;

static pthread_t rl_pool_tid_[RL_MAX_THREADS];
static int rl_pool_n_;           /* workers alive */
/* Per worker: the id of the last job it was woken for (atomic), padded to
 * its own cache line. */
static struct {
    uint64_t job;
    char pad[56];
} rl_pool_slot_[RL_MAX_THREADS];
static uint64_t rl_pool_seen0_[RL_MAX_THREADS]; /* slot value at creation */
static uint64_t rl_pool_ctr_;    /* atomic: job id << 32 | chunks << 16 | next */
static uint32_t rl_pool_job_id_; /* last job posted (caller side, under the run lock) */
static int rl_pool_done_n_;      /* atomic: chunks finished in the current job */
static int rl_pool_stop_;        /* atomic: shutting down */
static rl_pool_fn rl_pool_fn_;
static void *rl_pool_ctx_;

static uint64_t rl_pool_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void rl_pool_pause(void) { __builtin_ia32_pause(); }

/* A forked child has no workers: forget them (their memory is copied, the
 * threads are not) and re-initialise the locks a worker may have held. */
static void rl_pool_atfork_child(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    rl_pool_run_lock_ = m;
    rl_pool_mu_ = m;
    rl_pool_start_ = c;
    rl_pool_done_ = c;
    rl_pool_n_ = 0;
}

static void rl_pool_init(void) { pthread_atfork(NULL, NULL, rl_pool_atfork_child); }

/* Claim and run chunks of job `job` until none is left; answers how many
 * this thread ran. */
static int rl_pool_claim(uint32_t job) {
    int ran = 0;
    uint64_t c = __atomic_load_n(&rl_pool_ctr_, __ATOMIC_ACQUIRE);
    for (;;) {
        int nth = (int)((c >> 16) & 0xffff), i = (int)(c & 0xffff);
        if ((uint32_t)(c >> 32) != job || i >= nth)
            return ran;
        if (!__atomic_compare_exchange_n(&rl_pool_ctr_, &c, c + 1, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue; /* c now holds the current value */
        rl_pool_fn_(rl_pool_ctx_, i, nth);
        ran++;
        if (__atomic_add_fetch(&rl_pool_done_n_, 1, __ATOMIC_ACQ_REL) == nth) {
            pthread_mutex_lock(&rl_pool_mu_);
            pthread_cond_broadcast(&rl_pool_done_);
            pthread_mutex_unlock(&rl_pool_mu_);
            return ran;
        }
        c = __atomic_load_n(&rl_pool_ctr_, __ATOMIC_ACQUIRE);
    }
}

static void *rl_pool_worker(void *arg) {
    const int k = (int)(intptr_t)arg;
    uint64_t seen = rl_pool_seen0_[k]; /* set before we were created */
    int spin = 0;
    for (;;) {
        uint64_t g = __atomic_load_n(&rl_pool_slot_[k].job, __ATOMIC_ACQUIRE);
        if (g == seen && spin) {
            uint64_t t0 = rl_pool_ns();
            for (unsigned i = 1; g == seen; i++) {
                rl_pool_pause();
                if (!(i & 255) && rl_pool_ns() - t0 > RL_POOL_SPIN_NS)
                    break;
                g = __atomic_load_n(&rl_pool_slot_[k].job, __ATOMIC_ACQUIRE);
            }
        }
        if (g == seen) {
            pthread_mutex_lock(&rl_pool_mu_);
            while ((g = __atomic_load_n(&rl_pool_slot_[k].job, __ATOMIC_ACQUIRE)) == seen &&
                   !__atomic_load_n(&rl_pool_stop_, __ATOMIC_ACQUIRE))
                pthread_cond_wait(&rl_pool_start_, &rl_pool_mu_);
            pthread_mutex_unlock(&rl_pool_mu_);
        }
        if (g == seen) /* woken with nothing to do: stopping */
            return NULL;
        seen = g;
        spin = rl_pool_claim((uint32_t)g) > 0;
    }
}

/* Grow the pool to want workers; answers how many there are (fewer if a
 * thread could not be created).  Workers start with every signal blocked so
 * that no process signal meant for the Lisp threads lands on them. */
static int rl_pool_grow(int want) {
    if (rl_pool_n_ >= want)
        return rl_pool_n_;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    while (rl_pool_n_ < want) {
        rl_pool_seen0_[rl_pool_n_] = __atomic_load_n(&rl_pool_slot_[rl_pool_n_].job, __ATOMIC_ACQUIRE);
        if (pthread_create(&rl_pool_tid_[rl_pool_n_], NULL, rl_pool_worker,
                           (void *)(intptr_t)rl_pool_n_) != 0)
            break;
        rl_pool_n_++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rl_pool_n_;
}

void rl_pool_run(int nth, rl_pool_fn fn, void *ctx) {
    if (nth > RL_MAX_THREADS)
        nth = RL_MAX_THREADS;
    rl_pool_run_split(nth, nth, fn, ctx);
}

int rl_pool_split_chunks(int nthreads, size_t units) {
    if (nthreads <= 1 || units <= 1)
        return 1;
    size_t c = (size_t)(nthreads > RL_MAX_THREADS ? RL_MAX_THREADS : nthreads) * 4;
    return (int)(c < units ? c : units);
}

void rl_pool_run_split(int nchunks, int nthreads, rl_pool_fn fn, void *ctx) {
    int nth = nchunks < 1 ? 1 : nchunks > RL_POOL_MAX_CHUNKS ? RL_POOL_MAX_CHUNKS : nchunks;
    if (nthreads > RL_MAX_THREADS)
        nthreads = RL_MAX_THREADS;
    if (nthreads <= 1 || nth <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    if (nthreads > nth)
        nthreads = nth;
    pthread_once(&rl_pool_once_, rl_pool_init);
    if (pthread_mutex_trylock(&rl_pool_run_lock_) != 0) {
        for (int i = 0; i < nth; i++) /* busy or re-entered: run it here */
            fn(ctx, i, nth);
        return;
    }
    int have = rl_pool_grow(nthreads - 1);
    int wake = have < nthreads - 1 ? have : nthreads - 1;

    uint32_t job = ++rl_pool_job_id_;
    rl_pool_fn_ = fn;
    rl_pool_ctx_ = ctx;
    __atomic_store_n(&rl_pool_done_n_, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&rl_pool_ctr_, (uint64_t)job << 32 | (uint64_t)nth << 16, __ATOMIC_RELEASE);
    if (wake > 0) {
        for (int k = 0; k < wake; k++)
            __atomic_store_n(&rl_pool_slot_[k].job, job, __ATOMIC_RELEASE);
        pthread_mutex_lock(&rl_pool_mu_);
        pthread_cond_broadcast(&rl_pool_start_);
        pthread_mutex_unlock(&rl_pool_mu_);
    }

    rl_pool_claim(job);

    if (__atomic_load_n(&rl_pool_done_n_, __ATOMIC_ACQUIRE) != nth) {
        uint64_t t0 = rl_pool_ns();
        for (unsigned i = 1; __atomic_load_n(&rl_pool_done_n_, __ATOMIC_ACQUIRE) != nth; i++) {
            rl_pool_pause();
            if (!(i & 255) && rl_pool_ns() - t0 > RL_POOL_SPIN_NS)
                break;
        }
        pthread_mutex_lock(&rl_pool_mu_);
        while (__atomic_load_n(&rl_pool_done_n_, __ATOMIC_ACQUIRE) != nth)
            pthread_cond_wait(&rl_pool_done_, &rl_pool_mu_);
        pthread_mutex_unlock(&rl_pool_mu_);
    }
    pthread_mutex_unlock(&rl_pool_run_lock_);
}

int rl_pool_workers(void) {
    pthread_mutex_lock(&rl_pool_run_lock_);
    int n = rl_pool_n_;
    pthread_mutex_unlock(&rl_pool_run_lock_);
    return n;
}

void rl_pool_shutdown(void) {
    pthread_mutex_lock(&rl_pool_run_lock_);
    pthread_mutex_lock(&rl_pool_mu_);
    __atomic_store_n(&rl_pool_stop_, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&rl_pool_start_);
    pthread_mutex_unlock(&rl_pool_mu_);
    for (int i = 0; i < rl_pool_n_; i++)
        pthread_join(rl_pool_tid_[i], NULL);
    rl_pool_n_ = 0;
    __atomic_store_n(&rl_pool_stop_, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rl_pool_run_lock_);
}
