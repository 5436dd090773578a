/* pty_run.c - runs a program on a pseudo-terminal and drives it like a
 * person at a keyboard, for the tests of the REPL's terminal behaviour
 * (the debugger, line editing, history).
 *
 *   pty_run SECONDS STEPS -- PROGRAM [ARGS...]
 *
 * STEPS is a file of lines, each one step:
 *   expect TEXT   wait until the program's output since the last match
 *                 contains TEXT
 *   send TEXT     type TEXT
 *   sleep MS      wait MS milliseconds
 *   raw           wait until the terminal is out of canonical mode (a
 *                 line editor is reading), so what is sent next is not
 *                 taken by the kernel's line discipline instead
 * TEXT takes the escapes \r \n \t \e \\ and \xHH (so "\e[D" is Left,
 * "\e[A" Up, "\x03" Ctrl-C, "\x04" Ctrl-D).
 *
 * Everything the program writes goes to stdout.  Exit status: the
 * program's (128 + signal if a signal ended it), or 124 after a line on
 * stderr when an expect or the whole run outlasts SECONDS (the program
 * is then killed). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static pid_t child = -1;
static int master = -1;
static char seen[1 << 16]; /* output since the last match */
static size_t nseen;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail(const char *fmt, const char *arg) {
    fprintf(stderr, "pty_run: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    if (child > 0)
        kill(child, SIGKILL);
    exit(124);
}

/* Decodes the escapes of TEXT in place; answers the length. */
static size_t unescape(char *text) {
    size_t i = 0, o = 0;
    while (text[i]) {
        char c = text[i++];
        if (c == '\\' && text[i]) {
            char e = text[i++];
            switch (e) {
            case 'r': c = '\r'; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'e': c = 27; break;
            case 'x': {
                char hex[3] = {text[i], text[i] ? text[i + 1] : 0, 0};
                c = (char)strtol(hex, NULL, 16);
                i += hex[1] ? 2 : 1;
                break;
            }
            default: c = e;
            }
        }
        text[o++] = c;
    }
    text[o] = 0;
    return o;
}

/* Reads what the program wrote within WAIT seconds (at most) into seen
 * and stdout; answers 0 at end of output. */
static int pump(double wait) {
    struct pollfd p = {master, POLLIN, 0};
    char buf[4096];
    ssize_t n;
    /* WAIT is a deadline less the time now, taken by the caller a moment
     * earlier: on a busy machine it can be past by a millisecond or more,
     * and a negative timeout would make poll wait for ever. */
    int r = poll(&p, 1, wait > 0 ? (int)(wait * 1000) : 0);
    if (r <= 0)
        return 1;
    n = read(master, buf, sizeof buf);
    if (n <= 0)
        return 0; /* EIO once the program and its children closed the pty */
    fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
    if (nseen + (size_t)n >= sizeof seen) { /* keep the newest half */
        memmove(seen, seen + nseen / 2, nseen - nseen / 2);
        nseen -= nseen / 2;
    }
    memcpy(seen + nseen, buf, (size_t)n);
    nseen += (size_t)n;
    return 1;
}

static int contains(const char *text, size_t n) {
    if (n == 0)
        return 1;
    for (size_t i = 0; i + n <= nseen; i++)
        if (memcmp(seen + i, text, n) == 0) {
            /* The next expect looks only after this match. */
            memmove(seen, seen + i + n, nseen - i - n);
            nseen -= i + n;
            return 1;
        }
    return 0;
}

int main(int argc, char **argv) {
    double limit, deadline;
    FILE *steps;
    char line[4096];
    int status;
    struct winsize ws = {24, 80, 0, 0};

    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: pty_run SECONDS STEPS -- PROGRAM [ARGS...]\n");
        return 2;
    }
    limit = atof(argv[1]);
    deadline = now() + limit;
    steps = fopen(argv[2], "r");
    if (!steps) {
        fprintf(stderr, "pty_run: cannot open %s: %s\n", argv[2], strerror(errno));
        return 2;
    }
    child = forkpty(&master, NULL, NULL, &ws);
    if (child < 0) {
        fprintf(stderr, "pty_run: forkpty: %s\n", strerror(errno));
        return 2;
    }
    if (child == 0) {
        execvp(argv[4], argv + 4);
        fprintf(stderr, "pty_run: cannot run %s: %s\n", argv[4], strerror(errno));
        _exit(127);
    }
    while (fgets(line, sizeof line, steps)) {
        char *arg;
        size_t n;
        line[strcspn(line, "\n")] = 0;
        arg = strchr(line, ' ');
        arg = arg ? arg + 1 : line + strlen(line);
        n = unescape(arg);
        if (strncmp(line, "expect ", 7) == 0) {
            while (!contains(arg, n)) {
                if (now() > deadline || !pump(deadline - now()))
                    fail("timed out or output ended waiting for \"%s\"", arg);
            }
        } else if (strncmp(line, "send ", 5) == 0) {
            if (write(master, arg, n) != (ssize_t)n)
                fail("cannot type into the terminal: %s", strerror(errno));
        } else if (strncmp(line, "sleep ", 6) == 0) {
            double until = now() + atof(arg) / 1000;
            while (now() < until && pump(until - now()))
                ;
        } else if (strcmp(line, "raw") == 0) {
            struct termios t;
            while (tcgetattr(master, &t) == 0 && (t.c_lflag & ICANON)) {
                if (now() > deadline)
                    fail("timed out waiting for the terminal to leave canonical mode%s", "");
                pump(0.01);
            }
        } else if (line[0]) {
            fail("unknown step \"%s\"", line);
        }
    }
    /* The rest of the output, until the program ends. */
    while (pump(0.2)) {
        if (waitpid(child, &status, WNOHANG) == child) {
            while (pump(0.05))
                ;
            goto done;
        }
        if (now() > deadline)
            fail("the program did not end within %s seconds", argv[1]);
    }
    /* The output ended (the terminal closed): the program, too, gets only
     * until the deadline to end. */
    for (;;) {
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child)
            break;
        if (r < 0 && errno != EINTR)
            return 124;
        if (now() > deadline)
            fail("the program did not end within %s seconds", argv[1]);
        usleep(10000);
    }
done:
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
