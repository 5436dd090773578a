;;;; rontolisp.asd - the Lisp half of rontolisp and the one statement of its
;;;; load order.
;;;;
;;;; The files are :serial: each is compiled and loaded after every file
;;;; above it, so file order is dependency order (packages, then
;;;; conditions, then what signals them).  The build does not load this
;;;; system through ASDF: the code calls primitives that only the rontolisp
;;;; executable registers.  runtime/build-lisp.lisp reads this form as data
;;;; (the Makefile asks it for the file list, and it compiles the files in
;;;; this order into the library the executable links), so adding a file
;;;; here is all a new Lisp file needs.  The tests are their own system.

(defsystem "rontolisp"
  :description "ECL with native primitives for quantized language models:
Q8_0, the quantized matrix, matrix-vector products, GGUF files and the
command-line tools built on them."
  :serial t
  :pathname "lisp/"
  :components ((:file "packages")
               (:file "conditions")
               (:file "files")
               (:file "runtime")
               (:file "formats")
               (:file "halfarrays")
               (:file "qmatrix")
               (:file "vec")
               (:file "json")
               (:file "gguf")
               (:file "inspect")
               (:file "quantize-tool")
               (:file "safetensors")
               (:file "convert")
               (:file "bench")
               (:file "vec-standin")
               (:file "model")))
