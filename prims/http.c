/* http.c - the HTTP layer of `rontolisp serve' (see http.h) on
 * libmicrohttpd: one internal polling thread reads every connection,
 * requests wait in a bounded ring for the Lisp workers, and a watcher
 * thread turns SIGINT and SIGTERM into a graceful stop.
 *
 * Workload: small JSON requests (a question, a few texts) answered in a
 * millisecond or so by a handful of workers, from clients that may keep
 * their connections open.  The request a connection is waiting on belongs
 * to exactly one place at a time: libmicrohttpd (reading its body), the
 * queue, a worker (held), or libmicrohttpd again (sending the answer).
 * Its connection is suspended from the moment it is queued until a worker
 * answers it, so libmicrohttpd never frees a request a worker reads.
 *
 * Nothing here includes ECL: libmicrohttpd's threads and the watcher are
 * plain pthreads that never see a Lisp object. */
#include "prims/http.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* EARLY: answered by this layer once its body was read. */
enum { RL_REQ_READING, RL_REQ_EARLY, RL_REQ_QUEUED, RL_REQ_HELD, RL_REQ_ANSWERED };

typedef struct {
    struct MHD_Connection *conn; /* NULL once libmicrohttpd let it go */
    char *method, *path;
    uint8_t *body;
    size_t len, cap;
    size_t dropped;              /* body bytes read, once refused */
    int too_big, no_memory, state;
    int refused;                 /* a status to answer instead (401), or 0 */
    int status;                  /* the answer, once ANSWERED */
    char content_type[64];
    uint8_t *answer;
    size_t answer_len;
} rl_http_req;

static struct {
    pthread_mutex_t mu;
    pthread_mutex_t daemon_mu;   /* held around quiescing and stopping the daemon */
    pthread_cond_t work;         /* a request queued, or stopping */
    pthread_cond_t idle;         /* in_flight fell to 0 */
    struct MHD_Daemon *daemon;
    int running, stopping;
    rl_http_config cfg;
    uint8_t *api_key;
    rl_http_req **ring;          /* the queue: cfg.queue slots */
    size_t head, count;
    rl_http_req *held[RL_HTTP_MAX_HELD];
    size_t in_flight;            /* requests libmicrohttpd has not completed */
    rl_http_stats stats;
    int pipe_r, pipe_w;          /* the signal handler's self-pipe */
    pthread_t watcher;
    int watcher_exit;
    int quiesced_fd;             /* the listening socket once quiesced, or -1 */
    struct sigaction old_int, old_term;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .daemon_mu = PTHREAD_MUTEX_INITIALIZER,
       .work = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER,
       .pipe_r = -1,
       .pipe_w = -1,
       .quiesced_fd = -1};

/* ---- answers ----------------------------------------------------------- */

/* CORS as llama-server answers by default (any origin, with credentials):
 * the request's Origin echoed, and to a PREFLIGHT (OPTIONS) what may
 * follow. */
static void rl_add_cors(struct MHD_Response *r, struct MHD_Connection *c, int preflight) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin)
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    if (preflight) {
        MHD_add_response_header(r, "Access-Control-Allow-Credentials", "true");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "*");
    }
}

/* A browser's preflight: 200, no body, on any path, without the API key
 * (browsers send none with it). */
static enum MHD_Result rl_send_preflight(struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html");
    rl_add_cors(r, c, 1);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result rl_send(struct MHD_Connection *c, int status, const char *content_type,
                               const uint8_t *body, size_t n, int close_after) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    rl_add_cors(r, c, 0);
    if (close_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

/* llama-server's error shape; MESSAGE and TYPE are constants of ours (no
 * character needs escaping). */
static enum MHD_Result rl_send_error(struct MHD_Connection *c, int status, const char *message,
                                     const char *type, int close_after) {
    char body[512];
    int n = snprintf(body, sizeof body, "{\"error\":{\"code\":%d,\"message\":\"%s\",\"type\":\"%s\"}}",
                     status, message, type);
    return rl_send(c, status, "application/json; charset=utf-8", (const uint8_t *)body,
                   (size_t)n, close_after);
}

/* ---- the API key ------------------------------------------------------- */

/* True when the connection's Authorization header is "Bearer KEY".  The
 * comparison takes the same time for every header of a given length
 * (nothing leaves early on the first differing byte). */
static int rl_authorized(struct MHD_Connection *c) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    static const char prefix[] = "Bearer ";
    if (!h || strncmp(h, prefix, sizeof prefix - 1) != 0)
        return 0;
    const uint8_t *given = (const uint8_t *)h + sizeof prefix - 1;
    size_t n = strlen((const char *)given), k = S.cfg.api_key_len;
    unsigned diff = (unsigned)(n != k);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)(given[i] ^ (i < k ? S.api_key[i] : 0u));
    return diff == 0;
}

