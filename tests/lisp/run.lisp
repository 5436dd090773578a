;;;; run.lisp - the test runner: loads the system rontolisp-tests (FiveAM
;;;; from Debian's cl-fiveam, through ASDF), runs the suites and prints
;;;; "Lisp tests: N passed, M failed, K skipped".  From the repository root:
;;;;   build/rontolisp script tests/lisp/run.lisp [SUITE-SUBSTRING ...]
;;;; or, in a stock ECL that loads the system rontolisp through ASDF (the
;;;; primitives from build/rontolisp-prims.fas):
;;;;   ecl --norc --shell tests/lisp/run.lisp [SUITE-SUBSTRING ...]
;;;; With arguments, only the suites whose names contain one of them run
;;;; (the suite of tests/lisp/test-NAME.lisp is NAME; =NAME names exactly
;;;; that suite; --load-only loads the system and runs nothing).  The run
;;;; ends with each suite's wall time.  Exits 1 when
;;;; anything failed.

(require 'asdf)
(let ((root (truename (merge-pathnames "../../" (make-pathname :name nil :type nil
                                                               :defaults *load-truename*)))))
  (push root asdf:*central-registry*))
(let ((*error-output* (make-broadcast-stream))
      (*standard-output* (make-broadcast-stream)))
  ;; The executable holds the code under test; a stock ECL loads it.
  (unless (find-package "RONTOLISP")
    (asdf:load-system "rontolisp"))
  (asdf:load-system "fiveam")
  (asdf:load-system "yason"))
;; Debian's trivial-backtrace (under FiveAM) names a COPYING file it does not
;; ship, and ASDF warns about it on every plan; any other warning shows.
(handler-bind ((warning (lambda (w)
                          (when (search "without its input file" (princ-to-string w))
                            (muffle-warning w)))))
  (asdf:load-system "rontolisp-tests"))

(in-package "RONTOLISP-TESTS")

(defparameter *stock-ecl* (not (fboundp 'rontolisp::%line-editor-read))
  "True when the tests run in a stock ECL rather than in the executable.")

(defun run-arguments ()
  "The arguments given after run.lisp."
  (if *stock-ecl*
      (rest (member "run.lisp" ext:*command-args* :test #'string= :key #'file-namestring))
      rontolisp:*args*))

;; --load-only: load (and so compile FiveAM into the cache), run nothing.
(when (equal (run-arguments) '("--load-only"))
  (format t "~&Lisp tests: loaded~%")
  (finish-output)
  (if *stock-ecl* (ext:quit 0) (rontolisp:exit 0)))

(defun test-file-suites ()
  "The suite of each test file, in load order: test-NAME.lisp holds NAME."
  (loop for c in (asdf:component-children (asdf:find-system "rontolisp-tests"))
        for name = (asdf:component-name c)
        when (and (> (length name) 5) (string= "test-" name :end2 5))
          collect (let ((suite (find-symbol (string-upcase (subseq name 5)) "RONTOLISP-TESTS")))
                    (unless (and suite (fiveam:get-test suite))
                      (error "tests/lisp/~A.lisp defines no suite ~A" name (subseq name 5)))
                    suite)))

;; A test file the system does not list would never run: say so and fail.
(defun unlisted-test-files ()
  "Names of tests/lisp/test-*.lisp files that rontolisp-tests.asd does not list."
  (let ((listed (mapcar #'asdf:component-name
                        (asdf:component-children (asdf:find-system "rontolisp-tests")))))
    (loop for p in (directory (merge-pathnames "test-*.lisp" *load-truename*))
          unless (member (pathname-name p) listed :test #'string=)
            collect (pathname-name p))))

(defun suite-matches-p (filter suite)
  "True when the command-line FILTER names SUITE: \"=NAME\" the suite NAME
exactly, any other filter every suite whose name contains it."
  (if (and (plusp (length filter)) (char= #\= (char filter 0)))
      (string-equal (subseq filter 1) (symbol-name suite))
      (search (string-upcase filter) (symbol-name suite))))

(let* ((filters (run-arguments))
       (suites (test-file-suites))
       (chosen (if filters
                   (remove-if-not (lambda (s)
                                    (some (lambda (f) (suite-matches-p f s)) filters))
                                  suites)
                   suites))
       (seconds '())
       (results (let ((*test-dribble* *standard-output*))
                  (loop for s in chosen
                        for start = (get-internal-real-time)
                        append (copy-list (run s))
                        do (push (cons s (/ (- (get-internal-real-time) start)
                                            internal-time-units-per-second))
                                 seconds))))
       (passed (count-if (lambda (r) (typep r 'fiveam::test-passed)) results))
       (failed (count-if (lambda (r) (typep r 'fiveam::test-failure)) results))
       (skipped (count-if (lambda (r) (typep r 'fiveam::test-skipped)) results)))
  (let ((bad (remove-if (lambda (r) (typep r 'fiveam::test-passed)) results)))
    (when bad (explain! bad)))
  (dolist (name (unlisted-test-files))
    (format t "~&tests/lisp/~A.lisp is not listed in rontolisp-tests.asd, so it never runs.~%" name)
    (incf failed))
  (when (and filters (null chosen))
    (format t "~&No suite matches ~{~A~^, ~}.~%" filters)
    (incf failed))
  (format t "~&Suite times:~:{ ~(~A~) ~,1Fs~}~%"
          (mapcar (lambda (e) (list (car e) (float (cdr e)))) (reverse seconds)))
  (format t "~&Lisp tests: ~D passed, ~D failed, ~D skipped~%" passed failed skipped)
  (finish-output)
  (if *stock-ecl*
      (ext:quit (if (zerop failed) 0 1))
      (rontolisp:exit (if (zerop failed) 0 1))))
