/* net.c - the socket `rontolisp swank' listens on, made
 * without ECL's sb-bsd-sockets: an address is read exactly as inet_pton(3)
 * reads it (so what is checked is what is bound), a socket is made with
 * protocol 0 (no lookup in /etc/protocols, which a minimal system lacks),
 * and IPv6 (::1) works as IPv4 does.  The Lisp side (lisp/swank.lisp)
 * wraps the listening descriptor in an sb-bsd-sockets object, whose
 * accept Swank calls as before.
 *
 * Addresses arrive as UTF-8 octet vectors (RONTOLISP::%UTF8-OCTETS) and
 * are answered as octet vectors of 4 (IPv4) or 16 (IPv6). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prims/ecl/glue.h"

#define RL_FN_PTON "%INET-PTON"
#define RL_FN_LISTEN "%TCP-LISTEN"
#define RL_FN_PORT "%TCP-LOCAL-PORT"

static cl_object rl_octet_vector(const uint8_t *p, size_t n) {
    cl_object v = ecl_alloc_simple_vector((cl_index)n, ecl_aet_b8);
    memcpy(v->vector.self.b8, p, n);
    return v;
}

/* (%inet-pton text-octets) -> the address as 4 or 16 octets, or NIL when
 * inet_pton(3) takes TEXT as neither an IPv4 nor an IPv6 address. */
static cl_object rl_prim_inet_pton(cl_object text) {
    const cl_env_ptr env = ecl_process_env();
    char buf[64];
    uint8_t addr[16];
    cl_index n = 0;
    const uint8_t *p = rl_octets(RL_FN_PTON, 1, text, &n);
    if (n >= sizeof buf || memchr(p, 0, n))
        ecl_return1(env, ECL_NIL);
    memcpy(buf, p, n);
    buf[n] = 0;
    if (inet_pton(AF_INET, buf, addr) == 1)
        ecl_return1(env, rl_octet_vector(addr, 4));
    if (inet_pton(AF_INET6, buf, addr) == 1)
        ecl_return1(env, rl_octet_vector(addr, 16));
    ecl_return1(env, ECL_NIL);
}

/* The socket address of ADDR (4 or 16 octets) and PORT. */
static socklen_t rl_sockaddr(const uint8_t *addr, cl_index n, int port,
                             struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (n == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        memcpy(&in->sin_addr, addr, 4);
        return sizeof *in;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    memcpy(&in6->sin6_addr, addr, 16);
    return sizeof *in6;
}

/* (%tcp-listen address port backlog) -> a listening TCP socket's file
 * descriptor bound to ADDRESS (4 or 16 octets, as %INET-PTON answers) and
 * PORT (0: a free one), or NIL and a message naming the call that failed.
 * The socket is close-on-exec and reuses the address; an IPv6 one is IPv6
 * only. */
static cl_object rl_prim_tcp_listen(cl_object address, cl_object port, cl_object backlog) {
    const cl_env_ptr env = ecl_process_env();
    char msg[256];
    cl_index n = 0;
    const uint8_t *addr = rl_octets(RL_FN_LISTEN, 1, address, &n);
    int p = (int)rl_arg_fixnum(RL_FN_LISTEN, 2, port, 0, 65535);
    int b = (int)rl_arg_fixnum(RL_FN_LISTEN, 3, backlog, 1, 4096);
    if (n != 4 && n != 16)
        rl_type_error(RL_FN_LISTEN, 1, address, RL_T_VECTOR);
    struct sockaddr_storage ss;
    socklen_t len = rl_sockaddr(addr, n, p, &ss);
    const char *call = "socket";
    int one = 1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        call = "setsockopt";
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            (ss.ss_family != AF_INET6 ||
             setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0)) {
            call = "bind";
            if (bind(fd, (struct sockaddr *)&ss, len) == 0) {
                call = "listen";
                if (listen(fd, b) == 0)
                    ecl_return1(env, ecl_make_fixnum(fd));
            }
        }
        int e = errno;
        close(fd);
        errno = e;
    }
    snprintf(msg, sizeof msg, "%s: %s", call, strerror(errno));
    ecl_return2(env, ECL_NIL, ecl_make_simple_base_string(msg, -1));
}

/* (%tcp-local-port fd) -> the port the socket FD is bound to, or NIL. */
static cl_object rl_prim_tcp_local_port(cl_object fd) {
    const cl_env_ptr env = ecl_process_env();
    int s = (int)rl_arg_fixnum(RL_FN_PORT, 1, fd, 0, 1 << 30);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(s, (struct sockaddr *)&ss, &len) != 0)
        ecl_return1(env, ECL_NIL);
    if (ss.ss_family == AF_INET)
        ecl_return1(env, ecl_make_fixnum(ntohs(((struct sockaddr_in *)&ss)->sin_port)));
    if (ss.ss_family == AF_INET6)
        ecl_return1(env, ecl_make_fixnum(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)));
    ecl_return1(env, ECL_NIL);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM(RL_FN_PTON, rl_prim_inet_pton, 1),
    RL_PRIM(RL_FN_LISTEN, rl_prim_tcp_listen, 3),
    RL_PRIM(RL_FN_PORT, rl_prim_tcp_local_port, 1),
};
RL_PRIM_TABLE(rl_net_prims, "COMMAND-LINE", rl_defs);
