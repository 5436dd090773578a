/* numtext.h - numbers as text for the commands' output, from C: token ids
 * and single-floats, written into a caller's buffer.
 *
 * A single-float is written as the Lisp printer writes it (PRIN1, which
 * json-float-string and float-text use): the shortest digits that read back
 * as the same float, the nearer of two candidates and the larger in
 * magnitude on a tie; fixed notation for 1e-3 <= |x| < 1e7 ("0.001",
 * "123.5", "9999999.0"), else "d.ddde-N" ("1.0e7", "9.9e-4"); "-0.0".
 * Plain C, no ECL.
 */
#ifndef RL_PRIMS_NUMTEXT_H
#define RL_PRIMS_NUMTEXT_H

#include <stddef.h>
#include <stdint.h>

/* The longest text of one float or integer, with room to spare. */
#define RL_NUMTEXT_MAX 48

/* Write the decimal digits of N (with "-" when negative) at OUT; answers
 * the count of bytes. */
size_t rl_int_text(int64_t n, char *out);

/* Write the text of the finite, normal or zero single-float X at OUT and
 * answer the count of bytes; answers 0 (writing nothing) for a subnormal,
 * a NaN or an infinity, which the caller writes itself (the Lisp printer
 * gives a subnormal more digits than the shortest). */
size_t rl_float_text(float x, char *out);

#endif
