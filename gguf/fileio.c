/* fileio.c - safe opening of input files and the one atomic writer (see
 * fileio.h for the guarantees).  Workload: a few files per run, from a
 * few bytes of JSON to gigabytes of tensors streamed through
 * rl_gguf_atomic_write.
 */
#define _GNU_SOURCE /* sync_file_range */
#include "gguf/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- input */

static const char *file_kind(mode_t m) {
    if (S_ISDIR(m)) return "is a directory";
    if (S_ISFIFO(m)) return "is a FIFO";
    if (S_ISCHR(m)) return "is a character device";
    if (S_ISBLK(m)) return "is a block device";
    if (S_ISSOCK(m)) return "is a socket";
    return "is not a regular file";
}

int rl_gguf_open_regular(const char *path, const char *what, char *msg, size_t msgsz) {
    return rl_gguf_open_input(path, what, 0, msg, msgsz);
}

int rl_gguf_open_input(const char *path, const char *what, int streams, char *msg, size_t msgsz) {
    struct stat st;
    /* O_NONBLOCK: opening a FIFO for reading blocks until a writer comes. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(msg, msgsz, "cannot open: %s (expected %s)", strerror(errno), what);
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        snprintf(msg, msgsz, "cannot stat: %s", strerror(e));
        return -1;
    }
    if (streams ? S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(msg, msgsz, "%s: expected %s", file_kind(st.st_mode), what);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int rl_gguf_read_file(const char *path, const char *what, uint8_t **out, uint64_t *len,
                      char *msg, size_t msgsz) {
    struct stat st;
    uint8_t *buf;
    uint64_t n = 0, cap;
    int fd = rl_gguf_open_regular(path, what, msg, msgsz);
    *out = NULL;
    *len = 0;
    if (fd < 0)
        return EINVAL;
    if (fstat(fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size >= SIZE_MAX) {
        close(fd);
        snprintf(msg, msgsz, "cannot size the file");
        return EFBIG;
    }
    /* The size is a hint: a file that grows while read is read to its end. */
    cap = (uint64_t)st.st_size + 1;
    buf = malloc((size_t)cap);
    for (;;) {
        ssize_t k;
        if (!buf) {
            close(fd);
            snprintf(msg, msgsz, "out of memory reading %" PRIu64 " bytes", cap);
            return ENOMEM;
        }
        if (n + 1 >= cap) {
            uint8_t *b = cap < SIZE_MAX / 2 ? realloc(buf, (size_t)(cap * 2)) : NULL;
            if (!b)
                free(buf);
            buf = b;
            cap *= 2;
            continue;
        }
        k = read(fd, buf + n, (size_t)(cap - 1 - n));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            close(fd);
            snprintf(msg, msgsz, "cannot read at byte %" PRIu64 ": %s", n, strerror(e));
            return e;
        }
        if (k == 0)
            break;
        n += (uint64_t)k;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

/* ---------------------------------------------------- the cleanup table */

/* Names of the temporary files being written, for the signal handler: a
 * slot is 0 free, 2 being filled, 1 in use (only then does the handler
 * read it). */
#define RL_ATOMIC_SLOTS 64
static char tmp_names[RL_ATOMIC_SLOTS][PATH_MAX];
static int tmp_used[RL_ATOMIC_SLOTS];

static int slot_take(const char *name) {
    if (strlen(name) >= PATH_MAX)
        return -1;
    for (int i = 0; i < RL_ATOMIC_SLOTS; i++) {
        int expect = 0;
        if (__atomic_compare_exchange_n(&tmp_used[i], &expect, 2, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            strcpy(tmp_names[i], name);
            __atomic_store_n(&tmp_used[i], 1, __ATOMIC_RELEASE);
            return i;
        }
    }
    return -1;
}

static void slot_free(int i) {
    if (i >= 0)
        __atomic_store_n(&tmp_used[i], 0, __ATOMIC_RELEASE);
}

/* The temporary files of the set being written (rl_gguf_set_begin), a
 * NULL-terminated array published whole, or NULL. */
static char **set_temps;
/* While a set's files are renamed into place a signal is only noted here
 * and acted on when the renames are done or undone. */
static volatile sig_atomic_t set_committing, set_pending_signal;

void rl_gguf_atomic_remove_all(void) {
    char **temps = __atomic_load_n(&set_temps, __ATOMIC_ACQUIRE);
    for (int i = 0; i < RL_ATOMIC_SLOTS; i++)
        if (__atomic_load_n(&tmp_used[i], __ATOMIC_ACQUIRE) == 1)
            unlink(tmp_names[i]);
    for (; temps && *temps; temps++)
        unlink(*temps);
}

static void on_signal(int sig) {
    if (set_committing) {
        set_pending_signal = sig;
        return;
    }
    rl_gguf_atomic_remove_all();
    _exit(128 + sig);
}

void rl_gguf_atomic_trap_signals(int with_sigint) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (with_sigint)
        sigaction(SIGINT, &sa, NULL);
}

int rl_gguf_temp_begin(const char *name) {
    return slot_take(name);
}

void rl_gguf_temp_end(int slot) {
    if (slot < 0 || slot >= RL_ATOMIC_SLOTS)
        return;
    unlink(tmp_names[slot]); /* a signal here unlinks it again: harmless */
    slot_free(slot);
}

/* ------------------------------------------------ stale temporary files */

/* The number of the decimal digits at *S (no leading zero, at most
 * INT_MAX), *S moved past them; 0 when there are none. */
static long take_pid(const char **s) {
    const char *p = *s;
    long pid = 0;
    if (*p < '1' || *p > '9')
        return 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((pid = pid * 10 + (*p - '0')) > INT_MAX)
            return 0;
    *s = p;
    return pid;
}

static int all_digits(const char *s) {
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The PID in NAME when NAME is a temporary name of the target whose last
 * component is the BASELEN bytes at BASE (one of the forms fileio.h
 * lists), else 0. */
static long temp_name_pid(const char *name, const char *base, size_t baselen) {
    static const char infix[] = RL_GGUF_TMP_INFIX;
    const size_t ilen = sizeof infix - 1;
    const char *p, *word;
    long pid;
    if (strncmp(name, base, baselen) != 0 || strncmp(name + baselen, infix, ilen) != 0)
        return 0;
    p = name + baselen + ilen;
    if (!(pid = take_pid(&p)) || *p++ != '.')
        return 0;
    if (all_digits(p))
        return pid;                               /* BASE.rontolisp-tmp.PID.N */
    word = p;
    if (*p < 'a' || *p > 'z')
        return 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))
        p++;
    if (p - word > 16)
        return 0;
    if (!*p)
        return pid;                               /* BASE.rontolisp-tmp.PID.WORD */
    if (strncmp(p, infix, ilen) != 0)
        return 0;
    p += ilen;
    if (take_pid(&p) != pid || *p++ != '.' || !all_digits(p))
        return 0;
    return pid;                                   /* ...WORD.rontolisp-tmp.PID.N */
}