/* True for the paths anyone may ask without the key: the health check, and
 * the page at / (it holds no data; a browser cannot send the header when it
 * opens it, and the page sends the key the user types with its own
 * requests). */
static int rl_public_path(const char *url) {
    return strcmp(url, "/health") == 0 || strcmp(url, "/v1/health") == 0 || strcmp(url, "/") == 0;
}

/* ---- requests ---------------------------------------------------------- */

static void rl_req_free(rl_http_req *r) {
    if (!r)
        return;
    free(r->method);
    free(r->path);
    free(r->body);
    free(r->answer);
    free(r);
}

/* Append N bytes of body; over the limit (or out of memory, or refused)
 * the rest is read and dropped, and the request answered 413 (500, 401).
 * 0, or -1 once the body is over twice max_body: a body that goes on
 * past that (a chunked one that never ends, a length of a
 * terabyte) has its connection closed rather than read for ever. */
static int rl_req_append(rl_http_req *r, const char *data, size_t n) {
    if (!r->too_big && !r->no_memory && !r->refused &&
        (n > S.cfg.max_body || r->len > S.cfg.max_body - n)) { /* no size_t overflow */
        r->too_big = 1;
        r->dropped = r->len;
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
    }
    if (r->too_big || r->no_memory || r->refused) {
        r->dropped = n > SIZE_MAX - r->dropped ? SIZE_MAX : r->dropped + n;
        /* Over twice max_body (without overflow)? */
        return r->dropped > S.cfg.max_body && r->dropped - S.cfg.max_body > S.cfg.max_body
                   ? -1
                   : 0;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap = cap > S.cfg.max_body / 2 ? S.cfg.max_body : cap * 2;
        uint8_t *p = realloc(r->body, cap);
        if (!p) {
            r->no_memory = 1;
            return 0;
        }
        r->body = p;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    return 0;
}

static enum MHD_Result rl_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                     const char *method, const char *version,
                                     const char *data, size_t *size, void **con_cls) {
    (void)cls;
    (void)version;
    rl_http_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->conn = c;
        r->method = strdup(method);
        r->path = strdup(url);
        if (!r->method || !r->path) {
            rl_req_free(r);
            return MHD_NO;
        }
        *con_cls = r;
        pthread_mutex_lock(&S.mu);
        S.in_flight++;
        S.stats.received++;
        pthread_mutex_unlock(&S.mu);
        /* Refusals are answered once the body is read (and dropped):
         * answering before it confused libmicrohttpd 0.9.75 when the
         * client then reset the connection. */
        if (S.api_key && strcmp(method, "OPTIONS") != 0 && !rl_public_path(url) &&
            !rl_authorized(c))
            r->refused = 401;
        const char *length =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(length, &end, 10);
            if (errno == 0 && end != length && n > S.cfg.max_body) {
                /* Read and dropped for a 413 up to twice max_body; a
                 * body longer still is not read at all. */
                if (n - S.cfg.max_body > S.cfg.max_body)
                    return MHD_NO;
                r->too_big = 1;
            }
        }
        return MHD_YES;
    }
    if (*size) {
        if (r->state == RL_REQ_READING && rl_req_append(r, data, *size) != 0)
            return MHD_NO; /* libmicrohttpd closes the connection */
        *size = 0;
        return MHD_YES;
    }
    switch (r->state) {
    case RL_REQ_READING:
        r->state = RL_REQ_EARLY;
        if (strcmp(r->method, "OPTIONS") == 0)
            return rl_send_preflight(c);
        if (r->refused == 401)
            return rl_send_error(c, 401, "Invalid API Key", "authentication_error", 0);
        if (r->too_big)
            return rl_send_error(c, 413, "the request body is larger than --max-body",
                                 "invalid_request_error", 1);
        if (r->no_memory)
            return rl_send_error(c, 500, "out of memory reading the request body",
                                 "server_error", 1);
        pthread_mutex_lock(&S.mu);
        if (S.stopping || S.count == S.cfg.queue) {
            int stopping = S.stopping;
            if (!stopping)
                S.stats.rejected++;
            pthread_mutex_unlock(&S.mu);
            return stopping
                       ? rl_send_error(c, 503, "the server is shutting down", "unavailable_error", 1)
                       : rl_send_error(c, 503, "the queue of requests is full; try again later",
                                       "unavailable_error", 0);
        }
        /* Suspended before a worker can see it, so that its answer's
         * resume always finds it suspended. */
        MHD_suspend_connection(c);
        S.ring[(S.head + S.count) % S.cfg.queue] = r;
        S.count++;
        S.stats.queued = S.count;
        r->state = RL_REQ_QUEUED;
        pthread_cond_signal(&S.work);
        pthread_mutex_unlock(&S.mu);
        return MHD_YES;
    case RL_REQ_ANSWERED:
        return rl_send(c, r->status, r->content_type, r->answer, r->answer_len, S.stopping);
    default:
        return MHD_NO;
    }
}

