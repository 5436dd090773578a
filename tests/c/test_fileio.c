/* test_fileio.c - gguf/fileio.c: inputs that are not regular files are
 * refused without blocking; the atomic writer replaces only regular files,
 * writes through symbolic links, keeps the old file when a write fails,
 * and leaves no temporary file behind, not even when a signal ends the
 * process in the middle of a write; a set of files is replaced all or none;
 * a caller's own temporary file goes with a signal too; what an ended
 * process left is removed by the next write of its target, that only. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/fileio.h"
#include "tests/c/check.h"

static char dir[256];

static char *at(const char *name) {
    static char buf[4][4400]; /* dir and any name of the tests */
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* How many names in DIR hold the temporary infix. */
static int temporaries(void) {
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, RL_GGUF_TMP_INFIX) != NULL;
    if (d)
        closedir(d);
    return n;
}

static int file_is(const char *path, const char *text) {
    uint8_t *p;
    uint64_t n;
    char msg[256];
    if (rl_gguf_read_file(path, "a file", &p, &n, msg, sizeof msg) != 0)
        return 0;
    int same = n == strlen(text) && memcmp(p, text, n) == 0;
    free(p);
    return same;
}

static int write_text(const char *path, const char *text, char *msg, size_t msgsz) {
    rl_gguf_atomic a;
    int e = rl_gguf_atomic_begin(&a, path, msg, msgsz);
    if (e)
        return e;
    rl_gguf_atomic_write(&a, text, strlen(text));
    return rl_gguf_atomic_commit(&a, msg, msgsz);
}

static void test_inputs(void) {
    char msg[256];
    uint8_t *p;
    uint64_t n;
    /* A FIFO with no writer: a blocking open would hang here (the alarm
     * ends the test program instead). */
    mkfifo(at("fifo"), 0644);
    alarm(10);
    CHECK(rl_gguf_open_regular(at("fifo"), "a GGUF file", msg, sizeof msg) < 0);
    CHECK_MSG(strstr(msg, "is a FIFO: expected a GGUF file") != NULL, "%s", msg);
    CHECK(rl_gguf_read_file(at("fifo"), "a JSON file", &p, &n, msg, sizeof msg) != 0 && !p);
    alarm(0);
    mkdir(at("sub"), 0755);
    CHECK(rl_gguf_open_regular(at("sub"), "a JSON file", msg, sizeof msg) < 0);
    CHECK_MSG(!strcmp(msg, "is a directory: expected a JSON file"), "%s", msg);
    CHECK(rl_gguf_open_regular(at("missing"), "a GGUF file", msg, sizeof msg) < 0);
    CHECK_MSG(strstr(msg, "No such file") != NULL, "%s", msg);
    CHECK(rl_gguf_open_regular("/dev/null", "a GGUF file", msg, sizeof msg) < 0);
    CHECK_MSG(strstr(msg, "character device") != NULL, "%s", msg);

    FILE *f = fopen(at("in.txt"), "wb");
    fputs("hello", f);
    fclose(f);
    CHECK(rl_gguf_read_file(at("in.txt"), "a file", &p, &n, msg, sizeof msg) == 0 && n == 5 &&
          !memcmp(p, "hello", 5) && p[5] == 0);
    free(p);
    int fd = rl_gguf_open_regular(at("in.txt"), "a file", msg, sizeof msg);
    CHECK(fd >= 0 && read(fd, msg, 5) == 5);
    close(fd);
    unlink(at("in.txt"));
}

