/* serve_load.c - a load client for `rontolisp serve' (or any HTTP/1.1
 * server answering with Content-Length, llama-server included): a bounded
 * number of requests over a bounded number of keep-alive connections, and
 * the requests per second and latency percentiles it saw.  Built by
 * `make tools'; the server's tests use it for their load part.
 *
 *     build/tools/serve_load --port N [--host ADDR] [--path P]
 *         [--body TEXT | --body-file F [--lines]] [--requests N]
 *         [--concurrency C] [--items K] [--idle N] [--expect STATUS]
 *         [--deadline S]
 *
 * One thread, poll(2) over the connections: each sends a request, reads
 * its whole answer, then sends the next, until N requests have been sent;
 * a connection the server closes (or answers "Connection: close") is
 * opened again.  A request is GET without a body, POST with one; with
 * --lines each line of F is a body, taken in turn.  An answer whose
 * status is not --expect (default 200), or a connection lost before an
 * answer, is an error.  With --idle N, N more connections are opened
 * first, each sending half a request line and nothing more, and held open
 * for the whole run ("idle" clients the server must not wait on).
 *
 * Output, one line: requests, errors, seconds, req/s, items/s (requests
 * times --items), p50, p99 and max latency in ms, and with --idle how many
 * idle connections the server still held open at the end.  Exit status 0
 * when every request got its status before the deadline (default 120 s),
 * 1 otherwise, 2 on bad usage. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prims/bench.h"

#define RL_LOAD_MAX_CONNS 4096
#define RL_LOAD_MAX_ANSWER (64u << 20) /* bytes of one answer kept */

typedef struct {
    int fd;
    int busy;          /* a request was sent and its answer not yet read */
    size_t sent, want; /* bytes of the current request sent, its length */
    char *out;         /* the current request */
    char *in;          /* the answer so far */
    size_t in_len, in_cap;
    double started;
} conn;

typedef struct {
    const char *host, *path, *body_file, *body;
    int port, lines, expect;
    long requests, concurrency, items, idle;
    double deadline;
} options;

static double now(void) { return 1e-9 * (double)rl_bench_ns(); }

static void usage(FILE *f) {
    fputs("usage: serve_load --port N [--host ADDR] [--path P] [--body TEXT | --body-file F\n"
          "                  [--lines]] [--requests N] [--concurrency C] [--items K]\n"
          "                  [--idle N] [--expect STATUS] [--deadline S]\n"
          "\n"
          "Sends N requests (default 1000) over C keep-alive connections (default 8) to\n"
          "ADDR:PORT (default 127.0.0.1) and prints requests, errors, seconds, req/s,\n"
          "items/s and the p50, p99 and max latency in ms.\n"
          "\n"
          "  --path P          the path (default /health)\n"
          "  --body TEXT       POST TEXT (without a body: GET)\n"
          "  --body-file F     POST the contents of F; with --lines each line of F is one\n"
          "                    body, taken in turn\n"
          "  --items K         each request carries K items (questions, texts): items/s is\n"
          "                    K times req/s (default 1)\n"
          "  --idle N          first open N connections that send half a request line and\n"
          "                    nothing more, held open during the run\n"
          "  --expect STATUS   the status every answer must have (default 200)\n"
          "  --deadline S      give up after S seconds (default 120)\n"
          "  --help            print this help and exit\n"
          "\n"
          "Exit status: 0 every request got STATUS in time, 1 not, 2 bad usage.\n",
          f);
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "serve_load: %s expects an integer from %ld to %ld, found \"%s\"\n",
                flag, lo, hi, s);
        exit(2);
    }
    return v;
}

/* The whole file PATH, NUL-terminated, its length in *N; exits on error. */
static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "serve_load: cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "serve_load: out of memory reading %s\n", path);
            exit(2);
        }
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    fclose(f);
    buf[len] = 0;
    *n = len;
    return buf;
}

