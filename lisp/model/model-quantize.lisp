;;;; model-quantize.lisp - quantize at load (doc/outliers.md): MODEL:LOAD :quantize
;;;; :q8_0 turns the F32/F16/BF16 encoder matrices of a file into Q8_0 in
;;;; memory, keeping each matrix's outlier input channels out of the int8
;;;; product:
;;;;
;;;;   y = Q8_0(W without the outlier columns) x' + W[:, outliers] x[outliers]
;;;;
;;;; x' being x with the outlier channels zeroed, so that a massive channel
;;;; sets neither a weight block's scale nor an activation block's.  The
;;;; int8 part is VEC:MATMUL of a quantized matrix (doc/products.md §3, with the
;;;; :activations asked for), the f32 part VEC:MATMUL of the single-float
;;;; outlier columns (doc/products.md §3's 16-lane f32 dot), and the two are added in
;;;; single-float, int8 part first: every path and thread count gives the
;;;; same bits because both kernels do.
;;;;
;;;; Such a weight is an OUTLIER-MATRIX (vec/outlier-matrix.lisp, where
;;;; its product is); a matrix without outlier columns becomes a plain
;;;; quantized matrix.

(in-package "MODEL")

;;; Making one.

(defun widened-weight (path name data)
  "The weight matrix DATA (tensor NAME of PATH) as a single-float array;
MODEL-ERROR for a matrix that is already quantized."
  (cond ((or (float16-array-p data) (bfloat16-array-p data)) (half-array-to-single data))
        ((typep data '(simple-array single-float (* *))) data)
        (t (model-error path "tensor ~S: expected F32, F16 or BF16 weights to quantize ~
at load, found ~A (load the file without :quantize, or quantize its F32/F16 original)"
                               name (if (quantized-matrix-p data) (quantized-matrix-type data) (describe-object-type data))))))

(defun split-weight (w columns)
  "The weight W (rows x cols single-float) quantized at load with the
outlier COLUMNS (a list of column indices) kept in f32: an OUTLIER-MATRIX, or
a plain quantized matrix when COLUMNS is empty."
  (if (null columns)
      (quantize w 'q8-0)
      (let ((cs (make-array (length columns) :element-type 'fixnum
                                             :initial-contents (sort (copy-list columns) #'<))))
        (multiple-value-bind (inliers outliers) (split-columns w cs)
          (%make-outlier-matrix (quantize inliers 'q8-0) cs outliers)))))

;;; The encoder.

(defparameter *load-quantize-types* '(:q8_0)
  "What MODEL:LOAD's :quantize takes.")

(defun load-calibration (calibration encoder)
  "CALIBRATION as a list of (tensor-name . magnitudes) checked against
ENCODER: a calibration file's path (READ-CALIBRATION), or such a list as
MODEL:CALIBRATE answers; NIL calibrates ENCODER's file in memory.  Each
encoder matrix needs one vector of as many magnitudes as it has columns, and
nothing else may be named (TENSOR-DATA-ERROR otherwise); the magnitudes must
be finite and non-negative (READ-CALIBRATION's TENSOR-DATA-ERROR for a file,
OUTLIER-COLUMNS' ELEMENT-TYPE-ERROR for a list)."
  (let* ((where (if (or (stringp calibration) (pathnamep calibration))
                    (namestring calibration)
                    "(calibration list)"))
         (entries (cond ((null calibration) (model:calibrate (encoder-file encoder)))
                        ((or (stringp calibration) (pathnamep calibration))
                         (read-calibration calibration))
                        ((and (listp calibration) (every #'consp calibration)) calibration)
                        (t (element-type-error 'model:load calibration "expected :calibration ~
to be a calibration file's path or a list of (tensor-name . magnitudes), found ~A"
                                               (describe-object-type calibration)))))
         (expected (loop for layer in (encoder-layers encoder) for i from 0
                         append (loop for key in '(:qkv :out :up :down)
                                      collect (cons (layer-matrix-name i key)
                                                    (second (packed-dimensions
                                                             (getf layer key))))))))
    (loop for (name . magnitudes) in entries
          for want = (assoc name expected :test #'equal)
          do (unless want
               (tensor-data-error where name "names no encoder matrix of ~A: expected one of ~
~A .. ~A" (encoder-path encoder) (car (first expected)) (car (car (last expected)))))
             (unless (and (vectorp magnitudes) (= (length magnitudes) (cdr want)))
               (tensor-data-error where name "has ~:[no vector~;~:*~D channel magnitudes~]: ~
expected ~D, the columns of the matrix in ~A"
                                  (and (vectorp magnitudes) (length magnitudes)) (cdr want)
                                  (encoder-path encoder))))
    (loop for (name) in expected
          unless (assoc name entries :test #'equal)
            do (tensor-data-error where name "is missing: expected a vector for every encoder ~
matrix of ~A" (encoder-path encoder)))
    entries))

(defun quantize-encoder (encoder quantize calibration)
  "ENCODER (fresh from MODEL:LOAD) with its encoder matrices quantized at
load when QUANTIZE is :q8_0 (itself when QUANTIZE is NIL): each matrix whose
rows are a multiple of 32 values becomes Q8_0 with the outlier columns of
its CALIBRATION (see LOAD-CALIBRATION; OUTLIER-COLUMNS picks them) kept in
f32, an OUTLIER-MATRIX; other rows keep the file's type."
  (cond ((null quantize) encoder)
        ((not (member quantize *load-quantize-types*))
         (unknown-format-error 'model:load quantize "expected :quantize ~{~S~^ or ~} (or NIL), ~
found ~S" *load-quantize-types* quantize))
        (t
         (let ((outliers (calibration-outlier-table (load-calibration calibration encoder)))
               (path (encoder-path encoder)))
           (setf (encoder-layers encoder)
                 (loop for layer in (encoder-layers encoder) for i from 0
                       collect (loop for (key value) on layer by #'cddr
                                     append (list key
                                                  (if (member key '(:qkv :out :up :down))
                                                      (let* ((name (layer-matrix-name i key))
                                                             (w (widened-weight path name value)))
                                                        (if (zerop (mod (array-dimension w 1) 32))
                                                            (split-weight w (gethash name outliers))
                                                            value))
                                                      value)))))
           encoder))))
