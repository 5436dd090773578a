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

;;; ggml's tensor types, in one table built from C's (%TYPE-TABLE: the
;;; names and geometry of gguf/types.c, the families of the rows of
;;; prims/type_traits.c), never retyped here.  The tensor types rontolisp
;;; holds in Lisp are a view of it that adds only the Lisp side of each:
;;; its keyword (ggml's name in lower case) and the Lisp type of its data.
;;; The GGUF value types and the array kind codes of the primitives come
;;; from C the same way.  The tables are built on first use: the primitives
;;; are registered after this module loads.

(defstruct (ggml-type (:constructor %make-ggml-type (id name block-size block-bytes family))
                      (:copier nil) (:predicate nil))
  "One of ggml's tensor types: its ID and NAME (\"Q4_K\"), the BLOCK-SIZE
values stored in BLOCK-BYTES bytes (0 and 0 for an id ggml retired), and
the FAMILY of C's row for it: :FLOAT (F32, F16, BF16), :Q8_0, :QUANT (the
legacy, K and IQ4 types), or NIL when rontolisp only reads its name."
  (id 0 :type fixnum :read-only t)
  (name "" :type string :read-only t)
  (block-size 0 :type fixnum :read-only t)
  (block-bytes 0 :type fixnum :read-only t)
  (family nil :type (member nil :float :q8_0 :quant) :read-only t))

(document-functions
  ggml-type-id "The ggml type id of the GGML-TYPE TYPE."
  ggml-type-block-size "The values per block of the GGML-TYPE TYPE (0 for an id ggml retired).")

(defvar *ggml-types* nil "The GGML-TYPEs by id (NIL for an id without a name).")

(defun ggml-types ()
  "The GGML-TYPE of every id ggml named, in id order."
  (unless *ggml-types*
    (let ((rows (%type-table)))
      (setf *ggml-types*
            (let ((v (make-array (1+ (reduce #'max rows :key #'first :initial-value -1))
                                 :initial-element nil)))
              (dolist (row rows v)
                (setf (aref v (first row)) (apply #'%make-ggml-type row)))))))
  (coerce (remove nil *ggml-types*) 'list))

(defun find-ggml-type (key)
  "The GGML-TYPE named by KEY -- a ggml id, or its name in any case (a
string or a keyword such as :q4_k) -- or NIL."
  (ggml-types)
  (etypecase key
    (integer (and (< -1 key (length *ggml-types*)) (aref *ggml-types* key)))
    ((or string symbol)
     (find (string key) *ggml-types* :test #'string-equal
                                     :key (lambda (g) (and g (ggml-type-name g)))))))

(defun ggml-id (name)
  "The id of the ggml type NAME (\"Q4_K\", any case)."
  (let ((type (find-ggml-type name)))
    (unless type
      (rontolisp-error 'ggml-id "expected a ggml type name, found ~S" name))
    (ggml-type-id type)))

(defun computed-types (&rest families)
  "The GGML-TYPEs rontolisp computes with (C's rows), of FAMILIES (:float
:q8_0 :quant; all three when none is given), floats first, then Q8_0,
then the others, each in id order: the order quantize lists them."
  (let ((families (or families '(:float :q8_0 :quant))))
    (loop for family in '(:float :q8_0 :quant)
          when (member family families)
            append (remove family (ggml-types) :key #'ggml-type-family :test-not #'eq))))

(defun quantized-type-p (key)
  "True when KEY (an id or a name) is a type of quantized blocks rontolisp
reads and writes: Q8_0, the legacy, K and IQ4 types."
  (let ((type (find-ggml-type key)))
    (and type (member (ggml-type-family type) '(:q8_0 :quant)) t)))

(defun ggml-type-bits (key)
  "Bits per value of the ggml type KEY (an id or a name): 8 times the
bytes of a block over its values (Q4_K: 4.5), a rational."
  (let ((type (or (find-ggml-type key)
                  (rontolisp-error 'ggml-type-bits "expected a ggml type, found ~S" key))))
    (if (zerop (ggml-type-block-size type))
        0
        (/ (* 8 (ggml-type-block-bytes type)) (ggml-type-block-size type)))))

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

(document-functions
  tensor-type-keyword "The keyword of the TENSOR-TYPE TT: :f32, :f16, :bf16 or :q8_0."
  tensor-type-id "The ggml type id of the TENSOR-TYPE TT."
  tensor-type-name "The ggml type name of the TENSOR-TYPE TT (\"Q8_0\").")

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
      (declare (ignore count))
      (flet ((tensor-type-from-c (keyword lisp-type)
               (let ((type (find-ggml-type keyword)))
                 (unless (and type (ggml-type-family type))
                   (rontolisp-error 'format-tables "expected C's type table to have a row for ~
~A, found ~:[no such name~;a type without one~]" (string-upcase keyword) type))
                 (%make-tensor-type keyword lisp-type (ggml-type-id type) (ggml-type-name type)
                                    (ggml-type-block-size type) (ggml-type-block-bytes type)))))
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
