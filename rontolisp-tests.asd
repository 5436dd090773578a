;;;; rontolisp-tests.asd - the test system: the fixtures and one FiveAM suite
;;;; per Lisp file, in the order of the code they test.  A suite's file needs
;;;; only the fixtures (tests/lisp/run.lisp loads just those and the files of
;;;; the suites it runs).  tests/lisp/run.lisp
;;;; loads it inside the built rontolisp executable, which already holds the
;;;; code under test, so no rontolisp system is loaded here.

(defclass rontolisp-test-file (asdf:cl-source-file) ()
  (:documentation "A test file loaded from source, never compiled: the
suites test what ECL's compiler does to the code under test and when it is
loaded, so the test run must not load the compiler itself, and a run costs
no C compilation."))

(defmethod asdf:output-files ((o asdf:compile-op) (c rontolisp-test-file))
  (values nil t))

(defmethod asdf:perform ((o asdf:compile-op) (c rontolisp-test-file))
  nil)

(defmethod asdf:perform ((o asdf:load-op) (c rontolisp-test-file))
  (load (asdf:component-pathname c)))

(asdf:defsystem "rontolisp-tests"
  :description "The FiveAM suites of rontolisp; run them with tests/lisp/run.lisp."
  :depends-on ("fiveam" "yason")
  :pathname "tests/lisp/"
  :serial t
  :default-component-class rontolisp-test-file
  :components ((:file "package")
               (:file "fixtures")
               (:file "fixtures-shared")
               (:file "test-conditions")
               (:file "test-packages")
               (:file "test-runtime")
               (:file "test-repl")
               (:file "test-threads")
               (:file "test-swank")
               (:file "test-prims-module")
               (:file "test-formats")
               (:file "test-files")
               (:file "test-halfarrays")
               (:file "test-outliers")
               (:file "test-qmatrix")
               (:file "test-ecl-filenames")
               (:file "test-vec")
               (:file "test-encoder")
               (:file "test-json")
               (:file "test-svg")
               (:file "test-template")
               (:file "test-gguf")
               (:file "test-edit")
               (:file "test-split")
               (:file "test-regex")
               (:file "test-inspect")
               (:file "test-calibration")
               (:file "test-quantize-tool")
               (:file "test-safetensors")
               (:file "test-convert")
               (:file "test-bench")
               (:file "test-model")
               (:file "test-embed")
               (:file "test-qtypes")
               (:file "test-tokenizer")
               (:file "test-decision")
               (:file "test-model-scratch")
               (:file "test-model-quantize")
               (:file "test-eval")
               (:file "test-export")
               (:file "test-tokenizer-refs")
               (:file "test-decision-refs")
               (:file "test-serve")
               (:file "test-trained")
               (:file "test-gguf-py")
               (:file "test-quant-goldens")
               (:file "test-quantize-mixtures")))
