;;;; rontolisp.asd - the Lisp half of rontolisp and the one statement of its
;;;; load order.
;;;;
;;;; The files are :serial: each is compiled and loaded after every file
;;;; above it, so file order is dependency order (packages, then
;;;; conditions, then what signals them).  runtime/build-lisp.lisp reads
;;;; the first form below as data (the Makefile asks it for the file list,
;;;; and it compiles the files in this order into the library the
;;;; executable links), so adding a file here is all a new Lisp file needs.
;;;; A module's files sit in its folder and are named with it
;;;; ("gguf/shards"); each command's define-command form is a file of
;;;; commands/, loaded last and in the order `rontolisp --help' lists them.
;;;; The tests are their own system.
;;;;
;;;; A stock ECL loads the same code as a system:
;;;;   (require "asdf") (asdf:load-system "rontolisp")
;;;; with this directory in ASDF's registry and `make' run first: the
;;;; primitives come from the module build/rontolisp-prims.fas
;;;; (runtime/prims-module.lisp; `make install' puts it in
;;;; PREFIX/lib/rontolisp/ and this file in PREFIX/share/rontolisp/),
;;;; loaded before the Lisp files and registered after them, as the
;;;; executable does.

(defsystem "rontolisp"
  :description "ECL with native primitives for quantized language models:
Q8_0, the quantized matrix, matrix-vector products, GGUF files and the
command-line tools built on them."
  :serial t
  :depends-on ("rontolisp/prims")
  :perform (load-op :after (o c)
             (declare (ignore o c))
             (funcall (find-symbol "REGISTER" "RONTOLISP-PRIMS")))
  :pathname "lisp/"
  :components ((:file "packages")
               (:file "conditions")
               (:file "base/files")
               (:file "base/runtime")
               (:file "base/threads")
               (:file "base/progress")
               (:file "quant/formats")
               (:file "quant/halfarrays")
               (:file "quant/outliers")
               (:file "quant/qmatrix")
               (:file "quant/qmatrix-types")
               (:file "quant/selection")
               (:file "quant/ecl-aref")
               (:file "base/ecl-filenames")
               (:file "vec/vec")
               (:file "vec/encoder")
               (:file "vec/outlier-matrix")
               (:file "text/json")
               (:file "text/html")
               (:file "text/svg")
               (:file "text/template-lexer")
               (:file "text/template-parser")
               (:file "text/template")
               (:file "text/regex")
               (:file "gguf/conditions")
               (:file "gguf/gguf")
               (:file "gguf/shards")
               (:file "model/conditions")
               (:file "model/stage-clock")
               (:file "model/model-scratch")
               (:file "model/calibration")
               (:file "model/model")
               (:file "model/tokenizer")
               (:file "model/embed")
               (:file "model/decision")
               (:file "model/question")
               (:file "model/model-quantize")
               (:file "session/command-line")
               (:file "session/repl")
               (:file "session/swank")
               (:file "jobs/lines")
               (:file "jobs/inspect")
               (:file "jobs/inspect-markdown")
               (:file "jobs/split")
               (:file "jobs/edit")
               (:file "jobs/quantize-mixtures")
               (:file "jobs/quantize-tool")
               (:file "jobs/safetensors")
               (:file "jobs/convert-names")
               (:file "jobs/convert-input")
               (:file "jobs/convert-random")
               (:file "jobs/convert")
               (:file "jobs/bench")
               (:file "jobs/model-bench")
               (:file "jobs/bench-products")
               (:file "jobs/eval")
               (:file "jobs/calibrate")
               (:file "jobs/decision-bench")
               (:static-file "jobs/bench-page.html")
               (:file "jobs/export")
               (:static-file "jobs/serve-page.html")
               (:file "jobs/serve")
               (:file "commands/script")
               (:file "commands/swank")
               (:file "commands/inspect")
               (:file "commands/split")
               (:file "commands/merge")
               (:file "commands/edit")
               (:file "commands/quantize")
               (:file "commands/convert")
               (:file "commands/bench")
               (:file "commands/calibrate")
               (:file "commands/tokenize")
               (:file "commands/embed")
               (:file "commands/decide")
               (:file "commands/serve")
               (:file "commands/eval")
               (:file "commands/export")))

(defsystem "rontolisp/prims"
  :description "rontolisp's C primitives for a stock ECL: loads the module
build/rontolisp-prims.fas (made by `make'), or the installed one."
  :perform (load-op (o c)
             (declare (ignore o))
             (let* ((dir (component-pathname c))
                    (module (or (probe-file (merge-pathnames "build/rontolisp-prims.fas" dir))
                                (probe-file (merge-pathnames "../../lib/rontolisp/rontolisp-prims.fas"
                                                             dir)))))
               (unless module
                 (error "rontolisp: expected the primitives module build/rontolisp-prims.fas ~
                         (run make) or PREFIX/lib/rontolisp/rontolisp-prims.fas, found neither ~
                         from ~A" dir))
               (unless (find-package "RONTOLISP-PRIMS")
                 (load module)))))