/* The requests to send, in turn: one per body (or one GET). */
static char **build_requests(const options *o, size_t *count) {
    char *text = NULL;
    size_t text_len = 0, nb = 0, cap = 16;
    const char **list = malloc(cap * sizeof *list);
    size_t *lens = malloc(cap * sizeof *lens);
    if (!list || !lens)
        exit(2);
    if (o->body_file) {
        text = read_file(o->body_file, &text_len);
        if (o->lines) {
            for (char *p = text; p < text + text_len;) {
                char *nl = memchr(p, '\n', (size_t)(text + text_len - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(text + text_len - p);
                if (n > 0) {
                    if (nb == cap) {
                        cap *= 2;
                        list = realloc(list, cap * sizeof *list);
                        lens = realloc(lens, cap * sizeof *lens);
                        if (!list || !lens)
                            exit(2);
                    }
                    list[nb] = p;
                    lens[nb++] = n;
                }
                p += n + 1;
            }
            if (nb == 0) {
                fprintf(stderr, "serve_load: expected a body on a line of %s, found none\n",
                        o->body_file);
                exit(2);
            }
        } else {
            list[0] = text;
            lens[0] = text_len;
            nb = 1;
        }
    } else if (o->body) {
        list[0] = o->body;
        lens[0] = strlen(o->body);
        nb = 1;
    }
    size_t n = nb ? nb : 1;
    char **reqs = malloc(n * sizeof *reqs);
    if (!reqs)
        exit(2);
    for (size_t i = 0; i < n; i++) {
        char head[1024];
        int h = nb ? snprintf(head, sizeof head,
                              "POST %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: keep-alive\r\n"
                              "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                              o->path, o->host, o->port, lens[i])
                   : snprintf(head, sizeof head,
                              "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: keep-alive\r\n\r\n",
                              o->path, o->host, o->port);
        if (h < 0 || (size_t)h >= sizeof head) {
            fprintf(stderr, "serve_load: the path is too long\n");
            exit(2);
        }
        size_t body = nb ? lens[i] : 0;
        reqs[i] = malloc((size_t)h + body + 1);
        if (!reqs[i])
            exit(2);
        memcpy(reqs[i], head, (size_t)h);
        if (body)
            memcpy(reqs[i] + h, list[i], body);
        reqs[i][(size_t)h + body] = 0;
    }
    free(list);
    free(lens);
    free(text); /* the requests hold copies */
    *count = n;
    return reqs;
}

/* A connected, non-blocking socket, or -1 after a message. */
static int open_conn(const struct sockaddr_storage *addr, socklen_t alen) {
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "serve_load: socket: %s\n", strerror(errno));
        return -1;
    }
    if (connect(fd, (const struct sockaddr *)addr, alen) != 0) {
        fprintf(stderr, "serve_load: connect: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Case-insensitive search for header NAME in the header block H (of
 * length N); the value's start, or NULL. */
static const char *header(const char *h, size_t n, const char *name) {
    size_t k = strlen(name);
    for (const char *p = h; p + k + 2 < h + n; p++)
        if (p[0] == '\n' && strncasecmp(p + 1, name, k) == 0 && p[k + 1] == ':') {
            p += k + 2;
            while (*p == ' ')
                p++;
            return p;
        }
    return NULL;
}

/* Parse the answer read so far: 1 complete (status in *STATUS, whether
 * the server closes in *CLOSE), 0 not yet, -1 malformed.  AT_EOF: the
 * server closed the connection. */
static int answer_done(const conn *c, int at_eof, int *status, int *close_after) {
    const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end)
        return at_eof ? -1 : 0;
    size_t head = (size_t)(end - c->in) + 4;
    if (c->in_len < 12 || strncmp(c->in, "HTTP/1.", 7) != 0)
        return -1;
    *status = atoi(c->in + 9);
    const char *conn_h = header(c->in, head, "Connection");
    *close_after = conn_h && strncasecmp(conn_h, "close", 5) == 0;
    const char *len_h = header(c->in, head, "Content-Length");
    if (len_h) {
        size_t want = head + strtoul(len_h, NULL, 10);
        return c->in_len >= want ? 1 : at_eof ? -1 : 0;
    }
    if (header(c->in, head, "Transfer-Encoding"))
        return -1; /* chunked answers are not read */
    *close_after = 1;
    return at_eof ? 1 : 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    options o = {.host = "127.0.0.1", .path = "/health", .port = -1, .expect = 200,
                 .requests = 1000, .concurrency = 8, .items = 1, .deadline = 120};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--lines")) {
            o.lines = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "serve_load: expected an option with its value, found \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--port"))
            o.port = (int)parse_long(a, v, 1, 65535);
        else if (!strcmp(a, "--host"))
            o.host = v;
        else if (!strcmp(a, "--path"))
            o.path = v;
        else if (!strcmp(a, "--body"))
            o.body = v;
        else if (!strcmp(a, "--body-file"))
            o.body_file = v;
        else if (!strcmp(a, "--requests"))
            o.requests = parse_long(a, v, 1, 100000000);
        else if (!strcmp(a, "--concurrency"))
            o.concurrency = parse_long(a, v, 1, RL_LOAD_MAX_CONNS);
        else if (!strcmp(a, "--items"))
            o.items = parse_long(a, v, 1, 1000000);
        else if (!strcmp(a, "--idle"))
            o.idle = parse_long(a, v, 0, RL_LOAD_MAX_CONNS);
        else if (!strcmp(a, "--expect"))
            o.expect = (int)parse_long(a, v, 100, 599);
        else if (!strcmp(a, "--deadline"))
            o.deadline = (double)parse_long(a, v, 1, 86400);
        else {
            fprintf(stderr, "serve_load: unknown option \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (o.port < 0 || (o.body && o.body_file)) {
        fprintf(stderr, o.port < 0 ? "serve_load: expected --port N, found none\n"
                                   : "serve_load: expected --body or --body-file, found both\n");
        usage(stderr);
        return 2;
    }
    struct sockaddr_storage addr;
    socklen_t alen;
    memset(&addr, 0, sizeof addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    if (inet_pton(AF_INET, o.host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o.port);
        alen = sizeof *a4;
    } else if (inet_pton(AF_INET6, o.host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o.port);
        alen = sizeof *a6;
    } else {
        fprintf(stderr, "serve_load: --host expects an IPv4 or IPv6 address, found \"%s\"\n",
                o.host);
        return 2;
    }
    size_t nreq_bodies;
    char **reqs = build_requests(&o, &nreq_bodies);
    long nc = o.concurrency < o.requests ? o.concurrency : o.requests;
    double start = now(), give_up = start + o.deadline;

    /* The idle connections, each with half a request line. */
    int *idle = calloc((size_t)o.idle + 1, sizeof *idle);
    for (long i = 0; i < o.idle; i++) {
        idle[i] = open_conn(&addr, alen);
        if (idle[i] < 0)
            return 1;
        if (send(idle[i], "GET /health HT", 14, MSG_NOSIGNAL) != 14) {
            fprintf(stderr, "serve_load: idle connection %ld: send failed\n", i + 1);
            return 1;
        }
    }

    conn *cs = calloc((size_t)nc, sizeof *cs);
    struct pollfd *pfd = calloc((size_t)nc, sizeof *pfd);
    double *lat = malloc((size_t)o.requests * sizeof *lat);
    if (!cs || !pfd || !lat || !idle) {
        fprintf(stderr, "serve_load: out of memory\n");
        return 1;
    }
    long issued = 0, done = 0, errors = 0, reconnects = 0;
    int first_error_status = 0;
    char first_error[512] = ""; /* its request and the start of its answer */
    start = now();
    for (long i = 0; i < nc; i++)
        cs[i].fd = -1;
    while (done < o.requests) {
        double t = now();
        if (t > give_up) {
            fprintf(stderr, "serve_load: %ld of %ld requests answered within the %.0f s deadline\n",
                    done, o.requests, o.deadline);
            errors += o.requests - done;
            break;
        }
        /* Idle connections start their next request. */
        for (long i = 0; i < nc; i++) {
            conn *c = &cs[i];
            if (c->busy || issued >= o.requests)
                continue;
            if (c->fd < 0) {
                c->fd = open_conn(&addr, alen);
                if (c->fd < 0) {
                    errors += o.requests - done;
                    done = o.requests;
                    break;
                }
            }
            c->out = reqs[issued % (long)nreq_bodies];
            c->want = strlen(c->out);
            c->sent = 0;
            c->in_len = 0;
            c->busy = 1;
            c->started = now();
            issued++;
        }
        int live = 0;
        for (long i = 0; i < nc; i++) {
            pfd[i].fd = cs[i].busy ? cs[i].fd : -1;
            pfd[i].events = cs[i].sent < cs[i].want ? POLLOUT : POLLIN;
            pfd[i].revents = 0;
            live += cs[i].busy;
        }
        if (!live)
            break;
        int ready = poll(pfd, (nfds_t)nc, 100);
        if (ready < 0 && errno != EINTR) {
            fprintf(stderr, "serve_load: poll: %s\n", strerror(errno));
            return 1;
        }
        for (long i = 0; ready > 0 && i < nc; i++) {
            conn *c = &cs[i];
            if (!pfd[i].revents)
                continue;
            int lost = 0, at_eof = 0;
            if (c->sent < c->want) {
                ssize_t n = send(c->fd, c->out + c->sent, c->want - c->sent, MSG_NOSIGNAL);
                if (n > 0)
                    c->sent += (size_t)n;
                else if (n < 0 && errno != EAGAIN && errno != EINTR)
                    lost = 1;
            } else {
                if (c->in_cap - c->in_len < 65536) {
                    size_t cap = c->in_cap ? c->in_cap * 2 : 131072;
                    if (cap > RL_LOAD_MAX_ANSWER) {
                        lost = 1;
                    } else {
                        char *p = realloc(c->in, cap);
                        if (!p)
                            return 1;
                        c->in = p;
                        c->in_cap = cap;
                    }
                }
                if (!lost) {
                    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
                    if (n > 0)
                        c->in_len += (size_t)n;
                    else if (n == 0)
                        at_eof = 1;
                    else if (errno != EAGAIN && errno != EINTR)
                        lost = 1;
                }
            }
            int status = 0, close_after = 0;
            int r = lost ? -1 : c->sent == c->want ? answer_done(c, at_eof, &status, &close_after)
                                                   : 0;
            if (r == 0 && !at_eof)
                continue;
            if (r == 1) {
                lat[done++] = now() - c->started;
                if (status != o.expect) {
                    if (!first_error_status) {
                        first_error_status = status;
                        snprintf(first_error, sizeof first_error, "%.*s\n-> %.*s",
                                 (int)(c->want < 200 ? c->want : 200), c->out,
                                 (int)(c->in_len < 300 ? c->in_len : 300),
                                 c->in + (c->in_len < 300 ? 0 : c->in_len - 300));
                    }
                    errors++;
                }
            } else {
                /* Lost before a whole answer: an error, not retried. */
                lat[done++] = now() - c->started;
                errors++;
                close_after = 1;
            }
            c->busy = 0;
            if (close_after || at_eof) {
                close(c->fd);
                c->fd = -1;
                reconnects++;
            }
        }
    }
    double seconds = now() - start;
    long open_idle = 0;
    for (long i = 0; i < o.idle; i++) {
        char b;
        ssize_t n = recv(idle[i], &b, 1, MSG_DONTWAIT | MSG_PEEK);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            open_idle++;
        close(idle[i]);
    }
    long nl = done;
    qsort(lat, (size_t)nl, sizeof *lat, cmp_double);
    double p50 = nl ? lat[(nl - 1) * 50 / 100] : 0, p99 = nl ? lat[(nl - 1) * 99 / 100] : 0,
           mx = nl ? lat[nl - 1] : 0;
    printf("requests %ld errors %ld seconds %.3f req/s %.1f items/s %.1f p50 %.3f ms p99 %.3f ms "
           "max %.3f ms reconnects %ld",
           o.requests, errors, seconds, (double)done / seconds,
           (double)done * (double)o.items / seconds, 1e3 * p50, 1e3 * p99, 1e3 * mx, reconnects);
    if (o.idle)
        printf(" idle %ld open %ld", o.idle, open_idle);
    printf("\n");
    if (first_error_status)
        fprintf(stderr, "serve_load: an answer had status %d, expected %d; the first:\n%s\n",
                first_error_status, o.expect, first_error);
    for (long i = 0; i < nc; i++) {
        if (cs[i].fd >= 0)
            close(cs[i].fd);
        free(cs[i].in);
    }
    for (size_t i = 0; i < nreq_bodies; i++)
        free(reqs[i]);
    free(reqs);
    free(cs);
    free(pfd);
    free(lat);
    free(idle);
    return errors ? 1 : 0;
}
