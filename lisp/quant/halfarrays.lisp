;;;; halfarrays.lisp - packed arrays of binary16 and bfloat16 values.
;;;;
;;;; Lisp has no 16-bit float type, so a float16 or bfloat16 array is a small
;;;; struct around a simple (unsigned-byte 16) array of the values' bit
;;;; patterns, of the same dimensions.  They are what GGUF F16 and BF16
;;;; tensors read as, and what QUANTIZE takes besides single- and
;;;; double-float arrays.  Conversions are C's, bit-exact with ggml.

(in-package "RONTOLISP")

(defstruct (float16-array (:constructor %make-float16-array (bits))
                          (:copier nil) (:predicate nil))
  "An array of IEEE binary16 values, stored as their bit patterns in BITS, a
simple (unsigned-byte 16) array of the array's dimensions."
  (bits nil :type (simple-array (unsigned-byte 16)) :read-only t))

(defstruct (bfloat16-array (:constructor %make-bfloat16-array (bits))
                           (:copier nil) (:predicate nil))
  "An array of bfloat16 values, stored as their bit patterns in BITS, a
simple (unsigned-byte 16) array of the array's dimensions."
  (bits nil :type (simple-array (unsigned-byte 16)) :read-only t))

(defun float16-array-p (x)
  "True when X is a FLOAT16-ARRAY."
  (typep x 'float16-array))

(defun bfloat16-array-p (x)
  "True when X is a BFLOAT16-ARRAY."
  (typep x 'bfloat16-array))

(defun half-array-bits (x)
  "The simple (unsigned-byte 16) array of bit patterns behind the float16 or
bfloat16 array X (shared, not copied)."
  (etypecase x
    (float16-array (float16-array-bits x))
    (bfloat16-array (bfloat16-array-bits x))))

(defun half-array-dimensions (x)
  "The dimensions of the float16 or bfloat16 array X."
  (array-dimensions (half-array-bits x)))

(defmethod print-object ((x float16-array) stream)
  (format stream "#<float16-array ~S>" (half-array-dimensions x)))

(defmethod print-object ((x bfloat16-array) stream)
  (format stream "#<bfloat16-array ~S>" (half-array-dimensions x)))

(defun check-float-array (fn array)
  (unless (typep array '(or (simple-array single-float) (simple-array double-float)))
    (element-type-error fn array "expected a (simple-array single-float) or ~
(simple-array double-float), found ~A" (describe-object-type array))))

(defun describe-object-type (x)
  "A short description of X's type for error messages."
  (typecase x
    (array (format nil "an array of element type ~S and dimensions ~S~@[ (not simple)~]"
                   (array-element-type x) (array-dimensions x)
                   (not (typep x 'simple-array))))
    (t (format nil "~S, of type ~S" x (type-of x)))))

(defun make-half-bits (array bf16-p)
  (check-float-array (if bf16-p 'make-bfloat16-array 'make-float16-array) array)
  (%to-half-into array bf16-p
                 (make-array (array-dimensions array) :element-type '(unsigned-byte 16))))

(defun make-float16-array (array)
  "A FLOAT16-ARRAY of ARRAY's dimensions holding its values rounded to IEEE
binary16 (ties to even, overflow to infinity).  ARRAY is a simple
single-float or double-float array; doubles are first rounded to single."
  (%make-float16-array (make-half-bits array nil)))

(defun make-bfloat16-array (array)
  "A BFLOAT16-ARRAY of ARRAY's dimensions holding its values rounded to
bfloat16 by ggml's rule.  ARRAY is a simple single-float or double-float
array; doubles are first rounded to single."
  (%make-bfloat16-array (make-half-bits array t)))

(defun half-array-to-single (x)
  "A fresh simple single-float array of the float16 or bfloat16 array X's
dimensions holding its values, widened exactly."
  (let ((bits (half-array-bits x)))
    (%half-to-single-into bits (bfloat16-array-p x)
                          (make-array (array-dimensions bits) :element-type 'single-float))))

(defun first-non-finite (data)
  "The row-major index of the first NaN or infinity in DATA -- a simple
single- or double-float array (a double counts as non-finite when it is once
rounded to single, as every kernel rounds it), a float16-array or a
bfloat16-array -- or NIL when every value is finite."
  (multiple-value-bind (packed kind) (packed-numbers data)
    (unless packed
      (error 'type-error :datum data
                         :expected-type '(or (simple-array single-float) (simple-array double-float)
                                          float16-array bfloat16-array)))
    (%first-non-finite packed kind)))

(defun packed-numbers (data)
  "DATA's packed storage and the kind code the primitives read it by (see
NUMBER-KIND), or NIL for anything else: a simple single- or double-float
array is its own storage, a float16 or bfloat16 array its bits."
  (typecase data
    ((simple-array single-float) (values data (number-kind :f32)))
    ((simple-array double-float) (values data (number-kind :f64)))
    (float16-array (values (float16-array-bits data) (number-kind :f16)))
    (bfloat16-array (values (bfloat16-array-bits data) (number-kind :bf16)))))
