;;;; test-prims-module.lisp - the loadable system: a stock ECL loads
;;;; rontolisp through ASDF with the primitives module
;;;; (runtime/prims-module.lisp, build/rontolisp-prims.fas) and passes the
;;;; suites of the number formats, half arrays, the quantized matrix and
;;;; vec there too.

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
                                                       :junk-allowed t))))
      (is (eql 0 code) "stock ECL exited ~A; its stderr ends ~S" code
          (subseq err (max 0 (- (length err) 400))))
      (is (and passed (> passed 300)) "stock ECL's summary: ~S" (and summary (subseq summary 6)))
      (is (and summary (search " 0 failed" summary))))))
