;;;; vec-standin.lisp - TEMPORARY plain-Lisp stand-ins for the encoder's
;;;; kernels (VEC:MATMUL, VEC:LAYER-NORM, VEC:ROPE-NEOX, VEC:ATTENTION,
;;;; VEC:GEGLU), with the lambda lists of the C kernels that replace them.
;;;;
;;;; This file exists only so that the model, `embed' and their tests run
;;;; before the C kernels are merged; delete it (and its line in
;;;; rontolisp.asd) when they land.  Each definition stands aside when the
;;;; real kernel is already defined, so a merge that keeps both files still
;;;; runs the C kernels.  The arithmetic follows ggml's CPU
;;;; operations closely enough for the agreement test, not SPEC 4.2's
;;;; summation order: matmul of a float weight goes through VEC:MATVEC's
;;;; f32 baseline row by row, of a Q8_0 weight through VEC:MATVEC (:q8) or
;;;; a Lisp rendering of SPEC 4.1 (:q8x2).

(in-package "RONTOLISP")

(defmacro define-standin (name lambda-list &body body)
  "DEFUN NAME unless the real kernel is already defined: loaded after the C
kernels' Lisp face, this file then changes nothing."
  `(unless (fboundp ',name)
     (defun ,name ,lambda-list ,@body)))

