/* main.c - the rontolisp executable: boots ECL, initialises the Lisp code
 * compiled into this program, registers the C primitives, takes the global
 * flags and hands the rest of the command line to RONTOLISP:MAIN, whose
 * answer is the exit status.
 *
 * Global flags come before the subcommand (`rontolisp --threads 2 bench`);
 * for every subcommand but `script` (or `--script`), whose arguments belong
 * to the script, they are also taken after it.  The start-up options --eval
 * FORM, --load FILE, --norc, --quit and --non-interactive (lisp/repl.lisp)
 * come before the subcommand too, so they and their values are passed on
 * without being taken for it.
 *
 * Signals: SIGTERM, SIGHUP and SIGINT remove the temporary files of
 * unfinished writes and end the process with 128 + the signal's number;
 * once the REPL is at its prompt, Ctrl-C (SIGINT) returns to the prompt
 * instead (COMMAND-LINE::REPL gives SIGINT to ECL there). */
#include <ecl/ecl.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/fileio.h"
#include "prims/cpu.h"
#include "prims/ecl/glue.h"
#include "prims/ecl/register.h"
#include "runtime/lineedit.h"

/* Made by c:build-static-library from lisp/ (see the Makefile). */
extern void init_rontolisp_lisp(cl_object);

/* Takes a global flag at argv[*i]; answers 1 if it was one, 0 if not, -1
 * (after printing why, naming the subcommand CMD it follows, or none when
 * CMD is NULL) if it was malformed. */
static int rl_take_global_flag(int argc, char **argv, int *i, const char *cmd) {
    const char *a = argv[*i];
    if (strcmp(a, "--simd") == 0) {
        rl_set_simd(1);
        return 1;
    }
    if (strcmp(a, "--no-simd") == 0) {
        rl_set_simd(0);
        return 1;
    }
    if (strcmp(a, "--threads") == 0 || strncmp(a, "--threads=", 10) == 0) {
        const char *v = a[9] == '=' ? a + 10 : (*i + 1 < argc ? argv[++*i] : NULL);
        char *end;
        long n;
        if (!v) {
            fprintf(stderr, "rontolisp%s%s: --threads expects a count, found nothing\n", cmd ? " " : "",
                    cmd ? cmd : "");
            return -1;
        }
        errno = 0;
        n = strtol(v, &end, 10);
        if (errno || *end || end == v || n < 1 || n > RL_MAX_THREADS) {
            fprintf(stderr, "rontolisp%s%s: --threads expects a count from 1 to %d (the kernels' limit), found \"%s\"\n",
                    cmd ? " " : "", cmd ? cmd : "", RL_MAX_THREADS, v);
            return -1;
        }
        rl_set_threads((int)n);
        return 1;
    }
    return 0;
}

/* 1 if ARG is a start-up option that takes the next argument as its value
 * (--eval, --load), -1 if it is one that takes none (--norc, --quit,
 * --non-interactive or --eval=...), 0 if it is not one. */
static int rl_startup_option(const char *arg) {
    if (strcmp(arg, "--eval") == 0 || strcmp(arg, "--load") == 0)
        return 1;
    if (strcmp(arg, "--norc") == 0 || strcmp(arg, "--quit") == 0 ||
        strcmp(arg, "--non-interactive") == 0 || strncmp(arg, "--eval=", 7) == 0 ||
        strncmp(arg, "--load=", 7) == 0)
        return -1;
    return 0;
}

/* 1 if ARG runs a script, whose arguments are all its own: the subcommand
 * `script` or SBCL's spelling `--script`. */
static int rl_script_command(const char *arg) {
    return strcmp(arg, "script") == 0 || strcmp(arg, "--script") == 0;
}

int main(int argc, char **argv) {
    int status = 1;
    int i, sub = -1;
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    int nrest = 0;

    if (!rest)
        return 1;
    for (i = 1; i < argc; i++) {
        int taken;
        if (sub >= 0 && rl_script_command(argv[sub])) {
            rest[nrest++] = argv[i];
            continue;
        }
        taken = rl_take_global_flag(argc, argv, &i, sub >= 0 ? argv[sub] : NULL);
        if (taken < 0) {
            /* the flag said what was wrong; after a command (`bench
             * --threads N') the flag is that command's option too */
            if (sub >= 0)
                fprintf(stderr, "Try `rontolisp %s --help' for its options.\n", argv[sub]);
            else
                fprintf(stderr, "(rontolisp --help shows the usage)\n");
            free(rest);
            return 2;
        }
        if (taken)
            continue;
        if (sub < 0 && rl_startup_option(argv[i]) > 0 && i + 1 < argc) {
            rest[nrest++] = argv[i++];
        } else if (sub < 0 && rl_startup_option(argv[i]) == 0) {
            sub = i;
        }
        rest[nrest++] = argv[i];
    }

    /* Until the REPL's prompt an interrupt ends the run (see above), so
     * ECL must not turn SIGINT into a Lisp condition: one that came while
     * the REPL started landed in ECL's own debugger, at whatever point the
     * boot was, which read the REPL's input as its commands, crashed or
     * hung.  The handlers go in before cl_boot, which takes a tenth of a
     * second or more: installed after it, a signal during the boot met
     * the disposition inherited from the parent, and one that came in
     * ignored (SIGINT of a background job started by a shell) was lost
     * for good while the script ran on.  ECL leaves SIGTERM and SIGHUP
     * alone, and SIGINT when it does not trap it, so the handlers stay in
     * place. */
    ecl_set_option(ECL_OPT_TRAP_SIGINT, 0);
    rl_gguf_atomic_trap_signals(1);
    cl_boot(argc, argv);
    /* Each compiled function records its source file as a pathname
     * RONTOLISP:LISP;NAME.LISP (runtime/build-lisp.lisp), made again as
     * the compiled code loads: it is a logical pathname only when the host
     * RONTOLISP exists by then, else a physical one that no translation
     * reaches.  COMMAND-LINE::INSTALL-SOURCE-TRANSLATIONS points the host at
     * the sources once they are found. */
    si_pathname_translations(2, ecl_make_simple_base_string("RONTOLISP", -1), ECL_NIL);
    ecl_init_module(NULL, init_rontolisp_lisp);
    rl_register_primitives();
    rl_glue_define(&rl_lineedit_prims);

    {
        const cl_env_ptr env = ecl_process_env();
        cl_object args = ECL_NIL;
        cl_object exit_code = ecl_make_symbol("*PROGRAM-EXIT-CODE*", "EXT");
        /* Bytes that are not UTF-8 become U+DC80..U+DCFF, which
         * RONTOLISP::%UTF8-OCTETS turns back into those bytes, so a path
         * that is not UTF-8 still names its file. */
        for (i = nrest - 1; i >= 0; i--)
            args = ecl_cons(rl_string_from_utf8(rest[i], strlen(rest[i])), args);
        free(rest);
        ECL_CATCH_ALL_BEGIN(env) {
            cl_object r = cl_funcall(2, ecl_make_symbol("MAIN", "RONTOLISP"), args);
            status = ECL_FIXNUMP(r) ? (int)ecl_fixnum(r) : 1;
        } ECL_CATCH_ALL_IF_CAUGHT {
            /* ext:quit unwinds to here with its code in this variable. */
            cl_object c = ecl_symbol_value(exit_code);
            status = ECL_FIXNUMP(c) ? (int)ecl_fixnum(c) : 1;
        } ECL_CATCH_ALL_END;
    }
    cl_shutdown();
    return status;
}
