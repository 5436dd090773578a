;;;; commands/script.lisp - `rontolisp script': its command line; the work
;;;; is in session/command-line.lisp.

(in-package "COMMAND-LINE")

(define-command "script" (file &rest args)
    (:usage "FILE [ARGS...]"
     :summary "run a Lisp file (- for standard input) in package RONTOLISP-USER, rontolisp:*args* = ARGS"
     :details "A first line that starts with #! is skipped, so a script can be an
executable file starting #!/usr/bin/env -S rontolisp --script.  As with
SBCL's --script, an error or (break) prints one line and exits 1 (there is
no debugger), and the end of the file exits 0 (or the status given to rontolisp:exit).
`rontolisp --script FILE ARGS...' is the same command."
     :options-first t)
  (run-script file args))
