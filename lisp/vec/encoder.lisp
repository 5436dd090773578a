;;;; encoder.lisp - the encoder's kernels in VEC: a weight matrix times a
;;;; sequence of activation rows (VEC:MATMUL, doc/products.md §3), and LayerNorm
;;;; without bias, NEOX rotary embedding, attention and GeGLU (doc/encoder.md).
;;;;
;;;; The arithmetic is C (prims/matmul.c, prims/nn.c, reached through the
;;;; primitives of prims/ecl/model.c), fixed so that every path and thread
;;;; count answers the same bits.  This file checks the arguments' types and
;;;; what only Lisp knows (keywords, reals); the primitives check the
;;;; dimensions and that OUT is none of the inputs, each once, with the
;;;; conditions and messages saying what was expected and what was found.
;;;; This file turns the kernels' statuses into conditions.  Sequences
;;;; are (simple-array single-float (* *)) with one row per token.

(in-package "VEC")

(defmacro f32-matrix-p (x)
  "True when X (a variable) is a (simple-array single-float (* *)): the
test TYPEP makes, in C.  ECL's compiler leaves a TYPEP of an array type
to run time, which parses the type on every call (a tenth of a
microsecond, a question's products make dozens); simple as ECL's
SIMPLE-ARRAY-P: not adjustable, no fill pointer, not displaced to
another array."
  `(ffi:c-inline (,x) (:object) :bool
                 "(!ECL_IMMEDIATE(#0) && (#0)->d.t == t_array && (#0)->array.rank == 2 &&
                   (#0)->array.elttype == ecl_aet_sf && !ECL_ADJUSTABLE_ARRAY_P(#0) &&
                   !ECL_ARRAY_HAS_FILL_POINTER_P(#0) &&
                   ((#0)->array.displaced == ECL_NIL ||
                    ECL_CONS_CAR((#0)->array.displaced) == ECL_NIL))"
                 :one-liner t))

(defun check-f32-matrix (fn what x)
  "Signal unless X (the argument called WHAT of FN) is a simple rank-2
single-float array; answer its (values rows cols)."
  ;; The type spelled out, never a DEFTYPE of this file: ECL's compiler
  ;; does not expand those, and a TYPEP left to run time looks the type up
  ;; on every call (a tenth of a one-token encode); F32-MATRIX-P first.
  (when (f32-matrix-p x)
    (return-from check-f32-matrix (values (array-dimension x 0) (array-dimension x 1))))
  (typecase x
    ((simple-array single-float (* *)) (values (array-dimension x 0) (array-dimension x 1)))
    ((simple-array single-float)
     (shape-error fn "rank 2" (array-dimensions x) "expected ~A to be a matrix (rank 2), ~
found a single-float array of dimensions ~S" what (array-dimensions x)))
    (t (refuse-quantized fn x)
       (element-type-error fn x "expected ~A to be a (simple-array single-float (* *)), ~
found ~A" what (describe-object-type x)))))

(defun check-out-matrix (fn out rows cols)
  "OUT checked as the result of FN (a single-float matrix: the primitive
checks that it is ROWS x COLS and none of the inputs), or a fresh ROWS x
COLS matrix when OUT is NIL."
  (if (null out)
      (make-array (list rows cols) :element-type 'single-float)
      (progn (check-f32-matrix fn "out" out)
             out)))

(defun check-positive-integer (fn what x)
  (unless (typep x '(integer 1 #.most-positive-fixnum))
    (rontolisp-error fn "expected ~A to be a positive integer, found ~S" what x)))

(defun check-single-real (fn what x &key positive)
  "X (WHAT of FN), a finite non-negative real (positive with POSITIVE), as
a single-float."
  (unless (and (realp x) (not (and (floatp x) (or (ext:float-nan-p x) (ext:float-infinity-p x))))
               (if positive (plusp x) (not (minusp x)))
               (< x most-positive-single-float))
    (rontolisp-error fn "expected ~A to be a finite ~:[non-negative~;positive~] real below ~
~A, found ~S" what positive most-positive-single-float x))
  (float x 1f0))

(defun kernel-failure (fn status message)
  "Signal for a kernel's status other than the quantizer's."
  (rontolisp-error fn "the kernel failed (~(~A~)): ~A" status message))

;;; Matrix times a sequence.

(defun matmul-weight (fn m)
  "The (values rows cols w bf16-p) %MATMUL takes for the weight M: a
quantized matrix of rank 2, a (simple-array single-float (* *)), or a
float16 / bfloat16 array of rank 2 (W its bits); signals otherwise."
  ;; The common types first, each tested once (ECL tests an array type
  ;; by a TYPEP at run time; F32-MATRIX-P in C): a question makes a dozen
  ;; small products.
  (when (f32-matrix-p m)
    (return-from matmul-weight (values (array-dimension m 0) (array-dimension m 1) m nil)))
  (typecase m
    (quantized-matrix
     (multiple-value-bind (rows cols) (matvec-matrix-shape fn m)
       (values rows cols m nil)))
    ((or float16-array bfloat16-array)
     (let ((bits (half-array-bits m)))
       (unless (= 2 (array-rank bits))
         (shape-error fn "rank 2" (array-dimensions bits) "expected a matrix (rank 2), ~
found ~A" m))
       (values (array-dimension bits 0) (array-dimension bits 1) bits
               (bfloat16-array-p m))))
    (t (if (or (quantized-matrix-p m) (typep m '(simple-array single-float)))
           (multiple-value-bind (rows cols) (matvec-matrix-shape fn m)
             (values rows cols m nil))
           (element-type-error fn m "expected a quantized matrix, a (simple-array ~
single-float (* *)), or a float16 or bfloat16 array of rank 2, found ~A"
                               (describe-object-type m))))))

(defun matmul-failure (fn xs status message row where)
  "Signal for the kernel's STATUS: activation row ROW of XS could not be
quantized (WHERE the column of a non-finite value, or the block whose
scale overflows)."
  (case status
    (:non-finite
     (non-finite-error fn (list row where) "xs must be quantized to Q8_0 first: expected ~
finite values, found ~A at row ~D, column ~D" (aref xs row where) row where))
    (:scale-overflow
     (scale-overflow-error fn row where "xs must be quantized to Q8_0 first: the scale of ~
block ~D of row ~D (columns ~D to ~D) overflows binary16: expected a block absmax below ~
8321040, found ~A" where row (* 32 where) (+ (* 32 where) 31)
                           (block-absmax xs (nth-value 1 (packed-numbers xs))
                                         (+ (* row (array-dimension xs 1)) (* 32 where)))))
    (t (kernel-failure fn status message))))

(defun checked-matmul (fn m xs out activations)
  (check-activations fn activations)
  (multiple-value-bind (rows cols w bf16-p) (matmul-weight fn m)
    (declare (ignore cols))             ; %matmul checks xs against them
    (let* ((n (check-f32-matrix fn "xs" xs))
           (out (check-out-matrix fn out n rows)))
      (multiple-value-bind (result status message row where)
          (%matmul w xs out bf16-p (eq activations :q8x2))
        (or result (matmul-failure fn xs status message row where))))))

(defun matmul-rows-into (m first count xs out &key (activations :q8))
  "VEC:MATMUL-INTO of the COUNT rows of the weight matrix M from row FIRST:
OUT is n x COUNT, and each of its values has the bits VEC:MATMUL-INTO of
all of M gives at that token and row (an output depends on its weight row
and token row alone).  M as VEC:MATMUL-INTO takes it, an outlier matrix
excepted; FIRST and COUNT must lie within M's rows."
  (let ((fn "vec:matmul-rows-into"))
    (unless out                         ; another OUT is checked below
      (check-f32-matrix fn "out" out))
    (check-activations fn activations)
    (multiple-value-bind (rows cols w bf16-p) (matmul-weight fn m)
      (declare (ignore cols))
      (unless (and (typep count 'fixnum) (typep first 'fixnum) (<= 0 first)
                   (<= 0 count) (<= (+ first count) rows))
        (shape-error fn (format nil "rows within ~D" rows) (list first count)
                     "expected rows within the ~D of the weight matrix, found ~A from row ~A"
                     rows count first))
      (let ((n (check-f32-matrix fn "xs" xs)))
        (check-out-matrix fn out n count)
        (multiple-value-bind (result status message row where)
            (%matmul-rows w first count xs out bf16-p (eq activations :q8x2))
          (or result (matmul-failure fn xs status message row where)))))))

(defun matmul-product (m fn xs out activations)
  "VEC:MATMUL-INTO's work for the weight matrix M (FN names the operation
in messages; OUT NIL makes a fresh result): a quantized matrix or a packed
float array here, the OUTLIER-MATRIX of quantize at load in
vec/outlier-matrix.lisp.  A plain function, not a generic one: the
dispatch of a generic function on five arguments cost more than a small
product's arithmetic (a question makes a dozen), and one struct test
tells the two kinds apart."
  (if (outlier-matrix-p m)
      (outlier-matmul-product m fn xs out activations)
      (checked-matmul fn m xs out activations)))

(defun matmul-into (m xs out &key (activations :q8))
  "Store the product of the weight matrix M (rows x cols) with each row of
XS (n x cols) in OUT (n x rows) and answer OUT: row t of OUT is M times row
t of XS.  M is a quantized matrix of rank 2, a (simple-array single-float
(* *)), or a float16 or bfloat16 array of rank 2 (as GGUF:READ gives F16 and
BF16 tensors; used in place, widened exactly); XS and OUT are (simple-array
single-float (* *)), OUT neither XS nor M.

For a quantized M (Q8_0 or another type VEC:MATVEC-INTO takes, each type's
own row products on the matrix's blocks), row t is bit for bit (VEC:MATVEC
M row-t :ACTIVATIONS ACTIVATIONS), :Q8 or :Q8X2; a row that cannot be
quantized signals
NON-FINITE-ERROR or SCALE-OVERFLOW-ERROR naming row and column or block.
For float weights each output is the 16-lane single-float dot product of
doc/products.md §3 and ACTIVATIONS is ignored.  Every path and thread count answers
the same bits; the weights are read from memory once per call, not once
per token.  Wrong shapes signal SHAPE-ERROR, wrong types
ELEMENT-TYPE-ERROR, an unknown ACTIVATIONS UNKNOWN-FORMAT-ERROR.
M may also be a weight MODEL:LOAD :quantize made (an OUTLIER-MATRIX, see
vec/outlier-matrix.lisp)."
  ;; An OUT other than NIL is checked by each method (CHECK-OUT-MATRIX).
  (unless out
    (check-f32-matrix "vec:matmul-into" "out" out))
  (matmul-product m "vec:matmul-into" xs out activations))

(defun matmul (m xs &key (activations :q8))
  "The product of the weight matrix M with each row of XS as a fresh n x
rows single-float matrix; see VEC:MATMUL-INTO for M, XS, ACTIVATIONS, the
arithmetic and the conditions."
  (matmul-product m "vec:matmul" xs nil activations))

;;; The steps between the products.

(defun layer-norm (xs weight eps &optional out)
  "LayerNorm without bias of each row of XS (n x d single-float), scaled by
WEIGHT (a (simple-array single-float (*)) of length d), into OUT (a fresh
matrix, or an n x d single-float matrix, which may be XS) and answer it.
Per row, as llama.cpp: the mean and variance summed in double-float,
rounded to single-float, then (x - mean) / sqrt(variance + EPS) * weight in
single-float.  EPS is a finite non-negative real."
  (let ((fn "vec:layer-norm"))
    (multiple-value-bind (n d) (check-f32-matrix fn "xs" xs)
      (unless (typep weight '(simple-array single-float (*)))
        (element-type-error fn weight "expected weight to be a (simple-array single-float ~
(*)), found ~A" (describe-object-type weight)))
      (unless (= (length weight) d)
        (shape-error fn (list d) (list (length weight)) "expected weight of length ~D (the ~
columns of xs), found length ~D" d (length weight)))
      (when (zerop d)
        (shape-error fn "at least 1 column" (array-dimensions xs) "expected rows of at ~
least one value, found xs of dimensions ~S" (array-dimensions xs)))
      (let ((e (check-single-real fn "eps" eps))
            (out (check-out-matrix fn out n d)))
        (multiple-value-bind (result status message) (%layer-norm xs weight e out)
          (or result (kernel-failure fn status message)))))))

(defun check-heads (fn xs n-heads head-dim)
  "The rows of XS must hold N-HEADS heads of HEAD-DIM values."
  (check-positive-integer fn "n-heads" n-heads)
  (check-positive-integer fn "head-dim" head-dim)
  (unless (= (array-dimension xs 1) (* n-heads head-dim))
    (shape-error fn (list (array-dimension xs 0) (* n-heads head-dim)) (array-dimensions xs)
                 "expected rows of ~D heads x ~D values = ~D columns, found ~D columns"
                 n-heads head-dim (* n-heads head-dim) (array-dimension xs 1))))

(defun rope-neox (xs n-heads head-dim theta &optional out)
  "NEOX rotary position embedding of XS (n x (N-HEADS * HEAD-DIM)
single-float, token t at position t) into OUT (fresh, or a matrix of XS's
dimensions, which may be XS), answered.  In each head the pairs (i, i +
HEAD-DIM/2) turn by the angle t * THETA^(-2i/HEAD-DIM), computed in
single-float as llama.cpp's rope cache does.  HEAD-DIM must be even, THETA
(the frequency base) a finite positive real."
  (let ((fn "vec:rope-neox"))
    (multiple-value-bind (n d) (check-f32-matrix fn "xs" xs)
      (check-heads fn xs n-heads head-dim)
      (unless (evenp head-dim)
        (rontolisp-error fn "expected an even head-dim (NEOX turns pairs i, i + head-dim/2), ~
found ~D" head-dim))
      (let ((base (check-single-real fn "theta" theta :positive t))
            (out (check-out-matrix fn out n d)))
        (multiple-value-bind (result status message)
            (%rope-neox xs n-heads head-dim base out)
          (or result (kernel-failure fn status message)))))))

(defun attention (q k v n-heads head-dim &key window out)
  "Multi-head attention without a causal mask: Q, K and V are n x (N-HEADS
* HEAD-DIM) single-float (head h in columns h*HEAD-DIM ...), the answer an
array of the same dimensions (OUT when given, which must be none of Q, K,
V).  Query i of head h attends to every key (WINDOW NIL, the global layers)
or to the keys j with |i - j| <= WINDOW/2 (a positive integer WINDOW, the
symmetric sliding window); scores are q.k / sqrt(HEAD-DIM), softmax'd with
the maximum subtracted (sum in double-float), then the weighted sum of the
values, all in a fixed order (doc/encoder.md)."
  (let ((fn "vec:attention"))
    (multiple-value-bind (n d) (check-f32-matrix fn "q" q)
      (check-f32-matrix fn "k" k)
      (check-f32-matrix fn "v" v)
      (check-heads fn q n-heads head-dim)
      (when window
        (check-positive-integer fn "window" window))
      (let ((out (check-out-matrix fn out n d)))
        (multiple-value-bind (result status message)
            (%attention q k v n-heads head-dim (or window 0) out)
          (or result (kernel-failure fn status message)))))))

(defun geglu (xs &key (gelu :erf) out)
  "GeGLU of XS (n x 2f single-float): GELU of the first f columns times the
last f, into OUT (fresh, or an n x f single-float matrix other than XS),
answered.  GELU :ERF is the exact 0.5x(1 + erf(x/sqrt 2)) the model
defines, :TANH llama.cpp's tanh approximation; both in single-float with
llama.cpp's constants."
  (let ((fn "vec:geglu"))
    (multiple-value-bind (n d) (check-f32-matrix fn "xs" xs)
      (unless (member gelu '(:erf :tanh))
        (unknown-format-error fn gelu "expected :gelu :erf or :tanh, found ~S" gelu))
      (unless (and (evenp d) (plusp d))
        (shape-error fn "an even number of columns" (array-dimensions xs) "expected xs with ~
an even, non-zero number of columns (the GELU half, then the gate), found ~D" d))
      (let ((out (check-out-matrix fn out n (floor d 2))))
        (multiple-value-bind (result status message) (%geglu xs (eq gelu :tanh) out)
          (or result (kernel-failure fn status message)))))))
