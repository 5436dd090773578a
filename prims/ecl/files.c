/* files.c - the ECL glue for files the Lisp side reads and writes itself
 * (JSON configurations, tokenizers, safetensors, benchmark reports): the
 * same safe opening and atomic writer as the C readers and the GGUF writer
 * (gguf/fileio.c), and the process-level exits the command line needs
 * (a closed output pipe, a fatal error in any thread), and the encoding
 * of standard output and error output.
 *
 * Paths arrive as UTF-8 octet vectors (RONTOLISP::%UTF8-OCTETS), so a path
 * taken from the command line reaches open(2) as the bytes it was given. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/fileio.h"
#include "gguf/gguf.h"
#include "prims/ecl/glue.h"
#include "prims/sha256.h"
#include "prims/utf8.h"

/* A path from octets into BUF; NULL (and MSG set) when it cannot be one. */
static const char *rl_path(const char *fn, cl_object octets, char *buf, size_t bufsz, char *msg,
                           size_t msgsz) {
    cl_index n = 0;
    const uint8_t *p = rl_octets(fn, 1, octets, &n);
    if (n == 0 || n >= bufsz || memchr(p, 0, n)) {
        snprintf(msg, msgsz, "expected a path of 1 to %zu bytes without NUL", bufsz - 1);
        return NULL;
    }
    memcpy(buf, p, n);
    buf[n] = 0;
    return buf;
}

#define RL_FN_WRITE "%WRITE-FILE-ATOMICALLY"
#define RL_FN_READ "%READ-FILE-OCTETS"

/* (%write-file-atomically path-octets chunks) -> T, or NIL and a message.
 * CHUNKS is a list of octet vectors written in order to a temporary file
 * renamed over PATH (gguf/fileio.h says what is refused).  Everything is
 * checked before the first byte is written. */
static cl_object rl_prim_write_file_atomically(cl_object path, cl_object chunks) {
    const cl_env_ptr env = ecl_process_env();
    char pbuf[4096], msg[RL_GGUF_MSG_SIZE];
    rl_gguf_atomic a;
    cl_object l;
    cl_index n0 = 0;
    rl_octets(RL_FN_WRITE, 1, path, &n0);
    for (l = chunks; l != ECL_NIL; l = ECL_CONS_CDR(l)) {
        if (!ECL_CONSP(l))
            rl_type_error(RL_FN_WRITE, 2, chunks, RL_T_LIST);
        rl_octets(RL_FN_WRITE, 2, ECL_CONS_CAR(l), &n0);
    }
    if (!rl_path(RL_FN_WRITE, path, pbuf, sizeof pbuf, msg, sizeof msg))
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    if (rl_gguf_atomic_begin(&a, pbuf, msg, sizeof msg) != 0)
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    /* No Lisp error can happen from here to the commit: A is released. */
    for (l = chunks; l != ECL_NIL; l = ECL_CONS_CDR(l)) {
        cl_index n = 0;
        const uint8_t *p = rl_octets(RL_FN_WRITE, 2, ECL_CONS_CAR(l), &n);
        if (rl_gguf_atomic_write(&a, p, n) != 0)
            break;
    }
    if (rl_gguf_atomic_commit(&a, msg, sizeof msg) != 0)
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    ecl_return1(env, ECL_T);
}

/* ECL_UNWIND_PROTECT's own frame variable draws this warning; nothing of
 * ours lives across its setjmp. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wclobbered"
/* (%read-file-octets path-octets what) -> the file's bytes as an octet
 * vector, or NIL and a message.  WHAT (a string) names the kind of file
 * expected, for the message.  A FIFO, device or directory is refused
 * without blocking. */
