;;;; package.lisp - the package every test file is read in, and the root
;;;; suite.  Each tests/lisp/test-NAME.lisp holds the suite NAME, the tests
;;;; of lisp/NAME.lisp, nested in ALL; run.lisp runs ALL or the suites it is
;;;; asked for.

(defpackage "RONTOLISP-TESTS"
  (:use "CL" "FIVEAM")
  (:documentation "The FiveAM suites of rontolisp.  Test code reaches the
code under test by package prefix (rontolisp:, gguf:, vec:), as users do;
the fixtures in fixtures.lisp are shared by every suite."))

(in-package "RONTOLISP-TESTS")

(def-suite all :description "Every rontolisp suite.")
