;;;; test-prims-module.lisp - the loadable system: a stock ECL loads
;;;; rontolisp through ASDF with the primitives module
;;;; (runtime/prims-module.lisp, build/rontolisp-prims.fas) and passes the
;;;; suites of the number formats, half arrays, the quantized matrix and
;;;; vec there too (loading those four suite files only, and counting
;;;; their tests).

(in-package "RONTOLISP-TESTS")

(def-suite prims-module :in all :description "rontolisp as an ASDF system in a stock ECL.")
(in-suite prims-module)

(defun split-sequence-lines (text)
  "The lines of TEXT, as a list of strings."
  (with-input-from-string (s text)
    (loop for l = (read-line s nil) while l collect l)))

(test prims-module-stock-ecl-passes-suites
  ;; ASDF's output for lisp/ is build/asdf/, where `make check' links the
  ;; objects the build compiled into the .fas files compile-op would write
  ;; (runtime/build-lisp.lisp --asdf-output): the same compiler on the same
  ;; files in the same order, so the stock ECL loads them rather than
  ;; compiling the system a second time.  Without them ASDF compiles there.
  (multiple-value-bind (code out err)
      (sh "cd \"$1\" && ASDF_OUTPUT_TRANSLATIONS=\"$1/lisp/:$1/build/asdf/\" exec ecl --norc --shell tests/lisp/run.lisp formats halfarrays qmatrix vec"
          (string-right-trim "/" (namestring *root*)))
    (let* ((summary (find-if (lambda (l) (search "Lisp tests: " l))
                             (split-sequence-lines out)))
           (passed (and summary (parse-integer summary :start (+ 12 (search "Lisp tests: " summary))
                                                       :junk-allowed t)))
           (skipped (and summary (search "failed, " summary)
                         (parse-integer summary :start (+ 8 (search "failed, " summary))
                                                :junk-allowed t)))
           ;; every test of the four suites ran, and none only skipped
           (tests (loop for suite in '("formats" "halfarrays" "qmatrix" "vec")
                        sum (count-if (lambda (l) (and (> (length l) 6) (string= "(test " l :end2 6)))
                                      (split-sequence-lines
                                       (read-file-string
                                        (merge-pathnames (format nil "tests/lisp/test-~A.lisp" suite)
                                                         *root*)))))))
      (is (eql 0 code) "stock ECL exited ~A; its stderr ends ~S" code
          (subseq err (max 0 (- (length err) 400))))
      (is (and passed (eql passed tests) (eql skipped 0))
          "stock ECL's summary: ~S, for the ~D tests of the four suites" (and summary (subseq summary 6))
          tests)
      (is (and summary (search " 0 failed" summary)))
      ;; a run loads the fixtures and its suites' files, not every suite's
      (is (search (format nil "Loaded the fixtures and 4 of ~D suite files."
                          (length (directory (merge-pathnames "tests/lisp/test-*.lisp" *root*))))
                  out)
          "stock ECL's run did not say it loaded 4 suite files: ~S"
          (subseq out (max 0 (- (length out) 400)))))))