static cl_object rl_prim_read_file_octets(cl_object path, cl_object what) {
    const cl_env_ptr env = ecl_process_env();
    char pbuf[4096], wbuf[128], msg[RL_GGUF_MSG_SIZE];
    uint8_t *data = NULL;
    uint64_t n = 0;
    cl_object out;
    cl_index n0 = 0;
    rl_octets(RL_FN_READ, 1, path, &n0);
    if (!ECL_STRINGP(what) || !ecl_fits_in_base_string(what))
        rl_type_error(RL_FN_READ, 2, what, RL_T_STRING);
    what = si_coerce_to_base_string(what);
    snprintf(wbuf, sizeof wbuf, "%.*s", (int)ecl_length(what), (const char *)what->base_string.self);
    if (!rl_path(RL_FN_READ, path, pbuf, sizeof pbuf, msg, sizeof msg))
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    if (rl_gguf_read_file(pbuf, wbuf, &data, &n, msg, sizeof msg) != 0)
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    if (n >= (uint64_t)ECL_ARRAY_DIMENSION_LIMIT) {
        free(data);
        snprintf(msg, sizeof msg, "%llu bytes: expected a file Lisp can hold",
                 (unsigned long long)n);
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    }
    /* Allocating may signal: copy, free, then hand over. */
    {
        uint8_t *copy = data;
        data = NULL;
        out = ECL_NIL;
        ECL_UNWIND_PROTECT_BEGIN(env) {
            out = ecl_alloc_simple_vector((cl_index)n, ecl_aet_b8);
            memcpy(out->vector.self.b8, copy, (size_t)n);
        } ECL_UNWIND_PROTECT_EXIT {
            free(copy);
        } ECL_UNWIND_PROTECT_END;
    }
    ecl_return1(env, out);
}
#pragma GCC diagnostic pop

/* The paths of the list L of octet vectors (argument POS of FN), malloc'd
 * and NULL-terminated, their count in *N; NULL and MSG set when one cannot
 * be a path.  Signals (before allocating) when L is not such a list. */
static char **rl_path_list(const char *fn, int pos, cl_object l, size_t *n, char *msg,
                           size_t msgsz) {
    size_t k = 0;
    char **out;
    cl_object x;
    for (x = l; x != ECL_NIL; x = ECL_CONS_CDR(x), k++) {
        cl_index len = 0;
        if (!ECL_CONSP(x))
            rl_type_error(fn, pos, l, RL_T_LIST);
        rl_octets(fn, pos, ECL_CONS_CAR(x), &len);
    }
    out = calloc(k + 1, sizeof *out);
    if (!out) {
        snprintf(msg, msgsz, "out of memory");
        return NULL;
    }
    k = 0;
    for (x = l; x != ECL_NIL; x = ECL_CONS_CDR(x), k++) {
        char buf[4096];
        if (!rl_path(fn, ECL_CONS_CAR(x), buf, sizeof buf, msg, msgsz) || !(out[k] = strdup(buf))) {
            if (out[k] == NULL && !msg[0])
                snprintf(msg, msgsz, "out of memory");
            for (size_t j = 0; j < k; j++)
                free(out[j]);
            free(out);
            return NULL;
        }
    }
    *n = k;
    return out;
}

static void rl_path_list_free(char **l) {
    for (char **p = l; p && *p; p++)
        free(*p);
    free(l);
}

/* OP (rl_gguf_set_begin or rl_gguf_set_commit) on the list of path octet
 * vectors PATHS, Lisp interrupts held off meanwhile when HOLD: T, or NIL
 * and OP's message. */
static cl_object rl_set_step(const char *fn, cl_object paths, int hold,
                             int (*op)(const char *const *, size_t, char *, size_t)) {
    const cl_env_ptr env = ecl_process_env();
    char msg[RL_GGUF_MSG_SIZE] = "";
    size_t n = 0;
    int e;
    char **l = rl_path_list(fn, 1, paths, &n, msg, sizeof msg);
    if (!l)
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    if (hold)
        ecl_disable_interrupts_env(env);
    e = op((const char *const *)l, n, msg, sizeof msg);
    if (hold)
        ecl_enable_interrupts_env(env);
    rl_path_list_free(l);
    if (e)
        ecl_return2(env, ECL_NIL, rl_string_from_utf8(msg, strlen(msg)));
    ecl_return1(env, ECL_T);
}

/* (%set-begin temps) -> T, or NIL and a message: TEMPS (path octet
 * vectors) are the temporary files of a set about to be written (see
 * rl_gguf_set_begin). */
static cl_object rl_prim_set_begin(cl_object temps) {
    return rl_set_step("%SET-BEGIN", temps, 0, rl_gguf_set_begin);
}

/* (%set-commit targets) -> T, or NIL and a message: the set's temporary
 * files renamed over TARGETS, all or none (rl_gguf_set_commit), with Lisp
 * interrupts held off meanwhile. */
