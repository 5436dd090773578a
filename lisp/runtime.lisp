;;;; runtime.lisp - the command line, the REPL and the script runner.
;;;;
;;;; The C host boots ECL, registers the primitives, takes the global flags
;;;; (--simd, --no-simd, --threads N) and calls MAIN with the rest of the
;;;; command line.  MAIN dispatches: no argument runs the REPL, `script'
;;;; runs a file, and every other subcommand is looked up in *COMMANDS*,
;;;; which the tool files fill with DEFINE-COMMAND.  MAIN answers the exit
;;;; status; nothing here calls ext:quit, so the host always gets to flush
;;;; and shut ECL down cleanly.

(in-package "RONTOLISP")

(defparameter *version* "0.1.0")

(defvar *args* '()
  "The command-line arguments after the script's file name, as a list of
strings, while `rontolisp script FILE ARGS...' runs FILE.")

(defun version ()
  "The version of rontolisp and of the ECL it embeds, as a string."
  (format nil "rontolisp ~A (~A ~A)" *version*
          (lisp-implementation-type) (lisp-implementation-version)))

(defun exit (&optional (code 0))
  "Leave rontolisp with exit status CODE (an integer, default 0), unwinding
every dynamic extent on the way, so open files are closed and the standard
streams flushed."
  (check-type code (integer 0 255))
  (throw '%exit code))

;;; Knobs shared with the C kernels.

(defun simd ()
  "True when the kernels may use the CPU's SIMD paths (the default; the
command-line flag --no-simd turns them off).  Set with (setf (simd) nil)."
  (%simd))

(defun (setf simd) (on)
  (%set-simd (if on 1 0))
  on)

(defun threads ()
  "The number of threads the kernels split their work across (--threads N;
by default the machine's cores).  Set with (setf (threads) n)."
  (%threads))

(defun (setf threads) (n)
  ;; The C knob refuses a count outside 1 to its limit (a TYPE-ERROR whose
  ;; expected type names the limit), so the limit has one home.
  (%set-threads n)
  n)

(defun simd-path ()
  "The name of the kernel path in use now, as a string: \"avx512vnni\",
\"avx512\", \"avx2\" or \"scalar\"."
  (%simd-path))

;;; Subcommands.

(defstruct (command (:constructor make-command (name usage summary function)))
  name usage summary function)

(defvar *commands* '()
  "Every subcommand besides the REPL and `script', in the order of the usage
string: a list of COMMAND structures.")

(defmacro define-command (name (args) (usage summary) &body body)
  "Define the subcommand NAME (a string).  BODY runs with ARGS bound to the
list of argument strings after NAME and answers the exit status (an integer;
NIL means 0).  USAGE is its usage line, SUMMARY one sentence for --help."
  (let ((fn (intern (format nil "COMMAND-~:@(~A~)" name))))
    `(progn
       (defun ,fn (,args) ,@body)
       (setf *commands*
             (append (remove ,name *commands* :key #'command-name :test #'string=)
                     (list (make-command ,name ,usage ,summary ',fn))))
       ',fn)))

(defun usage-string ()
  (with-output-to-string (s)
    (format s "usage: rontolisp [--simd | --no-simd] [--threads N] [COMMAND ARGS...]~%~%")
    (format s "  rontolisp                          a REPL in package RONTOLISP-USER~%")
    (format s "  rontolisp script FILE [ARGS...]    run a Lisp file, rontolisp:*args* = ARGS~%")
    (dolist (c *commands*)
      (format s "  rontolisp ~A~%      ~A~%" (command-usage c) (command-summary c)))
    (format s "  rontolisp --help | --version~%~%")
    (format s "Global flags (before the command):~%")
    (format s "  --simd, --no-simd   use (the default) or avoid the CPU's SIMD kernels~%")
    (format s "  --threads N         threads for the kernels (default: every core)~%")
    (format s "~%Exit status: 0 success, 1 an error (one line on stderr), 2 bad usage.~%")))

(defun print-usage (&optional (stream *error-output*))
  (write-string (usage-string) stream)
  (finish-output stream))

;;; Reporting errors in batch modes.

(defun condition-line (condition)
  "CONDITION's report on one line (newlines folded), never failing itself."
  (let ((text (handler-case (princ-to-string condition)
                (serious-condition ()
                  (format nil "~S (its report failed)" (type-of condition))))))
    (substitute #\Space #\Newline (string-trim '(#\Space #\Newline) text))))

(defun report-error (prefix condition)
  (format *error-output* "~&~A: ~A~%" prefix (condition-line condition))
  (finish-output *error-output*))

(defun output-closed-p ()
  "True when standard output is a pipe whose reader has gone (`inspect |
head'): the reader took what it wanted, so the run ends quietly."
  (%output-closed-p 1))

(defun failure-status (prefix condition)
  "The exit status for CONDITION ending a batch run: 0, silently, when it
came from writing to a closed pipe; else 1 after one line on stderr."
  (cond ((and (typep condition 'stream-error) (output-closed-p)) 0)
        (t (ignore-errors (report-error prefix condition)) 1)))

(defmacro with-batch-errors ((prefix) &body body)
  "Run BODY; an unhandled serious condition prints one line on stderr and
answers exit status 1 (2 for a usage error, after the usage string; 0 and
nothing printed when standard output is a closed pipe)."
  `(handler-case (progn ,@body)
     (usage-error (c)
       (report-error ,prefix c)
       (print-usage)
       2)
     (serious-condition (c)
       (failure-status ,prefix c))))

(defun die-in-any-thread (condition hook)
  "The debugger hook of batch runs: no one is there to answer a debugger,
so an unhandled serious condition in any thread prints one line and ends
the process with status 1 (temporary files of unfinished writes removed)."
  (declare (ignore hook))
  (let ((status (failure-status "rontolisp" condition)))
    (ignore-errors (finish-output *standard-output*))
    (%exit-process status)))

(defun install-batch-debugger ()
  ;; SETF, not LET: threads see the global value, not the caller's binding.
  (setf *debugger-hook* #'die-in-any-thread))

;;; The script runner.

(defun run-script (args)
  (when (null args)
    (usage-error "script: expected a FILE to run, found nothing"))
  (let ((file (first args)))
    (install-batch-debugger)
    (with-batch-errors ((format nil "rontolisp: ~A" file))
      ;; Checked through the safe reader first: LOAD would wait forever on
      ;; a FIFO and say little about a directory.
      (multiple-value-bind (octets why)
          (%read-file-octets (path-octets file) "a Lisp source file to run")
        (unless octets
          (error 'file-io-error :path file :message why)))
      (let ((*args* (rest args))
            (*package* (find-package "RONTOLISP-USER"))
            (*readtable* (copy-readtable nil)))
        (load file :verbose nil :print nil))
      0)))

;;; The REPL.

(defun repl-read (interactive)
  "Read one form from *standard-input*, answering :EOF at end of input."
  (when interactive
    (format *standard-output* "~&~A> " (package-name *package*))
    (finish-output *standard-output*))
  (read *standard-input* nil :eof))

(defun repl ()
  "The read-eval-print loop: each form's values are printed; an error prints
the condition and returns to the prompt; end of input leaves with status 0."
  (let ((*package* (find-package "RONTOLISP-USER"))
        (interactive (/= 0 (%isatty 0)))
        (* nil) (** nil) (*** nil) (+ nil) (++ nil) (+++ nil)
        (/ nil) (// nil) (/// nil) (- nil))
    (if interactive
        (format t "~A~%Type (rontolisp:exit) or end of input to leave.~%" (version))
        (install-batch-debugger))
    (loop
      (let ((form (handler-case (repl-read interactive)
                    (end-of-file () :eof)
                    ;; Ctrl-C at the prompt: a fresh prompt, input kept.
                    (ext:interactive-interrupt ()
                      (when interactive (terpri))
                      :again)
                    (serious-condition (c)
                      (report-error "read error" c)
                      ;; Drop the rest of the offending line, not the
                      ;; whole input: piped sessions go on after it.
                      (ignore-errors (read-line *standard-input* nil))
                      :again))))
        (case form
          (:eof (when interactive (terpri)) (return 0))
          (:again)
          (t
           (handler-case
               (let ((values (multiple-value-list
                              (let ((- form)) (eval form)))))
                 (setf /// // // / / values
                       *** ** ** * * (first values)
                       +++ ++ ++ + + form)
                 (fresh-line)
                 (dolist (v values) (format t "~S~%" v))
                 (finish-output))
             (serious-condition (c)
               (format *error-output* "~&; ~A: ~A~%" (type-of c) (condition-line c))
               (finish-output *error-output*)))))))))

;;; The entry point the C host calls.

(defun dispatch (args)
  (let ((cmd (first args)))
    (cond ((null args) (repl))
          ((member cmd '("--help" "-h" "help") :test #'string=)
           (print-usage *standard-output*) 0)
          ((string= cmd "--version") (format t "~A~%" (version)) 0)
          ((string= cmd "script") (run-script (rest args)))
          (t
           (let ((c (find cmd *commands* :key #'command-name :test #'string=)))
             (cond (c
                    (with-batch-errors ((format nil "rontolisp ~A" cmd))
                      (or (funcall (command-function c) (rest args)) 0)))
                   (t
                    (format *error-output* "rontolisp: unknown command ~S~%" cmd)
                    (print-usage)
                    2)))))))

(defun flush-output (status)
  "Flush standard output and error at the end of a run and answer the exit
status: STATUS, or 1 after one line when the output cannot be written (a
full device); a closed pipe keeps STATUS.  Unwritable output is dropped so
that nothing tries to flush it again."
  (handler-case (progn (finish-output *standard-output*) status)
    (serious-condition (c)
      (ignore-errors (clear-output *standard-output*))
      (cond ((output-closed-p) status)
            (t (ignore-errors (report-error "rontolisp: cannot write the output" c))
               1)))))

(defun main (args)
  "The command line's entry point: run ARGS (a list of strings, global flags
already taken by the host) and answer the exit status."
  (let ((status 1))
    (unwind-protect
         (setf status
               (catch '%exit
                 (handler-case (dispatch args)
                   (usage-error (c)
                     (report-error "rontolisp" c)
                     (print-usage)
                     2)
                   (serious-condition (c)
                     (failure-status "rontolisp" c)))))
      (setf status (flush-output status))
      (ignore-errors (finish-output *error-output*)))
    status))
