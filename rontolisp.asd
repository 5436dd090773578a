;;;; rontolisp.asd - the Lisp half of rontolisp and the one statement of its
;;;; load order.
;;;;
;;;; The files are :serial: each is compiled and loaded after every file
;;;; above it, so file order is dependency order (packages, then
;;;; conditions, then what signals them).  runtime/build-lisp.lisp reads
;;;; the first form below as data (the Makefile asks it for the file list,
;;;; and it compiles the files in this order into the library the
;;;; executable links), so adding a file here is all a new Lisp file needs.
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
               (:file "files")
               (:file "runtime")
               (:file "threads")
               (:file "repl")
               (:file "swank")
               (:file "formats")
               (:file "halfarrays")
               (:file "outliers")
               (:file "qmatrix")
               (:file "qmatrix-types")
               (:file "vec")
               (:file "encoder")
               (:file "json")
               (:file "template")
               (:file "gguf")
               (:file "regex")
               (:file "inspect")
               (:file "inspect-markdown")
               (:file "shards")
               (:file "split")
               (:file "edit")
               (:file "calibration")
               (:file "quantize-mixtures")
               (:file "quantize-tool")
               (:file "safetensors")
               (:file "convert-names")
               (:file "convert-input")
               (:file "convert-random")
               (:file "convert")
               (:file "bench")
               (:file "model-scratch")
               (:file "model")
               (:file "tokenizer")
               (:file "embed")
               (:file "decision")
               (:file "model-bench")
               (:file "model-quantize")
               (:file "eval")
               (:file "decision-bench")
               (:file "export")))

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