static cl_object rl_prim_set_commit(cl_object targets) {
    return rl_set_step("%SET-COMMIT", targets, 1, rl_gguf_set_commit);
}

/* (%resolve-target path-octets) -> the path (a string) with the symbolic
 * links of its last component followed, or NIL and a message. */
static cl_object rl_prim_resolve_target(cl_object path) {
    const cl_env_ptr env = ecl_process_env();
    char buf[4096], msg[256];
    rl_path_arg("%RESOLVE-TARGET", path, buf, sizeof buf);
    char *target = rl_gguf_resolve_target(buf);
    if (!target) {
        snprintf(msg, sizeof msg, "cannot follow the symbolic link: %s", strerror(errno));
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    }
    cl_object s = rl_string_from_utf8(target, strlen(target));
    free(target);
    ecl_return1(env, s);
}

/* (%set-end) removes what is left of the set's temporary files. */
static cl_object rl_prim_set_end(void) {
    rl_gguf_set_end();
    ecl_return1(ecl_process_env(), ECL_T);
}

/* The kind of file of the mode M, as %PATH-KIND and %DIRECTORY-ENTRIES
 * name it. */
static const char *rl_mode_kind(mode_t m) {
    return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "link"
        : S_ISFIFO(m) ? "fifo" : (S_ISCHR(m) || S_ISBLK(m)) ? "device"
        : S_ISSOCK(m) ? "socket" : "other";
}

/* (%path-kind path-octets) -> :file, :directory, :fifo, :device, :socket
 * or :other for what PATH names (symbolic links followed), NIL when
 * nothing (or a dangling link) is there. */
static cl_object rl_prim_path_kind(cl_object path) {
    char buf[4096];
    struct stat st;
    rl_path_arg("%PATH-KIND", path, buf, sizeof buf);
    if (stat(buf, &st) != 0)
        ecl_return1(ecl_process_env(), ECL_NIL);
    ecl_return1(ecl_process_env(), rl_keyword(rl_mode_kind(st.st_mode)));
}

typedef struct rl_dir_entry {
    char *name;
    const char *kind; /* rl_mode_kind's, NULL when it went meanwhile */
} rl_dir_entry;

static int rl_dir_entry_cmp(const void *a, const void *b) {
    return strcmp(((const rl_dir_entry *)a)->name, ((const rl_dir_entry *)b)->name);
}

static void rl_dir_entries_free(rl_dir_entry *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

/* The entries of the directory D but . and .. (malloc'd, *N of them, in
 * the byte order of their names), or NULL with errno set. */
static rl_dir_entry *rl_read_entries(DIR *d, size_t *n) {
    rl_dir_entry *v = NULL;
    size_t cap = 0;
    struct dirent *e;
    *n = 0;
    for (errno = 0; (e = readdir(d)) != NULL; errno = 0) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (*n == cap) {
            rl_dir_entry *w = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
            if (!w)
                break;
            v = w;
        }
        if (!(v[*n].name = strdup(e->d_name)))
            break;
        v[*n].kind = fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0
            ? rl_mode_kind(st.st_mode) : NULL;
        ++*n;
    }
    if (errno) {
        int saved = errno;
        rl_dir_entries_free(v, *n);
        errno = saved;
        return NULL;
    }
    if (*n)
        qsort(v, *n, sizeof *v, rl_dir_entry_cmp);
    return v ? v : malloc(1);
}

/* ECL_UNWIND_PROTECT's frame variable draws this warning (see above). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wclobbered"
/* (%directory-entries path-octets) -> a list of (name . kind), one per
 * entry of the directory PATH but . and .., in the byte order of their
 * names (a name as %UTF8-STRING decodes it); KIND is the entry's own, as
 * %PATH-KIND names kinds, with :link for a symbolic link (not followed),
 * NIL for an entry gone while listed.  Or NIL and a message when PATH
 * cannot be read as a directory. */
