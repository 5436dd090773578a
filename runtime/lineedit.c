/* lineedit.c - line editing for the REPL at a terminal, with libedit (BSD
 * licence) through its readline-compatible interface: editing keys,
 * history kept in a file, completion of symbols asked from Lisp
 * (COMMAND-LINE::LINE-COMPLETIONS).  The REPL reads through a Lisp stream
 * that calls %LINE-EDITOR-READ once per line; nothing here runs unless
 * standard input is a terminal.
 *
 * Ctrl-C while a line is being edited must not run a Lisp interrupt that
 * longjmps out of libedit (the terminal would stay in raw mode): Lisp
 * interrupts are held while libedit reads, ECL's wake-up signal ends the
 * read (EINTR), and the interrupt runs once libedit has restored the
 * terminal; the Lisp side turns it into a fresh prompt.  While a form
 * runs, Ctrl-C interrupts it as usual (the debugger). */
#include <ecl/ecl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "prims/ecl/glue.h"
#include "runtime/lineedit.h"

/* History lines kept in the file and in memory. */
#define RL_HISTORY_MAX 1000

static int rl_le_started;
static char rl_le_history[4096];
static cl_object rl_le_complete_fn = ECL_NIL;

/* The completions of TEXT from Lisp as a readline match array (the common
 * prefix first, then each candidate, NULL-terminated; malloc'd, as libedit
 * frees it), or NULL when there are none or anything failed. */
static cl_object rl_le_candidates(const char *text) {
    const cl_env_ptr env = ecl_process_env();
    volatile cl_object list = ECL_NIL;
    ECL_CATCH_ALL_BEGIN(env) {
        list = cl_funcall(2, rl_le_complete_fn,
                          rl_string_from_utf8(text, (uint64_t)strlen(text)));
    } ECL_CATCH_ALL_IF_CAUGHT {
        list = ECL_NIL;
    } ECL_CATCH_ALL_END;
    return list;
}

static char **rl_le_complete(const char *text, int start, int end) {
    cl_object list = rl_le_candidates(text);
    char **matches = NULL;
    size_t n = 0, i = 0;
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    if (!ECL_LISTP(list) || list == ECL_NIL)
        return NULL;
    n = (size_t)ecl_length(list); /* LINE-COMPLETIONS answers a proper list */
    matches = calloc(n + 2, sizeof *matches);
    if (!matches)
        return NULL;
    for (cl_object l = list; l != ECL_NIL && i < n; l = ECL_CONS_CDR(l)) {
        cl_index len;
        /* Checked without signalling: nothing may unwind through libedit. */
        const uint8_t *p = rl_simple_data(ECL_CONS_CAR(l), ecl_aet_b8, &len);
        char *s = p ? malloc(len + 1) : NULL;
        if (!s)
            break;
        memcpy(s, p, len);
        s[len] = 0;
        matches[1 + i++] = s;
    }
    if (i == 0) {
        free(matches);
        return NULL;
    }
    if (i == 1) {
        matches[0] = matches[1];
        matches[1] = NULL;
        return matches;
    }
    {
        /* The longest common prefix replaces the word typed so far. */
        size_t k = strlen(matches[1]);
        for (size_t j = 2; j <= i; j++) {
            size_t m = 0;
            while (m < k && matches[j][m] == matches[1][m])
                m++;
            k = m;
        }
        matches[0] = malloc(k + 1);
        if (!matches[0]) {
            for (size_t j = 1; j <= i; j++)
                free(matches[j]);
            free(matches);
            return NULL;
        }
        memcpy(matches[0], matches[1], k);
        matches[0][k] = 0;
    }
    return matches;
}

/* (%line-editor-start history-path-octets-or-nil) -> T: set libedit up
 * once, reading the history file when one is given. */
static cl_object rl_prim_line_editor_start(cl_object path) {
    const cl_env_ptr env = ecl_process_env();
    if (path != ECL_NIL) {
        const char *p = rl_path_arg("%LINE-EDITOR-START", path, rl_le_history,
                                    sizeof rl_le_history);
        (void)p;
    }
    if (!rl_le_started) {
        rl_le_complete_fn = ecl_make_symbol("LINE-COMPLETIONS", "COMMAND-LINE");
        ecl_register_root(&rl_le_complete_fn);
        rl_readline_name = "rontolisp";
        /* A package-qualified symbol keeps its colons in the word. */
        rl_basic_word_break_characters = " \t\n\"'`(),;#|";
        rl_completion_append_character = '\0';
        rl_attempted_completion_function = rl_le_complete;
        rl_initialize();
        stifle_history(RL_HISTORY_MAX);
        rl_le_started = 1;
    }
    if (rl_le_history[0])
        read_history(rl_le_history);
    ecl_return1(env, ECL_T);
}

/* (%line-editor-read prompt-octets) -> the line typed (without its
 * newline), NIL at end of input, or :INTERRUPT when a signal ended the
 * read (after running the Lisp interrupt it queued, if any: Ctrl-C's
 * signals EXT:INTERACTIVE-INTERRUPT from here). */
static cl_object rl_prim_line_editor_read(cl_object prompt) {
    const cl_env_ptr env = ecl_process_env();
    cl_index plen;
    const uint8_t *pp = rl_octets("%LINE-EDITOR-READ", 1, prompt, &plen);
    char pbuf[256];
    char *line;
    int interrupted;
    cl_object out;
    if (!rl_le_started)
        rl_signal(RL_C_ERROR, "%%LINE-EDITOR-READ expects %%LINE-EDITOR-START first, found the editor not started");
    if (plen >= sizeof pbuf)
        plen = sizeof pbuf - 1;
    memcpy(pbuf, pp, plen);
    pbuf[plen] = 0;
    /* No Lisp interrupt may unwind through libedit. */
    ecl_disable_interrupts_env(env);
    errno = 0;
    line = readline(pbuf);
    interrupted = !line && errno == EINTR;
    /* The SIGINT that ended the read reaches ECL's signal thread, which
     * queues the interrupt for this one a moment later: wait for it (a
     * bounded time: another signal may have ended the read). */
    for (int ms = 0; interrupted && ms < 500 && env->interrupt_struct->pending_interrupt == ECL_NIL;
         ms++)
        usleep(1000);
    ecl_enable_interrupts_env(env);
    if (interrupted) {
        /* Ctrl-C (ECL's SIGINT handler queued an interrupt for this
         * thread): it runs now, outside libedit. */
        ecl_check_pending_interrupts(env);
        ecl_return1(env, ecl_make_keyword("INTERRUPT"));
    }
    if (!line)
        ecl_return1(env, ECL_NIL);
    if (line[strspn(line, " \t")]) {
        add_history(line);
        if (rl_le_history[0])
            write_history(rl_le_history);
    }
    out = rl_string_from_utf8(line, (uint64_t)strlen(line));
    free(line);
    ecl_return1(env, out);
}

static const rl_prim_def rl_lineedit_defs[] = {
    RL_PRIM("%LINE-EDITOR-START", rl_prim_line_editor_start, 1),
    RL_PRIM("%LINE-EDITOR-READ", rl_prim_line_editor_read, 1),
};

RL_PRIM_TABLE(rl_lineedit_prims, "COMMAND-LINE", rl_lineedit_defs);
