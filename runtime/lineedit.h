/* lineedit.h - the REPL's line editor (libedit), primitives registered by
 * main.c beside those of prims/ecl/. */
#ifndef RL_RUNTIME_LINEEDIT_H
#define RL_RUNTIME_LINEEDIT_H

#include "prims/ecl/glue.h"

extern const rl_prim_table rl_lineedit_prims;

#endif