int rl_gguf_remove_stale(const char *target, FILE *note) {
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    const char *cut = strstr(base, RL_GGUF_TMP_INFIX);
    size_t baselen = cut ? (size_t)(cut - base) : strlen(base);
    int dirlen = slash ? (int)(slash - target) : 0; /* the directory's name, no slash */
    char dir[PATH_MAX];
    long self = (long)getpid();
    struct dirent *e;
    DIR *d;
    int n = 0;
    if (baselen == 0 || (size_t)dirlen >= sizeof dir)
        return 0;
    snprintf(dir, sizeof dir, "%.*s", dirlen, target);
    d = opendir(!slash ? "." : dirlen == 0 ? "/" : dir);
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        long pid = temp_name_pid(e->d_name, base, baselen);
        if (pid == 0 || pid == self)
            continue;
        /* Alive (or another user's): it may be writing this very file. */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0)
            continue;
        n++;
        if (note)
            fprintf(note, "rontolisp: removed %.*s%s%s, a temporary file of process %ld, which "
                    "has ended\n", dirlen, target, slash ? "/" : "", e->d_name, pid);
    }
    closedir(d);
    return n;
}

/* --------------------------------------------------------------- output */

char *rl_gguf_resolve_target(const char *path) {
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        char link[PATH_MAX];
        ssize_t k;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        if (hops == 40) {
            free(cur);
            errno = ELOOP;
            return NULL;
        }
        k = readlink(cur, link, sizeof link - 1);
        if (k < 0) {
            free(cur);
            return NULL;
        }
        link[k] = 0;
        const char *slash = strrchr(cur, '/');
        size_t dirlen = (link[0] != '/' && slash) ? (size_t)(slash - cur) + 1 : 0;
        char *next = malloc(dirlen + (size_t)k + 1);
        if (next) {
            memcpy(next, cur, dirlen);
            memcpy(next + dirlen, link, (size_t)k + 1);
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

int rl_gguf_atomic_begin(rl_gguf_atomic *a, const char *path, char *msg, size_t msgsz) {
    static unsigned counter;
    struct stat st;
    int exists, e = 0;
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->slot = -1;
    if (!path || !*path || path[strlen(path) - 1] == '/') {
        snprintf(msg, msgsz, "is a directory: expected a file name to write");
        return EISDIR;
    }
    a->target = rl_gguf_resolve_target(path);
    if (!a->target) {
        e = errno;
        snprintf(msg, msgsz, "cannot follow the symbolic link: %s", strerror(e));
        return e;
    }
    exists = stat(a->target, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        snprintf(msg, msgsz, "%s: expected a regular file or a new name to write",
                 file_kind(st.st_mode));
        rl_gguf_atomic_abort(a);
        return S_ISDIR(st.st_mode) ? EISDIR : EEXIST;
    }
    rl_gguf_remove_stale(a->target, stderr);
    size_t tmpsz = strlen(a->target) + sizeof RL_GGUF_TMP_INFIX + 32;
    a->tmp = malloc(tmpsz);
    if (!a->tmp) {
        snprintf(msg, msgsz, "out of memory");
        rl_gguf_atomic_abort(a);
        return ENOMEM;
    }
    for (int tries = 0; tries < 100 && a->fd < 0; tries++) {
        unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        snprintf(a->tmp, tmpsz, "%s" RL_GGUF_TMP_INFIX "%ld.%u", a->target, (long)getpid(), n);
        /* Registered before it exists, so no signal can come between. */
        a->slot = slot_take(a->tmp);
        if (a->slot < 0) {
            snprintf(msg, msgsz, "too many files are being written at once");
            rl_gguf_atomic_abort(a);
            return EMFILE;
        }
        a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (a->fd < 0) {
            slot_free(a->slot);
            a->slot = -1;
            if (e != EEXIST)
                break;
        }
    }
    if (a->fd < 0) {
        snprintf(msg, msgsz, "cannot create the temporary file %s: %s", a->tmp, strerror(e));
        rl_gguf_atomic_abort(a);
        return e;
    }
    /* Replacing a file keeps its permissions. */
    if (exists)
        fchmod(a->fd, st.st_mode & 07777);
    return 0;
}

/* Bytes between two writeback requests. */
#define RL_GGUF_WRITEBACK_STEP (8u << 20)

int rl_gguf_atomic_write(rl_gguf_atomic *a, const void *data, uint64_t n) {
    const uint8_t *p = data;
    if (a->fd < 0 && !a->err)
        a->err = EBADF;
    while (n && !a->err) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t k = write(a->fd, p, chunk);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            a->err = k < 0 ? errno : EIO;
            break;
        }
        p += k;
        n -= (uint64_t)k;
        a->pos += (uint64_t)k;
    }
    if (!a->err && a->pos - a->queued >= RL_GGUF_WRITEBACK_STEP) {
        /* Advice only: a failure here shows again at the fsync of commit. */
        sync_file_range(a->fd, (off_t)a->queued, (off_t)(a->pos - a->queued),
                        SYNC_FILE_RANGE_WRITE);
        a->queued = a->pos;
    }
    return a->err;
}

