/* register.h - installs rontolisp's C primitives in the booted ECL. */
#ifndef RL_PRIMS_REGISTER_H
#define RL_PRIMS_REGISTER_H

/* Call once, after cl_boot and after the Lisp module is initialised (the
 * primitives live in its packages). */
void rl_register_primitives(void);

/* The file primitives (prims/ecl/files.c); rl_register_primitives calls it. */
void rl_register_file_primitives(void);

#endif
