;;;; run.lisp - the test runner: loads FiveAM (Debian's cl-fiveam, through
;;;; ASDF), the fixtures and the test files of the system rontolisp-tests,
;;;; runs the suites and prints "Lisp tests: N passed, M failed, K skipped",
;;;; counting tests (a test with any failed check failed; one that only
;;;; skipped is skipped), and the checks on a line of their own.  From the
;;;; repository root:
;;;;   build/rontolisp script tests/lisp/run.lisp [SUITE-SUBSTRING ...]
;;;; or, in a stock ECL that loads the system rontolisp through ASDF (the
;;;; primitives from build/rontolisp-prims.fas):
;;;;   ecl --norc --shell tests/lisp/run.lisp [SUITE-SUBSTRING ...]
;;;; With arguments, only the suites whose names contain one of them are
;;;; loaded and run (the suite of tests/lisp/test-NAME.lisp is NAME; =NAME
;;;; names exactly that suite): a run loads the fixtures and the files of
;;;; its suites, nothing else.  --load-only loads FiveAM and the fixtures
;;;; and runs nothing.  The run ends with each suite's wall time.  Exits 1
;;;; when anything failed.

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

(defparameter cl-user::*rontolisp-tests*
  ;; Debian's trivial-backtrace (under FiveAM) names a COPYING file it does
  ;; not ship, and ASDF warns about it; any other warning shows.
  (handler-bind ((warning (lambda (w)
                            (when (search "without its input file" (princ-to-string w))
                              (muffle-warning w)))))
    (asdf:find-system "rontolisp-tests"))
  "The test system: its files, in order, are loaded one by one below.")

