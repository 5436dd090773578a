;;;; formats.lisp - the number formats of GGUF files, seen from Lisp.
;;;;
;;;; Scalar conversions between single-floats and the bit patterns of IEEE
;;;; binary16 (f16) and bfloat16 (bf16), bit-exact with ggml: f16 rounds to
;;;; nearest even (overflow to infinity), bf16 rounds to nearest even on the
;;;; top 16 bits with NaN made quiet.  The arithmetic is C's (gguf/numfmt.c).

(in-package "RONTOLISP")

(deftype f16-bits () '(unsigned-byte 16))

(defun describe-magnitude (x)
  "X, a rational too large or too small for a double-float, in a few words:
its kind and power of ten (printing a 400-digit integer would not be one
line)."
  (let ((bits (if (integerp x)
                  (integer-length x)
                  (- (integer-length (numerator x)) (integer-length (denominator x))))))
    (format nil "~:[an integer~;a ratio~] of magnitude about ~:[~;-~]1e~D"
            (typep x 'ratio) (minusp x) (round (* bits (log 2d0 10))))))

(defun rational-to-double (fn x)
  "The rational X as a double-float (rounded), or OUT-OF-RANGE-ERROR when
its magnitude is beyond double-float range; ratios too small to tell from
zero become zero, as a double does."
  (handler-case (coerce x 'double-float)
    (floating-point-overflow ()
      (out-of-range-error fn x "expected a real number within double-float range (magnitude ~
below 1.8e308), found ~A" (describe-magnitude x)))
    (floating-point-underflow () (if (minusp x) -0d0 0d0))))

(defun check-single-float-arg (fn x)
  "The real X as a single-float for FN: a double-float by C's cast, any
other real rounded once (beyond the single-float range either becomes an
infinity); a rational beyond the double-float range signals RONTOLISP-ERROR
with its value (where Lisp would signal a bare FLOATING-POINT-OVERFLOW)."
  (unless (typep x 'real)
    (rontolisp-error fn "expected a real number, found ~S" x))
  ;; Every real takes the double-float road (C's cast to single, then the
  ;; rounding), so that 1e39 rounds to infinity whether written as an
  ;; integer or as 1d39; only what no double can hold is refused.
  (etypecase x
    (single-float x)
    (double-float (%double-to-single x))
    (float (%double-to-single (coerce x 'double-float)))
    (rational (%double-to-single (rational-to-double fn x)))))

(defun f16-bits (x)
  "The IEEE binary16 bit pattern (an integer below 65536) nearest to the real
X: X is first made a single-float (a double-float by C's cast, round to
nearest even), then rounded to binary16 with ties to even; values beyond
65504 round to infinity, NaN stays NaN."
  (%f16-bits (check-single-float-arg 'f16-bits x)))

(defun f16-value (bits)
  "The single-float whose binary16 bit pattern is BITS (0 to 65535); exact."
  (check-type bits f16-bits)
  (%f16-value bits))

(defun bf16-bits (x)
  "The bfloat16 bit pattern of the real X by ggml's rule: round to nearest
even on the top 16 bits of the single-float, NaN made quiet."
  (%bf16-bits (check-single-float-arg 'bf16-bits x)))

(defun bf16-value (bits)
  "The single-float whose bfloat16 bit pattern is BITS (0 to 65535); exact."
  (check-type bits f16-bits)
  (%bf16-value bits))

;;; The tensor types rontolisp holds in Lisp, in one table.  Ids, ggml names
;;; and block geometry come from C's table (gguf/types.c, through
;;; %GGML-TYPE and %FORMAT-TABLES), never retyped here; only the Lisp side
;;; of each type is: its keyword (ggml's name in lower case) and the Lisp
;;; type of its data.  The GGUF value types and the array kind codes of the
;;; primitives come from C the same way.  The tables are built on first use:
;;; the primitives are registered after this module loads.

(defstruct (tensor-type (:constructor %make-tensor-type
                            (keyword lisp-type id name block-size block-bytes))
                        (:copier nil) (:predicate nil))
  "A tensor type rontolisp holds in Lisp: its KEYWORD (:f32 :f16 :bf16
:q8_0), the LISP-TYPE of its data, ggml's type ID and NAME (\"Q8_0\"), and
the BLOCK-SIZE values stored in BLOCK-BYTES bytes."
  (keyword nil :type keyword :read-only t)
  (lisp-type nil :read-only t)
  (id 0 :type fixnum :read-only t)
  (name "" :type string :read-only t)
  (block-size 1 :type fixnum :read-only t)
  (block-bytes 0 :type fixnum :read-only t))

(defparameter *tensor-lisp-types*
  '((:f32 (simple-array single-float))
    (:f16 float16-array)
    (:bf16 bfloat16-array)
    (:q8_0 (and quantized-matrix (satisfies q8-0-matrix-p))))
  "The tensor types held in Lisp and the Lisp type of their data, in the
order type tests try them.")

(defvar *tensor-types* nil "The TENSOR-TYPEs, built by FORMAT-TABLES.")
(defvar *gguf-value-types* nil "The GGUF value type keywords by id.")
(defvar *number-kinds* nil "The array kind keywords by the primitives' code.")

(defun format-tables ()
  "Build the tables from C's on first use; answers the tensor types."
  (unless *tensor-types*
    (multiple-value-bind (count value-types kinds) (%format-tables)
      (flet ((tensor-type-from-c (keyword lisp-type)
               (let ((id (loop for id below count
                               when (equal (%ggml-type id) (string-upcase keyword))
                                 return id)))
                 (unless id
                   (rontolisp-error 'format-tables "expected ggml to know the type ~A, found no ~
such name in C's table" (string-upcase keyword)))
                 (multiple-value-bind (name block-size block-bytes) (%ggml-type id)
                   (%make-tensor-type keyword lisp-type id name block-size block-bytes)))))
        (setf *gguf-value-types* value-types
              *number-kinds* kinds
              *tensor-types* (loop for (keyword lisp-type) in *tensor-lisp-types*
                                   collect (tensor-type-from-c keyword lisp-type))))))
  *tensor-types*)

(defun find-tensor-type (key)
  "The TENSOR-TYPE named by KEY -- its keyword, ggml name (any case) or
ggml id -- or NIL when rontolisp does not hold that type in Lisp."
  (find-if (lambda (tt)
             (etypecase key
               (keyword (eq key (tensor-type-keyword tt)))
               (string (string-equal key (tensor-type-name tt)))
               (integer (= key (tensor-type-id tt)))))
           (format-tables)))

(defun tensor-type-of (data)
  "The TENSOR-TYPE whose Lisp type DATA has, or NIL."
  (find-if (lambda (tt) (typep data (tensor-type-lisp-type tt))) (format-tables)))

(defun gguf-value-types ()
  "The GGUF metadata value type keywords (:u8 ... :f64), in id order."
  (format-tables)
  *gguf-value-types*)

(defun number-kind (keyword)
  "The code by which the primitives (%q8-quantize, %first-non-finite) read
an array of KEYWORD numbers: :f32, :f64, or :f16 / :bf16 bits."
  (format-tables)
  (or (position keyword *number-kinds*)
      (rontolisp-error 'number-kind "expected one of ~S, found ~S" *number-kinds* keyword)))