int rl_gguf_atomic_commit(rl_gguf_atomic *a, char *msg, size_t msgsz) {
    const char *what = "cannot write";
    int e = a->err;
    if (a->fd < 0 && !e)
        e = EBADF;
    if (!e && fsync(a->fd) != 0) {
        e = errno;
        what = "cannot flush to disk";
    }
    if (a->fd >= 0 && close(a->fd) != 0 && !e) {
        e = errno;
        what = "cannot close";
    }
    a->fd = -1;
    if (!e && rename(a->tmp, a->target) != 0) {
        e = errno;
        what = "cannot rename the temporary file over the target";
    }
    if (e) {
        snprintf(msg, msgsz, "at byte %" PRIu64 ": %s: %s", a->pos, what, strerror(e));
        rl_gguf_atomic_abort(a);
        return e;
    }
    slot_free(a->slot);
    a->slot = -1;
    /* Best effort: make the rename itself durable. */
    char *slash = strrchr(a->target, '/');
    const char *dir = ".";
    if (slash == a->target)
        dir = "/";
    else if (slash) {
        *slash = 0;
        dir = a->target;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(a->target);
    free(a->tmp);
    a->target = a->tmp = NULL;
    return 0;
}

void rl_gguf_atomic_abort(rl_gguf_atomic *a) {
    if (a->fd >= 0)
        close(a->fd);
    if (a->slot >= 0 && a->tmp)
        unlink(a->tmp);
    slot_free(a->slot);
    free(a->target);
    free(a->tmp);
    a->fd = -1;
    a->slot = -1;
    a->target = a->tmp = NULL;
}

/* ------------------------------------------------------------ file sets */

static void set_free(char **names) {
    for (char **p = names; p && *p; p++)
        free(*p);
    free(names);
}

int rl_gguf_set_begin(const char *const *temps, size_t n, char *msg, size_t msgsz) {
    char **names = calloc(n + 1, sizeof *names);
    for (size_t i = 0; names && i < n; i++)
        if (!(names[i] = strdup(temps[i]))) {
            set_free(names);
            names = NULL;
        }
    if (!names) {
        snprintf(msg, msgsz, "out of memory");
        return ENOMEM;
    }
    char **expect = NULL;
    if (!__atomic_compare_exchange_n(&set_temps, &expect, names, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        set_free(names);
        snprintf(msg, msgsz, "another set of files is being written");
        return EBUSY;
    }
    return 0;
}

/* TARGET's backup name while a set is committed, malloc'd. */
static char *set_backup_name(const char *target) {
    size_t sz = strlen(target) + sizeof RL_GGUF_TMP_INFIX + 32;
    char *b = malloc(sz);
    if (b)
        snprintf(b, sz, "%s" RL_GGUF_TMP_INFIX "%ld.old", target, (long)getpid());
    return b;
}

int rl_gguf_set_commit(const char *const *targets, size_t n, char *msg, size_t msgsz) {
    char **temps = __atomic_load_n(&set_temps, __ATOMIC_ACQUIRE);
    char **backups = calloc(n + 1, sizeof *backups);
    /* 0 no old file, 1 kept by a hard link, 2 moved to its backup name */
    int *had = calloc(n + 1, sizeof *had);
    size_t renamed = 0;
    int e = 0, refused = 0;
    const char *what = NULL, *who = NULL;
    size_t count = 0;
    while (temps && temps[count])
        count++;
    if (!temps || count != n || !backups || !had) {
        free(backups);
        free(had);
        if (!temps || count != n)
            snprintf(msg, msgsz, "expected the %zu target%s of the set being written, found %zu",
                     count, count == 1 ? "" : "s", n);
        else
            snprintf(msg, msgsz, "out of memory");
        return temps && count == n ? ENOMEM : EINVAL;
    }
    set_committing = 1;
    /* Every old file is kept under a second name first, so that a failed
     * rename can give each target back the file it had. */
    for (size_t i = 0; i < n && !e; i++) {
        struct stat st;
        if (lstat(targets[i], &st) != 0)
            continue;
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            e = S_ISDIR(st.st_mode) ? EISDIR : EEXIST;
            what = file_kind(st.st_mode);
            who = targets[i];
            refused = 1;
            break;
        }
        backups[i] = set_backup_name(targets[i]);
        if (!backups[i]) {
            e = ENOMEM;
            what = "out of memory";
            break;
        }
        unlink(backups[i]);
        if (link(targets[i], backups[i]) == 0)
            had[i] = 1;
        else if (rename(targets[i], backups[i]) == 0)
            had[i] = 2;
        else {
            e = errno;
            what = "cannot keep the file it replaces";
            who = targets[i];
        }
    }
    for (; !e && renamed < n; renamed++)
        if (rename(temps[renamed], targets[renamed]) != 0) {
            e = errno;
            what = "cannot rename the temporary file over the target";
            who = targets[renamed];
            break;
        }
    for (size_t j = 0; j < n; j++) {
        if (e && j < renamed && !had[j])
            unlink(targets[j]);                  /* undone: it had no file */
        else if (e && (j < renamed || had[j] == 2))
            rename(backups[j], targets[j]);      /* undone: its old file back */
        if (backups[j]) {
            unlink(backups[j]);
            free(backups[j]);
        }
    }
    free(backups);
    free(had);
    set_committing = 0;
    if (set_pending_signal) {
        rl_gguf_atomic_remove_all();
        _exit(128 + set_pending_signal);
    }
    if (e) {
        if (refused)
            snprintf(msg, msgsz, "%s: %s: expected a regular file or a new name to write (no "
                     "file of the set was replaced)", who, what);
        else
            snprintf(msg, msgsz, "%s: %s: %s (no file of the set was replaced)", who ? who : "",
                     what, e == ENOMEM ? "out of memory" : strerror(e));
        return e;
    }
    return 0;
}

void rl_gguf_set_end(void) {
    char **temps = __atomic_exchange_n(&set_temps, NULL, __ATOMIC_ACQ_REL);
    for (char **p = temps; p && *p; p++)
        unlink(*p);
    set_free(temps);
}