(defun cl-user::load-test-file (component)
  "Loads the rontolisp-tests file COMPONENT as the system's load-op does."
  (asdf:perform (asdf:make-operation 'asdf:load-op) component))

(cl-user::load-test-file (asdf:find-component cl-user::*rontolisp-tests* "package"))

(in-package "RONTOLISP-TESTS")

(defparameter *stock-ecl* (not (fboundp (find-symbol "%LINE-EDITOR-READ" "RONTOLISP")))
  "True when the tests run in a stock ECL rather than in the executable.")

(defparameter *run-arguments*
  (if *stock-ecl*
      (rest (member "run.lisp" ext:*command-args* :test #'string= :key #'file-namestring))
      (symbol-value (find-symbol "*ARGS*" "RONTOLISP")))
  "The arguments given after run.lisp.")

(defun suite-matches-p (filter name)
  "True when the command-line FILTER names the suite NAME (a string): \"=NAME\"
that suite exactly, any other filter every suite whose name contains it."
  (if (and (plusp (length filter)) (char= #\= (char filter 0)))
      (string-equal (subseq filter 1) name)
      (search (string-downcase filter) (string-downcase name))))

(defun chosen-suite-p (name)
  "True when the arguments choose the suite NAME: every suite without
arguments, none for --load-only."
  (cond ((null *run-arguments*) t)
        ((equal *run-arguments* '("--load-only")) nil)
        (t (some (lambda (f) (suite-matches-p f name)) *run-arguments*))))

(defun test-file-suite-name (component)
  "The suite name of the rontolisp-tests COMPONENT test-NAME (NAME), or NIL
for the files every suite needs (the package, the fixtures)."
  (let ((name (asdf:component-name component)))
    (and (> (length name) 5) (string= "test-" name :end2 5) (subseq name 5))))

(defparameter *suite-files-loaded* (list 0 0)
  "How many suite files this run loaded, and how many the system lists.")

;; The fixtures, then the test files of the chosen suites.
(dolist (c (asdf:component-children cl-user::*rontolisp-tests*))
  (let ((suite (test-file-suite-name c)))
    (when suite
      (incf (second *suite-files-loaded*)))
    (when (if suite
              (chosen-suite-p suite)
              (string/= (asdf:component-name c) "package"))
      (when suite
        (incf (first *suite-files-loaded*)))
      (cl-user::load-test-file c))))

;; --load-only: load (and so compile FiveAM into the cache), run nothing.
(when (equal *run-arguments* '("--load-only"))
  (format t "~&Lisp tests: loaded~%")
  (finish-output)
  (if *stock-ecl* (ext:quit 0) (rontolisp:exit 0)))

(defun test-file-suites ()
  "The suite of each test file the arguments chose, in load order:
test-NAME.lisp holds NAME."
  (loop for c in (asdf:component-children cl-user::*rontolisp-tests*)
        for name = (test-file-suite-name c)
        when (and name (chosen-suite-p name))
          collect (let ((suite (find-symbol (string-upcase name) "RONTOLISP-TESTS")))
                    (unless (and suite (fiveam:get-test suite))
                      (error "tests/lisp/test-~A.lisp defines no suite ~A" name name))
                    suite)))

;; A test file the system does not list would never run: say so and fail.
(defun unlisted-test-files ()
  "Names of tests/lisp/test-*.lisp files that rontolisp-tests.asd does not list."
  (let ((listed (mapcar #'asdf:component-name
                        (asdf:component-children cl-user::*rontolisp-tests*))))
    (loop for p in (directory (merge-pathnames "test-*.lisp" *load-truename*))
          unless (member (pathname-name p) listed :test #'string=)
            collect (pathname-name p))))

(defun suite-tests (suite)
  "Every test case of SUITE (a name), in the suites nested in it too."
  (let ((tests '()))
    ;; a suite's table maps a test's name to the name, a nested suite's to the suite
    (labels ((walk (entry)
               (let ((object (if (symbolp entry) (fiveam:get-test entry) entry)))
                 (if (typep object 'fiveam::test-suite)
                     (loop for child being the hash-values of (fiveam::tests object)
                           do (walk child))
                     (push object tests)))))
      (walk (fiveam:get-test suite)))
    tests))

(defun test-verdicts (tests results)
  "The verdict on each of TESTS from the check RESULTS of a run: :FAILED
when any of its checks failed (or it checked nothing and skipped nothing:
no test passes vacuously), :PASSED when it passed a check, else :SKIPPED.
A list of (test . verdict)."
  (let ((by-test (make-hash-table :test 'eq)))
    (dolist (r results)
      (push r (gethash (fiveam::test-case r) by-test)))
    (loop for test in tests
          for rs = (gethash test by-test)
          collect (cons test
                        (cond ((some (lambda (r) (typep r 'fiveam::test-failure)) rs) :failed)
                              ((some (lambda (r) (typep r 'fiveam::test-passed)) rs) :passed)
                              ((some (lambda (r) (typep r 'fiveam::test-skipped)) rs) :skipped)
                              (t :failed))))))

(let* ((filters *run-arguments*)
       (chosen (test-file-suites))
       (seconds '())
       (results (let ((*test-dribble* *standard-output*))
                  (loop for s in chosen
                        for start = (get-internal-real-time)
                        append (copy-list (run s))
                        do (push (cons s (/ (- (get-internal-real-time) start)
                                            internal-time-units-per-second))
                                 seconds))))
       (tests (mapcan #'suite-tests chosen))
       (verdicts (test-verdicts tests results))
       (passed (count :passed verdicts :key #'cdr))
       ;; a failure outside any test of the suites (a suite's fixture) counts too
       (failed (+ (count :failed verdicts :key #'cdr)
                  (count-if (lambda (r) (and (typep r 'fiveam::test-failure)
                                             (not (member (fiveam::test-case r) tests))))
                            results)))
       (skipped (count :skipped verdicts :key #'cdr)))
  (let ((bad (remove-if (lambda (r) (typep r 'fiveam::test-passed)) results)))
    (when bad (explain! bad)))
  (loop for (test . verdict) in verdicts
        when (and (eq verdict :failed)
                  (notany (lambda (r) (eq (fiveam::test-case r) test)) results))
          do (format t "~&~(~A~): it checked nothing and skipped nothing.~%"
                     (fiveam::name test)))
  (dolist (name (unlisted-test-files))
    (format t "~&tests/lisp/~A.lisp is not listed in rontolisp-tests.asd, so it never runs.~%" name)
    (incf failed))
  (when (and filters (null chosen))
    (format t "~&No suite matches ~{~A~^, ~}.~%" filters)
    (incf failed))
  (format t "~&Loaded the fixtures and ~D of ~D suite files.~%"
          (first *suite-files-loaded*) (second *suite-files-loaded*))
  (format t "~&Suite times:~:{ ~(~A~) ~,1Fs~}~%"
          (mapcar (lambda (e) (list (car e) (float (cdr e)))) (reverse seconds)))
  (format t "~&  Lisp checks: ~D passed, ~D failed, ~D skipped~%"
          (count-if (lambda (r) (typep r 'fiveam::test-passed)) results)
          (count-if (lambda (r) (typep r 'fiveam::test-failure)) results)
          (count-if (lambda (r) (typep r 'fiveam::test-skipped)) results))
  (format t "~&Lisp tests: ~D passed, ~D failed, ~D skipped~%" passed failed skipped)
  (finish-output)
  (if *stock-ecl*
      (ext:quit (if (zerop failed) 0 1))
      (rontolisp:exit (if (zerop failed) 0 1))))