static void rl_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                            enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    rl_http_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    pthread_mutex_lock(&S.mu);
    int orphan = 0;
    if (r->state == RL_REQ_QUEUED) { /* not expected: suspended connections are kept */
        for (size_t i = 0; i < S.count; i++)
            if (S.ring[(S.head + i) % S.cfg.queue] == r) {
                for (size_t j = i; j + 1 < S.count; j++)
                    S.ring[(S.head + j) % S.cfg.queue] = S.ring[(S.head + j + 1) % S.cfg.queue];
                S.count--;
                break;
            }
        S.stats.queued = S.count;
    } else if (r->state == RL_REQ_HELD) { /* the worker frees it when it answers */
        r->conn = NULL;
        orphan = 1;
    }
    if (--S.in_flight == 0)
        pthread_cond_broadcast(&S.idle);
    pthread_mutex_unlock(&S.mu);
    if (!orphan)
        rl_req_free(r);
}

/* ---- the workers' side ------------------------------------------------- */

int rl_http_next(void) {
    pthread_mutex_lock(&S.mu);
    for (;;) {
        if (S.running && S.count > 0) {
            int id = -1;
            for (int i = 0; i < RL_HTTP_MAX_HELD; i++)
                if (!S.held[i]) {
                    id = i;
                    break;
                }
            if (id >= 0) {
                rl_http_req *r = S.ring[S.head];
                S.head = (S.head + 1) % S.cfg.queue;
                S.count--;
                r->state = RL_REQ_HELD;
                S.held[id] = r;
                S.stats.queued = S.count;
                S.stats.held++;
                pthread_mutex_unlock(&S.mu);
                return id;
            }
        } else if (!S.running || S.stopping) {
            pthread_mutex_unlock(&S.mu);
            return -1;
        }
        pthread_cond_wait(&S.work, &S.mu);
    }
}

int rl_http_request(int id, const char **method, const char **path, const uint8_t **body,
                    size_t *body_len) {
    int ok = -1;
    pthread_mutex_lock(&S.mu);
    if (id >= 0 && id < RL_HTTP_MAX_HELD && S.held[id]) {
        rl_http_req *r = S.held[id];
        *method = r->method;
        *path = r->path;
        *body = r->body ? r->body : (const uint8_t *)"";
        *body_len = r->len;
        ok = 0;
    }
    pthread_mutex_unlock(&S.mu);
    return ok;
}

