/* test_http.c - the HTTP layer of `rontolisp serve' (prims/http.c) with
 * this test as its only worker, over loopback sockets: a full queue is a
 * 503 while a queued request waits; a request queued before the stop is
 * still handed out and answered; bodies over the limit are 413 (declared
 * or chunked) and a body past twice the limit has its connection closed;
 * the API key is wanted everywhere but /health and the page at /; SIGTERM
 * wakes a waiting worker with no request, and the old handler is back
 * after the stop; a signal racing the stop is harmless.  Every wait has a
 * deadline. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "prims/http.h"
#include "tests/c/check.h"

/* A listening socket on 127.0.0.1 and a free port. */
static int listen_any(int *port) {
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &n) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* A connection to PORT that has sent REQ (LEN bytes); reads time out
 * after 10 s. */
static int send_request(int port, const char *req, size_t len) {
    struct sockaddr_in a;
    struct timeval tv = {10, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (size_t off = 0; off < len;) {
        ssize_t k = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    return fd;
}

/* What comes back on FD until the server closes it (or the timeout),
 * into BUF (NUL-terminated); FD is closed. */
static void read_answer(int fd, char *buf, size_t size) {
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t k = recv(fd, buf + n, size - 1 - n, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    buf[n] = 0;
    close(fd);
}

/* Wait (at most 10 s) until the server holds QUEUED requests in its queue
 * and has refused REJECTED; true when it did. */
static int wait_stats(uint64_t queued, uint64_t rejected) {
    for (int i = 0; i < 10000; i++) {
        rl_http_stats s;
        rl_http_get_stats(&s);
        if (s.queued == queued && s.rejected == rejected)
            return 1;
        usleep(1000);
    }
    return 0;
}

static const char GET_A[] = "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

static void test_queue_full_then_stop(void) {
    char msg[256], buf[4096];
    int port = 0;
    rl_http_config cfg = {.listen_fd = listen_any(&port), .max_body = 1000, .timeout = 30,
                          .queue = 1};
    CHECK(cfg.listen_fd >= 0);
    CHECK_MSG(rl_http_start(&cfg, msg, sizeof msg) == 0, "start: %s", msg);
    CHECK(rl_http_start(&cfg, msg, sizeof msg) == -1); /* one server per process */
    int a = send_request(port, GET_A, sizeof GET_A - 1);
    CHECK_MSG(wait_stats(1, 0), "the first request was never queued");
    int b = send_request(port, GET_A, sizeof GET_A - 1);
    read_answer(b, buf, sizeof buf);
    CHECK_MSG(strncmp(buf, "HTTP/1.1 503", 12) == 0, "second request: %.60s", buf);
    CHECK(strstr(buf, "\"type\":\"unavailable_error\"") != NULL);
    CHECK(strstr(buf, "queue of requests is full") != NULL);
    CHECK(wait_stats(1, 1));
    /* Stopping: what is queued is still handed out, then -1. */
    rl_http_shutdown();
    int id = rl_http_next();
    CHECK(id >= 0);
    const char *method = "", *path = "";
    const uint8_t *body;
    size_t n = 99;
    CHECK(rl_http_request(id, &method, &path, &body, &n) == 0);
    CHECK(strcmp(method, "GET") == 0 && strcmp(path, "/a") == 0 && n == 0);
    CHECK(rl_http_respond(id, 200, "text/plain", (const uint8_t *)"fine", 4) == 0);
    CHECK(rl_http_respond(id, 200, "text/plain", (const uint8_t *)"twice", 5) == -1);
    CHECK(rl_http_request(id, &method, &path, &body, &n) == -1);
    CHECK(rl_http_next() == -1);
    read_answer(a, buf, sizeof buf);
    CHECK_MSG(strncmp(buf, "HTTP/1.1 200", 12) == 0, "queued request: %.60s", buf);
    CHECK(strstr(buf, "\r\n\r\nfine") != NULL);
    rl_http_stop(5);
    rl_http_stop(5); /* idempotent */
}

static void test_limits_and_key(void) {
    char msg[256], buf[4096];
    int port = 0;
    static const uint8_t key[] = "sekret";
    rl_http_config cfg = {.listen_fd = listen_any(&port), .max_body = 10, .timeout = 30,
                          .queue = 4, .api_key = key, .api_key_len = 6};
    CHECK_MSG(rl_http_start(&cfg, msg, sizeof msg) == 0, "start: %s", msg);
    static const char big[] = "POST /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                              "Authorization: Bearer sekret\r\nContent-Length: 20\r\n\r\n"
                              "01234567890123456789";
    read_answer(send_request(port, big, sizeof big - 1), buf, sizeof buf);
    CHECK_MSG(strncmp(buf, "HTTP/1.1 413", 12) == 0, "declared: %.60s", buf);
    static const char chunked[] = "POST /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                  "Authorization: Bearer sekret\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n"
                                  "8\r\n01234567\r\n8\r\n01234567\r\n0\r\n\r\n";
    read_answer(send_request(port, chunked, sizeof chunked - 1), buf, sizeof buf);
    CHECK_MSG(strncmp(buf, "HTTP/1.1 413", 12) == 0, "chunked: %.60s", buf);
    const char *refused[] = {
        "GET /props HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "GET /props HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer sekre\r\n\r\n",
        "GET /props HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer sekret2\r\n\r\n",
        "GET /props HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: sekret\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        read_answer(send_request(port, refused[i], strlen(refused[i])), buf, sizeof buf);
        CHECK_MSG(strncmp(buf, "HTTP/1.1 401", 12) == 0, "refused %zu: %.60s", i, buf);
        CHECK(strstr(buf, "\"type\":\"authentication_error\"") != NULL);
    }
    /* A browser's preflight needs no key and is answered here, with CORS;
     * a refusal echoes the Origin too. */
    static const char preflight[] = "OPTIONS /props HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                    "Origin: http://a.test\r\n\r\n";
    read_answer(send_request(port, preflight, sizeof preflight - 1), buf, sizeof buf);
    CHECK_MSG(strncmp(buf, "HTTP/1.1 200", 12) == 0, "preflight: %.60s", buf);
    CHECK_MSG(strstr(buf, "Access-Control-Allow-Origin: http://a.test\r\n") &&
                  strstr(buf, "Access-Control-Allow-Credentials: true\r\n") &&
                  strstr(buf, "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n") &&
                  strstr(buf, "Access-Control-Allow-Headers: *\r\n"),
              "preflight: %s", buf);
    static const char cross[] = "GET /props HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                "Origin: http://b.test\r\n\r\n";
    read_answer(send_request(port, cross, sizeof cross - 1), buf, sizeof buf);
    CHECK_MSG(strncmp(buf, "HTTP/1.1 401", 12) == 0 &&
                  strstr(buf, "Access-Control-Allow-Origin: http://b.test\r\n") &&
                  !strstr(buf, "Access-Control-Allow-Methods"),
              "cross-origin refusal: %s", buf);
    const char *taken[] = {
        "POST /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer sekret\r\n"
        "Content-Length: 10\r\n\r\n0123456789",
        "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        /* the page: a browser opening it cannot send the key */
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        int fd = send_request(port, taken[i], strlen(taken[i]));
        CHECK_MSG(wait_stats(1, 0), "request %zu was never queued", i);
        int id = rl_http_next();
        const char *method, *path;
        const uint8_t *body;
        size_t n;
        CHECK(rl_http_request(id, &method, &path, &body, &n) == 0);
        CHECK(n == (i == 0 ? 10u : 0u));
        CHECK(i != 0 || memcmp(body, "0123456789", 10) == 0);
        CHECK(rl_http_respond(id, 201, "text/plain", body, n) == 0);
        read_answer(fd, buf, sizeof buf);
        CHECK_MSG(strncmp(buf, "HTTP/1.1 201", 12) == 0, "taken %zu: %.60s", i, buf);
    }
    rl_http_stop(5);
}

/* True when the server closed FD (end of file or a reset) without an
 * answer, within FD's 10 s read timeout; FD is closed. */
static int closed_without_answer(int fd) {
    char b[256];
    ssize_t k;
    int answered = 0;
    while ((k = recv(fd, b, sizeof b, 0)) > 0)
        answered = 1;
    int closed = k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    close(fd);
    return closed && !answered;
}

/* A body that goes on past twice max_body (a chunked one that never ends,
 * a declared length far over the limit) has its connection closed: it is
 * not read for ever. */
static void test_endless_body_closed(void) {
    char msg[256];
    int port = 0;
    rl_http_config cfg = {.listen_fd = listen_any(&port), .max_body = 10, .timeout = 30,
                          .queue = 1};
    CHECK_MSG(rl_http_start(&cfg, msg, sizeof msg) == 0, "start: %s", msg);
    static const char head[] = "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    int fd = send_request(port, head, sizeof head - 1);
    for (int i = 0; i < 1000; i++) /* never the last chunk */
        if (send(fd, "8\r\n01234567\r\n", 13, MSG_NOSIGNAL) != 13)
            break;
    CHECK_MSG(closed_without_answer(fd), "an endless chunked body was still read after 10 s");
    static const char declared[] = "POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n0123";
    CHECK_MSG(closed_without_answer(send_request(port, declared, sizeof declared - 1)),
              "a body declared 1 MB long was waited for");
    rl_http_stop(5);
}

static void test_sigterm_wakes_a_worker(void) {
    char msg[256];
    int port = 0;
    struct sigaction now;
    rl_http_config cfg = {.listen_fd = listen_any(&port), .max_body = 10, .timeout = 30,
                          .queue = 1};
    CHECK_MSG(rl_http_start(&cfg, msg, sizeof msg) == 0, "start: %s", msg);
    raise(SIGTERM); /* the server's handler, not the default: the test lives on */
    CHECK(rl_http_next() == -1);
    rl_http_stop(5);
    sigaction(SIGTERM, NULL, &now);
    CHECK(now.sa_handler == SIG_DFL);
}

/* A signal's stop (on the watcher thread) racing the worker's own stop:
 * the daemon must be quiesced before it is stopped, or not at all (a
 * quiesce of a daemon being stopped crashed). */
static void test_signal_racing_the_stop(void) {
    char msg[256];
    int ok = 1;
    for (int i = 0; i < 200 && ok; i++) {
        int port = 0;
        rl_http_config cfg = {.listen_fd = listen_any(&port), .max_body = 10, .timeout = 30,
                              .queue = 1};
        ok = rl_http_start(&cfg, msg, sizeof msg) == 0;
        raise(SIGTERM);
        usleep((useconds_t)(i % 20) * 10); /* the watcher ahead of the stop, or behind */
        rl_http_stop(1);
    }
    CHECK_MSG(ok, "start: %s", msg);
}

int main(void) {
    CHECK_CASE(test_queue_full_then_stop());
    CHECK_CASE(test_limits_and_key());
    CHECK_CASE(test_endless_body_closed());
    CHECK_CASE(test_sigterm_wakes_a_worker());
    CHECK_CASE(test_signal_racing_the_stop());
    return check_report("http");
}
