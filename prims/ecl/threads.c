/* threads.c - room for Lisp threads.  ECL 21.2.1 keeps its threads in a
 * vector (cl_core.processes) of 256 slots, and the code that grows it makes
 * the new vector without a fill pointer, so it looks full at once and is
 * grown again forever: the 256th live thread spins at 100% CPU while memory
 * runs out.  The Lisp side (lisp/threads.lisp) makes the vector large
 * enough once, here, and refuses threads beyond a limit below that size.
 *
 * A special variable's binding in a thread lives in that thread's table,
 * at the variable's index, which ECL hands out the first time any thread
 * binds it, without a lock (ecl_bds_bind): the Lisp side gives every
 * special its index before a thread starts (%slot-every-special), and
 * %special-slot-p says whether a variable has one. */
#include <string.h>

#include "prims/ecl/glue.h"

#define RL_FN_RESERVE "%RESERVE-THREAD-SLOTS"

extern void ecl_get_spinlock(cl_env_ptr env, cl_object *lock);
extern void ecl_giveup_spinlock(cl_object *lock);

/* (%reserve-thread-slots n) -> the number of slots ECL's vector of threads
 * has after making it hold at least N (it never shrinks), with its fill
 * pointer kept. */
static cl_object rl_prim_reserve_thread_slots(cl_object n) {
    const cl_env_ptr env = ecl_process_env();
    cl_index want = (cl_index)rl_arg_fixnum(RL_FN_RESERVE, 1, n, 1, 1 << 20);
    if (want > cl_core.processes->vector.dim) {
        /* Allocate first: nothing may allocate while the spinlock is held. */
        cl_object bigger = si_make_vector(ECL_T, ecl_make_fixnum((cl_fixnum)want), ECL_T,
                                          ecl_make_fixnum(0), ECL_NIL, ECL_NIL);
        ecl_disable_interrupts_env(env);
        ecl_get_spinlock(env, &cl_core.processes_spinlock);
        cl_object old = cl_core.processes;
        if (old->vector.fillp <= want && old->vector.dim < want) {
            memcpy(bigger->vector.self.t, old->vector.self.t,
                   old->vector.fillp * sizeof(cl_object));
            bigger->vector.fillp = old->vector.fillp;
            cl_core.processes = bigger;
        }
        ecl_giveup_spinlock(&cl_core.processes_spinlock);
        ecl_enable_interrupts_env(env);
    }
    ecl_return1(env, ecl_make_fixnum((cl_fixnum)cl_core.processes->vector.dim));
}

/* (%special-slot-p symbol) -> T when the special variable SYMBOL has its
 * index in the threads' tables of bindings (some thread has bound it),
 * else NIL.  A constant or a non-symbol is refused. */
static cl_object rl_prim_special_slot_p(cl_object s) {
    if (ecl_t_of(s) != t_symbol || (s->symbol.stype & ecl_stp_constant))
        rl_signal(RL_C_ERROR, "%%SPECIAL-SLOT-P: expected a symbol naming a variable, found %s",
                  ecl_t_of(s) == t_symbol ? "a constant" : "another object");
    ecl_return1(ecl_process_env(),
                s->symbol.binding == ECL_MISSING_SPECIAL_BINDING ? ECL_NIL : ECL_T);
}

/* Give the special variable S its index, if it has none, by binding it
 * (to its own global value) and unbinding it at once, as a LET would.
 * Answers 1 when it had none. */
static cl_index rl_slot_special(cl_env_ptr env, cl_object s) {
    if (s == OBJNULL || ecl_t_of(s) != t_symbol) return 0;
    if (!(s->symbol.stype & ecl_stp_special) || (s->symbol.stype & ecl_stp_constant)) return 0;
    if (s->symbol.binding != ECL_MISSING_SPECIAL_BINDING) return 0;
    ecl_bds_bind(env, s, s->symbol.value);
    ecl_bds_unwind1(env);
    return 1;
}

/* The symbols of a package's table (its internal or external symbols:
 * name -> symbol) given their index (rl_slot_special). */
static cl_index rl_slot_table(cl_env_ptr env, cl_object table) {
    cl_index n = 0;
    if (ecl_t_of(table) != t_hashtable) return 0;
    struct ecl_hashtable_entry *data = table->hash.data;
    cl_index size = table->hash.size;
    for (cl_index i = 0; i < size; i++)
        if (data[i].key != OBJNULL) n += rl_slot_special(env, data[i].value);
    return n;
}

/* (%slot-every-special) -> how many special variables, of every package's
 * symbols, had no index in the threads' tables of bindings and were given
 * one now.  Walks the packages' tables in place: DO-ALL-SYMBOLS took
 * 0.5 ms and consed 500 KB over ECL's 8,000 symbols. */
static cl_object rl_prim_slot_every_special(void) {
    const cl_env_ptr env = ecl_process_env();
    cl_index n = 0;
    for (cl_object l = cl_core.packages; ECL_CONSP(l); l = ECL_CONS_CDR(l)) {
        cl_object p = ECL_CONS_CAR(l);
        if (ecl_t_of(p) != t_package) continue;
        n += rl_slot_table(env, p->pack.internal);
        n += rl_slot_table(env, p->pack.external);
    }
    ecl_return1(env, ecl_make_fixnum((cl_fixnum)n));
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM(RL_FN_RESERVE, rl_prim_reserve_thread_slots, 1),
    RL_PRIM("%SPECIAL-SLOT-P", rl_prim_special_slot_p, 1),
    RL_PRIM("%SLOT-EVERY-SPECIAL", rl_prim_slot_every_special, 0),
};
RL_PRIM_TABLE(rl_thread_prims, "RONTOLISP", rl_defs);
