/* fileio.h - opening input files safely and writing output files
 * atomically, for every file the project reads or writes (GGUF,
 * safetensors, JSON); plain C, no ECL.
 *
 * Reading: rl_gguf_open_regular opens without blocking (a FIFO would hang a
 * plain open) and refuses anything but a regular file; rl_gguf_open_input
 * can take a pipe or device too.
 *
 * Writing: the bytes go to a temporary file beside the target, named
 *     TARGET.rontolisp-tmp.PID.N
 * (visible, and never ending in the target's extension, so a leftover from
 * a SIGKILL is easy to find and never taken for output), which is flushed
 * to disk and renamed over the target only when complete.  The target must
 * not exist or be a regular file: a device, FIFO or directory is refused;
 * a symbolic link is followed and the file it names is replaced.  While a
 * temporary file exists its name is kept in a table that
 * rl_gguf_atomic_remove_all clears from a signal handler, so an interrupt
 * leaves nothing behind (rl_gguf_atomic_trap_signals installs one).  What
 * a SIGKILL or a crash leaves is removed by the next write of the same
 * target, once the process that made it has ended (rl_gguf_remove_stale).
 *
 * Messages leave out the path the caller gave (callers put it first, as
 * every reader's message does) and name any other file concerned (the
 * temporary file that could not be created).
 */
#ifndef RL_GGUF_FILEIO_H
#define RL_GGUF_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The infix of temporary file names (see above). */
#define RL_GGUF_TMP_INFIX ".rontolisp-tmp."

/* Opens PATH for reading; answers the descriptor (blocking mode, close on
 * exec) or -1 with MSG saying why ("is a directory: expected a GGUF
 * file").  WHAT names the kind of file expected. */
int rl_gguf_open_regular(const char *path, const char *what, char *msg, size_t msgsz);

/* As rl_gguf_open_regular; with STREAMS a FIFO, device or socket is taken
 * too (a file of lines read as they come: /dev/stdin, a named pipe), a
 * directory still refused. */
int rl_gguf_open_input(const char *path, const char *what, int streams, char *msg, size_t msgsz);

/* Reads the whole regular file PATH into a malloc'd buffer (*out, *len;
 * one spare NUL byte after the data).  Answers 0, or an errno with MSG set
 * (path first). */
int rl_gguf_read_file(const char *path, const char *what, uint8_t **out, uint64_t *len,
                      char *msg, size_t msgsz);

typedef struct rl_gguf_atomic {
    int fd;         /* the temporary file, -1 when none */
    int slot;       /* its entry in the cleanup table */
    char *target;   /* the file to replace (symbolic links resolved) */
    char *tmp;      /* the temporary file's name */
    uint64_t pos;   /* bytes written so far */
    uint64_t queued; /* bytes handed to the kernel's writeback so far */
    int err;        /* errno of the first failed write, 0 if none */
} rl_gguf_atomic;

/* Starts writing PATH: checks the target and creates the temporary file.
 * Answers 0, or an errno with MSG set (nothing is left behind). */
int rl_gguf_atomic_begin(rl_gguf_atomic *a, const char *path, char *msg, size_t msgsz);

/* Appends N bytes; answers 0 or the errno of this or an earlier failure
 * (later writes are skipped once one failed; commit reports it).  Every
 * few MiB the bytes written are queued for writeback (sync_file_range, not
 * waiting), so that the flush at commit has little left to do. */
int rl_gguf_atomic_write(rl_gguf_atomic *a, const void *p, uint64_t n);

/* Flushes the temporary file to disk and renames it over the target.
 * Answers 0, or an errno with MSG set ("at byte N: cannot write: ...") after
 * removing
 * the temporary file.  Either way A is finished. */
int rl_gguf_atomic_commit(rl_gguf_atomic *a, char *msg, size_t msgsz);

/* Removes the temporary file and finishes A; accepts a finished A. */
void rl_gguf_atomic_abort(rl_gguf_atomic *a);

/* Removes every temporary file still being written.  Async-signal-safe. */
void rl_gguf_atomic_remove_all(void);

/* PATH with the symbolic links of its last component followed (the file a
 * writer replaces, so that writing through a link keeps the link),
 * malloc'd; NULL with errno set (ELOOP after 40 links, as the kernel). */
char *rl_gguf_resolve_target(const char *path);

/* A set of files replaced together (the shards of a model): each is
 * written first under its temporary name in TEMPS (rl_gguf_set_begin
 * registers the names, so a signal removes them), then rl_gguf_set_commit
 * renames every one over its target in TARGETS, all or none: the targets'
 * old files are kept under a second name until every rename has succeeded,
 * and a failed rename gives each target its old file back (or removes the
 * new one).  A signal during the renames takes effect once they are done or
 * undone.  TARGETS are the files themselves: a caller that writes through
 * symbolic links passes rl_gguf_resolve_target's answers (and makes the
 * temporary names beside them).  rl_gguf_set_end removes what is left of the temporary files and
 * ends the set.  One set at a time; each answers 0 or an errno with MSG set
 * (naming the file concerned). */
int rl_gguf_set_begin(const char *const *temps, size_t n, char *msg, size_t msgsz);
int rl_gguf_set_commit(const char *const *targets, size_t n, char *msg, size_t msgsz);
void rl_gguf_set_end(void);

/* A temporary file the caller writes and uses itself (export's F32
 * comparison file): rl_gguf_temp_begin enters NAME in the table
 * rl_gguf_atomic_remove_all clears, before the file exists, so that a
 * signal removes it as it removes the writer's own; it answers the entry
 * (>= 0), or -1 when NAME is too long or the table is full.
 * rl_gguf_temp_end removes the file and frees the entry; it accepts -1. */
int rl_gguf_temp_begin(const char *name);
void rl_gguf_temp_end(int slot);

/* Temporary files left by a process that ended without removing them
 * (SIGKILL, a crash, a power cut).  Every temporary name of a target
 * TARGET (its last component BASE) has one of the forms
 *     BASE.rontolisp-tmp.PID.N          the writer's (N a number)
 *     BASE.rontolisp-tmp.PID.WORD       a file of a set (set), a set's
 *                                       backup (old), export's F32
 *                                       comparison (f32): WORD is 1 to 16
 *                                       lowercase letters and digits,
 *                                       starting with a letter
 *     BASE.rontolisp-tmp.PID.WORD.rontolisp-tmp.PID.N
 *                                       the writer's temporary of the one
 *                                       before (the same PID twice)
 * PID being the process that made it (decimal, no leading zero).
 * rl_gguf_remove_stale removes, in TARGET's directory, the regular files
 * of those exact forms for TARGET whose PID is not this process and names
 * no process of this machine (kill(PID, 0) fails with ESRCH).  A PID that
 * was taken again by another process keeps its file (it could be a
 * writer's), nothing else is touched, and a directory that cannot be read
 * is left alone.  A TARGET that is itself a temporary name stands for its
 * BASE (the part before the first infix).  When NOTE is not NULL each file
 * removed gets a line there:
 *     rontolisp: removed PATH, a temporary file of process PID, which has ended
 * Answers the number of files removed.  rl_gguf_atomic_begin calls it
 * (NOTE stderr) for every target before it creates its temporary file. */
int rl_gguf_remove_stale(const char *target, FILE *note);

/* Installs handlers for SIGTERM and SIGHUP, and SIGINT when WITH_SIGINT,
 * that remove every temporary file and end the process with status
 * 128 + the signal's number (130, 143, 129). */
void rl_gguf_atomic_trap_signals(int with_sigint);

#endif
