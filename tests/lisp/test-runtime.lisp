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
    (is (= 0 code))
    (is (contains out "42"))
    (is (contains out "420"))
    (is (contains err "oops 7"))
    (is (contains err "TYPE-ERROR"))))

(test repl-survives-a-reader-error
  (multiple-value-bind (code out)
      (run-exe '() :input (format nil "(no-such-package::foo 1)~%(+ 1 1)~%"))
    (is (= 0 code))
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

(test script-serious-condition-exits-1
  (let ((f (write-file-string (tmp-path "sc.lisp")
                              (format nil "(signal 'storage-condition)~%(error 'storage-condition)~%"))))
    (multiple-value-bind (code out err) (run-exe (list "script" f))
      (declare (ignore out))
      (is (= 1 code))
      (is (plusp (length err))))
    (delete-file f)))

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
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "frobnicate"))
    (is (contains err "usage: rontolisp"))))

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
  (dolist (p '("RONTOLISP" "VEC" "LINALG" "GGUF"))
    (do-external-symbols (s p)
      (when (or (fboundp s) (boundp s))
        (is (or (documentation s 'function) (documentation s 'variable)
                (documentation s 'type))
            "~S has no docstring" s)))))

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
                           "~S on ~S answered ~S" sym bad outcome)))))))

(test primitive-error-names-the-primitive
  (let ((e (handler-case (rontolisp::%q8-dequantize-into 1 2) (type-error (e) e))))
    (is (typep e 'type-error))
    (is (search "%Q8-DEQUANTIZE-INTO" (princ-to-string e)))
    (is (null (find-symbol "%Q8-DEQUANTIZE-INTO" "CL")))))
