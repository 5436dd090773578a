;;;; outlier-matrix.lisp - the weight matrix of quantize at load
;;;; (model/model-quantize.lisp, doc/outliers.md): Q8_0 weights without their
;;;; outlier input columns, and those columns in f32.  Its product is
;;;; OUTLIER-MATMUL-PRODUCT, which MATMUL-PRODUCT (encoder.lisp), behind
;;;; VEC:MATMUL and VEC:MATMUL-INTO, calls for it:
;;;;
;;;;   y = Q8_0(W without the outlier columns) x' + W[:, outliers] x[outliers]
;;;;
;;;; x' being x with the outlier channels zeroed; the two parts are added in
;;;; single-float, int8 part first.

(in-package "VEC")

(defstruct (outlier-matrix (:constructor %make-outlier-matrix (quantized columns weights))
                           (:copier nil))
  "An encoder weight quantized at load: QUANTIZED, the Q8_0 matrix (rows x
cols) of the weights with the outlier columns set to zero; COLUMNS, the
outlier column indices in increasing order; WEIGHTS, the single-float rows x
k matrix of those columns' weights."
  (quantized nil :read-only t)
  (columns nil :type (simple-array fixnum (*)) :read-only t)
  (weights nil :type (simple-array single-float (* *)) :read-only t))

(defmethod print-object ((m outlier-matrix) stream)
  (print-unreadable-object (m stream :type t)
    (format stream "q8-0 ~S + ~D f32 column~:P ~S"
            (quantized-matrix-dims (outlier-matrix-quantized m))
            (length (outlier-matrix-columns m)) (coerce (outlier-matrix-columns m) 'list))))

(defun split-columns (m columns)
  "(values inliers outliers) of the rows x cols single-float matrix M and the
increasing column indices COLUMNS: a copy of M with those columns zeroed,
and the rows x k matrix of those columns.  It makes the weights at load; a
product does the same to its activations in C (%OUTLIER-MATMUL), and this
only names a block whose scale overflows there."
  (declare (type (simple-array single-float (* *)) m) (type (simple-array fixnum (*)) columns)
           (optimize speed (safety 0)))
  (let* ((rows (array-dimension m 0)) (cols (array-dimension m 1)) (k (length columns))
         (inliers (make-array (list rows cols) :element-type 'single-float))
         (outliers (make-array (list rows k) :element-type 'single-float)))
    (declare (type fixnum rows cols k))
    (dotimes (i (the fixnum (* rows cols)))
      (setf (row-major-aref inliers i) (row-major-aref m i)))
    (dotimes (row rows)
      (dotimes (c k)
        (let ((j (aref columns c)))
          (setf (aref outliers row c) (aref m row j)
                (aref inliers row j) 0.0))))
    (values inliers outliers)))

;;; The product.

(defun outlier-matmul-product (m fn xs out activations)
  "VEC:MATMUL-INTO's work for the OUTLIER-MATRIX M (FN names the operation;
OUT NIL makes a fresh result): the int8 product of XS without the outlier
columns with ACTIVATIONS, plus the f32 product of the outlier columns,
added in single-float."
  (check-activations fn activations)
  ;; %outlier-matmul checks the dimensions and that out is not xs; VALUES,
  ;; not NTH-VALUE, takes the rows: ECL conses a list for NTH-VALUE
  (let* ((q (outlier-matrix-quantized m))
         (n (check-f32-matrix fn "xs" xs))
         (out (check-out-matrix fn out n (values (matvec-matrix-shape fn q))))
         (columns (outlier-matrix-columns m)))
    ;; One C call (prims/matmul_outlier.c): the steps SPLIT-COLUMNS,
    ;; the two products and their sum, without arrays of their own.
    (multiple-value-bind (result status message row where)
        (%outlier-matmul q columns (outlier-matrix-weights m) xs out (eq activations :q8x2))
      (or result
          ;; a block's scale is that of xs without the outlier columns
          (matmul-failure fn (if (eq status :scale-overflow) (split-columns xs columns) xs)
                          status message row where)))))