int rl_http_respond(int id, int status, const char *content_type, const uint8_t *body,
                    size_t body_len) {
    static const char oom[] =
        "{\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    pthread_mutex_lock(&S.mu);
    if (id < 0 || id >= RL_HTTP_MAX_HELD || !S.held[id]) {
        pthread_mutex_unlock(&S.mu);
        return -1;
    }
    rl_http_req *r = S.held[id];
    S.held[id] = NULL;
    S.stats.held--;
    pthread_cond_broadcast(&S.work); /* a held slot is free again */
    int ok = 0;
    uint8_t *copy = malloc(body_len ? body_len : 1);
    if (copy) {
        memcpy(copy, body, body_len);
        r->status = status;
        snprintf(r->content_type, sizeof r->content_type, "%s", content_type);
        r->answer = copy;
        r->answer_len = body_len;
    } else {
        ok = -1;
        r->status = 500;
        snprintf(r->content_type, sizeof r->content_type, "application/json; charset=utf-8");
        r->answer = malloc(sizeof oom);
        r->answer_len = r->answer ? sizeof oom - 1 : 0;
        if (r->answer)
            memcpy(r->answer, oom, sizeof oom);
    }
    r->state = RL_REQ_ANSWERED;
    struct MHD_Connection *c = r->conn;
    pthread_mutex_unlock(&S.mu);
    if (c)
        MHD_resume_connection(c);
    else
        rl_req_free(r); /* its connection went while it was held */
    return ok;
}

/* ---- stopping ---------------------------------------------------------- */

static void rl_on_signal(int sig) {
    (void)sig;
    rl_http_shutdown();
}

void rl_http_shutdown(void) {
    int saved = errno;
    if (S.pipe_w >= 0) {
        ssize_t n = write(S.pipe_w, "s", 1);
        (void)n;
    }
    errno = saved;
}

/* Stop accepting and wake the workers; idempotent.  Called from the
 * watcher and from rl_http_stop, which may race: the daemon lock keeps the
 * quiesce from meeting a daemon being stopped (or already gone). */
static void rl_begin_stop(void) {
    pthread_mutex_lock(&S.mu);
    S.stopping = 1;
    pthread_cond_broadcast(&S.work);
    pthread_mutex_unlock(&S.mu);
    /* The listening socket is closed after libmicrohttpd stopped
     * (rl_http_stop): closed here, libmicrohttpd 0.9.75 sometimes closed
     * it again and aborted. */
    pthread_mutex_lock(&S.daemon_mu);
    if (S.daemon && S.quiesced_fd < 0)
        S.quiesced_fd = MHD_quiesce_daemon(S.daemon);
    pthread_mutex_unlock(&S.daemon_mu);
}

static void *rl_watch(void *arg) {
    (void)arg;
    char b;
    for (;;) {
        ssize_t n = read(S.pipe_r, &b, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || S.watcher_exit)
            return NULL;
        rl_begin_stop();
    }
}

/* ---- start and stop ---------------------------------------------------- */

int rl_http_start(const rl_http_config *cfg, char *msg, size_t msgsz) {
    int fds[2] = {-1, -1};
    if (S.running) {
        snprintf(msg, msgsz, "expected one server per process, found one running");
        return -1;
    }
    if (cfg->queue < 1 || cfg->queue > 1u << 20 || cfg->max_body < 1 || cfg->listen_fd < 0) {
        snprintf(msg, msgsz, "expected a queue of 1 to %u requests, a body limit above 0 "
                 "and a listening socket", 1u << 20);
        return -1;
    }
    S.cfg = *cfg;
    S.api_key = NULL;
    S.ring = calloc(cfg->queue, sizeof *S.ring);
    if (cfg->api_key) {
        S.api_key = malloc(cfg->api_key_len ? cfg->api_key_len : 1);
        if (S.api_key)
            memcpy(S.api_key, cfg->api_key, cfg->api_key_len);
    }
    if (!S.ring || (cfg->api_key && !S.api_key) || pipe(fds) != 0) {
        snprintf(msg, msgsz, "cannot allocate the server's queue: %s", strerror(errno));
        goto fail;
    }
    S.pipe_r = fds[0];
    S.pipe_w = fds[1];
    S.head = S.count = S.in_flight = 0;
    memset(S.held, 0, sizeof S.held);
    memset(&S.stats, 0, sizeof S.stats);
    S.stopping = 0;
    S.watcher_exit = 0;
    S.running = 1;
    S.daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, rl_on_request,
        NULL, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)cfg->listen_fd,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->timeout,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)RL_HTTP_MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)RL_HTTP_CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, rl_on_completed, NULL, MHD_OPTION_END);
    if (!S.daemon) {
        S.running = 0;
        snprintf(msg, msgsz, "libmicrohttpd could not start on the socket (threads or memory)");
        goto fail;
    }
    if (pthread_create(&S.watcher, NULL, rl_watch, NULL) != 0) {
        MHD_stop_daemon(S.daemon);
        S.daemon = NULL;
        S.running = 0;
        snprintf(msg, msgsz, "cannot start the signal watcher thread");
        goto fail;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = rl_on_signal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &S.old_int);
    sigaction(SIGTERM, &sa, &S.old_term);
    return 0;
