/* http.c - `rontolisp serve''s HTTP layer (prims/http.c) seen from Lisp:
 * start it on a listening socket, take the next request (blocking, with
 * Lisp interrupts held: the server's stop wakes the wait), read it, answer
 * it, stop.  A request is named by a small integer while a worker holds
 * it; the Lisp side (lisp/jobs/serve.lisp) answers every request it
 * took, whatever happens while it computes the answer. */
#include <string.h>

#include "prims/ecl/glue.h"
#include "prims/http.h"

#define RL_FN_START "%HTTP-START"
#define RL_FN_NEXT "%HTTP-NEXT"
#define RL_FN_REQUEST "%HTTP-REQUEST"
#define RL_FN_RESPOND "%HTTP-RESPOND"
#define RL_FN_SHUTDOWN "%HTTP-SHUTDOWN"
#define RL_FN_STOP "%HTTP-STOP"
#define RL_FN_STATS "%HTTP-STATS"

/* (%http-start listen-fd max-body timeout queue api-key) -> T, or NIL and
 * a message.  API-KEY is NIL or the key's UTF-8 octets. */
static cl_object rl_prim_http_start(cl_object fd, cl_object max_body, cl_object timeout,
                                    cl_object queue, cl_object api_key) {
    const cl_env_ptr env = ecl_process_env();
    char msg[256];
    rl_http_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.listen_fd = (int)rl_arg_fixnum(RL_FN_START, 1, fd, 0, 1 << 30);
    cfg.max_body = (size_t)rl_arg_fixnum(RL_FN_START, 2, max_body, 1, (cl_fixnum)1 << 40);
    cfg.timeout = (unsigned)rl_arg_fixnum(RL_FN_START, 3, timeout, 0, 1 << 30);
    cfg.queue = (size_t)rl_arg_fixnum(RL_FN_START, 4, queue, 1, 1 << 20);
    if (api_key != ECL_NIL) {
        cl_index n = 0;
        cfg.api_key = rl_octets(RL_FN_START, 5, api_key, &n);
        cfg.api_key_len = n;
    }
    if (rl_http_start(&cfg, msg, sizeof msg) != 0)
        ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
    ecl_return1(env, ECL_T);
}

/* (%http-next) -> the id of the next request, or NIL once the server is
 * stopping and no request waits. */
static cl_object rl_prim_http_next(void) {
    const cl_env_ptr env = ecl_process_env();
    int id;
    ecl_disable_interrupts_env(env);
    id = rl_http_next();
    ecl_enable_interrupts_env(env);
    ecl_return1(env, id < 0 ? ECL_NIL : ecl_make_fixnum(id));
}

/* (%http-request id) -> method, path and body (an octet vector) of the
 * held request ID, or NIL when ID is not held. */
static cl_object rl_prim_http_request(cl_object id) {
    const cl_env_ptr env = ecl_process_env();
    const char *method, *path;
    const uint8_t *body;
    size_t n;
    int i = (int)rl_arg_fixnum(RL_FN_REQUEST, 1, id, 0, RL_HTTP_MAX_HELD - 1);
    if (rl_http_request(i, &method, &path, &body, &n) != 0)
        ecl_return1(env, ECL_NIL);
    /* The request stays held (and its bytes in place) until answered. */
    cl_object m = rl_string_from_utf8(method, strlen(method));
    cl_object p = rl_string_from_utf8(path, strlen(path));
    cl_object v = ecl_alloc_simple_vector((cl_index)n, ecl_aet_b8);
    memcpy(v->vector.self.b8, body, n);
    ecl_return3(env, m, p, v);
}

/* (%http-respond id status content-type-octets body-octets) -> T, or NIL
 * when ID is not held. */
static cl_object rl_prim_http_respond(cl_object id, cl_object status, cl_object type,
                                      cl_object body) {
    const cl_env_ptr env = ecl_process_env();
    char ctype[64];
    cl_index tn = 0, bn = 0;
    int i = (int)rl_arg_fixnum(RL_FN_RESPOND, 1, id, 0, RL_HTTP_MAX_HELD - 1);
    int s = (int)rl_arg_fixnum(RL_FN_RESPOND, 2, status, 100, 599);
    const uint8_t *t = rl_octets(RL_FN_RESPOND, 3, type, &tn);
    const uint8_t *b = rl_octets(RL_FN_RESPOND, 4, body, &bn);
    if (tn >= sizeof ctype || memchr(t, 0, tn) || memchr(t, '\n', tn) || memchr(t, '\r', tn))
        rl_type_error(RL_FN_RESPOND, 3, type, RL_T_VECTOR);
    memcpy(ctype, t, tn);
    ctype[tn] = 0;
    ecl_return1(env, rl_http_respond(i, s, ctype, b, bn) == 0 ? ECL_T : ECL_NIL);
}

/* (%http-shutdown) -> T: begin stopping, as SIGINT does. */
static cl_object rl_prim_http_shutdown(void) {
    rl_http_shutdown();
    ecl_return1(ecl_process_env(), ECL_T);
}

/* (%http-stop deadline) -> T: after the workers are done, wait at most
 * DEADLINE seconds for the answers in flight and close the server. */
static cl_object rl_prim_http_stop(cl_object deadline) {
    const cl_env_ptr env = ecl_process_env();
    unsigned d = (unsigned)rl_arg_fixnum(RL_FN_STOP, 1, deadline, 0, 1 << 20);
    ecl_disable_interrupts_env(env);
    rl_http_stop(d);
    ecl_enable_interrupts_env(env);
    ecl_return1(env, ECL_T);
}

/* (%http-stats) -> requests received, queued, held, refused (queue full). */
static cl_object rl_prim_http_stats(void) {
    const cl_env_ptr env = ecl_process_env();
    rl_http_stats s;
    rl_http_get_stats(&s);
    rl_return4(env, ecl_make_uint64_t(s.received), ecl_make_uint64_t(s.queued),
               ecl_make_uint64_t(s.held), ecl_make_uint64_t(s.rejected));
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM(RL_FN_START, rl_prim_http_start, 5),
    RL_PRIM(RL_FN_NEXT, rl_prim_http_next, 0),
    RL_PRIM(RL_FN_REQUEST, rl_prim_http_request, 1),
    RL_PRIM(RL_FN_RESPOND, rl_prim_http_respond, 4),
    RL_PRIM(RL_FN_SHUTDOWN, rl_prim_http_shutdown, 0),
    RL_PRIM(RL_FN_STOP, rl_prim_http_stop, 1),
    RL_PRIM(RL_FN_STATS, rl_prim_http_stats, 0),
};
RL_PRIM_TABLE(rl_http_prims, "COMMAND-LINE", rl_defs);
