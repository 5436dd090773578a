;;;; test-vec.lisp - VEC:MATVEC answers the formula of doc/products.md §1 bit for bit on
;;;; every path and thread count, interpreted and compiled; the f32
;;;; baseline its fixed order; the other VEC/LINALG operations refuse a
;;;; quantized matrix.
;;;;
;;;; The references here are plain Lisp, independent of the C code: Q8_0
;;;; of x is recomputed from doc/formats.md §2 (binary16 rounding included), the
;;;; weights' blocks are read from the bytes WRITE-SEQUENCE writes, and
;;;; fmaf is computed exactly on rationals.

(in-package "RONTOLISP-TESTS")

(def-suite vec :in all :description "Matrix times vector, and the VEC and LINALG packages.")
(in-suite vec)

(defun vec-compiled (lambda-form)
  (let ((*error-output* (make-broadcast-stream))
        (*standard-output* (make-broadcast-stream)))
    (compile nil lambda-form)))

(defun vec-condition (thunk)
  "The error THUNK signals, or NIL."
  (handler-case (progn (funcall thunk) nil)
    (error (c) c)))

;;; The reference.

(defun f16-double (h)
  "The binary16 bit pattern H (finite) as an exact double."
  (let ((sign (if (logbitp 15 h) -1d0 1d0))
        (e (ldb (byte 5 10) h))
        (m (ldb (byte 10 0) h)))
    (assert (/= e 31) () "an infinite or NaN scale")
    (* sign (if (zerop e)
                (scale-float (float m 1d0) -24)
                (scale-float (float (+ 1024 m) 1d0) (- e 25))))))

(defun s8 (byte) (if (>= byte 128) (- byte 256) byte))

