;;;; test-repl.lisp - the REPL at a terminal (driven through a
;;;; pseudo-terminal by tools/pty_run.c: the debugger, line editing,
;;;; history, completion, Ctrl-C), the REPL on piped input, and the
;;;; start-up conventions (rc file, --eval, --load, --norc, #! scripts).

(in-package "RONTOLISP-TESTS")

(def-suite repl :in all :description "The REPL and how rontolisp starts.")
(in-suite repl)

(defun run-at-home (home args &key (input ""))
  "Run the executable with ARGS, HOME set to HOME and INPUT piped in;
answer (values exit-status stdout stderr)."
  (let ((in (write-file-string (tmp-path "in") input)))
    (unwind-protect
         (apply #'sh "h=$1; i=$2; shift 2; HOME=\"$h\" exec \"$0\" \"$@\" <\"$i\"" home in args)
      (ignore-errors (delete-file in)))))

(test pty-driver-has-a-deadline-after-the-output-ends
  "A program that closes the terminal and runs on is killed at the
driver's deadline, as one that keeps the terminal open is."
  (let ((steps (write-file-string (tmp-path "steps") ""))
        (start (get-internal-real-time)))
    (multiple-value-bind (code out err)
        (sh "\"$1\" 2 \"$2\" -- /bin/sh -c 'exec >/dev/null 2>&1 </dev/null; exec sleep 60'"
            *pty-run* steps)
      (declare (ignore out))
      (is (eql 124 code))
      (is (contains err "did not end within 2 seconds") "~A" err))
    (is (< (/ (- (get-internal-real-time) start) internal-time-units-per-second) 30))
    (delete-file steps)))

;;; At a terminal: ECL's top level and debugger.

(test repl-terminal-error-shows-restarts-and-backtrace
  (multiple-value-bind (code out)
      (pty-session '("expect RONTOLISP-USER> " "raw" "send (/ 1 0)\\r"
                     "expect Available restarts" "expect RESTART-TOPLEVEL"
                     "expect RONTOLISP-USER>> " "raw" "send :b\\r" "expect Backtrace"
                     "expect RONTOLISP-USER>> " "raw" "send :q\\r"
                     "expect RONTOLISP-USER> " "raw" "send (* 6 7)\\r" "expect 42"
                     "expect RONTOLISP-USER> " "raw" "send \\x04"))
    (is (eql 0 code) "exit ~A after: ~A" code out)
    (is (contains out "DIVISION-BY-ZERO"))))

(test repl-terminal-cerror-continue-resumes
  (multiple-value-bind (code out)
      (pty-session '("expect RONTOLISP-USER> "
                     "send (progn (cerror \"Go on.\" \"bad ~A\" 5) (princ :resumed) (terpri))\\r"
                     "expect (CONTINUE) Go on." "expect RONTOLISP-USER>> " "raw" "send :r1\\r"
                     "expect RESUMED" "expect RONTOLISP-USER> " "raw" "send (rontolisp:exit 3)\\r"))
    (is (eql 3 code) "exit ~A after: ~A" code out)
    (is (contains out "bad 5"))))

(test repl-terminal-arrows-edit-and-recall
  (let ((home (fresh-home)))
    (unwind-protect
         (multiple-value-bind (code out)
             ;; Left moves back into the line; Up recalls it, Left and
             ;; Backspace edit the recalled copy.
             (pty-session '("expect RONTOLISP-USER> " "raw" "send (+ 40 )\\e[D2\\r" "expect 42"
                            "expect RONTOLISP-USER> " "raw" "send \\e[A\\e[D\\x7f3\\r" "expect 43"
                            "expect RONTOLISP-USER> " "raw" "send \\x04")
                          :home home)
           (is (eql 0 code) "exit ~A after: ~A" code out)
           (let ((history (read-file-string (merge-pathnames ".rontolisp_history" home))))
             (is (search "40" history) "history: ~S" history)))
      (remove-home home))))