fail:
    free(S.ring);
    S.ring = NULL;
    free(S.api_key);
    S.api_key = NULL;
    if (fds[0] >= 0) {
        close(fds[0]);
        close(fds[1]);
    }
    S.pipe_r = S.pipe_w = -1;
    return -1;
}

void rl_http_stop(unsigned deadline) {
    static const char busy[] =
        "{\"error\":{\"code\":503,\"message\":\"the server is shutting down\",\"type\":\"unavailable_error\"}}";
    if (!S.running)
        return;
    rl_begin_stop();
    /* Whatever no worker took is answered here, so that no connection is
     * left suspended (libmicrohttpd refuses to stop with one). */
    for (;;) {
        pthread_mutex_lock(&S.mu);
        int id = -1;
        if (S.count > 0) {
            for (int i = 0; i < RL_HTTP_MAX_HELD && id < 0; i++)
                if (!S.held[i])
                    id = i;
            if (id >= 0) {
                S.held[id] = S.ring[S.head];
                S.held[id]->state = RL_REQ_HELD;
                S.head = (S.head + 1) % S.cfg.queue;
                S.count--;
                S.stats.held++;
            }
        }
        pthread_mutex_unlock(&S.mu);
        if (id < 0)
            break;
        rl_http_respond(id, 503, "application/json; charset=utf-8", (const uint8_t *)busy,
                        sizeof busy - 1);
    }
    for (int i = 0; i < RL_HTTP_MAX_HELD; i++) {
        pthread_mutex_lock(&S.mu);
        int held = S.held[i] != NULL;
        pthread_mutex_unlock(&S.mu);
        if (held)
            rl_http_respond(i, 503, "application/json; charset=utf-8", (const uint8_t *)busy,
                            sizeof busy - 1);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += deadline;
    pthread_mutex_lock(&S.mu);
    while (S.in_flight > 0)
        if (pthread_cond_timedwait(&S.idle, &S.mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&S.mu);
    pthread_mutex_lock(&S.daemon_mu);
    MHD_stop_daemon(S.daemon);
    S.daemon = NULL;
    if (S.quiesced_fd >= 0 && fcntl(S.quiesced_fd, F_GETFD) != -1)
        close(S.quiesced_fd);
    S.quiesced_fd = -1;
    pthread_mutex_unlock(&S.daemon_mu);
    sigaction(SIGINT, &S.old_int, NULL);
    sigaction(SIGTERM, &S.old_term, NULL);
    S.watcher_exit = 1;
    rl_http_shutdown();
    pthread_join(S.watcher, NULL);
    int r = S.pipe_r, w = S.pipe_w;
    S.pipe_r = S.pipe_w = -1; /* before the close: a late rl_http_shutdown writes nowhere */
    close(r);
    close(w);
    pthread_mutex_lock(&S.mu);
    S.running = 0;
    pthread_mutex_unlock(&S.mu);
    free(S.ring);
    S.ring = NULL;
    free(S.api_key);
    S.api_key = NULL;
}

void rl_http_get_stats(rl_http_stats *out) {
    pthread_mutex_lock(&S.mu);
    *out = S.stats;
    pthread_mutex_unlock(&S.mu);
}
