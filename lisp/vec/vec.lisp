;;;; vec.lisp - the matrix-vector product (VEC:MATVEC, VEC:MATVEC-INTO) and
;;;; the few vector and matrix operations a caller needs beside it.
;;;;
;;;; The product itself is C (prims/matvec.c, reached through %MATVEC): for
;;;; a Q8_0 matrix, ggml's integer-dot shape fixed so that the scalar, SIMD
;;;; and threaded paths answer the same bits (doc/products.md §1); for the
;;;; other quantized types, their row products (§4, §5); for a rank-2
;;;; single-float array, the f32 baseline with a fixed summation order.
;;;; This file checks arguments, so that every misuse signals one of our
;;;; conditions with a message saying what was expected and what was
;;;; found, and turns the kernels' statuses into conditions.
;;;;
;;;; Only VEC:MATVEC, VEC:MATVEC-INTO and LINALG:ROW take a quantized
;;;; matrix.  Every other operation wants a packed float array and refuses
;;;; a quantized matrix with QUANTIZED-MATRIX-ERROR, whose message says to
;;;; call RONTOLISP:DEQUANTIZE first: a silent element-by-element fallback
;;;; through AREF would be a hundred times slower than the caller expects.

(in-package "VEC")

(deftype float-vector ()
  "The vectors the VEC operations take: simple single- or double-float."
  '(or (simple-array single-float (*)) (simple-array double-float (*))))

(defun refuse-quantized (fn x)
  "Signal QUANTIZED-MATRIX-ERROR when X, an argument of the operation FN (a
string such as \"vec:dot\"), is a quantized matrix."
  (when (quantized-matrix-p x)
    (quantized-matrix-error fn "expected a packed float array, found ~A; call ~
rontolisp:dequantize on it first (only vec:matvec, vec:matvec-into and linalg:row take ~
a quantized matrix)" x)))

(defun check-float-vector (fn what x)
  "Signal unless X (the argument called WHAT of FN) is a simple single- or
double-float vector."
  (refuse-quantized fn x)
  (unless (typep x 'float-vector)
    (element-type-error fn x "expected ~A to be a (simple-array single-float (*)) or ~
(simple-array double-float (*)), found ~A" what (describe-object-type x))))

(defun check-float-matrix (fn x)
  "Signal unless X is a simple rank-2 single- or double-float array."
  (refuse-quantized fn x)
  (unless (typep x '(or (simple-array single-float) (simple-array double-float)))
    (element-type-error fn x "expected a (simple-array single-float (* *)) or ~
(simple-array double-float (* *)), found ~A" (describe-object-type x)))
  (unless (= 2 (array-rank x))
    (shape-error fn "rank 2" (array-dimensions x)
                 "expected a matrix (rank 2), found rank ~D (dimensions ~S)"
                 (array-rank x) (array-dimensions x))))

(defun matvec-matrix-shape (fn m)
  "The (values rows cols) of M, which VEC:MATVEC takes: a quantized matrix
of rank 2 or a simple rank-2 single-float array; signals otherwise."
  (cond ((quantized-matrix-p m)
         (unless (= 2 (length (quantized-matrix-dims m)))
           (shape-error fn "rank 2" (quantized-matrix-dims m)
                        "expected a matrix (rank 2), found the rank-~D ~A"
                        (length (quantized-matrix-dims m)) m))
         (values (quantized-matrix-rows m) (quantized-matrix-cols m)))
        ((typep m '(simple-array single-float (* *)))
         (values (array-dimension m 0) (array-dimension m 1)))
        ((typep m '(simple-array single-float))
         (shape-error fn "rank 2" (array-dimensions m) "expected a matrix (rank 2), found a ~
single-float array of rank ~D (dimensions ~S)" (array-rank m) (array-dimensions m)))
        (t
         (element-type-error fn m "expected a quantized matrix or a (simple-array ~
single-float (* *)) (the f32 baseline), found ~A~@[; ~A~]"
                             (describe-object-type m)
                             (typecase m
                               ((simple-array double-float (* *))
                                "coerce it to single-float or rontolisp:quantize it")
                               ((or float16-array bfloat16-array)
                                "widen it with rontolisp:half-array-to-single or rontolisp:quantize it"))))))

(defun matvec-failure (fn x status message where)
  "Signal the condition for the kernel's STATUS (a keyword) on vector X;
WHERE is what the kernel found: the index of a non-finite value, or the
block whose scale overflows."
  (case status
    (:non-finite
     (let ((i where))
       (non-finite-error fn (list i) "x must be quantized to Q8_0 first: expected finite ~
values, found ~A at index ~D"
                        (let ((v (and i (aref x i))))
                             (cond ((null v) "a non-finite value")
                                   ((ext:float-nan-p v) "NaN")
                                   ((plusp v) (if (ext:float-infinity-p v)
                                                  "+infinity"
                                                  (format nil "~S (+infinity as a single-float)" v)))
                                   (t (if (ext:float-infinity-p v)
                                          "-infinity"
                                          (format nil "~S (-infinity as a single-float)" v)))))
                        i)))
    (:scale-overflow
     (let ((b where)
           (amax (block-absmax x (nth-value 1 (packed-numbers x)) (* 32 where))))
       (scale-overflow-error fn 0 b "x must be quantized to Q8_0 first: the scale of its ~
block ~D (values ~D to ~D) overflows binary16: expected a block absmax below 8321040, ~
found ~A" b (and b (* 32 b)) (and b (+ (* 32 b) 31)) amax)))
    (t
     (rontolisp-error fn "the kernel failed (~(~A~)): ~A" status message))))

(defun check-activations (fn activations)
  "Signal UNKNOWN-FORMAT-ERROR unless ACTIVATIONS is :Q8 or :Q8X2, the ways
activations meet a quantized matrix (doc/products.md §1, §2)."
  (unless (member activations '(:q8 :q8x2))
    (unknown-format-error fn activations "expected :activations :q8 or :q8x2, found ~S"
                          activations)))

(defun checked-matvec (fn m x out activations)
  "VEC:MATVEC-INTO's work, its errors naming the operation FN."
  (check-activations fn activations)
  (multiple-value-bind (rows cols) (matvec-matrix-shape fn m)
    (check-float-vector fn "x" x)
    (unless (= (length x) cols)
      (shape-error fn (list cols) (list (length x)) "expected x of length ~D (the matrix's ~
columns, matrix ~S), found length ~D" cols (array-dimensions m) (length x)))
    (unless out
      (setf out (make-array rows :element-type (array-element-type x))))
    (refuse-quantized fn out)
    (unless (typep out (if (typep x '(simple-array double-float (*)))
                           '(simple-array double-float (*))
                           '(simple-array single-float (*))))
      (element-type-error fn out "expected out to be a (simple-array ~(~A~) (*)) like x, ~
found ~A" (array-element-type x) (describe-object-type out)))
    (unless (= (length out) rows)
      (shape-error fn (list rows) (list (length out)) "expected out of length ~D (the ~
matrix's rows, matrix ~S), found length ~D" rows (array-dimensions m) (length out)))
    (multiple-value-bind (result status message where)
        (if (and (eq activations :q8x2) (quantized-matrix-p m))
            (%matvec-q8x2 m x out)
            (%matvec m x out))
      (or result (matvec-failure fn x status message where)))))

(defun matvec-into (m x out &key (activations :q8))
  "Store the product of the matrix M and the vector X in OUT and answer OUT.
M is a quantized matrix of rank 2 (rows x cols) or a (simple-array
single-float (* *)) (the f32 baseline); X a (simple-array single-float (*))
or (simple-array double-float (*)) of length cols; OUT a vector of X's
element type and length rows, not X itself.

For a quantized M, X (rounded to single-float) is quantized to Q8_0 as
RONTOLISP:QUANTIZE does, each row's blocks are dotted with it in exact
integers and summed in double-float in a fixed order, so the answer is the
same bits whatever the path (--simd, --no-simd) and thread count (--threads
N); it is a quantization error (about 1e-2 relative) away from the f32
product.  An X with a NaN or infinity signals NON-FINITE-ERROR, one whose
block scale overflows binary16 SCALE-OVERFLOW-ERROR.  For a single-float M
the sums are single-float in a fixed order.  A double-float X gets the
double-float sums (for a quantized M) or the single-float sums widened.
Wrong shapes signal SHAPE-ERROR, wrong types ELEMENT-TYPE-ERROR.

ACTIVATIONS :Q8X2 (doc/products.md §2) adds a second pass for a quantized M: each
block's residual x - d*q is quantized again at 128/d and dotted too, still
in exact integers, which keeps about 15 bits of each activation (the same
bits on every path and thread count as well); a single-float M ignores it.
Any other value signals UNKNOWN-FORMAT-ERROR.

A quantized M of another type than Q8_0 (Q4_0 .. Q5_1, Q2_K .. Q6_K,
IQ4_NL, IQ4_XS) runs its type's row product as ggml does (doc/products.md
§4, §5): X, checked as for Q8_0 (the same conditions), is quantized to the
type's activation blocks (Q8_0, Q8_1 or Q8_K) and each row is the product's
single-float (widened for a double-float X).  :Q8X2 adds the residual pass
for the types whose activations are Q8_0 (Q4_0, Q5_0, IQ4_NL) and changes
nothing for the others."
  (checked-matvec "vec:matvec-into" m x out activations))

(defun matvec (m x &key (activations :q8))
  "The product of the matrix M and the vector X as a fresh vector of X's
element type and length rows.  M is a quantized matrix of rank 2 or a
(simple-array single-float (* *)); X a single- or double-float simple
vector of length cols; ACTIVATIONS :Q8 or :Q8X2.  See VEC:MATVEC-INTO for the
arithmetic and the conditions."
  (checked-matvec "vec:matvec" m x nil activations))

;;; Plain operations on packed float arrays.

(defun dot (x y)
  "The dot product of the float vectors X and Y (simple, of one element
type and one length): each product and the running sum in double-float,
left to right; answered as a double-float for double-float vectors, else
rounded once to single-float.  A quantized matrix signals
QUANTIZED-MATRIX-ERROR (dequantize it first)."
  (check-float-vector "vec:dot" "x" x)
  (check-float-vector "vec:dot" "y" y)
  (unless (equal (array-element-type x) (array-element-type y))
    (element-type-error 'vec:dot y "expected y of x's element type ~(~A~), found ~A"
                        (array-element-type x) (describe-object-type y)))
  (unless (= (length x) (length y))
    (shape-error 'vec:dot (list (length x)) (list (length y))
                 "expected vectors of one length, found lengths ~D and ~D" (length x) (length y)))
  (let ((s 0d0))
    (declare (double-float s))
    (etypecase x
      ((simple-array single-float (*))
       (let ((x x) (y y))
         (declare (type (simple-array single-float (*)) x y))
         (dotimes (i (length x))
           (incf s (* (float (aref x i) 1d0) (float (aref y i) 1d0)))))
       (%double-to-single s))
      ((simple-array double-float (*))
       (let ((x x) (y y))
         (declare (type (simple-array double-float (*)) x y))
         (dotimes (i (length x))
           (incf s (* (aref x i) (aref y i)))))
       s))))

(defun norm (x)
  "The Euclidean norm of the float vector X: the square root of its sum of
squares taken in double-float, answered in X's element type.  A quantized
matrix signals QUANTIZED-MATRIX-ERROR (dequantize it first)."
  (check-float-vector "vec:norm" "x" x)
  (let ((s 0d0))
    (declare (double-float s))
    (etypecase x
      ((simple-array single-float (*))
       (let ((x x))
         (declare (type (simple-array single-float (*)) x))
         (dotimes (i (length x))
           (let ((v (float (aref x i) 1d0))) (incf s (* v v)))))
       (%double-to-single (sqrt s)))
      ((simple-array double-float (*))
       (let ((x x))
         (declare (type (simple-array double-float (*)) x))
         (dotimes (i (length x))
           (let ((v (aref x i))) (incf s (* v v)))))
       (sqrt s)))))

(defun linalg:transpose (m)
  "A fresh matrix, the transpose of M (a simple rank-2 single- or
double-float array), of M's element type.  A quantized matrix signals
QUANTIZED-MATRIX-ERROR: its blocks run along rows, so dequantize it first."
  (check-float-matrix "linalg:transpose" m)
  (destructuring-bind (rows cols) (array-dimensions m)
    (let ((tr (make-array (list cols rows) :element-type (array-element-type m))))
      (etypecase m
        ((simple-array single-float (* *))
         (let ((m m) (tr tr))
           (declare (type (simple-array single-float (* *)) m tr))
           (dotimes (i rows) (dotimes (j cols) (setf (aref tr j i) (aref m i j))))))
        ((simple-array double-float (* *))
         (let ((m m) (tr tr))
           (declare (type (simple-array double-float (* *)) m tr))
           (dotimes (i rows) (dotimes (j cols) (setf (aref tr j i) (aref m i j)))))))
      tr)))

(defun linalg:row (m i)
  "Row I of the matrix M as a fresh vector.  For a quantized matrix of rank
2, the row's values q*d (exact) in a (simple-array single-float (*)), the
same numbers as that row of (rontolisp:dequantize m); for a simple rank-2
single- or double-float array, a copy of the row of that element type.
Signals INDEX-ERROR for an I out of range."
  (multiple-value-bind (rows cols)
      (if (quantized-matrix-p m)
          (if (= 2 (length (quantized-matrix-dims m)))
              (values (quantized-matrix-rows m) (quantized-matrix-cols m))
              (shape-error 'linalg:row "rank 2" (quantized-matrix-dims m)
                           "expected a matrix (rank 2), found the rank-~D ~A"
                           (length (quantized-matrix-dims m)) m))
          (progn (check-float-matrix "linalg:row" m)
                 (values (array-dimension m 0) (array-dimension m 1))))
    (unless (and (integerp i) (< -1 i rows))
      (index-error 'linalg:row "expected a row index from 0 to ~D, found ~S" (1- rows) i))
    (if (quantized-matrix-p m)
        (%q8-row-into m i (make-array cols :element-type 'single-float))
        (let ((v (make-array cols :element-type (array-element-type m))))
          (replace v (make-array (* rows cols) :element-type (array-element-type m)
                                               :displaced-to m)
                   :start2 (* i cols))
          v))))
