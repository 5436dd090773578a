/* register.h - installs rontolisp's C primitives in the booted ECL. */
#ifndef RL_PRIMS_ECL_REGISTER_H
#define RL_PRIMS_ECL_REGISTER_H

/* Call once, after cl_boot and after the Lisp module is initialised (the
 * primitives live in its packages).  Exits with a message if the Lisp
 * quantized-matrix struct disagrees with the C glue. */
void rl_register_primitives(void);

#endif