(test repl-terminal-multi-line-form
  (multiple-value-bind (code out)
      (pty-session '("expect RONTOLISP-USER> " "raw" "send (list 1\\r" "raw"
                     "send 2 3)\\r" "expect (1 2 3)" "expect RONTOLISP-USER> " "raw" "send \\x04"))
    (is (eql 0 code) "exit ~A after: ~A" code out)))

(test repl-terminal-completes-symbols
  (multiple-value-bind (code out)
      (pty-session '("expect RONTOLISP-USER> " "raw" "send (rontolisp:quantiz\\t"
                     "sleep 300" "send  (make-array 32 :element-type 'single-float :initial-element 1.0) :q8_0)\\r"
                     "expect #<quantized-matrix" "expect RONTOLISP-USER> " "raw" "send \\x04"))
    (is (eql 0 code) "exit ~A after: ~A" code out)))

(test repl-terminal-ctrl-c-returns-to-the-prompt
  ;; Ctrl-C while typing drops the line; Ctrl-C while a form runs enters
  ;; the debugger, whose continue restart resumes it.
  (multiple-value-bind (code out)
      (pty-session '("expect RONTOLISP-USER> " "raw" "send (car" "sleep 200" "send \\x03"
                     "expect RONTOLISP-USER> " "raw" "send (+ 2 3)\\r" "expect 5"
                     "expect RONTOLISP-USER> " "raw" "send (progn (sleep 1) (princ :done) (terpri))\\r"
                     "sleep 300" "send \\x03" "expect RONTOLISP-USER>> " "raw" "send :r1\\r"
                     "expect DONE" "expect RONTOLISP-USER> " "raw" "send \\x04"))
    (is (eql 0 code) "exit ~A after: ~A" code out)
    (is (contains out "INTERACTIVE-INTERRUPT"))))