static cl_object rl_prim_directory_entries(cl_object path) {
    const cl_env_ptr env = ecl_process_env();
    char buf[4096], msg[256];
    rl_dir_entry *v;
    size_t n = 0;
    cl_object out = ECL_NIL;
    DIR *d;
    rl_path_arg("%DIRECTORY-ENTRIES", path, buf, sizeof buf);
    d = opendir(buf);
    v = d ? rl_read_entries(d, &n) : NULL;
    if (!v) {
        snprintf(msg, sizeof msg, "cannot read the directory: %s", strerror(errno));
        if (d)
            closedir(d);
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    }
    closedir(d);
    /* Allocating may signal: the entries are freed on the way out. */
    ECL_UNWIND_PROTECT_BEGIN(env) {
        for (size_t i = n; i-- > 0;)
            out = ecl_cons(ecl_cons(rl_string_from_utf8(v[i].name, strlen(v[i].name)),
                                    v[i].kind ? rl_keyword(v[i].kind) : ECL_NIL),
                           out);
    } ECL_UNWIND_PROTECT_EXIT {
        rl_dir_entries_free(v, n);
    } ECL_UNWIND_PROTECT_END;
    ecl_return1(env, out);
}
#pragma GCC diagnostic pop

/* (%temporary-begin path-octets) -> an entry (a fixnum), or NIL and a
 * message: PATH, a temporary file the caller is about to make and use,
 * entered in the table of files a signal removes (rl_gguf_temp_begin). */
static cl_object rl_prim_temporary_begin(cl_object path) {
    char buf[4096];
    int slot;
    rl_path_arg("%TEMPORARY-BEGIN", path, buf, sizeof buf);
    slot = rl_gguf_temp_begin(buf);
    if (slot < 0)
        ecl_return2(ecl_process_env(), ECL_NIL,
                    ecl_make_simple_base_string("too many files are being written at once", -1));
    ecl_return1(ecl_process_env(), ecl_make_fixnum(slot));
}

/* (%temporary-end entry) -> T: the file of ENTRY (of %TEMPORARY-BEGIN)
 * removed and its entry freed. */
static cl_object rl_prim_temporary_end(cl_object slot) {
    rl_gguf_temp_end((int)rl_arg_fixnum("%TEMPORARY-END", 1, slot, 0, 1 << 20));
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%open-input path-octets what streams) -> (values fd size): the regular
 * file PATH opened for reading (as the C readers open theirs; WHAT names
 * the kind expected), for a Lisp stream to read in blocks; or NIL and a
 * message.  With STREAMS true a FIFO or device is opened too (its size is
 * 0).  OPEN on the name would take "*" and "[" for wildcards. */
static cl_object rl_prim_open_input(cl_object path, cl_object what, cl_object streams) {
    char pbuf[4096], wbuf[128], msg[RL_GGUF_MSG_SIZE];
    struct stat st;
    int fd;
    rl_octets("%OPEN-INPUT", 1, path, &(cl_index){0});
    if (!ECL_STRINGP(what) || !ecl_fits_in_base_string(what))
        rl_type_error("%OPEN-INPUT", 2, what, RL_T_STRING);
    what = si_coerce_to_base_string(what);
    snprintf(wbuf, sizeof wbuf, "%.*s", (int)ecl_length(what), (const char *)what->base_string.self);
    if (!rl_path("%OPEN-INPUT", path, pbuf, sizeof pbuf, msg, sizeof msg))
        ecl_return2(ecl_process_env(), ECL_NIL, ecl_make_simple_base_string(msg, -1));
    fd = rl_gguf_open_input(pbuf, wbuf, !Null(streams), msg, sizeof msg);
    if (fd < 0)
        ecl_return2(ecl_process_env(), ECL_NIL, ecl_make_simple_base_string(msg, -1));
    if (fstat(fd, &st) != 0) {
        snprintf(msg, sizeof msg, "cannot stat: %s", strerror(errno));
        close(fd);
        ecl_return2(ecl_process_env(), ECL_NIL, ecl_make_simple_base_string(msg, -1));
    }
    ecl_return2(ecl_process_env(), ecl_make_fixnum(fd),
                ecl_make_uint64_t(S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0));
}

/* (%read-some fd buffer) -> the count of bytes read into BUFFER (an
 * (unsigned-byte 8) vector) by one read(2), 0 at the end of the input; or
 * NIL and a message.  Unlike READ-SEQUENCE it answers what a pipe holds
 * without waiting for the buffer to fill, so a line is answered as it
 * comes. */
