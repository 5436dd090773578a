;;;; outliers.lisp - which input channels of a matrix are outliers (doc/outliers.md),
;;;; and the column mask the outlier-aware quantizer takes.
;;;;
;;;; Small encoders carry a few massive residual channels; calibration
;;;; records max |x| per input channel of every matrix product, and this
;;;; rule turns that vector into the columns whose weights the Q8_0 scale
;;;; search protects (prims/q8_outlier.c).

(in-package "RONTOLISP")

(defconstant +outlier-ratio+ 3.0d0
  "A channel is an outlier when its magnitude exceeds this many times the
median channel's.")

(defconstant +outlier-fraction+ 16
  "At most cols / this many outlier columns per matrix.")

(defun outlier-columns (magnitudes)
  "The outlier columns of a matrix whose input channels reached
MAGNITUDES (a vector of non-negative finite reals, max |x| per channel, as
calibration records them): the channels whose magnitude exceeds 3.0 times
the median channel's, at most (floor cols 16) of them, largest first (equal
magnitudes: the earlier column first).  The median of an even count is the
lower of the two middle values, a channel's own magnitude.  Comparisons are
in double-float.  Signals ELEMENT-TYPE-ERROR for anything but such a
vector."
  (unless (vectorp magnitudes)
    (element-type-error 'outlier-columns magnitudes
                        "expected a vector of channel magnitudes, found ~A"
                        (describe-object-type magnitudes)))
  (let* ((cols (length magnitudes))
         (mags (make-array cols :element-type 'double-float)))
    (dotimes (i cols)
      (let ((m (aref magnitudes i)))
        (unless (and (realp m) (not (and (floatp m) (or (ext:float-nan-p m)
                                                          (ext:float-infinity-p m))))
                     (>= m 0))
          (element-type-error 'outlier-columns magnitudes
                              "expected non-negative finite reals, found ~S at index ~D" m i))
        (setf (aref mags i) (float m 1d0))))
    (when (zerop cols)
      (return-from outlier-columns nil))
    (let* ((threshold (* +outlier-ratio+ (nth-value 1 (channel-spread mags))))
           (over (loop for i below cols
                       when (> (aref mags i) threshold) collect i))
           ;; stable: equal magnitudes keep column order
           (ranked (stable-sort over #'> :key (lambda (i) (aref mags i)))))
      (subseq ranked 0 (min (length ranked) (floor cols +outlier-fraction+))))))

(defun channel-spread (magnitudes)
  "The largest and the median of MAGNITUDES (a non-empty vector of reals,
max |x| per channel), as double-floats: the median of an even count is the
lower of the two middle values, as OUTLIER-COLUMNS takes it."
  (let ((sorted (sort (map '(simple-array double-float (*)) (lambda (m) (float m 1d0)) magnitudes)
                      #'<)))
    (values (aref sorted (1- (length sorted))) (aref sorted (floor (1- (length sorted)) 2)))))

(defun outlier-mask (where columns cols)
  "A fresh (unsigned-byte 8) vector of COLS bytes, 1 at each of COLUMNS (a
list or vector of column indices, repeats allowed) and 0 elsewhere; WHERE
names the operation in errors.  Signals ELEMENT-TYPE-ERROR when COLUMNS is
not a sequence of integers and INDEX-ERROR for a column outside 0..COLS-1."
  (unless (typep columns 'sequence)
    (element-type-error where columns "expected a list or vector of outlier columns, found ~A"
                        (describe-object-type columns)))
  (let ((mask (make-array cols :element-type '(unsigned-byte 8) :initial-element 0)))
    (map nil (lambda (c)
               (unless (integerp c)
                 (element-type-error where columns
                                     "expected integer outlier columns, found ~S" c))
               (unless (< -1 c cols)
                 (index-error where "expected outlier columns from 0 to ~D, found ~D"
                              (1- cols) c))
               (setf (aref mask c) 1))
         columns)
    mask))
