;;;; run.lisp - loads FiveAM and every suite in tests/lisp/, runs them and
;;;; prints "Lisp tests: N passed, M failed".  Run from the repository root:
;;;;   build/rontolisp script tests/lisp/run.lisp [FILE-SUBSTRING ...]
;;;; With arguments, only the test files whose names contain one of them
;;;; are loaded.  Exits 1 when anything failed.

(require 'asdf)
(let ((*error-output* (make-broadcast-stream))
      (*standard-output* (make-broadcast-stream)))
  (asdf:load-system "fiveam"))

(defpackage "RONTOLISP-TESTS"
  (:use "CL" "FIVEAM"))

(in-package "RONTOLISP-TESTS")

(def-suite all :description "Every rontolisp suite.")

(defparameter *root* (truename "./"))
(defparameter *exe* (namestring (merge-pathnames "build/rontolisp" *root*))
  "The executable under test, for tests of the command line.")
(defvar *tmp-counter* 0)

(defun tmp-path (name)
  "A fresh path under the system's temporary directory."
  (format nil "~A/rl-test-~D-~D-~A"
          (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp"))
          (ext:getpid) (incf *tmp-counter*) name))

(defun golden (name)
  "The path of a file under tests/golden/, as a string."
  (namestring (merge-pathnames (concatenate 'string "tests/golden/" name) *root*)))

(defun read-file-string (path)
  (with-open-file (s path :external-format :utf-8)
    (let* ((str (make-string (file-length s)))
           (n (read-sequence str s)))
      (subseq str 0 n))))

(defun write-file-string (path string)
  (with-open-file (s path :direction :output :if-exists :supersede
                          :external-format :utf-8)
    (write-string string s))
  path)

(defun run-exe (args &key (input ""))
  "Run the rontolisp executable with ARGS (strings), INPUT (a string) on its
standard input; answer (values exit-status stdout stderr)."
  (let ((in (write-file-string (tmp-path "in") input))
        (out (tmp-path "out"))
        (err (tmp-path "err")))
    (unwind-protect
         (let ((code (nth-value 1 (ext:run-program *exe* args
                                                   :input in :output out :error err
                                                   :if-output-exists :supersede
                                                   :if-error-exists :supersede
                                                   :wait t))))
           (values code (read-file-string out) (read-file-string err)))
      (dolist (f (list in out err)) (ignore-errors (delete-file f))))))

(defun contains (haystack needle)
  (and (search needle haystack) t))

(defmacro skip-unless-file ((path) &body body)
  "Run BODY when PATH exists; otherwise say the test is skipped (a skip is
not a pass)."
  `(if (probe-file ,path)
       (progn ,@body)
       (skip "missing test file ~A" ,path)))

;;; Load the suites.
(let* ((filters rontolisp:*args*)
       (files (sort (directory (merge-pathnames "tests/lisp/test-*.lisp" *root*))
                    #'string< :key #'namestring)))
  (dolist (f files)
    (when (or (null filters)
              (some (lambda (s) (search s (pathname-name f))) filters))
      (load f))))

(let* ((results (let ((*test-dribble* *standard-output*))
                  (run 'all)))
       (passed (count-if (lambda (r) (typep r 'fiveam::test-passed)) results))
       (failed (count-if (lambda (r) (typep r 'fiveam::test-failure))
                         results))
       (skipped (count-if (lambda (r) (typep r 'fiveam::test-skipped)) results)))
  (let ((bad (remove-if (lambda (r) (typep r (quote fiveam::test-passed))) results)))
    (when bad (explain! bad)))
  (format t "~&Lisp tests: ~D passed, ~D failed, ~D skipped~%" passed failed skipped)
  (finish-output)
  (rontolisp:exit (if (zerop failed) 0 1)))