static cl_object rl_prim_read_some(cl_object fd, cl_object buffer) {
    cl_index n;
    uint8_t *p = (uint8_t *)rl_octets("%READ-SOME", 2, buffer, &n);
    int f = (int)rl_arg_fixnum("%READ-SOME", 1, fd, 0, 1 << 20);
    ssize_t k;
    char msg[256];
    do {
        k = read(f, p, n);
    } while (k < 0 && errno == EINTR);
    if (k < 0) {
        snprintf(msg, sizeof msg, "cannot read: %s", strerror(errno));
        ecl_return2(ecl_process_env(), ECL_NIL, ecl_make_simple_base_string(msg, -1));
    }
    ecl_return1(ecl_process_env(), ecl_make_fixnum(k));
}

/* (%close-fd fd) -> T: the descriptor FD (of %OPEN-INPUT) closed. */
static cl_object rl_prim_close_fd(cl_object fd) {
    close((int)rl_arg_fixnum("%CLOSE-FD", 1, fd, 0, 1 << 20));
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%delete-path path-octets) -> T, or NIL and a message: the file (not a
 * directory) PATH removed. */
static cl_object rl_prim_delete_path(cl_object path) {
    char buf[4096], msg[256];
    rl_path_arg("%DELETE-PATH", path, buf, sizeof buf);
    if (unlink(buf) != 0) {
        snprintf(msg, sizeof msg, "cannot remove: %s", strerror(errno));
        ecl_return2(ecl_process_env(), ECL_NIL, ecl_make_simple_base_string(msg, -1));
    }
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%make-directories path-octets) -> T, or NIL and a message: every
 * directory of PATH up to its last slash made when missing (mkdir -p of
 * its directory part). */
static cl_object rl_prim_make_directories(cl_object path) {
    char buf[4096], msg[4400];
    rl_path_arg("%MAKE-DIRECTORIES", path, buf, sizeof buf);
    for (char *p = buf[0] ? buf + 1 : buf; (p = strchr(p, '/')) != NULL; p++) {
        struct stat st;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            snprintf(msg, sizeof msg, "cannot make the directory %s: %s", buf, strerror(errno));
            ecl_return2(ecl_process_env(), ECL_NIL, rl_string_from_utf8(msg, strlen(msg)));
        }
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(msg, sizeof msg, "%s is not a directory", buf);
            ecl_return2(ecl_process_env(), ECL_NIL, rl_string_from_utf8(msg, strlen(msg)));
        }
        *p = '/';
    }
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%output-closed-p fd) -> T when FD is a pipe or socket whose reader has
 * gone (writing would fail with EPIPE), else NIL. */
static cl_object rl_prim_output_closed_p(cl_object fd) {
    struct pollfd p;
    if (!ECL_FIXNUMP(fd) || ecl_fixnum(fd) < 0 || ecl_fixnum(fd) > 1 << 20)
        rl_type_error("%OUTPUT-CLOSED-P", 1, fd, RL_T_FIXNUM);
    p.fd = (int)ecl_fixnum(fd);
    p.events = POLLOUT;
    p.revents = 0;
    ecl_return1(ecl_process_env(),
                poll(&p, 1, 0) == 1 && (p.revents & POLLERR) ? ECL_T : ECL_NIL);
}

/* (%exit-process code) ends the process at once with CODE, from any thread,
 * after removing the temporary files of unfinished writes.  The caller
 * flushes what it wants flushed. */
static cl_object rl_prim_exit_process(cl_object code) {
    int c = (int)rl_arg_fixnum("%EXIT-PROCESS", 1, code, 0, 255);
    rl_gguf_atomic_remove_all();
    fflush(NULL);
    _exit(c);
}

/* The encoder of a UTF-8 output stream as prims/utf8.h encodes: the
 * characters U+DC80..U+DCFF, which stand for bytes that were not UTF-8 (a
 * path from the command line, a key of a GGUF file), come out as those
 * bytes.  ECL's own UTF-8 encoder would write each as three bytes that
 * name no file and mean nothing. */
static int rl_stream_utf8_encoder(cl_object stream, unsigned char *buf, ecl_character c) {
    (void)stream;
    return (int)rl_utf8_encode((uint32_t)c, buf);
}

/* Install rl_stream_utf8_encoder on the file stream S (following synonym
 * and two-way streams to their output) when it encodes UTF-8; answers 1
 * if it did. */
static int rl_keep_bytes_on(cl_object s) {
    s = rl_utf8_file_stream(s);
    if (Null(s))
        return 0;
    s->stream.encoder = rl_stream_utf8_encoder;
    return 1;
}

