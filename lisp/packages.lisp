;;;; packages.lisp - every package of rontolisp, in one place.
;;;;
;;;; rontolisp is ECL with native primitives for quantized language models:
;;;; ggml's Q8_0 format, a quantized matrix that answers CL's array functions,
;;;; a deterministic matrix-vector product and the GGUF container.  The public
;;;; API lives in four packages that user code reaches by prefix
;;;; (`rontolisp:quantize', `vec:matvec', `gguf:read'); none of them is meant
;;;; to be :USEd.  Primitives implemented in C are internal and start with %.
;;;; The REPL and scripts start in RONTOLISP-USER, which uses only CL.

(defpackage "RONTOLISP"
  (:use "CL")
  (:shadow "EXIT")
  (:documentation "The rontolisp runtime: quantization, the quantized matrix,
the command line, and the root of every error the project signals.")
  (:export
   ;; runtime
   "*ARGS*" "EXIT" "VERSION" "SIMD" "THREADS" "SIMD-PATH" "MAIN"
   ;; number formats
   "F16-BITS" "F16-VALUE" "BF16-BITS" "BF16-VALUE"
   ;; conditions
   "RONTOLISP-ERROR" "RONTOLISP-ERROR-MESSAGE"
   "USAGE-ERROR"))

(defpackage "VEC"
  (:use "CL")
  (:documentation "Vector operations on packed float arrays, and the
matrix-vector product of a quantized matrix."))

(defpackage "LINALG"
  (:use "CL")
  (:documentation "Linear algebra on packed float arrays; LINALG:ROW reads a
row of a quantized matrix."))

(defpackage "GGUF"
  (:use "CL")
  (:shadow "READ" "WRITE" "CLOSE")
  (:documentation "Reading, inspecting and writing GGUF files, llama.cpp's
model container."))

(defpackage "RONTOLISP-USER"
  (:use "CL")
  (:documentation "The package the REPL and scripts start in."))
