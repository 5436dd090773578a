;;;; test-runtime.lisp - the executable: REPL, script runner, command line,
;;;; the knobs, and the packages.

(in-package "RONTOLISP-TESTS")

(def-suite runtime :in all :description "The host program and its command line.")
(in-suite runtime)

(test runtime-packages-exist
  (dolist (p '("RONTOLISP" "VEC" "LINALG" "GGUF" "RONTOLISP-USER"))
    (is (find-package p)))
  (is (equal (list (find-package "CL"))
             (package-use-list (find-package "RONTOLISP-USER")))))

(test repl-starts-in-rontolisp-user
  (multiple-value-bind (code out)
      (run-exe '() :input (format nil "(princ (package-name *package*))~%"))
    (is (= 0 code))
    (is (contains out "RONTOLISP-USER"))))

(test repl-survives-an-error
  (multiple-value-bind (code out err)
      (run-exe '() :input (format nil "(car 1)~%(+ 40 2)~%(error \"oops ~~A\" 7)~%(* 6 7 10)~%"))
    ;; Piped input goes on after an error, and the status says one failed.
    (is (= 1 code))
    (is (contains out "42"))
    (is (contains out "420"))
    (is (contains err "oops 7"))
    (is (contains err "TYPE-ERROR"))))

(test repl-survives-a-reader-error
  (multiple-value-bind (code out)
      (run-exe '() :input (format nil "(no-such-package::foo 1)~%(+ 1 1)~%"))
    (is (= 1 code))
    (is (contains out "2"))))

(test repl-exit-sets-status
  (is (= 3 (run-exe '() :input (format nil "(rontolisp:exit 3)~%(+ 1 1)~%")))))

(test script-sees-its-args
  (let ((f (write-file-string (tmp-path "args.lisp")
                              (format nil "(prin1 rontolisp:*args*)~%"))))
    (multiple-value-bind (code out) (run-exe (list "script" f "a" "b"))
      (is (= 0 code))
      (is (string= "(\"a\" \"b\")" out)))
    (delete-file f)))

(test script-args-are-not-global-flags
  (let ((f (write-file-string (tmp-path "args.lisp")
                              (format nil "(prin1 rontolisp:*args*)~%"))))
    (multiple-value-bind (code out) (run-exe (list "script" f "--threads" "3" "--no-simd"))
      (is (= 0 code))
      (is (string= "(\"--threads\" \"3\" \"--no-simd\")" out)))
    (delete-file f)))

(test script-error-exits-1-with-one-line
  (let ((f (write-file-string (tmp-path "err.lisp")
                              (format nil "(princ \"before\")~%(error \"broken ~~A\" 99)~%(princ \"after\")~%"))))
    (multiple-value-bind (code out err) (run-exe (list "script" f))
      (is (= 1 code))
      (is (string= "before" out))
      (is (contains err "broken 99"))
      (is (= 1 (count #\Newline err))))
    (delete-file f)))

(test script-error-about-a-big-array-is-one-short-line
  "A type error about a 64x64 array (25 KB printed) and a float overflow
end a script with one short line naming them."
  (dolist (case '(("(+ (make-array '(64 64) :element-type 'single-float) 1)"
                   "#<(simple-array single-float (64 64))>")
                  ("(* 1d300 1d300)" "floating point overflow")))
    (let ((f (write-file-string (tmp-path "big.lisp") (first case))))
      (multiple-value-bind (code out err) (run-exe (list "script" f))
        (declare (ignore out))
        (is (= 1 code))
        (is (= 1 (count #\Newline err)) "~A" err)
        (is (< (length err) 400) "~D characters" (length err))
        (is (contains err (second case)) "~A" err))
      (delete-file f))))

(test script-serious-condition-exits-1
  (let ((f (write-file-string (tmp-path "sc.lisp")
                              (format nil "(signal 'storage-condition)~%(error 'storage-condition)~%"))))
    (multiple-value-bind (code out err) (run-exe (list "script" f))
      (declare (ignore out))
      (is (= 1 code))
      (is (plusp (length err))))
    (delete-file f)))

(test script-break-exits-1-without-a-debugger
  ;; (break) printed ECL's debugger on stdout, read its commands from
  ;; stdin and, at the end of input, exited 0 with the rest skipped.  A
  ;; script has no debugger: one line on stderr, exit 1.  Standard input
  ;; here is a pipe that stays open: a debugger waiting on it would hang
  ;; to the deadline.
  (let ((f (write-file-string (tmp-path "break.lisp")
                              (format nil "(princ \"before\")~%(break \"stop ~~A\" 7)~%(princ \"after\")~%")))
        (out (tmp-path "out")) (err (tmp-path "err")))
    (unwind-protect
         (multiple-value-bind (process input)
             (run-child *exe* (list "script" f) :input :stream :output out :error err
                                                :if-output-exists :supersede
                                                :if-error-exists :supersede :wait nil)
           (multiple-value-bind (how code)
               (unwind-protect (wait-child process :deadline 60 :what "a script calling break")
                 (ignore-errors (close input))
                 (end-child process))
             (let ((out (read-file-string out)) (err (read-file-string err)))
               (is (eq :exited how))
               (is (eql 1 code) "exit ~S: ~A" code err)
               (is (string= "before" out) "stdout: ~S" out)
               (is (= 1 (length (split-lines err))) "stderr: ~S" err)
               (is (contains err "stop 7") "stderr: ~S" err))))
      (dolist (p (list f out err)) (ignore-errors (delete-file p))))))

(test script-exit-code
  (let ((f (write-file-string (tmp-path "exit.lisp")
                              (format nil "(rontolisp:exit 9)~%(princ \"not here\")~%"))))
    (multiple-value-bind (code out) (run-exe (list "script" f))
      (is (= 9 code))
      (is (string= "" out)))
    (delete-file f)))

(test script-missing-file-exits-1
  (multiple-value-bind (code out err) (run-exe (list "script" "/nonexistent/x.lisp"))
    (declare (ignore out))
    (is (= 1 code))
    (is (contains err "x.lisp"))))

(test cli-help-and-version
  (multiple-value-bind (code out) (run-exe '("--help"))
    (is (= 0 code))
    (is (contains out "usage: rontolisp"))
    (is (contains out "script FILE")))
  (multiple-value-bind (code out) (run-exe '("--version"))
    (is (= 0 code))
    (is (contains out "rontolisp "))
    (is (contains out "ECL"))))

(test cli-unknown-command-exits-2
  (multiple-value-bind (code out err) (run-exe '("frobnicate"))
    (is (= 2 code))
    (is (string= "" out))
    (is (contains err "unknown command \"frobnicate\""))
    ;; Nothing is near it: no guess, and not the whole usage either.
    (is (not (contains err "did you mean")) "~A" err)
    (is (<= (count #\Newline err) 3) "~A" err)
    (is (contains err "rontolisp --help"))))

(test cli-unknown-command-names-the-nearest
  "A mistyped command or option is answered in at most three lines with
the nearest one by edit distance; a file given as a command, with script."
  (let ((file (write-file-string (tmp-path "prog.lisp") "(princ 1)")))
    (unwind-protect
         (loop for (word guess) in `(("inpsect" "did you mean inspect?")
                                     ("quantise" "did you mean quantize?")
                                     ("--scirpt" "did you mean --script?")
                                     ("--non-interactiv" "did you mean --non-interactive?")
                                     (,file ,(format nil "did you mean `rontolisp script ~A'?" file)))
               do (multiple-value-bind (code out err) (run-exe (list word))
                    (is (= 2 code) "~A exited ~A" word code)
                    (is (string= "" out))
                    (is (contains err (format nil "~S" word)) "~A" err)
                    (is (contains err guess) "~A: ~A" word err)
                    (is (<= (count #\Newline err) 3) "~A: ~A" word err)
                    (is (not (contains err "usage:")) "~A: the whole usage: ~A" word err)))
      (delete-file file)))
  (is (= 3 (command-line::edit-distance "kitten" "sitting")))
  (is (= 2 (command-line::edit-distance "inpsect" "inspect")))
  (is (= 0 (command-line::edit-distance "" "")))
  (is (= 5 (command-line::edit-distance "" "bench")))
  (is (null (command-line::closest-name "xyzzy" '("inspect" "bench")))))

;;; SBCL's habits: --script, script -, and (in test-repl.lisp) --quit.

(test dash-dash-script-runs-a-file-as-script-does
  (let ((f (write-file-string (tmp-path "args.lisp")
                              (format nil "(prin1 rontolisp:*args*)~%")))
        (bad (write-file-string (tmp-path "bad.lisp")
                                (format nil "(princ :before)~%(error \"broken ~~A\" 99)~%(princ :after)~%"))))
    (unwind-protect
         (progn
           ;; The options end at --script: the rest are the script's.
           (multiple-value-bind (code out err) (run-exe (list "--script" f "a" "--threads" "3" "--quit"))
             (is (= 0 code) "~A" err)
             (is (string= "(\"a\" \"--threads\" \"3\" \"--quit\")" out)))
           (multiple-value-bind (code out err) (run-exe (list "--eval" "(defvar *x* 5)" "--script" f))
             (is (= 0 code) "~A" err)
             (is (string= "NIL" out)))
           (multiple-value-bind (code out err) (run-exe (list "--script" bad))
             (is (= 1 code))
             (is (string= "BEFORE" out))
             (is (= 1 (count #\Newline err)) "~A" err)
             (is (contains err "broken 99"))))
      (delete-file f)
      (delete-file bad))))

(test script-reads-standard-input
  "`script -' and `--script' with no file run the forms of standard input,
a #! first line skipped, each form as it is read."
  (dolist (args '(("script" "-" "x") ("--script")))
    (multiple-value-bind (code out err)
        (run-exe args :input (format nil "#!/usr/bin/env -S rontolisp --script~%(princ (package-name *package*))~%(prin1 rontolisp:*args*)~%"))
      (is (= 0 code) "~S: ~A" args err)
      (is (string= (format nil "RONTOLISP-USER~S" (rest (rest args))) out) "~S: ~A" args out)))
  ;; A first line that is not #!: a #| comment, or a plain form.
  (multiple-value-bind (code out err) (run-exe '("script" "-") :input "#|note|# (princ 8)")
    (is (= 0 code) "~A" err)
    (is (string= "8" out)))
  (multiple-value-bind (code out err) (run-exe '("script" "-") :input "(princ 9)")
    (is (= 0 code) "~A" err)
    (is (string= "9" out)))
  (is (= 0 (run-exe '("script" "-") :input "")))
  ;; An error stops the run at that form: one line, exit 1; so does #! later on.
  (dolist (input (list (format nil "(princ 1)~%(car 1)~%(princ 2)~%")
                       (format nil "(princ 1)~%#!later~%(princ 2)~%")))
    (multiple-value-bind (code out err) (run-exe '("script" "-") :input input)
      (is (= 1 code) "~S exited ~A" input code)
      (is (string= "1" out))
      (is (= 1 (count #\Newline err)) "~A" err)
      (is (contains err "standard input") "~A" err)))
  ;; rontolisp:exit sets the status.
  (is (= 4 (run-exe '("--script") :input "(rontolisp:exit 4) (princ 2)"))))

(test cli-bad-threads-exits-2
  (is (= 2 (run-exe '("--threads" "zero"))))
  (is (= 2 (run-exe '("--threads" "0"))))
  (is (= 2 (run-exe '("--threads")))))

(test cli-global-flags-reach-lisp
  (let ((f (write-file-string (tmp-path "knobs.lisp")
                              (format nil "(prin1 (list (rontolisp:simd) (rontolisp:threads) (rontolisp:simd-path)))~%"))))
    (multiple-value-bind (code out) (run-exe (list "--no-simd" "--threads" "3" "script" f))
      (is (= 0 code))
      (is (string= "(NIL 3 \"scalar\")" out)))
    (multiple-value-bind (code out) (run-exe (list "--simd" "--threads=2" "script" f))
      (is (= 0 code))
      (is (contains out "(T 2 ")))
    (delete-file f)))

(test knobs-settable-from-lisp
  (let ((simd (rontolisp:simd)) (threads (rontolisp:threads)))
    (unwind-protect
         (progn
           (setf (rontolisp:simd) nil)
           (is (null (rontolisp:simd)))
           (is (string= "scalar" (rontolisp:simd-path)))
           (setf (rontolisp:threads) 5)
           (is (= 5 (rontolisp:threads)))
           (signals type-error (setf (rontolisp:threads) 0)))
      (setf (rontolisp:simd) simd (rontolisp:threads) threads))))

(test exported-symbols-are-documented
  (dolist (p '("RONTOLISP" "TEXT" "VEC" "LINALG" "GGUF" "MODEL"))
    (do-external-symbols (s p)
      (when (or (fboundp s) (boundp s))
        (is (or (documentation s 'function) (documentation s 'variable)
                (documentation s 'type))
            "~S has no docstring" s)))))

;;; Subcommands: one parser and one DEFINE-COMMAND for all of them, so
;;; --help, bad usage and errors answer the same way everywhere.

(defparameter *command-names* '("script" "inspect" "quantize" "convert" "bench")
  "Every subcommand the executable must have.")

(defun test-command (&key options (min 0) max options-first)
  "A command structure for parser tests, with OPTIONS given as
(var name metavar parser repeat)."
  (command-line::make-command
   "test" "ARGS" "a test command" nil
   (loop for (var name metavar parser repeat) in options
         collect (command-line::make-command-option var name metavar parser repeat nil))
   min max options-first nil))

(defun parse-line (command &rest args)
  (multiple-value-list (command-line::parse-command-line command args)))

(defun usage-message (thunk)
  "The message of the USAGE-ERROR THUNK signals, or NIL."
  (handler-case (progn (funcall thunk) nil)
    (rontolisp:usage-error (c) (princ-to-string c))))

(defun count-matches (needle haystack)
  (loop for start = 0 then (1+ pos)
        for pos = (search needle haystack :start2 start)
        while pos count t))

(test command-parser-reads-options-and-arguments
  (let ((c (test-command :options `((n "--n" "N" ,(command-line::integer-parser :min 1 :max 9) nil)
                                    (flag "--flag" nil nil nil)
                                    (shape "--shape" "RxC" nil t))
                         :min 1 :max 2)))
    (is (equal '(("a" "b") ((flag . t) (n . 3)))
               (parse-line c "a" "--n" "3" "--flag" "b")))
    (is (equal '(("a") ((n . 4))) (parse-line c "--n=4" "a")))
    (is (equal '(("a") ((shape "1x2" "3x4"))) (parse-line c "--shape" "1x2" "a" "--shape=3x4")))
    (is (equal '(("-" "--n") nil) (parse-line c "-" "--" "--n")))
    (is (eq :help (first (parse-line c "a" "--help" "--bogus"))))
    (is (eq :help (first (parse-line c "-h"))))
    (dolist (bad '(("a" "--bogus") ("a" "--n") ("a" "--n" "10") ("a" "--n" "x")
                   ("a" "--flag=1") () ("a" "b" "c")))
      (signals rontolisp:usage-error (apply #'parse-line c bad)))))

(test command-parser-options-first-leaves-the-rest
  (let ((c (test-command :options '((flag "--flag" nil nil nil)) :min 1 :options-first t)))
    (is (equal '(("f" "--flag" "--help") ((flag . t)))
               (parse-line c "--flag" "f" "--flag" "--help")))))

(test command-value-parsers
  (let ((ints (command-line::integer-parser :min 0))
        (types (command-line::choice-parser '("f32" "q8_0") :key #'string-upcase)))
    (is (= 0 (funcall ints "--n" "0")))
    (is (= -5 (funcall (command-line::integer-parser) "--seed" "-5")))
    (is (string= "Q8_0" (funcall types "--type" "Q8_0")))
    (is (search "--n expects an integer of 0 or more, found \"-1\""
                (usage-message (lambda () (funcall ints "--n" "-1")))))
    ;; integers are read as every number on the command line (SCAN-NUMBER)
    (dolist (bad '(" 5" "5 " "1e3" "5.0" "0x10" ""))
      (is (search "--n expects an integer of 0 or more"
                  (usage-message (lambda () (funcall ints "--n" bad))))
          "~S" bad))
    (is (search "--n expects an integer of 0 or more"
                (usage-message (lambda () (funcall ints "--n" (make-string 500 :initial-element #\9))))))
    (is (search "--type expects one of f32, q8_0, found \"q4\""
                (usage-message (lambda () (funcall types "--type" "q4")))))))

(test runtime-scan-number-reads-decimals-without-the-reader
  ;; the value, and whether it was written as a float
  (loop for (text value float) in '(("12" 12 nil) ("-7" -7 nil) ("+3" 3 nil) ("1.5" 3/2 t)
                                    ("5." 5 t) (".5" 1/2 t) ("-0.25e-3" -1/4000 t) ("1E2" 100 t)
                                    ("0e999999999999" 0 t) ("1e-999999999" 0 t)
                                    ("1e999999999" :overflow t) ("-1e400" :-overflow t)
                                    ("1e399" #.(expt 10 399) t))
        do (is (equal (list value float) (multiple-value-list (command-line::scan-number text)))
               "~S" text))
  (dolist (bad '("" "." "e5" "1e" "1e+" "1x" " 1" "1 " "--1" "1.5.2" "0x10" "inf" "nan" "1_000"))
    (is (null (command-line::scan-number bad)) "~S is not a number" bad))
  ;; past 800 significant digits the rest only says "more": the digits kept
  ;; plus a sticky 1
  (is (= (/ (1+ (expt 10 800)) (expt 10 699))
         (command-line::scan-number (format nil "1~800,,,'0A1e-700" "")))))

(test runtime-number-argument-rounds-and-refuses-by-range
  (flet ((refusal (string type)
           (usage-message (lambda () (command-line::number-argument "--set a" string type)))))
    ;; as strtod rounds, subnormals and ties included
    (is (= 1.5d0 (command-line::number-argument "--set a" "1.5" :f64)))
    (is (eql 0.1d0 (command-line::number-argument "--set a" "0.1" :f64)))
    (is (eql 0.1 (command-line::number-argument "--set a" "0.1" :f32)))
    (is (eql (* 2024 least-positive-double-float) (command-line::number-argument "--set a" "1e-320" :f64)))
    (is (zerop (command-line::number-argument "--set a" "2.4703282292062327e-324" :f64)))
    (is (eql least-positive-double-float (command-line::number-argument "--set a" "2.4703282292062328e-324" :f64)))
    (is (eql most-positive-double-float
             (command-line::number-argument "--set a" "1.7976931348623158e308" :f64)))
    (is (eql most-positive-single-float (command-line::number-argument "--set a" "3.4028235e38" :f32)))
    (is (eql -7 (command-line::number-argument "--set a" "-7" '(-128 127))))
    ;; one rule: a number that rounds beyond the type's largest value is
    ;; refused with the range, whatever its exponent's length
    (loop for (string type range) in '(("1e999999999" :f64 "the f64 range")
                                       ("1e999" :f64 "the f64 range")
                                       ("1.7976931348623159e308" :f64 "the f64 range")
                                       ("1e39" :f32 "the f32 range")
                                       ("3.4028235677973366e38" :f32 "the f32 range")
                                       ("-1e999999999" :f32 "the f32 range")
                                       ("x" :f32 "the f32 range")
                                       ("128" (-128 127) "an integer from -128 to 127")
                                       ("1e2" (-128 127) "an integer from -128 to 127")
                                       ("99999999999999999999999999999999" (0 255) "from 0 to 255"))
          do (let ((message (refusal string type)))
               (is (search "--set a: expected" message) "~S: ~A" string message)
               (is (search range message) "~S: ~A" string message)
               (is (search (prin1-to-string string) message) "~S: ~A" string message)))))

(test cli-every-command-answers-help
  (dolist (name *command-names*)
    (is (command-line::find-command name) "no command ~S" name))
  (dolist (c command-line::*commands*)
    (let ((name (command-line::command-name c)))
      (dolist (flag '("--help" "-h"))
        (multiple-value-bind (code out err) (run-exe (list name flag))
          (is (= 0 code) "~A ~A exited ~D" name flag code)
          (is (string= "" err) "~A ~A wrote to stderr: ~A" name flag err)
          (is (contains out (format nil "usage: rontolisp ~A ~A" name (command-line::command-usage c))))
          (is (contains out (command-line::command-summary c)))
          (dolist (o (command-line::command-options c))
            (is (contains out (command-line::command-option-name o))
                "~A --help does not show ~A" name (command-line::command-option-name o))))))))

(test cli-help-lists-every-command
  (multiple-value-bind (code out) (run-exe '("--help"))
    (is (= 0 code))
    (dolist (c command-line::*commands*)
      (is (contains out (format nil "rontolisp ~A ~A" (command-line::command-name c)
                                (command-line::command-usage c)))))))

(test cli-bad-usage-exits-2-the-same-way-everywhere
  (dolist (args '(("script") ("inspect") ("inspect" "a.gguf" "--frob") ("inspect" "a" "b")
                  ("quantize" "a.gguf") ("quantize" "a.gguf" "b.gguf" "iq2_xs")
                  ("convert") ("convert" "--type") ("convert" "--random" "s1-pico" "o.gguf" "--seed" "x")
                  ("bench" "--iters" "0") ("bench" "--shape" "4")))
    (let ((name (first args)))
      (multiple-value-bind (code out err) (run-exe args)
        (is (= 2 code) "~S exited ~D" args code)
        (is (string= "" out) "~S wrote to stdout: ~A" args out)
        (let ((first-line (subseq err 0 (or (position #\Newline err) (length err)))))
          (is (eql 0 (search (format nil "rontolisp ~A: " name) first-line))
              "~S: the error line ~S does not name the command first" args first-line)
          (is (= 1 (count-matches (format nil "~A:" name) first-line))
              "~S: the command is named twice in ~S" args first-line))
        (is (contains err (format nil "usage: rontolisp ~A " name)) "~S: no usage: ~A" args err)))))

(test cli-bad-file-exits-1-with-one-line
  (dolist (args (list '("inspect" "/nonexistent/a.gguf")
                      (list "quantize" "/nonexistent/a.gguf" (tmp-path "q.gguf") "q8_0")
                      (list "convert" "/nonexistent/laya" (tmp-path "c.gguf"))
                      '("bench" "/nonexistent/a.gguf" "--iters" "1")
                      '("script" "/nonexistent/a.lisp")))
    (multiple-value-bind (code out err) (run-exe args)
      (is (= 1 code) "~S exited ~D" args code)
      (is (string= "" out) "~S wrote to stdout: ~A" args out)
      (is (= 1 (count #\Newline err)) "~S: not one line: ~A" args err)
      (is (contains err "/nonexistent/") "~S: the file is not named: ~A" args err)
      (is (not (contains err "usage:")) "~S: usage printed for a bad file" args))))

;;; Hardening (issue 13): bytes, signals, pipes, threads, odd files.

(defparameter *signal-numbers* '(("HUP" . 1) ("INT" . 2) ("TERM" . 15))
  "The numbers of the signals the tests send, by name.")

(defun interrupted-status (args signal &key (input ""))
  "Start the executable with ARGS, send it SIGNAL (\"INT\", \"TERM\"...)
after a second, then give it INPUT and close its input; answer (values
exit-status stdout), the status (:signaled n) when a signal ended it."
  (let ((out (tmp-path "sig-out")))
    (unwind-protect
         (multiple-value-bind (p in)
             (run-child *exe* args :input :stream :output out :error nil
                                   :if-output-exists :supersede :wait nil)
           (unwind-protect
                (progn
                  (sleep 1)
                  (is (signal-process p (cdr (assoc signal *signal-numbers* :test #'string=))))
                  (sleep 0.5)
                  (ignore-errors (write-string input in) (finish-output in))
                  (ignore-errors (close in))
                  (multiple-value-bind (how n)
                      (wait-child p :deadline 30 :what (format nil "rontolisp~{ ~A~} after SIG~A" args signal))
                    (values (if (eq how :exited) n (list how n)) (read-file-string out))))
             (end-child p)))
      (ignore-errors (delete-file out)))))

(defun process-gone-p (pid)
  "True once the process PID has ended (gone, or a zombie), waiting for
that at most 10 s."
  (loop repeat 1000
        for stat = (ignore-errors (with-open-file (s (format nil "/proc/~D/stat" pid))
                                    (read-line s)))
        when (or (null stat) (search ") Z" stat)) return t
        do (sleep 0.01)))

(test child-wait-has-a-deadline
  "A child that never ends is killed at the deadline, with what it
started, and the test fails with a message, instead of waiting for ever."
  (let* ((pid-file (tmp-path "pid"))
         (f (write-file-string (tmp-path "forever.lisp")
                               (format nil "(with-open-file (s ~S :direction :output)~
                                              (print (ext:getpid) s))~%(loop (sleep 0.05))~%"
                                       pid-file)))
         (start (get-internal-real-time)))
    ;; The shell runs the executable as its child, not in its place.
    (dolist (args (list (list *exe* (list "script" f))
                        (list "/bin/sh" (list "-c" "\"$0\" script \"$1\"; exit 3" *exe* f))))
      (ignore-errors (delete-file pid-file))
      (let ((e (handler-case (progn (run-child (first args) (second args) :input nil :output nil
                                                                         :error nil :deadline 2)
                                    nil)
                 (error (e) e))))
        (is (typep e 'error))
        (is (contains (princ-to-string e) "did not end within 2 s") "~A" e))
      (let ((pid (ignore-errors (parse-integer (read-file-string pid-file) :junk-allowed t))))
        (is (integerp pid))
        (is (and pid (process-gone-p pid)) "~A: the executable (~A) still runs" (first args) pid)))
    (is (< (/ (- (get-internal-real-time) start) internal-time-units-per-second) 40))
    (ignore-errors (delete-file pid-file))
    (delete-file f)))

(test cli-arguments-are-utf-8
  ;; ECL's run-program passes only base strings: the shell makes the bytes.
  (let ((f (write-file-string (tmp-path "utf8.lisp")
                              (format nil "(prin1 rontolisp:*args*)~%")))
        (g (tmp-path "x.gguf")))
    (multiple-value-bind (code out)
        (sh "\"$0\" script \"$1\" \"$(printf '\\303\\251')\" \"$(printf 'Mod\\303\\250le')\"" f)
      (is (= 0 code))
      (is (string= (format nil "(~S ~S)" (string (code-char 233)) (format nil "Mod~Cle" (code-char 232)))
                   out)))
    ;; A path with a non-ASCII name opens, and shows as given.
    (multiple-value-bind (code out)
        (sh "d=\"$2$(printf '\\303\\251')\"; cp \"$1\" \"$d\" && \"$0\" inspect \"$d\"; s=$?; rm -f \"$d\"; exit $s"
            (golden "q8_main.f32.gguf") g)
      (is (= 0 code))
      (is (contains out (format nil "x.gguf~C: GGUF v3" (code-char 233)))))
    (delete-file f)))

(test cli-path-that-is-not-utf-8-still-opens
  ;; The file name holds the byte FF, which no UTF-8 text contains.
  (let ((dir (tmp-path "bytes")))
    (multiple-value-bind (code out err)
        (sh "mkdir \"$2\" && cp \"$1\" \"$2/$(printf 'x\\377.gguf')\" &&
             \"$0\" inspect \"$2/$(printf 'x\\377.gguf')\" >/dev/null &&
             \"$0\" quantize \"$2/$(printf 'x\\377.gguf')\" \"$2/$(printf 'y\\376.gguf')\" q8_0 >/dev/null &&
             ls \"$2\" | od -An -tx1; s=$?; rm -rf \"$2\"; exit $s"
            (golden "q8_main.f32.gguf") dir)
      (is (= 0 code) "~A" err)
      (is (contains out "78 ff"))
      (is (contains out "79 fe")))))

(test cli-bad-threads-after-a-command-names-the-command
  ;; --threads after a command is still taken by the host: its refusal
  ;; names the command and the range, and no "bad global flag" follows
  (multiple-value-bind (code out err) (run-exe '("bench" "--threads" "100000"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "rontolisp bench: --threads expects a count from 1 to 256") "~A" err)
    (is (contains err "rontolisp bench --help") "~A" err)
    (is (not (contains err "global")) "~A" err))
  (multiple-value-bind (code out err) (run-exe '("--threads" "0"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "rontolisp: --threads expects a count from 1 to 256 (the kernels' limit), found \"0\"") "~A" err)
    (is (not (contains err "global")) "~A" err)))

(test cli-threads-beyond-the-limit-are-refused
  (multiple-value-bind (code out err) (run-exe '("--threads" "1024" "--version"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "256")))
  (is (= 0 (run-exe '("--threads" "256" "--version"))))
  (let ((threads (rontolisp:threads)))
    (signals type-error (setf (rontolisp:threads) 1024))
    (is (= threads (rontolisp:threads)))))

(test script-thread-error-exits-1-without-a-debugger
  (let ((f (write-file-string
            (tmp-path "thread.lisp")
            (format nil "(mp:process-run-function \"w\" (lambda () (error \"worker broke ~~A\" 5)))~%(sleep 30)~%(princ \"not here\")~%"))))
    (multiple-value-bind (code out err) (run-exe (list "script" f) :input (format nil ":q~%(quit)~%"))
      (is (= 1 code))
      (is (string= "" out))
      (is (contains err "worker broke 5"))
      (is (= 1 (count #\Newline err))))
    (delete-file f)))

(test piped-repl-thread-error-exits-1
  (multiple-value-bind (code out err)
      (run-exe '() :input (format nil "(mp:process-run-function \"w\" (lambda () (car 1)))~%(sleep 30)~%"))
    (declare (ignore out))
    (is (= 1 code))
    (is (contains err "CAR"))))

(test cli-closed-pipe-ends-quietly
  (multiple-value-bind (code out err)
      (sh "( \"$0\" inspect --max-array 1000000 \"$1\" 2>\"$2\"; echo $? >\"$2.status\" ) | head -c 10 >/dev/null;
           cat \"$2.status\"; cat \"$2\" >&2; rm -f \"$2\" \"$2.status\""
          (golden "vocab/ggml-vocab-falcon.gguf") (tmp-path "pipe"))
    (is (= 0 code))
    (is (string= (format nil "0~%") out))
    (is (string= "" err))))

(test cli-full-device-is-one-line-and-exit-1
  (dolist (args '("--help" "--version" "inspect"))
    (multiple-value-bind (code out err)
        (sh (format nil "\"$0\" ~A \"$1\" >/dev/full" args) (golden "q8_main.f32.gguf"))
      (declare (ignore out))
      (is (= 1 code) "~A: exit ~A" args code)
      (is (= 1 (count #\Newline err)) "~A: ~S" args err)
      (is (contains err "No space left")))))

(test batch-signals-exit-128-plus-the-signal
  (let ((f (write-file-string (tmp-path "loop.lisp") (format nil "(loop (sleep 0.05))~%"))))
    (is (eql 130 (interrupted-status (list "script" f) "INT")))
    (is (eql 143 (interrupted-status (list "script" f) "TERM")))
    (is (eql 129 (interrupted-status (list "script" f) "HUP")))
    (delete-file f)))

(defun early-signal-status (args signal delay &key ignored output)
  "Start the executable with ARGS (with SIGNAL ignored when IGNORED, as a
shell leaves SIGINT for a background job), wait until its main function
runs (ECL's threads exist), send it SIGNAL DELAY seconds later; answer its
exit status, (:signaled n) when the signal ended it.  With OUTPUT (a
path), its standard output goes there and its standard input is a pipe
closed only once the signal is sent (a REPL waits on it)."
  (multiple-value-bind (p in)
      (run-child "/bin/sh" (list* "-c" (format nil "~:[~;trap '' ~A; ~]exec \"$0\" \"$@\""
                                               ignored signal)
                                  *exe* args)
                 :input (and output :stream) :output output :if-output-exists :supersede
                 :error nil :wait nil)
    (let ((end (+ (get-internal-real-time) (* 30 internal-time-units-per-second))))
      (unwind-protect
           (let ((tasks (format nil "/proc/~D/task/*/" (ext:external-process-pid p))))
             (loop until (or (> (length (directory tasks)) 1)
                             (not (eq :running (ext:external-process-wait p nil)))
                             (> (get-internal-real-time) end))
                   do (sleep 0.001))
             (sleep delay)
             (signal-process p (cdr (assoc signal *signal-numbers* :test #'string=)))
             (when in (ignore-errors (close in)))
             (multiple-value-bind (how n)
                 (wait-child p :deadline 20 :what (format nil "rontolisp~{ ~A~} after an early SIG~A"
                                                          args signal))
               (if (eq how :exited) n (list how n))))
        (when in (ignore-errors (close in)))
        (end-child p)))))

(test batch-signal-at-start-up-is-not-lost
  "SIGINT, SIGTERM and SIGHUP in the first milliseconds, while ECL boots,
end a script as they do later (128 + the signal), whether the signal's
disposition came in as the default or as ignored (a background job)."
  (let ((f (write-file-string (tmp-path "loop.lisp") (format nil "(loop (sleep 0.05))~%"))))
    (dolist (delay '(0 0.005 0.01 0.04 0.08))
      (dolist (ignored '(t nil))
        (is (eql 130 (early-signal-status (list "script" f) "INT" delay :ignored ignored))
            "SIGINT ~D ms into start-up~:[~; (ignored on entry)~]" (round delay 1/1000) ignored)))
    (dolist (signal '("TERM" "HUP"))
      (is (eql (+ 128 (cdr (assoc signal *signal-numbers* :test #'string=)))
               (early-signal-status (list "script" f) signal 0))
          "SIG~A at start-up" signal))
    (delete-file f)))

(defun reading-standard-input (pid)
  "When the main thread of the process PID waits in read(2) on descriptor 0
(/proc/PID/syscall; read is system call 0 on x86-64, 63 on AArch64), the
number of times it has gone to sleep so far (its voluntary context
switches); else NIL."
  (flet ((proc-line (file prefix)
           (ignore-errors
            (with-open-file (s (format nil "/proc/~D/task/~D/~A" pid pid file))
              (loop for line = (read-line s nil) while line
                    when (eql 0 (search prefix line)) return line)))))
    (let ((call (proc-line "syscall" "")))
      (when (and call (or (eql 0 (search "0 0x0 " call)) (eql 0 (search "63 0x0 " call))))
        (let ((line (proc-line "status" "voluntary_ctxt_switches:")))
          (and line (parse-integer line :start (1+ (position #\: line)) :junk-allowed t)))))))

(defun wait-for (what deadline predicate)
  "The first true value of PREDICATE, called every few milliseconds for at
most DEADLINE seconds; at the deadline an error naming WHAT."
  (let ((end (+ (get-internal-real-time) (* deadline internal-time-units-per-second))))
    (loop
      (let ((value (funcall predicate)))
        (when value (return value)))
      (when (> (get-internal-real-time) end)
        (error "~A did not happen within ~D s" what deadline))
      (sleep 0.005))))

(test repl-ctrl-c-while-starting-ends-it
  ;; SIGINT while the REPL starts landed in ECL's own debugger wherever the
  ;; boot was: its "Console interrupt" on stdout, the REPL's input read as
  ;; debugger commands, then a crash (status 139) or a loop of "Detected
  ;; access to protected memory" that SIGTERM did not end.  Before the
  ;; prompt it ends the program (130); at the prompt it returns there, and
  ;; the end of input then exits 0.
  (let ((out (tmp-path "early-out")))
    (dolist (delay '(0 0.002 0.005 0.01 0.02 0.04 0.08 0.16))
      (let ((status (early-signal-status '("--norc") "INT" delay :output out)))
        (is (member status '(130 0)) "SIGINT ~D ms into start-up: ~S" (round delay 1/1000) status)
        (is (not (contains (read-file-string out) "INTERACTIVE-INTERRUPT"))
            "SIGINT ~D ms into start-up: ~S" (round delay 1/1000) (read-file-string out))))
    (ignore-errors (delete-file out))))

(test repl-survives-ctrl-c-at-the-prompt
  ;; The signal went a second after the start, its input half a second
  ;; later: on a loaded machine the REPL was not at its prompt yet, or had
  ;; not taken the signal before the input came.  Each step now waits for
  ;; the REPL's main thread to be reading its input: before the signal,
  ;; and again after it, once it has woken up.
  (let ((out (tmp-path "sig-out")))
    (unwind-protect
         (multiple-value-bind (p in)
             (run-child *exe* '("--norc") :input :stream :output out :error nil
                                          :if-output-exists :supersede :wait nil)
           (unwind-protect
                (let* ((pid (ext:external-process-pid p))
                       (sleeps (wait-for "the REPL reading its input" 60
                                         (lambda () (reading-standard-input pid)))))
                  (is (signal-process p (cdr (assoc "INT" *signal-numbers* :test #'string=))))
                  (wait-for "the REPL reading its input again after SIGINT" 60
                            (lambda () (let ((now (reading-standard-input pid)))
                                         (and now (> now sleeps)))))
                  (ignore-errors (write-line "(+ 2 3)" in) (finish-output in))
                  (ignore-errors (close in))
                  (multiple-value-bind (how code)
                      (wait-child p :deadline 60 :what "the REPL after SIGINT")
                    (is (eq :exited how))
                    (is (eql 0 code))
                    (is (contains (read-file-string out) "5"))))
             (ignore-errors (close in))
             (end-child p)))
      (ignore-errors (delete-file out)))))

(test cli-utf-8-name-reaches-the-metadata
  (let ((out (tmp-path "named.gguf")))
    (multiple-value-bind (code stdout err)
        (sh "\"$0\" convert --random s1-pico \"$1\" --name \"$(printf 'Mod\\303\\250le')\" >/dev/null" out)
      (declare (ignore stdout))
      (is (= 0 code) "~A" err))
    (gguf:with-file (f out)
      (is (string= (format nil "Mod~Cle" (code-char 232)) (gguf:value f "general.name"))))
    (ignore-errors (delete-file out))))

;;; Comparisons with a reference that is missing skip, except under
;;; CI=true, where they fail saying what was missing: in the Lisp suites
;;; (SKIP-REFERENCE), in the C tests (CHECK_SKIP_REFERENCE) and in the
;;; script that fetches llama.cpp's libraries.

(def-suite reference-probe
  :description "Not run on its own: a test that finds its reference missing.")

(def-test reference-probe-test (:suite reference-probe)
  (skip-reference "the probe's reference ~A is missing" "R"))

(in-suite runtime)

(defun with-environment-variable (name value thunk)
  "Call THUNK with the environment variable NAME set to VALUE (NIL: unset),
then restore it."
  (let ((old (ext:getenv name)))
    (unwind-protect
         (progn (if value (ext:setenv name value) (ext:setenv name nil))
                (funcall thunk))
      (ext:setenv name old))))

(test reference-skips-fail-under-ci
  (flet ((probe (ci)
           (with-environment-variable "CI" ci
             (lambda ()
               (let ((results (let ((fiveam:*test-dribble* (make-broadcast-stream)))
                                (fiveam:run 'reference-probe))))
                 (is (= 1 (length results)))
                 (first results))))))
    (let ((r (probe "true")))
      (is (typep r 'fiveam::test-failure) "under CI=true: ~S" r)
      (is (contains (fiveam::reason r) "CI=true and a reference is missing: the probe's reference R")))
    (dolist (ci '(nil "false"))
      (let ((r (probe ci)))
        (is (typep r 'fiveam::test-skipped) "under CI=~A: ~S" ci r)
        (is (contains (fiveam::reason r) "the probe's reference R is missing"))))))

(test c-reference-skips-fail-under-ci
  (let ((program (namestring (merge-pathnames "tests/test_llama_interop" *exe*))))
    (skip-unless-file (program)
      (dolist (ci '("true" "false"))
        (multiple-value-bind (code out err)
            (sh (format nil "CI=~A RL_LLAMA_LIB=/nonexistent/libggml-base.so \"$1\"" ci) program)
          (is (contains out "C test llama_interop: 0 passed"))
          (is (contains err "llama.cpp library not loaded (/nonexistent/libggml-base.so"))
          (if (string= ci "true")
              (progn (is (eql 1 code))
                     (is (contains out "1 failed"))
                     (is (contains err "FAILED (CI=true, a reference is missing)")))
              (progn (is (eql 0 code))
                     (is (contains err "SKIP: llama.cpp library not loaded")))))))))

(test fetch-llama-lib-fails-under-ci-without-npm
  (let ((dir (tmp-path "fetch"))
        (script (namestring (merge-pathnames "tests/fetch-llama-lib.sh" *root*))))
    (dolist (ci '("true" "false"))
      ;; Run where nothing is cached, with a PATH holding no npm.
      (multiple-value-bind (code out err)
          (sh (format nil "mkdir -p \"$1\" && cd \"$1\" && unset RL_LLAMA_LIB && CI=~A PATH=/nonexistent /bin/sh \"$2\"; s=$?; rm -rf \"$1\"; exit $s" ci)
              dir script)
        (is (string= "" err) "~A" err)
        (is (contains out "no npm") "~A" out)
        (is (eql (if (string= ci "true") 1 0) code) "CI=~A: exit ~A" ci code)))))

(test build-llama-server-fails-under-ci-without-the-libraries
  (let ((dir (tmp-path "build-server"))
        (script (namestring (merge-pathnames "tests/build-llama-server.sh" *root*))))
    (dolist (ci '("true" "false"))
      ;; Run where nothing is cached: no llama.cpp libraries to build against.
      (multiple-value-bind (code out err)
          (sh (format nil "mkdir -p \"$1\" && cd \"$1\" && CI=~A /bin/sh \"$2\"; s=$?; rm -rf \"$1\"; exit $s" ci)
              dir script)
        (is (string= "" err) "~A" err)
        (is (contains out (format nil "llama-server: not built (no build/cache/llama/~
libllama-common.so: run sh tests/fetch-llama-lib.sh first)")) "~A" out)
        (is (eql (if (string= ci "true") 1 0) code) "CI=~A: exit ~A" ci code)))))

;;; A fixture git tracks that is missing fails the test that needs it,
;;; whatever CI says: only files made or fetched outside the repository
;;; (SKIP-UNLESS-FILE, SKIP-REFERENCE) may skip.

(def-suite tracked-fixture-probe
  :description "Not run on its own: a test whose tracked fixture is missing.")

(def-test tracked-fixture-probe-test (:suite tracked-fixture-probe)
  (with-tracked-fixture ((golden "no-such-fixture.gguf"))
    (is (= 1 2) "the body ran without its fixture")))

(in-suite runtime)

(test missing-tracked-fixture-fails
  (dolist (ci '(nil "false" "true"))
    (with-environment-variable "CI" ci
      (lambda ()
        (let ((results (let ((fiveam:*test-dribble* (make-broadcast-stream)))
                         (fiveam:run 'tracked-fixture-probe))))
          (is (= 1 (length results)) "CI=~A: ~S" ci results)
          (let ((r (first results)))
            (is (typep r 'fiveam::test-failure) "CI=~A: ~S" ci r)
            (is (contains (fiveam::reason r) "the tracked fixture ")
                "CI=~A: ~A" ci (fiveam::reason r))
            (is (contains (fiveam::reason r) "tests/golden/no-such-fixture.gguf is missing")
                "CI=~A: ~A" ci (fiveam::reason r))))))))

(test no-test-skips-on-a-tracked-fixture
  "SKIP-UNLESS-FILE never guards a file under tests/golden/ or tests/bad/:
those are tracked, and take WITH-TRACKED-FIXTURE."
  (let ((files (directory (merge-pathnames "tests/lisp/test-*.lisp" *root*))))
    (is (< 20 (length files)))
    (dolist (file files)
      (let ((text (read-file-string file)))
        ;; (the guards spelt in two pieces, so that this file is not a hit)
        (dolist (guard '("((golden" "(\"tests/"))
          (is (not (search (concatenate 'string "(skip-unless-" "file " guard) text))
              "~A: skip-unless-file ~A... guards a tracked file" (file-namestring file) guard))))))

;;; Every primitive called with wrong-typed arguments answers a TYPE-ERROR or
;;; one of rontolisp's own conditions: never a package error (C once
;;; interned the caller's name into COMMON-LISP at error time) or a crash.
;;; %RELEASE and %GGUF-CLOSE take anything, by design (closing twice is
;;; fine).

(defparameter *accept-anything* '(rontolisp::%release gguf::%gguf-close))

(test primitives-reject-wrong-types
  (let ((prims (rontolisp::%primitives)))
    (is (> (length prims) 50))
    (is (find 'rontolisp::%q8-dequantize-into prims :key #'car))
    (dolist (bad (list (list :wrong) :wrong))
      (loop for (sym . narg) in prims
            unless (zerop narg)
              do (let ((outcome
                         (handler-case (progn (apply sym (make-list narg :initial-element bad))
                                              :returned)
                           (package-error () :package-error)
                           (type-error () :type-error)
                           (rontolisp::rontolisp-error () :own-condition)
                           (error (e) (type-of e)))))
                   (if (member sym *accept-anything*)
                       (is (eq :returned outcome))
                       (is (member outcome '(:type-error :own-condition))
                           "~S on ~S answered ~S" sym bad outcome)))))
    ;; and none of them left its name behind in COMMON-LISP
    (is (null (remove-if-not (lambda (p) (find-symbol (symbol-name (car p)) "CL")) prims)))))

(test primitive-error-names-the-primitive
  (let ((e (handler-case (rontolisp::%q8-dequantize-into 1 2) (type-error (e) e))))
    (is (typep e 'type-error))
    (is (search "%Q8-DEQUANTIZE-INTO" (princ-to-string e)))
    (is (null (find-symbol "%Q8-DEQUANTIZE-INTO" "CL")))))

(test utf8-octets-turns-escaped-bytes-back
  "U+DC80..U+DCFF stand for bytes of a command-line argument that was not
UTF-8: %utf8-octets gives the bytes back; other surrogates become U+FFFD."
  (flet ((octets (&rest codes)
           (coerce (rontolisp::%utf8-octets (map 'string #'code-char codes)) 'list)))
    (is (equal '(97 #x80 #xff) (octets 97 #xdc80 #xdcff)))
    (is (equal '(#xef #xbf #xbd) (octets #xd800)))
    (is (equal '(#xef #xbf #xbd) (octets #xdc7f)))
    (is (equal '(#xe2 #x82 #xac) (octets #x20ac)))))

;;; The manual: doc/command-line.md, the man page and --help name the same
;;; commands and options.  Each source is read generically (a command is
;;; whatever each lists), so a command or option added to all three passes
;;; and one missing from any fails, naming it and where it is missing.

(defun manual-option-tokens (text)
  "The long options (--name) written in TEXT, once each, in order; man
escapes (\\- and \\fB...) already removed."
  (let ((found '()))
    (loop for start = (search "--" text) then (search "--" text :start2 end)
          for end = (and start (or (position-if-not (lambda (c) (or (alphanumericp c) (char= c #\-)))
                                                    text :start (+ start 2))
                                   (length text)))
          while start
          do (let ((token (string-right-trim "-" (subseq text start end))))
               (when (and (> (length token) 2) (alphanumericp (char token 2))
                          (or (zerop start) (not (alphanumericp (char text (1- start))))))
                 (pushnew token found :test #'string=))))
    (nreverse found)))

(defun manual-man-text (line)
  "LINE of the man page as text: \\- a dash, font changes (\\fB \\fI \\fR
\\fP) gone."
  (with-output-to-string (s)
    (loop with i = 0
          while (< i (length line))
          do (let ((c (char line i)))
               (cond ((and (char= c #\\) (< (1+ i) (length line)) (char= (char line (1+ i)) #\-))
                      (write-char #\- s) (incf i 2))
                     ((and (char= c #\\) (< (+ i 2) (length line)) (char= (char line (1+ i)) #\f))
                      (incf i 3))
                     (t (write-char c s) (incf i)))))))

(defun manual-first-word (text)
  "The first word of TEXT made of lower-case letters and dashes, after any
leading request (.BI, .B), quotes and spaces; NIL when it starts otherwise."
  (let* ((text (if (and (plusp (length text)) (char= (char text 0) #\.))
                   (subseq text (or (position #\Space text) (length text)))
                   text))
         (start (position-if-not (lambda (c) (member c '(#\Space #\"))) text)))
    (when (and start (lower-case-p (char text start)))
      (subseq text start (position-if-not (lambda (c) (or (lower-case-p c) (char= c #\-)))
                                          text :start start)))))

(defun manual-help ()
  "From `rontolisp --help' and each command's --help: (values commands
global-options table), the table mapping a command to its options."
  (multiple-value-bind (code out) (run-exe '("--help"))
    (is (= 0 code))
    (let ((commands '()) (global '()) (table (make-hash-table :test 'equal)) (in-global nil))
      (dolist (line (split-lines out))
        (cond ((and (> (length line) 12) (string= "  rontolisp " line :end2 12)
                    (lower-case-p (char line 12)))
               (pushnew (manual-first-word (subseq line 12)) commands :test #'string=))
              ((search "Global flags" line) (setf in-global t))
              ((and in-global (> (length line) 4) (string= "  --" line :end2 4))
               (setf global (union global (manual-option-tokens
                                           (subseq line 0 (or (search "   " line :start2 2)
                                                              (length line))))
                                   :test #'string=)))))
      (dolist (command commands)
        (multiple-value-bind (code out) (run-exe (list command "--help"))
          (is (= 0 code) "~A --help exited ~A" command code)
          (setf (gethash command table)
                (loop with in-options = nil
                      for line in (split-lines out)
                      do (cond ((string= line "Options:") (setf in-options t))
                               ((string= line "") (when in-options (setf in-options :done))))
                      when (and (eq in-options t) (> (length line) 4) (string= "  --" line :end2 4))
                        append (remove "--help" (manual-option-tokens
                                                 (subseq line 0 (or (search "  " line :start2 2)
                                                                    (length line))))
                                       :test #'string=)))))
      (values (reverse commands) global table))))

(defun manual-man-page ()
  "From rontolisp.1: (values table global-options) where the table maps a
command of the COMMANDS section to (header-options . entry-options): the
options of its .TP header lines and of its whole entries."
  (let ((table (make-hash-table :test 'equal)) (global '()) (section nil) (command nil) (header nil))
    (dolist (raw (split-lines (read-file-string (namestring (merge-pathnames "rontolisp.1" *root*)))))
      (let ((line (manual-man-text raw)))
        (cond ((and (> (length raw) 4) (string= ".SH " raw :end2 4))
               (setf section (string-trim " \"" (subseq raw 4)) command nil))
              ((string= raw ".TP") (setf header t command nil))
              ((string= section "OPTIONS")
               (setf global (union global (manual-option-tokens line) :test #'string=)))
              ((and (string= section "COMMANDS") header)
               (setf header nil command (manual-first-word line))
               (when command
                 (let ((entry (or (gethash command table) (cons '() '())))
                       (options (manual-option-tokens line)))
                   (setf (gethash command table)
                         (cons (union (car entry) options :test #'string=)
                               (union (cdr entry) options :test #'string=))))))
              ((and (string= section "COMMANDS") command)
               (push-options-to-man-entry table command (manual-option-tokens line))))))
    (values table global)))

(defun push-options-to-man-entry (table command options)
  (let ((entry (gethash command table)))
    (setf (cdr entry) (union (cdr entry) options :test #'string=))))

(defun manual-command-line-md ()
  "From doc/command-line.md's section 1: (values table global-options),
the table mapping each command of the synopsis block (lines
`    rontolisp NAME ...' and the lines indented under them) to its options;
the global options are those of the section's text outside the block."
  (let ((table (make-hash-table :test 'equal)) (global '()) (in-section nil) (command nil))
    (dolist (line (split-lines (read-file-string (namestring (merge-pathnames "doc/command-line.md" *root*)))))
      (cond ((and (> (length line) 3) (string= "## " line :end2 3))
             (setf in-section (and (> (length line) 5) (string= "## 1." line :end2 5)) command nil))
            ((not in-section))
            ((and (> (length line) 14) (string= "    rontolisp " line :end2 14)
                  (lower-case-p (char line 14)))
             (setf command (manual-first-word (subseq line 14)))
             (setf (gethash command table)
                   (union (gethash command table) (manual-option-tokens (subseq line 14))
                          :test #'string=)))
            ((and command (> (length line) 5) (string= "     " line :end2 5))
             (setf (gethash command table)
                   (union (gethash command table) (manual-option-tokens line) :test #'string=)))
            ((and (> (length line) 4) (string= "    " line :end2 4)) (setf command nil))
            (t (setf command nil
                     global (union global (manual-option-tokens line) :test #'string=)))))
    (values table global)))

(test manual-names-every-command-and-option
  (multiple-value-bind (commands global help) (manual-help)
    (multiple-value-bind (man man-global) (manual-man-page)
      (multiple-value-bind (doc doc-global) (manual-command-line-md)
        (is (< 10 (length commands)) "~A" commands)
        (flet ((keys (table) (loop for k being the hash-keys of table collect k))
               (missing (what from where)
                 (let ((gone (set-difference what from :test #'string=)))
                   (is (null gone) "~A: ~{~A~^ ~}" where gone))))
          (missing commands (keys man) "commands of --help missing from rontolisp.1")
          (missing commands (keys doc) "commands of --help missing from doc/command-line.md")
          (missing (keys man) commands "commands of rontolisp.1 that --help does not list")
          (missing (keys doc) commands "commands of doc/command-line.md that --help does not list")
          (missing global man-global "global options of --help missing from rontolisp.1's OPTIONS")
          (missing global doc-global "global options of --help missing from doc/command-line.md")
          (dolist (command commands)
            (let ((options (gethash command help)))
              (when (gethash command man)
                (missing options (cdr (gethash command man))
                         (format nil "options of ~A --help missing from its rontolisp.1 entry" command))
                (missing (car (gethash command man)) options
                         (format nil "options in rontolisp.1's ~A synopsis that ~A --help does not list"
                                 command command)))
              (when (gethash command doc)
                (missing options (gethash command doc)
                         (format nil "options of ~A --help missing from doc/command-line.md's ~A line"
                                 command command))
                (missing (gethash command doc) options
                         (format nil "options in doc/command-line.md's ~A line that ~A --help does not list"
                                 command command))))))))))
