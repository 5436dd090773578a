/* http.h - the HTTP layer of `rontolisp serve': libmicrohttpd reads
 * requests on its own thread, this layer holds them in a bounded queue,
 * and the Lisp workers take them, compute the answer and hand it back.
 *
 * Threads: libmicrohttpd's thread never touches Lisp.  It reads a
 * request's body (at most max_body bytes: more is a 413), checks the API
 * key (every path but /health: a 401), then pushes the request onto the
 * queue (full: a 503) and suspends its connection.  A worker blocks in
 * rl_http_next until a request is queued or the server stops, reads it
 * through rl_http_request, and answers it with rl_http_respond, which
 * resumes the connection; libmicrohttpd then sends the answer.  Every
 * error this layer answers itself is llama-server's JSON shape
 * {"error": {"code", "message", "type"}}.
 *
 * Stopping: SIGINT or SIGTERM (while the server runs) or rl_http_shutdown
 * stop accepting connections; requests already queued are still given to
 * the workers, new ones on open connections get a 503, and rl_http_next
 * answers -1 once the queue is empty.  rl_http_stop then waits for the
 * answers in flight to be sent and closes everything.
 *
 * One server per process. */
#ifndef RL_PRIMS_HTTP_H
#define RL_PRIMS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define RL_HTTP_MAX_HELD 256 /* requests held by workers at once */

/* Connections open at once: libmicrohttpd accepts no more until one
 * closes (the others wait in the listening socket's backlog). */
#define RL_HTTP_MAX_CONNECTIONS 1000

/* Bytes a connection's request line and headers may take, with its read
 * buffer (libmicrohttpd's per-connection memory): more is a 431. */
#define RL_HTTP_CONNECTION_MEMORY (32 * 1024)

typedef struct {
    int listen_fd;          /* a bound, listening TCP socket; the server owns it */
    size_t max_body;        /* bytes */
    unsigned timeout;       /* seconds a connection may be idle; 0: none */
    size_t queue;           /* requests waiting for a worker, 1.. */
    const uint8_t *api_key; /* NULL: no key */
    size_t api_key_len;
} rl_http_config;

/* Start the server on CFG's socket; 0, or -1 with MSG set (a bad
 * configuration, a server already running, no memory or threads). */
int rl_http_start(const rl_http_config *cfg, char *msg, size_t msgsz);

/* Block until a request is queued (answers its id, 0..RL_HTTP_MAX_HELD-1,
 * held by the caller until rl_http_respond) or the server is stopping and
 * the queue is empty (answers -1). */
int rl_http_next(void);

/* The method, path (no query) and body of the held request ID; 0, or -1
 * when ID is not held. */
int rl_http_request(int id, const char **method, const char **path, const uint8_t **body,
                    size_t *body_len);

/* Answer the held request ID with STATUS, CONTENT_TYPE and BODY (copied);
 * 0, or -1 when ID is not held or memory ran out (the request is then
 * answered 500 by this layer). */
int rl_http_respond(int id, int status, const char *content_type, const uint8_t *body,
                    size_t body_len);

/* Begin stopping (as SIGINT does).  Async-signal-safe. */
void rl_http_shutdown(void);

/* After every worker has left rl_http_next: wait at most DEADLINE seconds
 * for the answers in flight, close the server, put the signal handlers
 * back.  Idempotent. */
void rl_http_stop(unsigned deadline);

/* Counters: requests received, queued now, held by workers now, refused
 * because the queue was full. */
typedef struct {
    uint64_t received, queued, held, rejected;
} rl_http_stats;
void rl_http_get_stats(rl_http_stats *out);

#endif