(defun ref-f16-bits (x)
  "The binary16 bits of the non-negative single-float X, rounded to nearest
even, +infinity when it rounds past 65504."
  (if (zerop x)
      0
      (let* ((r (rational x))
             (k (- (integer-length (numerator r)) (integer-length (denominator r)) 11)))
        ;; n * 2^k with 2^10 <= n < 2^11, or the subnormal step 2^-24
        (loop while (>= (/ r (expt 2 k)) 2048) do (incf k))
        (loop while (< (/ r (expt 2 k)) 1024) do (decf k))
        (when (< k -24) (setf k -24))
        (let ((n (round (/ r (expt 2 k)))))   ; ties to even
          (when (= n 2048) (setf n 1024 k (1+ k)))
          (cond ((< n 1024) n)                 ; subnormal
                ((>= (+ k 25) 31) #x7c00)      ; overflow
                (t (logior (ash (+ k 25) 10) (- n 1024))))))))

(defun round-away (r)
  "The rational R rounded to an integer, ties away from zero (C's roundf)."
  (if (minusp r) (- (floor (+ (- r) 1/2))) (floor (+ r 1/2))))

(defun ref-quantize-vector (x)
  "doc/formats.md §2 for the float vector X (each value made single-float first): a
list of (d-bits . quants) per block of 32, quants a list of 32 integers."
  (let ((xs (map 'vector (lambda (v) (coerce v 'single-float)) x)))
    (loop for b from 0 below (floor (length xs) 32)
          collect (let* ((block (subseq xs (* 32 b) (* 32 (1+ b))))
                         (amax (reduce #'max block :key #'abs :initial-value 0f0))
                         (d (/ amax 127f0))
                         (id (if (zerop d) 0f0 (and (>= d least-positive-normalized-single-float)
                                                    (/ 1f0 d)))))
                    ;; a subnormal d makes 1/d infinite: every quant is 0
                    (cons (ref-f16-bits d)
                          (map 'list (lambda (v) (if id (round-away (rational (* v id))) 0))
                               block))))))

(defun ref-matvec-q8 (m x)
  "doc/products.md §1 for the quantized matrix M and the float vector X, in plain Lisp:
a fresh vector of X's element type."
  (let* ((rows (array-dimension m 0))
         (cols (array-dimension m 1))
         (nb (floor cols 32))
         (w (matrix-octets m))
         (xq (coerce (ref-quantize-vector x) 'vector))
         (y (make-array rows :element-type (array-element-type x))))
    (dotimes (r rows y)
      (let ((acc (make-array 4 :initial-element 0d0)))
        (dotimes (b nb)
          (let* ((wo (* 34 (+ (* r nb) b)))
                 (dw (f16-double (logior (aref w wo) (ash (aref w (1+ wo)) 8))))
                 (xb (aref xq b))
                 (dx (f16-double (car xb)))
                 (qx (coerce (cdr xb) 'vector)))
            (dotimes (l 4)
              (let ((s (loop for j from (* 8 l) below (+ (* 8 l) 8)
                             sum (* (s8 (aref w (+ wo 2 j))) (aref qx j)))))
                (setf (aref acc l) (+ (aref acc l) (* (float s 1d0) (* dw dx))))))))
        (let ((sum (+ (+ (aref acc 0) (aref acc 1)) (+ (aref acc 2) (aref acc 3)))))
          (setf (aref y r) (if (typep x '(array double-float (*)))
                               sum
                               (coerce sum 'single-float))))))))

(defun round-to-single (r)
  "The single-float nearest the rational R, ties to even (normal range)."
  (if (zerop r)
      0f0
      (let* ((a (abs r))
             (k (- (integer-length (numerator a)) (integer-length (denominator a)) 24)))
        (loop while (>= (/ a (expt 2 k)) (expt 2 24)) do (incf k))
        (loop while (< (/ a (expt 2 k)) (expt 2 23)) do (decf k))
        (* (signum r) (scale-float (float (round (/ a (expt 2 k))) 1f0) k)))))

(defun fmaf (a b c)
  (round-to-single (+ (* (rational a) (rational b)) (rational c))))

(defun ref-matvec-f32 (m x)
  "The f32 baseline (prims/matvec.h) in plain Lisp: 16 fmaf partial sums
over j mod 16, then a fixed tree, in single-float."
  (let* ((rows (array-dimension m 0))
         (cols (array-dimension m 1))
         (xs (map 'vector (lambda (v) (coerce v 'single-float)) x))
         (y (make-array rows :element-type (array-element-type x))))
    (dotimes (r rows y)
      (let ((p (make-array 16 :initial-element 0f0)))
        (dotimes (j cols)
          (setf (aref p (mod j 16)) (fmaf (aref m r j) (aref xs j) (aref p (mod j 16)))))
        (let* ((a (loop for k below 8 collect (+ (aref p k) (aref p (+ k 8)))))
               (b (loop for k below 4 collect (+ (nth k a) (nth (+ k 4) a))))
               (c (loop for k below 2 collect (+ (nth k b) (nth (+ k 2) b))))
               (s (+ (first c) (second c))))
          (setf (aref y r) (if (typep x '(array double-float (*))) (float s 1d0) s)))))))

;; The references run compiled: interpreted, they would dominate the suite.
(dolist (f '(f16-double s8 ref-f16-bits round-away ref-quantize-vector ref-matvec-q8 round-to-single fmaf
             ref-matvec-f32 same-bits-p))
  (let ((*error-output* (make-broadcast-stream))
        (*standard-output* (make-broadcast-stream)))
    (compile f)))

(defun vec-paths ()
  "The kernel paths this CPU runs: ((id . name) ...)."
  (getf (command-line::%cpu-info) :paths))

(defun quantized-case (rows cols wscale xscale state &key zero-rows (type 'single-float))
  "A quantized random matrix (rows in ZERO-ROWS all zero) and a random x."
  (let ((a (vec-random-matrix rows cols wscale state)))
    (dolist (r zero-rows) (dotimes (j cols) (setf (aref a r j) 0f0)))
    (values (rontolisp:quantize a 'q8-0) (vec-random-vector cols xscale state type) a)))

;;; The formula.

(test reference-quantizer-matches-quantize
  "The Lisp version of doc/formats.md §2 used by the reference writes QUANTIZE's bytes (subnormal
scales and zero blocks included), so the reference rests on doc/formats.md §2 itself."
  (let ((state (make-random-state t)))
    (dolist (scale '(1e-37 1e-30 1e-6 1e-5 3e-3 1.0 8e6))
      (dolist (type '(single-float double-float))
        (let ((x (vec-random-vector 96 scale state type)))
          (dotimes (j 32) (setf (aref x (+ 64 j)) (coerce 0 type)))
          (is (equalp (matrix-octets (rontolisp:quantize x 'q8-0))
                      (coerce (loop for (d . qs) in (ref-quantize-vector x)
                                    append (list* (ldb (byte 8 0) d) (ldb (byte 8 8) d)
                                                  (mapcar (lambda (q) (ldb (byte 8 0) q)) qs)))
                              '(vector (unsigned-byte 8))))
              "scale ~A ~A" scale type))))))

(test matvec-matches-reference-formula
  "Random shapes and scales, single and double x: the bits of doc/products.md §1."
  (let ((state (make-random-state t)) (cases 0))
    (dolist (shape '((1 32) (3 64) (7 96) (13 320) (5 1024)))
      (dolist (scales '((1.0 1.0) (1e-30 1.0) (1.0 1e-30) (1e-37 1e3) (8e6 1e-3) (1e3 8e6)
                        (1e-3 1e-37) (1e-5 3e-3)))
        (dolist (type '(single-float double-float))
          (destructuring-bind (rows cols) shape
            (multiple-value-bind (m x)
                (quantized-case rows cols (first scales) (second scales) state
                                :zero-rows (list (floor rows 2)) :type type)
              ;; a block of x that is all zero
              (dotimes (j 32) (setf (aref x j) (coerce 0 type)))
              (let ((got (vec:matvec m x)) (want (ref-matvec-q8 m x)))
                (incf cases)
                (is (same-bits-p want got) "~A scales ~A ~A: ~S vs reference ~S"
                    shape scales type got want)))))))
    (is (= 80 cases))))

(test matvec-paths-and-threads-identical
  "Every path and thread count (exact chunk counts, odd row counts) gives
the reference's bits."
  (let ((state (make-random-state t)))
    (dolist (shape '((1 32) (5 64) (13 96) (31 1024) (129 256)))
      (dolist (scale '(1e-30 1.0 8e6))
        (multiple-value-bind (m x) (quantized-case (first shape) (second shape) scale 1.0 state
                                                   :zero-rows '(0))
          (let ((want (ref-matvec-q8 m x))
                (out (make-array (first shape) :element-type 'single-float)))
            (loop for (path . name) in (vec-paths)
                  do (loop for threads from 1 to 4
                           do (fill out 42f0)
                              (command-line::%bench-matvec m x out path threads 1 0)
                              (is (same-bits-p want out) "~A ~A ~A threads ~D" shape scale
                                  name threads)))))))))

(test matvec-knobs-give-identical-bits
  "(setf (simd) nil/t) and (setf (threads) 1..4) on a product big enough
for the knob entries to use every thread, and on small odd ones."
  (let ((state (make-random-state t))
        (simd (rontolisp:simd))
        (threads (rontolisp:threads)))
    (unwind-protect
         (dolist (shape '((517 1024) (3 32) (67 160)))
           (multiple-value-bind (m x) (quantized-case (first shape) (second shape) 1.0 1.0 state
                                                      :zero-rows '(1))
             (let ((want (ref-matvec-q8 m x))
                   (xd (map '(simple-array double-float (*)) (lambda (v) (float v 1d0)) x)))
               (let ((want-d (ref-matvec-q8 m xd)))
                 (dolist (on '(nil t))
                   (loop for n from 1 to 4
                         do (setf (rontolisp:simd) on (rontolisp:threads) n)
                            (is (same-bits-p want (vec:matvec m x)) "~A simd ~A threads ~D"
                                shape on n)
                            (is (same-bits-p want-d (vec:matvec m xd)) "~A double simd ~A threads ~D"
                                shape on n)))))))
      (setf (rontolisp:simd) simd (rontolisp:threads) threads))))

(test matvec-interpreted-and-compiled-callers-agree
  (let ((state (make-random-state t)))
    (multiple-value-bind (m x) (quantized-case 9 128 1.0 1.0 state)
      (let ((direct (vec:matvec m x))
            (interpreted (eval `(vec:matvec ,m ,x)))
            (compiled (funcall (vec-compiled '(lambda (m x) (vec:matvec m x))) m x))
            (declared (funcall (vec-compiled
                                '(lambda (m x)
                                  (declare (type rontolisp:quantized-matrix m)
                                           (type (simple-array single-float (*)) x)
                                           (optimize (speed 3) (safety 0)))
                                  (vec:matvec-into m x (make-array 9 :element-type 'single-float))))
                               m x)))
        (is (same-bits-p direct interpreted))
        (is (same-bits-p direct compiled))
        (is (same-bits-p direct declared))
        (is (same-bits-p (ref-matvec-q8 m x) direct))))))

(test matvec-result-follows-x
  (let ((state (make-random-state t)))
    (multiple-value-bind (m x a) (quantized-case 6 64 1.0 1.0 state)
      (let ((xd (map '(simple-array double-float (*)) (lambda (v) (float v 1d0)) x)))
        (is (typep (vec:matvec m x) '(simple-array single-float (6))))
        (is (typep (vec:matvec m xd) '(simple-array double-float (6))))
        (is (typep (vec:matvec a x) '(simple-array single-float (6))))
        (is (typep (vec:matvec a xd) '(simple-array double-float (6))))
        ;; the double result is the unrounded sum: rounding it gives the single one
        (is (same-bits-p (vec:matvec m x)
                         (map '(simple-array single-float (*)) #'rontolisp::%double-to-single
                              (vec:matvec m xd))))))))

(test matvec-into-writes-out
  (let ((state (make-random-state t)))
    (multiple-value-bind (m x) (quantized-case 4 32 1.0 1.0 state)
      (let ((out (make-array 4 :element-type 'single-float :initial-element 7f0)))
        (is (eq out (vec:matvec-into m x out)))
        (is (same-bits-p (vec:matvec m x) out))))))

(test matvec-empty-matrix
  (let ((m (rontolisp:quantize (make-array '(0 64) :element-type 'single-float
                                                   :initial-element 0f0)
                                       'q8-0)))
    (is (equalp #() (vec:matvec m (make-array 64 :element-type 'single-float :initial-element 0f0))))))

(test matvec-near-the-f32-product
  "The quantized product is a quantization error (about 1e-2) from f32's."
  (let ((state (make-random-state t)))
    (multiple-value-bind (m x a) (quantized-case 16 1024 1.0 1.0 state)
      (let* ((q (vec:matvec m x)) (f (vec:matvec a x))
             (err (sqrt (loop for u across q for v across f sum (expt (- u v) 2))))
             (norm (sqrt (loop for v across f sum (* v v)))))
        (is (< (/ err norm) 3e-2) "relative error ~A" (/ err norm))
        (is (> (/ err norm) 1e-6) "no quantization error at all? ~A" (/ err norm))))))

;;; The f32 baseline.

(test matvec-f32-baseline-matches-reference
  (let ((state (make-random-state t)))
    (dolist (shape '((1 1) (3 15) (5 16) (7 17) (9 33) (4 100) (2 1000)))
      (dolist (type '(single-float double-float))
        (let* ((a (vec-random-matrix (first shape) (second shape) 1.0 state))
               (x (vec-random-vector (second shape) 1.0 state type))
               (want (ref-matvec-f32 a x)))
          (is (same-bits-p want (vec:matvec a x)) "~A ~A" shape type)
          (let ((out (make-array (first shape) :element-type 'single-float)))
            (when (eq type 'single-float)
              (loop for (path . name) in (vec-paths)
                    do (loop for threads from 1 to 3
                             do (command-line::%bench-matvec a x out path threads 1 0)
                                (is (same-bits-p want out) "~A ~A ~D threads" shape name
                                    threads))))))))))

;;; Wrong arguments.

(test matvec-signals-on-wrong-arguments
  (let* ((state (make-random-state t))
         (a (vec-random-matrix 3 64 1.0 state))
         (m (rontolisp:quantize a 'q8-0))
         (x (vec-random-vector 64 1.0 state)))
    (signals rontolisp:shape-error (vec:matvec m (subseq x 1)))
    (signals rontolisp:shape-error (vec:matvec a (make-array 65 :element-type 'single-float :initial-element 0f0)))
    (signals rontolisp:shape-error (vec:matvec-into m x (make-array 4 :element-type 'single-float :initial-element 0f0)))
    (signals rontolisp:element-type-error
      (vec:matvec-into m x (make-array 3 :element-type 'double-float :initial-element 0d0)))
    (signals rontolisp:element-type-error (vec:matvec m (make-array 64 :initial-element 1.0)))
    (signals rontolisp:element-type-error (vec:matvec m (coerce x 'list)))
    (signals rontolisp:element-type-error
      (vec:matvec m (make-array 64 :element-type 'single-float :adjustable t)))
    (signals rontolisp:element-type-error
      (vec:matvec (make-array '(3 64) :element-type 'double-float :initial-element 0d0) x))
    (signals rontolisp:element-type-error (vec:matvec '((1.0)) x))
    (signals rontolisp:element-type-error (vec:matvec (rontolisp:make-float16-array a) x))
    (signals rontolisp:shape-error
      (vec:matvec (rontolisp:quantize (make-array 64 :element-type 'single-float :initial-element 0f0) 'q8-0) x))
    (signals rontolisp:shape-error (vec:matvec (make-array 64 :element-type 'single-float :initial-element 0f0) x))
    (signals rontolisp:quantized-matrix-error
      (vec:matvec m (rontolisp:quantize (make-array 64 :element-type 'single-float :initial-element 0f0) 'q8-0)))
    (signals rontolisp:rontolisp-error
      (let ((sq (rontolisp:quantize (make-array '(64 64) :element-type 'single-float :initial-element 0f0) 'q8-0))
            (v (make-array 64 :element-type 'single-float :initial-element 0f0)))
        (vec:matvec-into sq v v)))
    (let ((c (vec-condition (lambda () (vec:matvec m (subseq x 2))))))
      (is (search "length 64" (princ-to-string c)))
      (is (search "length 62" (princ-to-string c))))))

(test matvec-refuses-unquantizable-x
  (let* ((state (make-random-state t))
         (m (rontolisp:quantize (vec-random-matrix 3 96 1.0 state) 'q8-0)))
    (let ((x (vec-random-vector 96 1.0 state)))
      (setf (aref x 70) (rontolisp::%bits-single #x7fc00000))
      (let ((c (vec-condition (lambda () (vec:matvec m x)))))
        (is (typep c 'rontolisp:non-finite-error))
        (is (equal '(70) (rontolisp:non-finite-error-index c)))
        (is (search "NaN" (princ-to-string c)))))
    (let ((x (vec-random-vector 96 1.0 state 'double-float)))
      (setf (aref x 5) 1d300)              ; infinite once made single-float
      (let ((c (vec-condition (lambda () (vec:matvec m x)))))
        (is (typep c 'rontolisp:non-finite-error))
        (is (equal '(5) (rontolisp:non-finite-error-index c)))))
    (let ((x (vec-random-vector 96 1.0 state)))
      (setf (aref x 40) 9e6)
      (let ((c (vec-condition (lambda () (vec:matvec m x)))))
        (is (typep c 'rontolisp:scale-overflow-error))
        (is (eql 1 (rontolisp:scale-overflow-error-block c)))
        (is (search "block 1" (princ-to-string c)))))))

;;; The other operations.

(test vec-operations-refuse-quantized-matrix
  (let* ((m (rontolisp:quantize (make-array '(2 32) :element-type 'single-float :initial-element 0f0) 'q8-0))
         (v (make-array 32 :element-type 'single-float :initial-element 0f0)))
    (dolist (thunk (list (lambda () (vec:dot m v))
                         (lambda () (vec:dot v m))
                         (lambda () (vec:norm m))
                         (lambda () (linalg:transpose m))))
      (let ((c (vec-condition thunk)))
        (is (typep c 'rontolisp:quantized-matrix-error))
        (is (search "rontolisp:dequantize" (princ-to-string c)))))))

(test vec-dot-and-norm
  (let ((x (make-array 3 :element-type 'single-float :initial-contents '(1.0 2.0 2.0)))
        (y (make-array 3 :element-type 'single-float :initial-contents '(3.0 -1.0 0.5)))
        (xd (make-array 2 :element-type 'double-float :initial-contents '(3d0 4d0))))
    (is (eql 2.0 (vec:dot x y)))
    (is (eql 3.0 (vec:norm x)))
    (is (eql 5d0 (vec:norm xd)))
    (is (eql 25d0 (vec:dot xd xd)))
    (signals rontolisp:shape-error (vec:dot x (subseq y 1)))
    (signals rontolisp:element-type-error (vec:dot x (make-array 3 :element-type 'double-float :initial-element 0d0)))
    (signals rontolisp:element-type-error (vec:norm #(1 2 3)))))

(test linalg-transpose
  (let* ((a (vec-random-matrix 3 5 1.0 (make-random-state t)))
         (tr (linalg:transpose a)))
    (is (equal '(5 3) (array-dimensions tr)))
    (is (typep tr '(simple-array single-float (5 3))))
    (is (loop for i below 3 always (loop for j below 5 always (= (aref a i j) (aref tr j i)))))
    (is (typep (linalg:transpose (make-array '(2 4) :element-type 'double-float :initial-element 0d0))
               '(simple-array double-float (4 2))))
    (signals rontolisp:shape-error (linalg:transpose (make-array 4 :element-type 'single-float :initial-element 0f0)))))

(test linalg-row-equals-dequantized-row
  (let* ((a (vec-random-matrix 7 96 3.0 (make-random-state t)))
         (m (rontolisp:quantize a 'q8-0))
         (d (rontolisp:dequantize m)))
    (dotimes (i 7)
      (let ((row (linalg:row m i)))
        (is (typep row '(simple-array single-float (96))))
        (is (loop for j below 96 always (= (aref d i j) (aref row j))))))
    (is (equalp (linalg:row a 2) (subseq (make-array (* 7 96) :element-type 'single-float
                                                                :displaced-to a)
                                         192 288)))
    (signals rontolisp:index-error (linalg:row m 7))
    (signals rontolisp:index-error (linalg:row m -1))
    (signals rontolisp:shape-error
      (linalg:row (rontolisp:quantize (make-array 32 :element-type 'single-float :initial-element 0f0) 'q8-0) 0))))