(deftype standin-matrix () '(simple-array single-float (* *)))

(defvar *standin-widened* (make-hash-table :test 'eq :weakness :key)
  "Half-precision weights widened to single-float once, by weight.")

(defun standin-weight (m)
  (if (or (float16-array-p m) (bfloat16-array-p m))
      (or (gethash m *standin-widened*)
          (setf (gethash m *standin-widened*) (half-array-to-single m)))
      m))

(defun standin-row (xs i)
  (let* ((cols (array-dimension xs 1))
         (row (make-array cols :element-type 'single-float)))
    (replace row (make-array (array-total-size xs) :element-type 'single-float
                                                   :displaced-to xs)
             :start2 (* i cols))
    row))

(defun standin-set-row (out i row)
  (let ((cols (array-dimension out 1)))
    (dotimes (j cols) (setf (aref out i j) (aref row j)))))

(defun standin-q8x2-matvec (m x)
  "SPEC 4.1's two-pass product of the Q8_0 matrix M and the vector X."
  (let* ((rows (quantized-matrix-rows m)) (cols (quantized-matrix-cols m))
         (nb (floor cols 32))
         (w (quantized-matrix-octets m))
         (qx (quantized-matrix-octets (quantize (make-array (list 1 cols) :element-type 'single-float
                                                                          :initial-contents (list x))
                                                'q8-0)))
         (y (make-array rows :element-type 'single-float)))
    (flet ((half (v o) (f16-value (logior (aref v o) (ash (aref v (1+ o)) 8))))
           (s8 (v o) (let ((b (aref v o))) (if (> b 127) (- b 256) b))))
      (let ((dx (make-array nb)) (r (make-array cols :element-type 'fixnum))
            (q (make-array cols :element-type 'fixnum)))
        (dotimes (b nb)
          (let* ((d (half qx (* b 34)))
                 (inv (if (zerop d) 0f0 (/ 128f0 d))))
            (setf (aref dx b) d)
            (dotimes (j 32)
              (let* ((k (+ (* b 32) j))
                     (qj (s8 qx (+ (* b 34) 2 j)))
                     (e (- (aref x k) (* d (float qj 1f0)))))
                (setf (aref q k) qj
                      (aref r k) (if (zerop d) 0
                                     (max -127 (min 127 (let ((v (* e inv)))
                                                          (if (minusp v)
                                                              (- (floor (+ (- v) 1/2)))
                                                              (floor (+ v 1/2))))))))))))
        (dotimes (row rows y)
          (let ((acc (make-array 4 :element-type 'double-float :initial-element 0d0)))
            (dotimes (b nb)
              (let* ((o (* 34 (+ (* row nb) b)))
                     (dd (* (float (half w o) 1d0) (float (aref dx b) 1d0))))
                (dotimes (l 4)
                  (let ((s 0))
                    (loop for j from (* 8 l) below (* 8 (1+ l))
                          for k = (+ (* b 32) j)
                          for qw = (s8 w (+ o 2 j))
                          do (incf s (+ (* 128 qw (aref q k)) (* qw (aref r k)))))
                    (incf (aref acc l) (* (* s dd) (expt 2d0 -7)))))))
            (setf (aref y row) (coerce (+ (+ (aref acc 0) (aref acc 1))
                                          (+ (aref acc 2) (aref acc 3)))
                                       'single-float))))))))

(define-standin vec:matmul (m xs &key (activations :q8))
  "Stand-in: the product of the weight M (rows x cols; quantized, single-float,
float16 or bfloat16) and each row of XS (n x cols single-float): n x rows."
  (let* ((n (array-dimension xs 0))
         (w (standin-weight m))
         (rows (array-dimension w 0))
         (out (make-array (list n rows) :element-type 'single-float)))
    (dotimes (i n out)
      (let ((x (standin-row xs i)))
        (standin-set-row out i (if (and (quantized-matrix-p w) (eq activations :q8x2))
                                   (standin-q8x2-matvec w x)
                                   (vec:matvec w x)))))))

(define-standin vec:layer-norm (xs weight eps &optional out)
  "Stand-in: ggml_norm (no bias) of each row of XS, times WEIGHT."
  (destructuring-bind (n d) (array-dimensions xs)
    (let ((out (or out (make-array (list n d) :element-type 'single-float))))
      (dotimes (i n out)
        (let ((sum 0d0) (sum2 0d0))
          (dotimes (j d) (incf sum (aref xs i j)))
          (let ((mean (coerce (/ sum d) 'single-float)))
            (dotimes (j d)
              (let ((v (- (aref xs i j) mean)))
                (setf (aref out i j) v)
                (incf sum2 (* v v))))
            (let ((scale (/ 1f0 (sqrt (+ (coerce (/ sum2 d) 'single-float) eps)))))
              (dotimes (j d)
                (setf (aref out i j) (* (* (aref out i j) scale) (aref weight j)))))))))))

(define-standin vec:rope-neox (xs n-heads head-dim theta &optional out)
  "Stand-in: NEOX rotary embedding of each head of each row of XS, row i at
position i, base THETA, as ggml's CPU rope computes its angles."
  (let* ((n (array-dimension xs 0))
         (out (or out (make-array (array-dimensions xs) :element-type 'single-float)))
         (half (floor head-dim 2))
         (scale (expt (coerce theta 'single-float) (/ -2f0 head-dim)))
         (cs (make-array head-dim :element-type 'single-float)))
    (dotimes (p n out)
      (let ((th (float p 1f0)))
        (dotimes (i half)
          (setf (aref cs (* 2 i)) (cos th) (aref cs (1+ (* 2 i))) (sin th)
                th (* th scale))))
      (dotimes (h n-heads)
        (let ((base (* h head-dim)))
          (dotimes (i half)
            (let ((x0 (aref xs p (+ base i))) (x1 (aref xs p (+ base i half)))
                  (c (aref cs (* 2 i))) (s (aref cs (1+ (* 2 i)))))
              (setf (aref out p (+ base i)) (- (* x0 c) (* x1 s))
                    (aref out p (+ base i half)) (+ (* x0 s) (* x1 c))))))))))

(define-standin vec:attention (q k v n-heads head-dim &key window out)
  "Stand-in: softmax(q k^T / sqrt(head-dim)) v per head; with WINDOW, token i
sees token j only when |i - j| <= WINDOW / 2."
  (standin-attention q k v n-heads head-dim (if window (floor window 2) -1)
                     (or out (make-array (array-dimensions q) :element-type 'single-float))))

(defun standin-flat (m)
  (let ((v (make-array (array-total-size m) :element-type 'single-float)))
    (replace v (make-array (array-total-size m) :element-type 'single-float :displaced-to m))))

(defun standin-attention (q k v n-heads head-dim half out)
  (let ((qf (standin-flat q)) (kf (standin-flat k)) (vf (standin-flat v))
        (of (make-array (array-total-size out) :element-type 'single-float))
        (n (array-dimension q 0)) (d (array-dimension q 1)))
    (standin-attention-flat qf kf vf n d n-heads head-dim half of)
    (replace (make-array (array-total-size out) :element-type 'single-float :displaced-to out) of)
    out))

(defun standin-attention-flat (q k v n d n-heads head-dim half out)
  (declare (type (simple-array single-float (*)) q k v out)
           (type fixnum n d n-heads head-dim half)
           (optimize speed (safety 0)))
  (let ((scale (/ 1f0 (sqrt (float head-dim 1f0))))
        (s (make-array n :element-type 'single-float)))
    (declare (type (simple-array single-float (*)) s) (type single-float scale))
    (dotimes (h n-heads out)
      (let ((base (* h head-dim)))
        (declare (type fixnum base))
        (dotimes (i n)
          (let ((mx most-negative-single-float) (sum 0d0) (qi (+ (* i d) base)))
            (declare (type single-float mx) (type double-float sum) (type fixnum qi))
            (dotimes (j n)
              (if (and (>= half 0) (> (abs (- i j)) half))
                  (setf (aref s j) 0f0)
                  (let ((dot 0f0) (kj (+ (* j d) base)))
                    (declare (type single-float dot) (type fixnum kj))
                    (dotimes (c head-dim)
                      (incf dot (* (aref q (+ qi c)) (aref k (+ kj c)))))
                    (setf (aref s j) (* dot scale))
                    (setf mx (max mx (aref s j))))))
            (dotimes (j n)
              (if (and (>= half 0) (> (abs (- i j)) half))
                  (setf (aref s j) 0f0)
                  (let ((e (exp (- (aref s j) mx))))
                    (declare (type single-float e))
                    (setf (aref s j) e)
                    (incf sum e))))
            (let ((inv (coerce (/ 1d0 sum) 'single-float)))
              (declare (type single-float inv))
              (dotimes (c head-dim)
                (let ((acc 0f0))
                  (declare (type single-float acc))
                  (dotimes (j n)
                    (incf acc (* (* (aref s j) inv) (aref v (+ (* j d) base c)))))
                  (setf (aref out (+ qi c)) acc))))))))))

(defun standin-erf (x)
  "erf of the double X: its Taylor series below 3, the continued fraction of
erfc above."
  (let ((a (abs x)))
    (* (signum x)
       (cond ((>= a 6d0) 1d0)
             ((< a 3d0)
              (let ((sum 0d0) (term a))
                (loop for n from 0 below 200
                      until (< (abs term) (* 1d-17 (abs sum)))
                      do (incf sum (/ term (+ (* 2 n) 1)))
                         (setf term (/ (* term (- (* a a))) (1+ n))))
                (* sum (/ 2d0 (sqrt pi)))))
             (t (let ((f 0d0))
                  (loop for k from 60 downto 1 do (setf f (/ (* k 0.5d0) (+ a f))))
                  (- 1d0 (/ (exp (- (* a a))) (* (sqrt pi) (+ a f))))))))))

(define-standin vec:geglu (xs &key (gelu :erf) out)
  "Stand-in: for XS n x 2f, GELU of the first half of each row times the
second half: n x f.  GELU :erf exact, :tanh ggml's tanh approximation."
  (destructuring-bind (n f2) (array-dimensions xs)
    (let* ((f (floor f2 2))
           (out (or out (make-array (list n f) :element-type 'single-float))))
      (dotimes (i n out)
        (dotimes (j f)
          (let* ((x (aref xs i j))
                 (g (ecase gelu
                      (:erf (coerce (* 0.5d0 x (+ 1d0 (standin-erf (/ x (sqrt 2d0)))))
                                    'single-float))
                      (:tanh (* 0.5f0 x (+ 1f0 (tanh (* 0.7978846f0 x
                                                        (+ 1f0 (* 0.044715f0 x x))))))))))
            (setf (aref out i j) (* g (aref xs i (+ f j))))))))))