static void test_targets(void) {
    char msg[512];
    struct stat st;
    /* New file, then a replacement that keeps the old file's mode. */
    CHECK(write_text(at("out.json"), "one", msg, sizeof msg) == 0 && file_is(at("out.json"), "one"));
    chmod(at("out.json"), 0600);
    CHECK(write_text(at("out.json"), "two", msg, sizeof msg) == 0 && file_is(at("out.json"), "two"));
    CHECK(stat(at("out.json"), &st) == 0 && (st.st_mode & 0777) == 0600);

    /* Not regular: refused before anything is created, nothing replaced. */
    CHECK(write_text(at("fifo"), "x", msg, sizeof msg) != 0);
    CHECK_MSG(strstr(msg, "is a FIFO") != NULL, "%s", msg);
    CHECK(lstat(at("fifo"), &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(write_text(at("sub"), "x", msg, sizeof msg) == EISDIR);
    CHECK_MSG(strstr(msg, "is a directory") != NULL, "%s", msg);
    CHECK(write_text(at("sub/"), "x", msg, sizeof msg) == EISDIR);
    /* A device (as root a fresh node: a broken writer must not be able to
     * replace the system's /dev/null, which only root could). */
    const char *dev = mknod(at("null"), S_IFCHR | 0666, makedev(1, 3)) == 0 ? at("null") : "/dev/null";
    CHECK(write_text(dev, "x", msg, sizeof msg) != 0);
    CHECK_MSG(strstr(msg, "is a character device") != NULL, "%s", msg);
    CHECK(stat(dev, &st) == 0 && S_ISCHR(st.st_mode));
    CHECK(temporaries() == 0);

    /* Symbolic links: written through (relative, chained, dangling). */
    CHECK(symlink("out.json", at("link1")) == 0 && symlink("link1", at("link2")) == 0);
    CHECK(write_text(at("link2"), "three", msg, sizeof msg) == 0);
    CHECK(lstat(at("link2"), &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(at("link1"), &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(file_is(at("out.json"), "three"));
    CHECK(symlink("new.json", at("dangling")) == 0);
    CHECK(write_text(at("dangling"), "four", msg, sizeof msg) == 0 && file_is(at("new.json"), "four"));
    CHECK(lstat(at("dangling"), &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(symlink("sub", at("dirlink")) == 0 && write_text(at("dirlink"), "x", msg, sizeof msg) == EISDIR);
    CHECK(symlink("loop", at("loop")) == 0 && write_text(at("loop"), "x", msg, sizeof msg) == ELOOP);
    CHECK(temporaries() == 0);

    /* abort removes the temporary file and leaves the target alone. */
    rl_gguf_atomic a;
    CHECK(rl_gguf_atomic_begin(&a, at("out.json"), msg, sizeof msg) == 0 && temporaries() == 1);
    CHECK(strstr(a.tmp, "/out.json" RL_GGUF_TMP_INFIX) != NULL);
    rl_gguf_atomic_write(&a, "partial", 7);
    rl_gguf_atomic_abort(&a);
    rl_gguf_atomic_abort(&a);
    CHECK(temporaries() == 0 && file_is(at("out.json"), "three"));

    /* A full disk (a file size limit) fails the write: the message names
     * the file and the byte, the old file stays, the temporary goes. */
    struct rlimit saved, lim;
    getrlimit(RLIMIT_FSIZE, &saved);
    lim = saved;
    lim.rlim_cur = 1000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    static char big[5000];
    memset(big, 'b', sizeof big - 1);
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        int e = write_text(at("out.json"), big, msg, sizeof msg);
        setrlimit(RLIMIT_FSIZE, &saved);
        CHECK(e == EFBIG);
        CHECK_MSG(strstr(msg, "at byte 1000: cannot write: File too large") != NULL, "%s", msg);
        CHECK(file_is(at("out.json"), "three") && temporaries() == 0);
    } else {
        CHECK_SKIP("cannot lower RLIMIT_FSIZE: %s", strerror(errno));
    }
    signal(SIGXFSZ, prev);
}

/* A child starts a write and is hit by SIG in the middle of it: it must
 * exit with 128 + SIG and leave neither the target nor a temporary. */
static void test_signal(int sig) {
    char msg[256];
    unlink(at("sig.gguf"));
    pid_t pid = check_fork();
    if (pid == 0) {
        rl_gguf_atomic a;
        rl_gguf_atomic_trap_signals(1);
        if (rl_gguf_atomic_begin(&a, at("sig.gguf"), msg, sizeof msg) != 0)
            _exit(99);
        rl_gguf_atomic_write(&a, "half a file", 11);
        raise(sig);
        _exit(98); /* not reached */
    }
    int status = check_wait(pid, "the child writing sig.gguf");
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig, "signal %d: status %#x", sig,
              status);
    CHECK(access(at("sig.gguf"), F_OK) != 0 && temporaries() == 0);
}

/* A temporary file of the caller's own (rl_gguf_temp_begin) goes with a
 * signal as the writer's do, and with rl_gguf_temp_end. */
static void test_own_temporary(void) {
    char msg[256];
    int slot = rl_gguf_temp_begin(at("own.f32"));
    CHECK(slot >= 0 && write_text(at("own.f32"), "x", msg, sizeof msg) == 0);
    rl_gguf_temp_end(slot);
    rl_gguf_temp_end(-1);
    CHECK(temporaries() == 0);
    pid_t pid = check_fork();
    if (pid == 0) {
        rl_gguf_atomic_trap_signals(1);
        if (rl_gguf_temp_begin(at("own.f32")) < 0 ||
            write_text(at("own.f32"), "a whole F32 file", msg, sizeof msg) != 0)
            _exit(99);
        raise(SIGINT);
        _exit(98); /* not reached */
    }
    int status = check_wait(pid, "the child holding own.f32");
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT, "status %#x", status);
    CHECK(access(at("own.f32"), F_OK) != 0);
}

/* The PID of a process that has ended and been reaped. */
static long dead_pid(void) {
    pid_t pid = check_fork();
    if (pid == 0)
        _exit(0);
    check_wait(pid, "a child that exits at once");
    return (long)pid;
}

static void make_file(const char *name) {
    FILE *f = fopen(at(name), "wb");
    if (f)
        fclose(f);
}

/* Temporary files of a process that has ended are removed by the next
 * write of their target, those of the exact forms only: not another
 * target's, not a living process's (PID 1's, ours), not a name that only
 * looks like one, not a directory or a symbolic link. */
static void test_stale(void) {
    char name[256], gone[16][256], kept[16][256];
    int ngone = 0, nkept = 0;
    long dead = dead_pid(), self = (long)getpid();
#define STALE(list, n, ...) snprintf(list[n++], sizeof list[0], __VA_ARGS__)
    STALE(gone, ngone, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.0", dead);
    STALE(gone, ngone, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.12", dead);
    STALE(gone, ngone, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.old", dead);
    STALE(gone, ngone, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.f32", dead);
    STALE(gone, ngone, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.f32" RL_GGUF_TMP_INFIX "%ld.3", dead,
          dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "1.0");
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.0", self);
    STALE(kept, nkept, "other.gguf" RL_GGUF_TMP_INFIX "%ld.0", dead);
    STALE(kept, nkept, "xstale.gguf" RL_GGUF_TMP_INFIX "%ld.0", dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "%ld", dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "0%ld.0", dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.0x", dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.F32", dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.abcdefghijklmnopq", dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.f32" RL_GGUF_TMP_INFIX "1.3", dead);
    STALE(kept, nkept, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.f32.tmp", dead);
    for (int i = 0; i < ngone; i++)
        make_file(gone[i]);
    for (int i = 0; i < nkept; i++)
        make_file(kept[i]);
    snprintf(name, sizeof name, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.set", dead);
    CHECK(mkdir(at(name), 0755) == 0);
    char link[256];
    snprintf(link, sizeof link, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.7", dead);
    CHECK(symlink("other.gguf", at(link)) == 0);

    /* A note per file removed, naming it and the process. */
    char notes[4096] = "";
    FILE *note = fmemopen(notes, sizeof notes - 1, "w");
    CHECK(rl_gguf_remove_stale(at("stale.gguf"), note) == ngone);
    fclose(note);
    for (int i = 0; i < ngone; i++) {
        char line[600];
        snprintf(line, sizeof line, "rontolisp: removed %s, a temporary file of process %ld, "
                 "which has ended\n", at(gone[i]), dead);
        CHECK_MSG(access(at(gone[i]), F_OK) != 0, "%s was kept", gone[i]);
        CHECK_MSG(strstr(notes, line) != NULL, "no note for %s in: %s", gone[i], notes);
    }
    for (int i = 0; i < nkept; i++)
        CHECK_MSG(access(at(kept[i]), F_OK) == 0, "%s was removed", kept[i]);
    struct stat st;
    CHECK(lstat(at(name), &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(lstat(at(link), &st) == 0 && S_ISLNK(st.st_mode));

    /* The writer does it before it writes the target, and a temporary
     * target (a set's file, export's F32 file) stands for its own target. */
    make_file(gone[0]);
    CHECK(write_text(at("stale.gguf"), "new", name, sizeof name) == 0);
    CHECK(access(at(gone[0]), F_OK) != 0 && file_is(at("stale.gguf"), "new"));
    make_file(gone[2]);
    char temp[256];
    snprintf(temp, sizeof temp, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.f32", self);
    CHECK(write_text(at(temp), "f32", name, sizeof name) == 0);
    CHECK(access(at(gone[2]), F_OK) != 0);
    CHECK(rl_gguf_remove_stale("stale.gguf", NULL) == 0); /* a relative name: ".", not ours */

    unlink(at(temp));
    unlink(at("stale.gguf"));
    unlink(at(link));
    snprintf(name, sizeof name, "stale.gguf" RL_GGUF_TMP_INFIX "%ld.set", dead);
    rmdir(at(name));
    for (int i = 0; i < nkept; i++)
        unlink(at(kept[i]));
#undef STALE
}

static const char *set_names[] = {"set1", "set2", "set3"};
static const char *set_temps[] = {"set1.t", "set2.t", "set3.t"};

static void set_paths(const char **targets, const char **temps) {
    static char buf[6][512];
    for (int i = 0; i < 3; i++) {
        snprintf(buf[i], sizeof buf[i], "%s", at(set_names[i]));
        snprintf(buf[3 + i], sizeof buf[3 + i], "%s", at(set_temps[i]));
        targets[i] = buf[i];
        temps[i] = buf[3 + i];
    }
}

/* A set of three files: a failed rename puts every old file back, a target
 * missing before is written with the others, and a signal while the set is
 * written leaves the old files and no temporary. */
static void test_set(void) {
    const char *targets[3], *temps[3];
    char msg[512];
    set_paths(targets, temps);
    for (int i = 0; i < 3; i++)
        CHECK(write_text(targets[i], "old", msg, sizeof msg) == 0);
    CHECK(rl_gguf_set_begin(temps, 3, msg, sizeof msg) == 0);
    CHECK(rl_gguf_set_begin(temps, 3, msg, sizeof msg) == EBUSY);
    CHECK(write_text(temps[0], "new", msg, sizeof msg) == 0);
    CHECK(write_text(temps[1], "new", msg, sizeof msg) == 0); /* the third is missing */
    CHECK(rl_gguf_set_commit(targets, 3, msg, sizeof msg) == ENOENT);
    CHECK_MSG(strstr(msg, "set3") && strstr(msg, "no file of the set was replaced"), "%s", msg);
    rl_gguf_set_end();
    for (int i = 0; i < 3; i++)
        CHECK_MSG(file_is(targets[i], "old"), "%s was replaced", targets[i]);
    CHECK(temporaries() == 0);
    unlink(targets[2]);
    CHECK(rl_gguf_set_begin(temps, 3, msg, sizeof msg) == 0);
    for (int i = 0; i < 3; i++)
        CHECK(write_text(temps[i], "new", msg, sizeof msg) == 0);
    CHECK(rl_gguf_set_commit(targets, 2, msg, sizeof msg) == EINVAL);
    CHECK(rl_gguf_set_commit(targets, 3, msg, sizeof msg) == 0);
    rl_gguf_set_end();
    for (int i = 0; i < 3; i++)
        CHECK(file_is(targets[i], "new"));
    CHECK(temporaries() == 0);
    pid_t pid = fork();
    if (pid == 0) {
        rl_gguf_atomic_trap_signals(1);
        if (rl_gguf_set_begin(temps, 3, msg, sizeof msg) != 0 ||
            write_text(temps[0], "newer", msg, sizeof msg) != 0)
            _exit(99);
        raise(SIGTERM);
        _exit(98); /* not reached */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM, "status %#x", status);
    for (int i = 0; i < 3; i++) {
        CHECK(file_is(targets[i], "new"));
        CHECK(access(temps[i], F_OK) != 0);
        unlink(targets[i]);
    }
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/rl-test-fileio.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK_CASE(test_inputs());
    CHECK_CASE(test_targets());
    CHECK_CASE(test_signal(SIGINT));
    CHECK_CASE(test_signal(SIGTERM));
    CHECK_CASE(test_signal(SIGHUP));
    CHECK_CASE(test_set());
    CHECK_CASE(test_own_temporary());
    CHECK_CASE(test_stale());
    const char *names[] = {"null", "fifo", "out.json", "new.json", "link1", "link2", "dangling",
                           "dirlink", "loop"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(at(names[i]));
    rmdir(at("sub"));
    rmdir(dir);
    return check_report("fileio");
}