/* (%keep-escaped-bytes) makes standard output and error output write the
 * characters U+DC80..U+DCFF as the bytes 80..FF they stand for, so a path
 * or key that is not UTF-8 is printed as the bytes it is.  Answers how
 * many streams it changed. */
static cl_object rl_prim_keep_escaped_bytes(void) {
    int n = rl_keep_bytes_on(ecl_symbol_value(ecl_make_symbol("*STANDARD-OUTPUT*", "CL")));
    n += rl_keep_bytes_on(ecl_symbol_value(ecl_make_symbol("*ERROR-OUTPUT*", "CL")));
    ecl_return1(ecl_process_env(), ecl_make_fixnum(n));
}

/* (%sha256-blocks h octets end) -> h: the 64-byte blocks of the simple
 * (unsigned-byte 8) vector OCTETS below END (a multiple of 64) folded into
 * H, a simple (unsigned-byte 32) vector of 8 (prims/sha256.h). */
static cl_object rl_prim_sha256_blocks(cl_object h, cl_object octets, cl_object end) {
    cl_index nh = 0, n = 0;
    uint32_t *state = rl_simple_data(h, ecl_aet_b32, &nh);
    if (!state || nh != 8)
        rl_type_error("%SHA256-BLOCKS", 1, h, RL_T_VECTOR);
    const uint8_t *p = rl_octets("%SHA256-BLOCKS", 2, octets, &n);
    cl_fixnum e = rl_arg_fixnum("%SHA256-BLOCKS", 3, end, 0, (cl_fixnum)n);
    if (e % 64 != 0)
        rl_signal(RL_C_INDEX, "%%SHA256-BLOCKS: expected an end that is a multiple of 64, found %ld",
                  (long)e);
    rl_sha256_blocks(state, p, (size_t)e / 64);
    ecl_return1(ecl_process_env(), h);
}

/* What base/files.lisp builds on. */
static const rl_prim_def rl_defs[] = {
    RL_PRIM(RL_FN_WRITE, rl_prim_write_file_atomically, 2),
    RL_PRIM(RL_FN_READ, rl_prim_read_file_octets, 2),
    RL_PRIM("%PATH-KIND", rl_prim_path_kind, 1),
    RL_PRIM("%DIRECTORY-ENTRIES", rl_prim_directory_entries, 1),
    RL_PRIM("%TEMPORARY-BEGIN", rl_prim_temporary_begin, 1),
    RL_PRIM("%TEMPORARY-END", rl_prim_temporary_end, 1),
    RL_PRIM("%OPEN-INPUT", rl_prim_open_input, 3),
    RL_PRIM("%DELETE-PATH", rl_prim_delete_path, 1),
    RL_PRIM("%MAKE-DIRECTORIES", rl_prim_make_directories, 1),
};
RL_PRIM_TABLE(rl_file_prims, "RONTOLISP", rl_defs);

/* A shard set's all-or-nothing commit, which GGUF's WRITE-SHARDS runs. */
static const rl_prim_def rl_set_defs[] = {
    RL_PRIM("%SET-BEGIN", rl_prim_set_begin, 1),
    RL_PRIM("%SET-COMMIT", rl_prim_set_commit, 1),
    RL_PRIM("%SET-END", rl_prim_set_end, 0),
    RL_PRIM("%RESOLVE-TARGET", rl_prim_resolve_target, 1),
};
RL_PRIM_TABLE(rl_file_set_prims, "GGUF", rl_set_defs);

/* The command line's own: standard streams, reading and closing the
 * descriptors OPEN-INPUT-FD opens, exit, export's hash. */
static const rl_prim_def rl_command_defs[] = {
    RL_PRIM("%CLOSE-FD", rl_prim_close_fd, 1),
    RL_PRIM("%KEEP-ESCAPED-BYTES", rl_prim_keep_escaped_bytes, 0),
    RL_PRIM("%OUTPUT-CLOSED-P", rl_prim_output_closed_p, 1),
    RL_PRIM("%READ-SOME", rl_prim_read_some, 2),
    RL_PRIM("%EXIT-PROCESS", rl_prim_exit_process, 1),
    RL_PRIM("%SHA256-BLOCKS", rl_prim_sha256_blocks, 3),
};
RL_PRIM_TABLE(rl_file_command_prims, "COMMAND-LINE", rl_command_defs);
