/* kernel.c - the names of kernel.h's statuses. */
#include "prims/kernel.h"

const char *rl_status_name(rl_status st) {
    switch (st) {
    case RL_OK: return "ok";
    case RL_NONFINITE: return "non-finite";
    case RL_OVERFLOW: return "scale-overflow";
    case RL_BADLEN: return "bad-length";
    case RL_BADARG: return "bad-argument";
    case RL_NOMEM: return "out-of-memory";
    case RL_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}
