;;;; ecl-aref.lisp - ECL only: AREF, ROW-MAJOR-AREF, ARRAY-DIMENSIONS and the
;;;; other CL array functions answering for a quantized matrix.
;;;;
;;;; A quantized matrix (qmatrix.lisp) is a struct, not an array, and
;;;; standard CL has no way to extend AREF to a new type.  So this file
;;;; patches ECL 21.2.1 itself, in three places, each tied to its internals:
;;;;
;;;; - the function cells of the CL symbols (with CL's package lock lifted
;;;;   while it writes them): a dispatcher answers a quantized matrix with
;;;;   the QM- functions of qmatrix.lisp and hands every other argument to
;;;;   ECL's own function; this serves the REPL, interpreted code, FUNCALL
;;;;   and APPLY.  SI:ASET, SI:ROW-MAJOR-ASET, SI:MAKE-VECTOR and
;;;;   SI:MAKE-PURE-ARRAY are ECL's internal entry points for SETF AREF and
;;;;   MAKE-ARRAY;
;;;; - the compiler macros of the same symbols, for natively compiled code
;;;;   (COMPILE, COMPILE-FILE): ECL open-codes AREF without checking that
;;;;   its argument is an array, so a function cell alone is not enough.
;;;;   Our macros wrap ECL's own expansion as (if (arrayp x) <ECL's code>
;;;;   <ours>) and leave it untouched where the compiler knows X is an
;;;;   array (asking the compiler's environment through C::CMP-ENV-SEARCH-VAR
;;;;   and C::VAR-TYPE, by name, since package C exists only once the
;;;;   compiler is loaded);
;;;; - the compiler's entry points (COMPILE, COMPILE-FILE, ...) and
;;;;   EXT:*MODULE-PROVIDER-FUNCTIONS*: ECL's compiler loads lazily and
;;;;   installs its own AREF macro when it does, so the entry points are
;;;;   wrapped to (re)install ours first, whoever loads the compiler.
;;;;
;;;; Another Lisp would need its own version of this file; the only other
;;;; file of rontolisp that touches CL's symbols is base/ecl-filenames.lisp
;;;; (CL's file functions on names of any characters), which wraps the
;;;; COMPILE-FILE wrapper here and takes its place in the property
;;;; RONTOLISP-WRAPPER that KEEP-COMPILER-WRAPPERS keeps in the cell.

(in-package "RONTOLISP")

;;; Function-cell dispatchers: the REPL, interpreted code, FUNCALL, APPLY.

(defvar *originals* (make-hash-table :test 'eq)
  "ECL's own function for each CL symbol whose function cell we took.")

(defmacro with-cl-unlocked (&body body)
  `(let ((was (si:package-locked-p (find-package "CL"))))
     (si:package-lock (find-package "CL") nil)
     (unwind-protect (progn ,@body)
       (si:package-lock (find-package "CL") was))))

(defmacro define-dispatcher (name lambda-list test qm-form call-original)
  "Install in NAME's function cell a function of LAMBDA-LIST that answers
QM-FORM when TEST holds and CALL-ORIGINAL (with ORIGINAL bound to ECL's
function) otherwise."
  (let ((fn (intern (format nil "DISPATCH-~A" (symbol-name name)))))
    `(progn
       (defun ,fn ,lambda-list
         (if ,test
             ,qm-form
             (let ((original (gethash ',name *originals*)))
               ,call-original)))
       (unless (gethash ',name *originals*)
         (setf (gethash ',name *originals*) (fdefinition ',name))
         (with-cl-unlocked (setf (fdefinition ',name) #',fn))))))

(define-dispatcher aref (array &rest subscripts)
  (quantized-matrix-p array)
  (qm-aref array subscripts)
  (apply original array subscripts))

(define-dispatcher si:aset (array &rest subscripts-and-value)
  (quantized-matrix-p array)
  (apply #'qm-setf-error array subscripts-and-value)
  (apply original array subscripts-and-value))

(define-dispatcher row-major-aref (array index)
  (quantized-matrix-p array)
  (%qm-row-major-aref array index)
  (funcall original array index))

(define-dispatcher si:row-major-aset (array index value)
  (quantized-matrix-p array)
  (qm-setf-error array index value)
  (funcall original array index value))

(define-dispatcher array-dimensions (array)
  (quantized-matrix-p array)
  (copy-list (quantized-matrix-dims array))
  (funcall original array))

(define-dispatcher array-dimension (array axis)
  (quantized-matrix-p array)
  (qm-array-dimension array axis)
  (funcall original array axis))

(define-dispatcher array-rank (array)
  (quantized-matrix-p array)
  (length (quantized-matrix-dims array))
  (funcall original array))

(define-dispatcher array-total-size (array)
  (quantized-matrix-p array)
  (qm-array-total-size array)
  (funcall original array))

(define-dispatcher array-element-type (array)
  (quantized-matrix-p array)
  (quantized-matrix-format array)
  (funcall original array))

(define-dispatcher array-in-bounds-p (array &rest subscripts)
  (quantized-matrix-p array)
  (qm-array-in-bounds-p array subscripts)
  (apply original array subscripts))

(define-dispatcher array-row-major-index (array &rest subscripts)
  (quantized-matrix-p array)
  (qm-array-row-major-index array subscripts)
  (apply original array subscripts))

(define-dispatcher write-sequence (sequence stream &rest keys)
  (quantized-matrix-p sequence)
  (apply #'qm-write-sequence sequence stream keys)
  (apply original sequence stream keys))

;;; ECL's MAKE-ARRAY and ADJUST-ARRAY take :DISPLACED-TO on trust and read
;;; its array header: a quantized matrix (or a list) there read garbage and
;;; crashed.  Compiled code reaches ECL's C constructors through
;;; SI:MAKE-VECTOR and SI:MAKE-PURE-ARRAY (what ECL's compiler macro for
;;; MAKE-ARRAY expands into), interpreted code through MAKE-ARRAY itself.

(defun refuse-displaced-to (fn to)
  (element-type-error fn to "expected an array (or NIL) for :displaced-to, found ~A"
                      (if (quantized-matrix-p to)
                          (format nil "~A, which is not an array" to)
                          (describe-object-type to))))

(defun bad-displaced-to-p (to)
  (and to (not (arrayp to))))

(define-dispatcher make-array (dimensions &rest keys &key displaced-to &allow-other-keys)
  (bad-displaced-to-p displaced-to)
  (refuse-displaced-to 'make-array displaced-to)
  (apply original dimensions keys))

(define-dispatcher adjust-array (array dimensions &rest keys &key displaced-to
                                       &allow-other-keys)
  (bad-displaced-to-p displaced-to)
  (refuse-displaced-to 'adjust-array displaced-to)
  (apply original array dimensions keys))

(define-dispatcher si:make-vector (element-type dimension adjustable fill-pointer
                                                displaced-to offset)
  (bad-displaced-to-p displaced-to)
  (refuse-displaced-to 'make-array displaced-to)
  (funcall original element-type dimension adjustable fill-pointer displaced-to offset))

(define-dispatcher si:make-pure-array (element-type dimensions adjustable fill-pointer
                                                    displaced-to offset)
  (bad-displaced-to-p displaced-to)
  (refuse-displaced-to 'make-array displaced-to)
  (funcall original element-type dimensions adjustable fill-pointer displaced-to offset))

;;; Compiler macros: natively compiled code.

(defvar *ecl-compiler-macros* (make-hash-table :test 'eq)
  "ECL's own compiler macro for each symbol we wrap (or NIL).")

(defun known-type (form env)
  "The type the compiler knows FORM to have: TYPE for (the TYPE x), a
variable's declared or inferred type, else T."
  (cond ((and (consp form) (eq (first form) 'the)) (second form))
        ((and (symbolp form) env (not (constantp form)))
         (let* ((search (find-symbol "CMP-ENV-SEARCH-VAR" "C"))
                (var-type (find-symbol "VAR-TYPE" "C"))
                (var (and search (fboundp search)
                          (ignore-errors (funcall search form env)))))
           (if (and var (typep var 'structure-object) var-type (fboundp var-type))
               (or (ignore-errors (funcall var-type var)) t)
               t)))
        (t t)))

(defun known-subtype-p (form env type)
  (let ((known (known-type form env)))
    (and (not (eq known t))
         (values (ignore-errors (subtypep known type))))))

(defun ecl-expansion (name form env)
  "FORM as ECL's own compiler macro for NAME would expand it (FORM itself
when it has none or declines)."
  (let ((cm (gethash name *ecl-compiler-macros*)))
    (if cm (funcall cm form env) form)))

(defun plain-variable-p (form env)
  (and (symbolp form) (not (constantp form))
       (eq form (macroexpand-1 form env))))

(defun call-with-evaluated-once (form env fn)
  "FN's code for FORM's value: FN called with FORM itself when FORM is a
plain variable, else with a gensym bound to FORM around FN's code."
  (if (plain-variable-p form env)
      (funcall fn form)
      (let ((g (gensym "ARRAY")))
        `(let ((,g ,form)) ,(funcall fn g)))))

(defun c-inline-aref (m subscripts)
  "Code reading element SUBSCRIPTS of the quantized matrix M as an unboxed
double, through the C entry points of prims/ecl/qmatrix.c."
  (case (length subscripts)
    (1 `(ffi:c-inline (,m ,(first subscripts)) (:object :object) :double
                      "({extern double rl_qm_aref_1(cl_object,cl_object); rl_qm_aref_1(#0,#1);})"
                      :one-liner t))
    (2 `(ffi:c-inline (,m ,@subscripts) (:object :object :object) :double
                      "({extern double rl_qm_aref_2(cl_object,cl_object,cl_object); rl_qm_aref_2(#0,#1,#2);})"
                      :one-liner t))
    (t `(qm-aref ,m (list ,@subscripts)))))

(defun c-inline-row-major-aref (m index)
  `(ffi:c-inline (,m ,index) (:object :object) :double
                 "({extern double rl_qm_row_major_aref(cl_object,cl_object); rl_qm_row_major_aref(#0,#1);})"
                 :one-liner t))

(defun expand-array-access (name form env qm-code)
  "The expansion of FORM, a call of NAME on an array-or-matrix first
argument: ECL's own when the compiler knows the argument is an array,
QM-CODE's when it knows it is a quantized matrix, else a test for both.
QM-CODE is called with the (evaluated-once) matrix form and the other
arguments."
  (if (not (and (consp form) (eq (first form) name) (consp (rest form))))
      form                              ; (funcall #'aref ...) and the like
      (destructuring-bind (array &rest args) (rest form)
        (cond ((known-subtype-p array env 'array) (ecl-expansion name form env))
              ((known-subtype-p array env 'quantized-matrix) (funcall qm-code array args))
              (t (call-with-evaluated-once
                  array env
                  (lambda (a)
                    `(if (arrayp ,a)
                         ,(ecl-expansion name `(,name (the array ,a) ,@args) env)
                         ,(funcall qm-code a args)))))))))

(defun expand-aref (form env)
  (expand-array-access 'aref form env #'c-inline-aref))

(defun expand-row-major-aref (form env)
  (expand-array-access 'row-major-aref form env
                       (lambda (m args) (c-inline-row-major-aref m (first args)))))

(defun expand-setter (name)
  (lambda (form env)
    (expand-array-access name form env
                         (lambda (m args) `(qm-setf-error ,m ,@args)))))

(defun expand-query (name qm-function)
  "An expander for a function NAME of an array (and maybe more arguments)
whose answer for a quantized matrix is QM-FUNCTION's."
  (lambda (form env)
    (expand-array-access name form env
                         (lambda (m args)
                           `(if (quantized-matrix-p ,m)
                                (,qm-function ,m ,@args)
                                ;; neither an array nor a matrix: ECL's error
                                (funcall (gethash ',name *originals*) ,m ,@args))))))

(defun expand-write-sequence (form env)
  (if (not (and (consp form) (eq (first form) 'write-sequence) (consp (rest form))))
      form
      (destructuring-bind (seq &rest args) (rest form)
        (if (known-subtype-p seq env 'sequence)
            form
            (call-with-evaluated-once
             seq env
             (lambda (s)
               `(if (quantized-matrix-p ,s)
                    (qm-write-sequence ,s ,@args)
                    (write-sequence (the sequence ,s) ,@args))))))))

(defun rest-list-qm (fn)
  "Adapt FN, a function of a matrix and a list of subscripts, to take the
subscripts as separate arguments."
  (lambda (m &rest subscripts) (funcall fn m subscripts)))

(setf (fdefinition 'qm-array-dimensions) (lambda (m) (copy-list (quantized-matrix-dims m)))
      (fdefinition 'qm-array-rank) (lambda (m) (length (quantized-matrix-dims m)))
      (fdefinition 'qm-array-in-bounds-p*) (rest-list-qm #'qm-array-in-bounds-p)
      (fdefinition 'qm-array-row-major-index*) (rest-list-qm #'qm-array-row-major-index))

(defparameter *compiler-macro-expanders*
  (list (cons 'aref #'expand-aref)
        (cons 'row-major-aref #'expand-row-major-aref)
        (cons 'si:aset (expand-setter 'si:aset))
        (cons 'si:row-major-aset (expand-setter 'si:row-major-aset))
        (cons 'array-dimensions (expand-query 'array-dimensions 'qm-array-dimensions))
        (cons 'array-dimension (expand-query 'array-dimension 'qm-array-dimension))
        (cons 'array-rank (expand-query 'array-rank 'qm-array-rank))
        (cons 'array-total-size (expand-query 'array-total-size 'qm-array-total-size))
        (cons 'array-element-type (expand-query 'array-element-type 'quantized-matrix-format))
        (cons 'array-in-bounds-p (expand-query 'array-in-bounds-p 'qm-array-in-bounds-p*))
        (cons 'array-row-major-index (expand-query 'array-row-major-index
                                                   'qm-array-row-major-index*))
        (cons 'write-sequence #'expand-write-sequence))
  "Each wrapped CL symbol with the function computing its expansion.")

(defun install-compiler-macros ()
  "Install our compiler macros on the CL array functions, remembering the
ones ECL's compiler installed (once loaded, it installs its AREF and ASET
macros over ours).  Idempotent."
  (with-cl-unlocked
    (loop for (name . expander) in *compiler-macro-expanders*
          for current = (compiler-macro-function name)
          unless (eq current expander)
            do (setf (gethash name *ecl-compiler-macros*) current
                     (compiler-macro-function name) expander))))

(defvar *real-compilers* (make-hash-table :test 'eq)
  "ECL's own function for each compiler entry point we wrap.")

(defparameter *compiler-entry-points*
  '(compile compile-file compile-file-pathname disassemble)
  "The functions that load ECL's compiler on first use (autoload stubs until
then); each is wrapped so our compiler macros are in place first.")

(defun compiler-loaded-p ()
  (and (member "CMP" *modules* :test #'string-equal) t))

(defun keep-compiler-wrappers ()
  "Put our wrapper back in each entry point's function cell where loading
the compiler replaced it, remembering the compiler's function."
  (dolist (name *compiler-entry-points*)
    (let ((current (fdefinition name))
          (wrapper (get name 'rontolisp-wrapper)))
      (when (and wrapper (not (eq current wrapper)))
        (setf (gethash name *real-compilers*) current)
        (with-cl-unlocked (setf (fdefinition name) wrapper))))))

(defun compiler-provider (module)
  "A module provider for REQUIRE: loads ECL's compiler itself so that,
whoever asks for it (ASDF does, on (require 'asdf)), our compiler macros
go back on top of the compiler's own."
  (when (string-equal (string module) "CMP")
    (let ((loaded (load "SYS:cmp" :verbose nil)))
      (pushnew "CMP" *modules* :test #'string=)
      (keep-compiler-wrappers)
      (install-compiler-macros)
      loaded)))

(defun prepare-compiler ()
  "Load ECL's compiler if needed and make sure our compiler macros and
wrappers are in place."
  (unless (compiler-loaded-p)
    (require "CMP"))
  (keep-compiler-wrappers)
  (install-compiler-macros))

(defun wrap-compiler-entry-point (name)
  (let ((wrapper (lambda (&rest args)
                   (prepare-compiler)
                   (apply (gethash name *real-compilers*) args))))
    (setf (get name 'rontolisp-wrapper) wrapper
          (gethash name *real-compilers*) (fdefinition name))
    (with-cl-unlocked (setf (fdefinition name) wrapper))))

(unless (get 'compile 'rontolisp-wrapper)
  (mapc #'wrap-compiler-entry-point *compiler-entry-points*)
  (push 'compiler-provider ext:*module-provider-functions*))
(install-compiler-macros)