(test repl-completion-candidates
  (let ((*package* (find-package "RONTOLISP-USER")))
    (is (member "rontolisp:quantize" (command-line::completion-candidates "rontolisp:quantiz")
                :test #'string=))
    ;; Internal symbols only after ::.
    (is (null (command-line::completion-candidates "rontolisp:check-quantized-matr")))
    (is (equal '("rontolisp::check-quantized-matrix")
               (command-line::completion-candidates "rontolisp::check-quantized-matr")))
    (is (member "MULTIPLE-VALUE-BIND" (command-line::completion-candidates "MULTIPLE-VALUE-B")
                :test #'string=))
    (is (member "gguf:" (command-line::completion-candidates "ggu") :test #'string=))
    (is (null (command-line::completion-candidates "no-such-package:x")))))

(test repl-describe-quantized-matrix-is-short
  (let* ((m (rontolisp:quantize (make-array '(64 256) :element-type 'single-float
                                                      :initial-element 0.5)
                                :q8_0))
         (text (with-output-to-string (s) (describe m s))))
    (is (< (count #\Newline text) 6) "~A" text)
    (is (contains text "64 x 256"))
    (is (contains text (princ-to-string (* 64 8 34))))))

;;; Piped input.

(test repl-piped-failure-exits-1-at-the-end
  (multiple-value-bind (code out err)
      (run-exe '() :input (format nil "(car 1)~%(princ :after)~%"))
    (is (= 1 code))
    (is (contains out "AFTER"))
    (is (contains err "CAR")))
  (is (= 0 (run-exe '() :input (format nil "(+ 1 2)~%"))))
  ;; ECL reports an arithmetic error as #<a DIVISION-BY-ZERO 0x...>; the
  ;; line names the call instead.
  (multiple-value-bind (code out err) (run-exe '() :input (format nil "(/ 1 0)~%"))
    (declare (ignore out))
    (is (= 1 code))
    (is (contains err "division by zero in (/ 1 0)") "~A" err)
    (is (not (contains err "#<")))))

(test repl-piped-break-fails-the-form-and-goes-on
  ;; (break) on piped input entered ECL's debugger, which printed itself
  ;; on stdout and took the next forms as its commands.  It fails the form
  ;; as an error does: one line on stderr, the next form runs, status 1.
  (multiple-value-bind (code out err)
      (run-exe '("--norc") :input (format nil "(break \"stop ~~A\" 7)~%(princ :after)~%"))
    (is (eql 1 code) "exit ~S: ~A" code err)
    (is (contains out "AFTER") "~S" out)
    (is (not (contains out "restarts")) "~S" out)
    (is (= 1 (length (split-lines err))) "~S" err)
    (is (contains err "stop 7") "~S" err)))

;;; Start-up conventions.

(test startup-rc-file-loads-before-the-repl
  (let ((home (fresh-home)))
    (unwind-protect
         (progn
           (write-file-string (merge-pathnames ".rontolisprc" home)
                              (format nil "(defvar *from-rc* 7)~%"))
           (multiple-value-bind (code out) (run-at-home home '() :input (format nil "(princ *from-rc*)~%"))
             (is (= 0 code))
             (is (contains out "7")))
           ;; --norc skips it; a command never loads it.
           (is (= 1 (run-at-home home '("--norc") :input (format nil "(princ *from-rc*)~%"))))
           (write-file-string (merge-pathnames ".rontolisprc" home) (format nil "(error \"rc broke\")~%"))
           (multiple-value-bind (code out err) (run-at-home home '("--version"))
             (declare (ignore out err))
             (is (= 0 code)))
           (multiple-value-bind (code out err) (run-at-home home '() :input (format nil "(princ :no)~%"))
             (is (= 1 code))
             (is (string= "" out))
             (is (contains err "rc broke"))
             (is (contains err "--norc"))
             (is (= 1 (count #\Newline err)))))
      (remove-home home))))

(test startup-eval-and-load-run-in-order
  (let ((f (write-file-string (tmp-path "two.lisp") (format nil "(push 2 *x*)~%")))
        (script (write-file-string (tmp-path "show.lisp") (format nil "(prin1 *x*)~%"))))
    (multiple-value-bind (code out err)
        (run-exe (list "--eval" "(defvar *x* (list 1))" "--load" f "--eval=(push 3 *x*)"
                       "script" script "--eval" "ignored"))
      (is (= 0 code) "~A" err)
      (is (string= "(3 2 1)" out)))
    ;; Before the REPL too, in package RONTOLISP-USER.
    (multiple-value-bind (code out)
        (run-exe (list "--norc" "--eval" "(defvar *y* (package-name *package*))")
                 :input (format nil "(princ *y*)~%"))
      (is (= 0 code))
      (is (contains out "RONTOLISP-USER")))
    (delete-file f)
    (delete-file script)))

(test startup-eval-error-is-one-line-and-exit-1
  (multiple-value-bind (code out err) (run-exe (list "--eval" "(car 1)" "--version"))
    (declare (ignore out))
    (is (= 0 code) "--version runs no start-up option: ~A" err))
  (multiple-value-bind (code out err) (run-exe (list "--eval" "(car 1)" "inspect" "--help"))
    (is (= 1 code))
    (is (string= "" out))
    (is (contains err "--eval \"(car 1)\""))
    (is (= 1 (count #\Newline err))))
  (multiple-value-bind (code out err) (run-exe (list "--load" "/nonexistent/x.lisp" "inspect" "--help"))
    (declare (ignore out))
    (is (= 1 code))
    (is (contains err "/nonexistent/x.lisp")))
  (multiple-value-bind (code out err) (run-exe (list "--eval"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "--eval expects a form"))))

(test startup-quit-and-non-interactive-skip-the-repl
  "--quit and --non-interactive (SBCL's) run the rc file and the start-up
options, then exit without reading a form of standard input."
  (let ((home (fresh-home)))
    (unwind-protect
         (progn
           (write-file-string (merge-pathnames ".rontolisprc" home) (format nil "(princ :rc)~%"))
           (dolist (quit '("--quit" "--non-interactive"))
             (multiple-value-bind (code out err)
                 (run-at-home home (list "--eval" "(princ 1)" quit "--eval" "(princ 2)")
                              :input (format nil "(princ :repl)~%"))
               (is (= 0 code) "~A: ~A" quit err)
               (is (string= "RC12" out) "~A: ~A" quit out)
               (is (string= "" err)))
             (multiple-value-bind (code out err)
                 (run-at-home home (list "--norc" quit "--eval" "(car 1)" "--eval" "(princ 2)")
                              :input (format nil "(princ :repl)~%"))
               (is (= 1 code) "~A exited ~A" quit code)
               (is (string= "" out) "~A: ~A" quit out)
               (is (= 1 (count #\Newline err)) "~A" err)
               (is (contains err "--eval \"(car 1)\""))))
           ;; Before a command it changes nothing.
           (multiple-value-bind (code out) (run-at-home home '("--quit" "--version"))
             (is (= 0 code))
             (is (contains out "rontolisp "))))
      (remove-home home))))

(test startup-shebang-scripts-run
  (let ((f (write-file-string (tmp-path "exe.lisp")
                              (format nil "#!/usr/bin/env -S rontolisp script~%(prin1 rontolisp:*args*)~%")))
        (bad (write-file-string (tmp-path "bad.lisp") (format nil "(prin1 1)~%#!later~%"))))
    (multiple-value-bind (code out err) (run-exe (list "script" f "a"))
      (is (= 0 code) "~A" err)
      (is (string= "(\"a\")" out)))
    ;; Run as an executable, through env -S, as `script' or as SBCL's `--script'.
    (multiple-value-bind (code out err)
        (sh "d=$(dirname \"$0\"); chmod +x \"$1\"; PATH=\"$d:$PATH\" \"$1\" b" f)
      (is (= 0 code) "~A" err)
      (is (string= "(\"b\")" out)))
    (write-file-string f (format nil "#!/usr/bin/env -S rontolisp --script~%(prin1 rontolisp:*args*)~%"))
    (multiple-value-bind (code out err)
        (sh "d=$(dirname \"$0\"); chmod +x \"$1\"; PATH=\"$d:$PATH\" \"$1\" c --threads 2" f)
      (is (= 0 code) "~A" err)
      (is (string= "(\"c\" \"--threads\" \"2\")" out)))
    (multiple-value-bind (code out err) (run-exe (list "script" bad))
      (is (= 1 code))
      (is (string= "1" out))
      (is (contains err "#!")))
    (delete-file f)
    (delete-file bad)))

;;; Nesting deeper than the reader's limit: an error of our own naming the
;;; limit and where, never a crash of the reader's recursion.

(defun nested (open close depth)
  "A form of DEPTH levels: DEPTH times OPEN, then DEPTH times CLOSE."
  (with-output-to-string (s)
    (dotimes (i depth) (write-string open s))
    (dotimes (i depth) (write-string close s))))

(defparameter *deep-forms*
  (list (nested "(" ")" 50000) (nested "#(" ")" 50000) (nested "'" "" 50000)
        (nested "`" "" 50000) (nested "(" "" 50000))
  "Forms nested far deeper than the limit (and than the C stack held):
lists, vectors, quotes, backquotes, and a list never closed.")

(defun nesting-message-p (err)
  (contains err (format nil "expected forms nested at most ~D deep, found deeper nesting at character"
                        command-line::*read-depth-limit*)))

(test script-with-deep-nesting-exits-1-with-one-line
  (dolist (form *deep-forms*)
    (let ((f (write-file-string (tmp-path "deep.lisp") (format nil "(princ 1)~%~A~%(princ 2)~%" form))))
      (multiple-value-bind (code out err) (run-exe (list "script" f))
        (is (eql 1 code) "~A... exited ~A" (subseq form 0 4) code)
        (is (string= "1" out))
        (is (nesting-message-p err) "~A" err)
        (is (contains err f))
        (is (= 1 (count #\Newline err))))
      (delete-file f)))
  ;; At the limit itself the form reads.
  (let ((f (write-file-string (tmp-path "limit.lisp")
                              (format nil "(princ (length '~A))~%"
                                      ;; princ, length and the quote are 3 levels
                                      (nested "(" ")" (- command-line::*read-depth-limit* 3))))))
    (multiple-value-bind (code out err) (run-exe (list "script" f))
      (is (eql 0 code) "~A" err)
      (is (string= "1" out)))
    (delete-file f)))

(test program-reads-with-standard-syntax-are-bounded-too
  ;; A script's own READ-FROM-STRING, under WITH-STANDARD-IO-SYNTAX (ECL's
  ;; standard readtable) as well as under the script's readtable, is a
  ;; READ-NESTING-ERROR it can handle; the standard syntax crashed the
  ;; process (SIGSEGV).  A form at the limit still reads, once: wrapping a
  ;; bounded readtable again does not count its levels twice.
  (let ((f (write-file-string
            (tmp-path "reads.lisp")
            (format nil "(defun try (text)
  (handler-case (length (read-from-string text))
    (rontolisp::read-nesting-error () :bounded)))
(let ((deep ~S) (limit ~S))
  (print (list (try deep) (with-standard-io-syntax (try deep))
               (with-standard-io-syntax (try limit))
               (let ((*readtable* (command-line::depth-limited-readtable))) (try limit)))))"
                    (first *deep-forms*)
                    (nested "(" ")" command-line::*read-depth-limit*)))))
    (multiple-value-bind (code out err) (run-exe (list "script" f))
      (is (eql 0 code) "exit ~A: ~A" code err)
      (is (string= (format nil "~%(:BOUNDED :BOUNDED 1 1) ") out) "~S" out))
    (delete-file f)))

(test repl-piped-deep-nesting-is-a-read-error-and-goes-on
  (multiple-value-bind (code out err)
      (run-exe '() :input (format nil "(+ 1 2)~%~A~%(+ 3 4)~%" (first *deep-forms*)))
    (is (eql 1 code))
    (is (contains out "3"))
    (is (contains out "7"))
    (is (nesting-message-p err) "~A" err)
    (is (contains err "at character 1009") "~A" err)))

(test startup-deep-nesting-is-one-line-and-exit-1
  (let ((form (first *deep-forms*))
        (home (fresh-home)))
    (unwind-protect
         (let ((f (write-file-string (tmp-path "deep.lisp") form)))
           (dolist (args (list (list "--eval" form "--version") (list "--eval" form "inspect" "--help")
                               (list "--load" f "inspect" "--help")))
             (multiple-value-bind (code out err) (run-exe args)
               (unless (equal (car (last args)) "--version")
                 (is (eql 1 code) "~A ~A exited ~A" (first args) (car (last args)) code)
                 (is (string= "" out))
                 (is (nesting-message-p err) "~A" err)
                 (is (= 1 (count #\Newline err)))
                 (is (< (length err) 400) "~D characters" (length err)))))
           (write-file-string (merge-pathnames ".rontolisprc" home) form)
           (multiple-value-bind (code out err) (run-at-home home '() :input (format nil "(princ :no)~%"))
             (is (eql 1 code))
             (is (string= "" out))
             (is (nesting-message-p err) "~A" err)
             (is (contains err "--norc")))
           (delete-file f))
      (remove-home home))))

(test repl-terminal-deep-nesting-enters-the-debugger-at-every-level
  ;; The second deep form is read at debugger level 1, where ECL's
  ;; debugger binds the standard readtable: the limit holds there too (and
  ;; the debugger drops the form).
  (let ((deep (nested "(" ")" (+ 100 command-line::*read-depth-limit*))))
    (multiple-value-bind (code out)
        (pty-session (list "expect RONTOLISP-USER> " "raw" (format nil "send ~A\\r" deep)
                           "expect nested at most" "expect RONTOLISP-USER>> "
                           "raw" (format nil "send ~A\\r" deep)
                           "expect nested at most" "expect RONTOLISP-USER>> "
                           "raw" "send :q\\r" "expect RONTOLISP-USER> "
                           "raw" "send (* 6 7)\\r" "expect 42"
                           "expect RONTOLISP-USER> " "raw" "send \\x04"))
      (is (eql 0 code) "exit ~A after: ~A" code (subseq out (max 0 (- (length out) 2000)))))))
