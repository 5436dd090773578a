;;;; test-outliers.lisp - the outlier rule of doc/outliers.md (OUTLIER-COLUMNS) and
;;;; QUANTIZE's :outliers (the scale search itself is checked against a
;;;; brute force in tests/c/test_q8_outlier.c; here: what the Lisp entry
;;;; point promises about the result, and its argument checks).

(in-package "RONTOLISP-TESTS")

(def-suite outliers :in all :description "Outlier columns and outlier-aware Q8_0.")
(in-suite outliers)

(defun magnitudes (n base &rest plants)
  "A vector of N magnitudes BASE with (column value) pairs PLANTS set."
  (let ((v (make-array n :initial-element base)))
    (loop for (c m) on plants by #'cddr do (setf (aref v c) m))
    v))

(test outlier-columns-threshold-is-three-times-the-median
  (is (equal '(7) (rontolisp:outlier-columns (magnitudes 32 1.0 7 3.01))))
  (is (equal '() (rontolisp:outlier-columns (magnitudes 32 1.0 7 3.0))))
  ;; the lower median of an even count: 16 ones and 16 fours give 1 (the
  ;; mean of the middle two, 2.5, would give none); 2 allowed, equal
  ;; magnitudes in column order
  (let ((v (make-array 32 :initial-element 4.0)))
    (fill v 1.0 :end 16)
    (is (equal '(16 17) (rontolisp:outlier-columns v))))
  (is (equal '() (rontolisp:outlier-columns (magnitudes 64 0.5)))))

(test outlier-columns-largest-first-at-most-a-sixteenth
  ;; 64 columns allow 4; ties keep column order
  (is (equal '(40 2 3 9)
             (rontolisp:outlier-columns (magnitudes 64 1 3 10 9 10 2 11 40 12 41 3.5 50 4))))
  ;; fewer than 16 columns allow none
  (is (equal '() (rontolisp:outlier-columns (magnitudes 15 1 0 100))))
  (is (equal '() (rontolisp:outlier-columns #())))
  ;; single- and double-float and integer magnitudes agree
  (is (equal (rontolisp:outlier-columns (magnitudes 32 1 4 20))
             (rontolisp:outlier-columns (coerce (magnitudes 32 1d0 4 20d0)
                                                '(simple-array double-float (*)))))))

(test outlier-columns-rejects-bad-magnitudes
  (signals rontolisp:element-type-error (rontolisp:outlier-columns '(1 2 3)))
  (signals rontolisp:element-type-error (rontolisp:outlier-columns #(1 -2 3)))
  (signals rontolisp:element-type-error (rontolisp:outlier-columns #(1 :a 3)))
  (let ((nan (rontolisp:f16-value #x7e00)))
    (signals rontolisp:element-type-error (rontolisp:outlier-columns (vector 1d0 nan)))
    (signals rontolisp:element-type-error
      (rontolisp:outlier-columns (vector 1d0 ext:double-float-positive-infinity)))))

(defun weighted-error (a m outliers)
  "Sum over A's elements of weight * (a - m)^2 in double, outlier columns
weighing 10^4 (doc/outliers.md)."
  (let ((cols (array-dimension a 1)))
    (loop for i below (array-total-size a)
          for d = (- (float (row-major-aref a i) 1d0) (row-major-aref m i))
          sum (* (if (member (mod i cols) outliers) 1d4 1d0) d d))))

(defun fixed-random-state ()
  "A fixed random state (ECL seeds one from an integer), so a failure can
be replayed."
  (make-random-state 20261201))

(defun massive-matrix (rows cols columns state)
  "A random matrix whose COLUMNS are 20 times larger than the rest."
  (let ((a (random-matrix rows cols :state state)))
    (dotimes (r rows a)
      (dolist (c columns) (setf (aref a r c) (* 20 (aref a r c)))))))

(test quantize-outliers-never-worse-and-standard-elsewhere
  (let* ((state (fixed-random-state))
         (cols 128)
         (outliers '(5 70 71))
         (a (massive-matrix 16 cols outliers state))
         (plain (rontolisp:quantize a 'q8-0))
         (aware (rontolisp:quantize a 'q8-0 :outliers outliers))
         (po (rontolisp:quantized-matrix-octets plain))
         (ao (rontolisp:quantized-matrix-octets aware)))
    (is (equal '(16 128) (array-dimensions aware)))
    ;; whole matrix and every row: never worse in weighted error
    (is (<= (weighted-error a aware outliers) (weighted-error a plain outliers)))
    (is (< (weighted-error a aware outliers) (weighted-error a plain outliers))
        "the search changed nothing on a matrix with 20x columns")
    ;; blocks 1 and 3 of each row hold no outlier column: the standard bytes
    (dotimes (r 16)
      (dolist (b '(1 3))
        (let ((s (* 34 (+ (* r 4) b))))
          (is (equalp (subseq po s (+ s 34)) (subseq ao s (+ s 34)))))))
    ;; a vector of columns, repeated columns and an empty list are the same thing
    (is (equalp ao (rontolisp:quantized-matrix-octets
                    (rontolisp:quantize a 'q8-0 :outliers (vector 71 5 70 5)))))
    (is (equalp po (rontolisp:quantized-matrix-octets (rontolisp:quantize a 'q8-0 :outliers '()))))))

(test quantize-outliers-rank-1-and-half-sources
  (let* ((state (fixed-random-state))
         (v (make-array 64 :element-type 'single-float)))
    (dotimes (i 64) (setf (aref v i) (- (random 2.0 state) 1.0)))
    (setf (aref v 33) 17.3)
    (let ((q (rontolisp:quantize v 'q8-0 :outliers '(33))))
      (is (equal '(64) (array-dimensions q)))
      (is (< (abs (- (aref q 33) 17.3d0))
             (abs (- (aref (rontolisp:quantize v 'q8-0) 33) 17.3d0)))))
    ;; a float16 source quantizes as its exact widening
    (let* ((a (massive-matrix 4 64 '(9) state))
           (h (rontolisp:make-float16-array a)))
      (is (equalp (rontolisp:quantized-matrix-octets (rontolisp:quantize h 'q8-0 :outliers '(9)))
                  (rontolisp:quantized-matrix-octets
                   (rontolisp:quantize (rontolisp:half-array-to-single h) 'q8-0
                                       :outliers '(9))))))))

(test quantize-outliers-rejects-bad-columns
  (let ((a (random-matrix 2 64)))
    (signals rontolisp:index-error (rontolisp:quantize a 'q8-0 :outliers '(64)))
    (signals rontolisp:index-error (rontolisp:quantize a 'q8-0 :outliers '(-1)))
    (signals rontolisp:element-type-error (rontolisp:quantize a 'q8-0 :outliers '(1.5)))
    (signals rontolisp:element-type-error (rontolisp:quantize a 'q8-0 :outliers 3))
    (is (search "expected outlier columns from 0 to 63, found 64"
                (error-message (lambda () (rontolisp:quantize a 'q8-0 :outliers '(64))))))
    ;; the quantizer's own errors still come through, with their subscripts
    (setf (aref a 1 7) (rontolisp:f16-value #x7e00))
    (let ((c (handler-case (progn (rontolisp:quantize a 'q8-0 :outliers '(7)) nil)
               (rontolisp:non-finite-error (c) c))))
      (is (equal '(1 7) (and c (rontolisp:non-finite-error-index c)))))
    (setf (aref a 1 7) 1e7)
    (let ((c (handler-case (progn (rontolisp:quantize a 'q8-0 :outliers '(7)) nil)
               (rontolisp:scale-overflow-error (c) c))))
      (is (typep c 'rontolisp:scale-overflow-error))
      (is (equal '(1 0) (and c (list (rontolisp:scale-overflow-error-row c)
                                      (rontolisp:scale-overflow-error-block c))))))))
