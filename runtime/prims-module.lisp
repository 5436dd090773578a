;;;; prims-module.lisp - the primitives as a module a stock ECL can load,
;;;; for `(asdf:load-system "rontolisp")' (rontolisp.asd).
;;;;
;;;; The Makefile links this file with the objects of prims/ecl/ and the C
;;;; library into build/rontolisp-prims.fas.  Loading it only makes the C
;;;; code present (compiled Lisp code, such as AREF of a quantized matrix
;;;; in compiled code, calls it by name); REGISTER then does what the
;;;; executable's main does after its Lisp code is loaded: define the
;;;; primitives in the packages of lisp/packages.lisp, which must exist by
;;;; then, and check the quantized matrix's slots against the C side.

(defpackage "RONTOLISP-PRIMS"
  (:use "CL")
  (:export "REGISTER")
  (:documentation "The loader of rontolisp's C primitives in a stock ECL."))

(in-package "RONTOLISP-PRIMS")

(ffi:clines "extern void rl_register_primitives(void);"
            "extern void rl_gguf_atomic_trap_signals(int);")

(defun register ()
  "Define rontolisp's primitives (once the Lisp system is loaded) and make
SIGTERM and SIGHUP remove the temporary files of unfinished writes."
  (ffi:c-inline () () :void
                "rl_register_primitives(); rl_gguf_atomic_trap_signals(0);"
                :one-liner nil)
  t)
