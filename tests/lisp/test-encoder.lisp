;;;; test-encoder.lisp - the encoder's kernels in VEC (lisp/vec/encoder.lisp):
;;;; VEC:MATMUL rows are VEC:MATVEC of each token bit for bit, for every
;;;; weight type and both activation modes, on every SIMD setting and thread
;;;; count; LayerNorm, RoPE, attention and GeGLU against plain double-float
;;;; references written here from doc/encoder.md; every argument error signals our
;;;; conditions.  (The C tests test_matmul and test_nn cover the kernels'
;;;; paths over many more sizes.)

(in-package "RONTOLISP-TESTS")

(def-suite encoder :in all :description "Matrix times a sequence and the encoder's steps.")
(in-suite encoder)

(defun enc-row (xs i)
  "Row I of the matrix XS as a fresh single-float vector."
  (let ((v (make-array (array-dimension xs 1) :element-type 'single-float)))
    (dotimes (j (length v) v)
      (setf (aref v j) (aref xs i j)))))

(defun enc-matrix-rows-equal-p (y fn n)
  "True when row t of Y has the bits of (FUNCALL FN t) for t below N."
  (loop for i below n
        always (same-bits-p (enc-row y i) (funcall fn i))))

;;; Matrix times a sequence.

(test matmul-q8-rows-are-matvec-of-each-token
  (let* ((state (make-random-state t))
         (w (random-matrix 37 160 :state state))
         (m (rontolisp:quantize w 'rontolisp:q8-0))
         (xs (random-matrix 11 160 :scale 3.0 :state state)))
    (dolist (act '(:q8 :q8x2))
      (let ((want (vec:matmul m xs :activations act)))
        (is (equal '(11 37) (array-dimensions want)))
        (is (enc-matrix-rows-equal-p want (lambda (i) (vec:matvec m (enc-row xs i) :activations act))
                                     11)
            "~A rows differ from matvec" act)
        (enc-with-knobs
         (lambda (on n)
           (is (same-bits-p (make-array 407 :element-type 'single-float :displaced-to want)
                            (make-array 407 :element-type 'single-float
                                        :displaced-to (vec:matmul m xs :activations act)))
               "~A simd ~A threads ~D" act on n)))))))

;; The legacy, K and IQ4 types run their own row products on the blocks as
;; stored (not a dequantized copy): a sequence's rows are each token's
;; matvec, on every knob; near the f32 product of the same weights; :q8x2
;; closer still where the activations are Q8_0, else the same bits as :q8.
(test matmul-quant-types-run-their-row-products
  (let* ((state (make-random-state t))
         (w (random-matrix 37 512 :state state))
         (xs (random-matrix 5 512 :scale 3.0 :state state))
         (x0 (enc-row xs 0)))
    (flet ((rel (q f) (/ (loop for u across q for v across f maximize (abs (- u v)))
                         (loop for v across f maximize (abs v)))))
      (dolist (type '(rontolisp:q4-0 rontolisp:q4-1 rontolisp:q5-0 rontolisp:q5-1 rontolisp:q2-k
                      rontolisp:q3-k rontolisp:q4-k rontolisp:q5-k rontolisp:q6-k
                      rontolisp:iq4-nl rontolisp:iq4-xs))
        (let* ((m (rontolisp:quantize w type))
               (f (vec:matvec (rontolisp:dequantize m) x0))
               (q8 (vec:matvec m x0))
               (q8x2 (vec:matvec m x0 :activations :q8x2))
               (xd (map '(simple-array double-float (*)) (lambda (v) (float v 1d0)) x0)))
          (is (< 0 (rel q8 f) 3e-2) "~A: :q8 ~,3e from the f32 product" type (rel q8 f))
          (if (member type '(rontolisp:q4-0 rontolisp:q5-0 rontolisp:iq4-nl))
              (is (< (rel q8x2 f) (/ (rel q8 f) 4)) "~A: :q8x2 ~,3e, :q8 ~,3e" type
                  (rel q8x2 f) (rel q8 f))
              (is (same-bits-p q8 q8x2) "~A: :q8x2 should change nothing" type))
          (is (same-bits-p (map '(simple-array double-float (*)) (lambda (v) (float v 1d0)) q8)
                           (vec:matvec m xd))
              "~A: a double-float x answers the single-float product widened" type)
          (dolist (act '(:q8 :q8x2))
            (let ((want (vec:matmul m xs :activations act)))
              (is (enc-matrix-rows-equal-p
                   want (lambda (i) (vec:matvec m (enc-row xs i) :activations act)) 5)
                  "~A ~A rows differ from matvec" type act)
              (enc-with-knobs
               (lambda (on n)
                 (is (same-bits-p (make-array 185 :element-type 'single-float :displaced-to want)
                                  (make-array 185 :element-type 'single-float
                                              :displaced-to (vec:matmul m xs :activations act)))
                     "~A ~A simd ~A threads ~D" type act on n))))))))))

(test matmul-quant-types-name-the-row-they-cannot-quantize
  (let ((m (rontolisp:quantize (random-matrix 4 256) 'rontolisp:q4-k))
        (xs (make-array '(3 256) :element-type 'single-float :initial-element 1.0)))
    (setf (aref xs 2 9) (rontolisp::%bits-single #x7fc00000))
    (handler-case (progn (vec:matmul m xs) (fail "no error for a NaN activation"))
      (rontolisp:non-finite-error (e)
        (is (search "row 2, column 9" (princ-to-string e)) "~A" e)))))

;; The :q8 kernel of the VNNI path counts its tiles by the way it summed
;; them (whole blocks where provably exact, else lane by lane: the same
;; bits, which the test above checks); the benchmark reports the split.
(test matmul-q8-counts-its-tiles
  (if (string= "avx512vnni" (getf (command-line::%cpu-info) :best))
      (let* ((state (make-random-state t))
             (m (rontolisp:quantize (random-matrix 40 256 :state state) 'rontolisp:q8-0))
             (xs (random-matrix 9 256 :state state))
             (threads (rontolisp:threads))
             (before (multiple-value-list (command-line::%matmul-q8-tiles))))
        (setf (rontolisp:threads) 1)
        (unwind-protect (vec:matmul m xs)
          (setf (rontolisp:threads) threads))
        (let ((after (multiple-value-list (command-line::%matmul-q8-tiles))))
          (is (every #'<= before after))
          ;; 40 rows x 9 tokens on one thread: 3 sets of 16 rows, 3 quads
          ;; of 4 tokens
          (is (= 9 (- (reduce #'+ after) (reduce #'+ before))))))
      (skip "this CPU has no AVX-512 VNNI: the :q8 matmul kernel does not run")))

(test matmul-float-weights-agree-with-the-f32-baseline
  "F32 rows are the f32 baseline matvec's; F16 and BF16 weights give the
bits of their exactly widened single-float matrix."
  (let* ((state (make-random-state t))
         (w (random-matrix 21 75 :state state))
         (xs (random-matrix 6 75 :state state))
         (y (vec:matmul w xs)))
    (is (enc-matrix-rows-equal-p y (lambda (i) (vec:matvec w (enc-row xs i))) 6))
    (dolist (half (list (rontolisp::make-float16-array w) (rontolisp::make-bfloat16-array w)))
      (let ((wide (rontolisp::half-array-to-single half)))
        (is (equalp (vec:matmul wide xs) (vec:matmul half xs)) "~A" half)))))

(test matmul-into-writes-out-and-ignores-activations-for-floats
  (let* ((state (make-random-state t))
         (w (random-matrix 5 32 :state state))
         (xs (random-matrix 3 32 :state state))
         (out (make-array '(3 5) :element-type 'single-float)))
    (is (eq out (vec:matmul-into w xs out :activations :q8x2)))
    (is (equalp (vec:matmul w xs) out))))

(test matmul-rows-into-has-the-bits-of-the-whole-product
  "VEC:MATMUL-ROWS-INTO of a part of a weight matrix's rows gives, value
for value, the bits of VEC:MATMUL-INTO of the whole at those rows: F32,
F16, BF16, Q8_0 and Q4_0 (:q8 and :q8x2) weights, on every SIMD setting
and thread count; a part outside the rows is a SHAPE-ERROR."
  (let* ((state (make-random-state t))
         (w (random-matrix 192 64 :state state))
         (xs (random-matrix 37 64 :state state)))
    (enc-with-knobs
     (lambda (on n)
       (dolist (m (list w (rontolisp::make-float16-array w) (rontolisp::make-bfloat16-array w)
                        (rontolisp:quantize w 'rontolisp:q8-0)
                        (rontolisp:quantize w 'rontolisp:q4-0)))
         (dolist (activations '(:q8 :q8x2))
           (let ((whole (vec:matmul m xs :activations activations)))
             (loop for (first count) in '((0 64) (64 64) (128 64) (5 1) (0 192))
                   do (let ((part (make-array (list 37 count) :element-type 'single-float))
                            (want (make-array (list 37 count) :element-type 'single-float)))
                        (dotimes (tok 37)
                          (dotimes (r count)
                            (setf (aref want tok r) (aref whole tok (+ first r)))))
                        (vec:matmul-rows-into m first count xs part :activations activations)
                        (is (same-bits-p (flat want) (flat part))
                            "~A ~A rows ~D+~D simd ~A threads ~D" (type-of m) activations
                            first count on n))))))))
    (signals rontolisp:shape-error
      (vec:matmul-rows-into w 150 64 xs (make-array '(37 64) :element-type 'single-float)))
    (signals rontolisp:shape-error
      (vec:matmul-rows-into w 0 64 xs (make-array '(37 65) :element-type 'single-float)))))

(test matmul-q8x2-is-closer-to-f32-than-q8
  (let* ((state (make-random-state t))
         (w (random-matrix 64 256 :state state))
         (m (rontolisp:quantize w 'rontolisp:q8-0))
         (xs (random-matrix 8 256 :state state)))
    (let ((f32 (vec:matmul (rontolisp:dequantize m) xs))
          (e1 0d0) (e2 0d0))
      (let ((y1 (vec:matmul m xs :activations :q8))
            (y2 (vec:matmul m xs :activations :q8x2)))
        (dotimes (i (array-total-size f32))
          (incf e1 (abs (- (row-major-aref y1 i) (row-major-aref f32 i))))
          (incf e2 (abs (- (row-major-aref y2 i) (row-major-aref f32 i))))))
      (is (< (* 20 e2) e1) "q8x2 error ~A, q8 ~A" e2 e1))))

(test matmul-empty-sequence
  (let ((m (rontolisp:quantize (random-matrix 4 32) 'rontolisp:q8-0)))
    (is (equal '(0 4) (array-dimensions
                       (vec:matmul m (make-array '(0 32) :element-type 'single-float)))))))

(test matmul-argument-errors
  (let* ((w (random-matrix 4 64))
         (m (rontolisp:quantize w 'rontolisp:q8-0))
         (xs (random-matrix 2 64)))
    (signals rontolisp:shape-error (vec:matmul m (random-matrix 2 32)))
    (signals rontolisp:shape-error (vec:matmul m (make-array 64 :element-type 'single-float)))
    (signals rontolisp:element-type-error
      (vec:matmul m (make-array '(2 64) :element-type 'double-float)))
    (signals rontolisp:element-type-error (vec:matmul (make-array '(4 64)) xs))
    (signals rontolisp:quantized-matrix-error (vec:matmul m m))
    (signals rontolisp:unknown-format-error (vec:matmul m xs :activations :q4))
    (signals rontolisp:shape-error
      (vec:matmul-into m xs (make-array '(2 5) :element-type 'single-float)))
    (signals rontolisp:element-type-error (vec:matmul-into m xs nil))
    (signals rontolisp:rontolisp-error (vec:matmul-into (random-matrix 64 64) xs xs))
    (let ((sq (random-matrix 64 64)))
      (signals rontolisp:rontolisp-error (vec:matmul-into sq (random-matrix 64 64) sq)))
    (let ((bad (random-matrix 3 64)))
      (setf (aref bad 2 40) ext:single-float-negative-infinity)
      (let ((c (handler-case (progn (vec:matmul m bad) nil)
                 (rontolisp:non-finite-error (c) c))))
        (is (not (null c)))
        (when c
          (is (equal '(2 40) (rontolisp:non-finite-error-index c)))
          (is (search "row 2, column 40" (princ-to-string c))))))
    (let ((big (random-matrix 2 64)))
      (setf (aref big 1 33) 9e6)
      (signals rontolisp:scale-overflow-error (vec:matmul m big)))))

(test matvec-q8x2-keyword
  (let* ((m (rontolisp:quantize (random-matrix 9 96) 'rontolisp:q8-0))
         (x (vec-random-vector 96 1.0 (make-random-state t)))
         (xd (map '(simple-array double-float (*)) (lambda (v) (float v 1d0)) x)))
    (is (same-bits-p (vec:matvec m x :activations :q8x2)
                     (enc-row (vec:matmul m (make-array '(1 96) :element-type 'single-float
                                                                :initial-contents (list x))
                                          :activations :q8x2)
                              0)))
    ;; a double-float x: the same sums, not rounded to single-float
    (is (every (lambda (d s) (= (float d 1f0) s))
               (vec:matvec m xd :activations :q8x2) (vec:matvec m x :activations :q8x2)))
    (signals rontolisp:unknown-format-error (vec:matvec m x :activations :q16))))

;;; LayerNorm, RoPE, attention, GeGLU against double references.

(defun enc-close-p (a b tol)
  "Every element of the arrays A and B within TOL * (1 + |b|)."
  (loop for i below (array-total-size a)
        always (<= (abs (- (row-major-aref a i) (row-major-aref b i)))
                   (* tol (+ 1 (abs (row-major-aref b i)))))))

(test layer-norm-against-double-reference
  (let* ((state (make-random-state t))
         (xs (random-matrix 5 48 :scale 4.0 :state state))
         (w (vec-random-vector 48 1.0 state))
         (want (make-array '(5 48) :element-type 'double-float)))
    (dotimes (i 5)
      (let* ((mean (/ (loop for j below 48 sum (float (aref xs i j) 1d0)) 48))
             (var (/ (loop for j below 48 sum (expt (- (aref xs i j) mean) 2)) 48)))
        (dotimes (j 48)
          (setf (aref want i j) (* (/ (- (aref xs i j) mean) (sqrt (+ var 1d-5))) (aref w j))))))
    (is (enc-close-p (vec:layer-norm xs w 1e-5) want 1d-5))
    ;; in place, the same bits
    (let ((y (vec:layer-norm xs w 1e-5)))
      (is (eq xs (vec:layer-norm xs w 1e-5 xs)))
      (is (equalp y xs)))))

(test rope-neox-against-double-reference
  (let* ((state (make-random-state t))
         (xs (random-matrix 7 24 :state state))
         (y (vec:rope-neox xs 2 12 10000)))
    (is (same-bits-p (enc-row y 0) (enc-row xs 0)) "position 0 turns nothing")
    (dotimes (p 7)
      (dotimes (h 2)
        (dotimes (i 6)
          (let* ((th (* p (expt 10000d0 (/ (* -2 i) 12))))
                 (a (aref xs p (+ (* h 12) i))) (b (aref xs p (+ (* h 12) i 6))))
            (is (< (abs (- (aref y p (+ (* h 12) i)) (- (* a (cos th)) (* b (sin th))))) 1d-5))
            (is (< (abs (- (aref y p (+ (* h 12) i 6)) (+ (* a (sin th)) (* b (cos th))))) 1d-5))))))))

(defun enc-attention-reference (q k v heads hd window)
  (let* ((n (array-dimension q 0))
         (out (make-array (array-dimensions q) :element-type 'double-float)))
    (dotimes (h heads out)
      (dotimes (i n)
        (let* ((js (loop for j below n
                         when (or (null window) (<= (abs (- i j)) (floor window 2))) collect j))
               (scores (mapcar (lambda (j)
                                 (/ (loop for c below hd
                                          sum (* (float (aref q i (+ (* h hd) c)) 1d0)
                                                 (aref k j (+ (* h hd) c))))
                                    (sqrt (float hd 1d0))))
                               js))
               (mx (reduce #'max scores))
               (es (mapcar (lambda (s) (exp (- s mx))) scores))
               (sum (reduce #'+ es)))
          (dotimes (c hd)
            (setf (aref out i (+ (* h hd) c))
                  (loop for j in js for e in es
                        sum (* (/ e sum) (aref v j (+ (* h hd) c)))))))))))

(test attention-against-double-reference-global-and-window
  (let* ((state (make-random-state t))
         (q (random-matrix 13 16 :state state))
         (k (random-matrix 13 16 :state state))
         (v (random-matrix 13 16 :state state)))
    (dolist (window '(nil 4 5 1))
      (let ((y (vec:attention q k v 2 8 :window window)))
        (is (enc-close-p y (enc-attention-reference q k v 2 8 window) 1d-5) "window ~A" window)
        (enc-with-knobs
         (lambda (on n)
           (is (equalp y (vec:attention q k v 2 8 :window window)) "simd ~A threads ~D" on n)))))
    (is (equalp v (vec:attention q k v 2 8 :window 1)) "window 1: each token sees itself")))

(test geglu-against-double-reference
  (let* ((state (make-random-state t))
         (xs (random-matrix 4 20 :scale 4.0 :state state)))
    (flet ((ref (gelu)
             (let ((out (make-array '(4 10) :element-type 'double-float)))
               (dotimes (i 4 out)
                 (dotimes (c 10)
                   (let ((a (float (aref xs i c) 1d0)) (g (aref xs i (+ c 10))))
                     (setf (aref out i c)
                           (* g 0.5d0 a
                              (+ 1 (if (eq gelu :erf)
                                       (- 1 (* 2 (enc-erfc-half a)))
                                       (tanh (* (sqrt (/ 2 pi)) (+ a (* 0.044715d0 a a a))))))))))))))
      (is (enc-close-p (vec:geglu xs) (ref :erf) 1d-6))
      (is (enc-close-p (vec:geglu xs :gelu :tanh) (ref :tanh) 1d-6))
      (is (not (equalp (vec:geglu xs) (vec:geglu xs :gelu :tanh)))))))

(defun enc-erfc-half (a)
  "Phi(-a) = P(N(0,1) < -a) by integrating the normal density (Simpson), so
that 1 - 2 Phi(-a) = erf(a / sqrt 2) without a library erf."
  (let* ((lo -12d0) (hi (- a)) (n 2000) (h (/ (- hi lo) n))
         (f (lambda (x) (/ (exp (/ (* x x) -2)) (sqrt (* 2 pi))))))
    (if (<= hi lo)
        0d0
        (* (/ h 3)
           (loop for i from 0 to n
                 sum (* (cond ((or (= i 0) (= i n)) 1) ((oddp i) 4) (t 2))
                        (funcall f (+ lo (* i h)))))))))

(test glue-checks-say-what-was-expected-and-found
  ;; The primitives are the one check of dimensions and of a result that is
  ;; an input (doc/kernels.md section 7): a SHAPE-ERROR with its slots, a
  ;; message naming the operand.
  (let* ((m (rontolisp:quantize (random-matrix 4 64) 'rontolisp:q8-0))
         (xs (random-matrix 3 16))
         (w (make-array 16 :element-type 'single-float :initial-element 1.0)))
    (flet ((caught (thunk)
             (handler-case (progn (funcall thunk) nil)
               (rontolisp:rontolisp-error (c) c))))
      (let ((c (caught (lambda () (vec:matmul m (random-matrix 2 32))))))
        (is (typep c 'rontolisp:shape-error))
        (is (equal '(2 64) (rontolisp:shape-error-expected c)))
        (is (equal '(2 32) (rontolisp:shape-error-found c)))
        (is (search "expected xs with 64 columns" (princ-to-string c)) "~A" c))
      (let ((c (caught (lambda () (vec::%layer-norm xs w 1e-5 (random-matrix 3 8))))))
        (is (typep c 'rontolisp:shape-error))
        (is (equal '(3 16) (rontolisp:shape-error-expected c)))
        (is (equal '(3 8) (rontolisp:shape-error-found c))))
      (let ((c (caught (lambda () (vec:attention xs (random-matrix 3 16) xs 2 8 :out xs)))))
        (is (search "other than q" (princ-to-string c)) "~A" c))
      (let* ((sq (rontolisp:quantize (random-matrix 32 32) 'rontolisp:q8-0))
             (x (make-array 32 :element-type 'single-float :initial-element 0.5))
             (c (caught (lambda () (vec:matvec-into sq x x)))))
        (is (search "other than x" (princ-to-string c)) "~A" c)))))

(test encoder-steps-argument-errors
  (let ((xs (random-matrix 3 16))
        (w (make-array 16 :element-type 'single-float :initial-element 1.0)))
    (signals rontolisp:shape-error (vec:layer-norm xs (make-array 8 :element-type 'single-float) 1e-5))
    (signals rontolisp:element-type-error (vec:layer-norm xs (make-array 16) 1e-5))
    (signals rontolisp:rontolisp-error (vec:layer-norm xs w -1))
    (signals rontolisp:rontolisp-error (vec:layer-norm xs w :eps))
    (signals rontolisp:shape-error (vec:layer-norm xs w 1e-5 (random-matrix 3 8)))
    (signals rontolisp:shape-error (vec:layer-norm (make-array 16 :element-type 'single-float) w 1e-5))
    (signals rontolisp:rontolisp-error (vec:rope-neox xs 2 7 10000))
    (signals rontolisp:shape-error (vec:rope-neox xs 3 4 10000))
    (signals rontolisp:rontolisp-error (vec:rope-neox xs 2 8 0))
    (signals rontolisp:rontolisp-error (vec:rope-neox xs 0 8 10000))
    (signals rontolisp:shape-error (vec:attention xs (random-matrix 4 16) xs 2 8))
    (signals rontolisp:rontolisp-error (vec:attention xs xs xs 2 8 :window 0))
    (signals rontolisp:rontolisp-error (vec:attention xs xs xs 2 8 :out xs))
    (signals rontolisp:quantized-matrix-error
      (vec:attention (rontolisp:quantize (random-matrix 3 32) 'rontolisp:q8-0) xs xs 2 8))
    (signals rontolisp:unknown-format-error (vec:geglu xs :gelu :relu))
    (signals rontolisp:shape-error (vec:geglu (random-matrix 3 15)))
    (signals rontolisp:shape-error (vec:geglu xs :out (random-matrix 3 16)))
    (signals rontolisp:element-type-error (vec:geglu (make-array '(3 16) :element-type 'double-float)))))

(test check-f32-matrix-takes-what-typep-takes
  "VEC::CHECK-F32-MATRIX's test in C (VEC::F32-MATRIX-P) takes exactly the
(simple-array single-float (* *)) TYPEP takes: not an adjustable, filled
or displaced matrix (one that others are displaced to is still simple),
nor a vector, another rank or element type."
  (let* ((plain (make-array '(2 3) :element-type 'single-float))
         (target (make-array '(2 3) :element-type 'single-float))
         (onto (make-array 6 :element-type 'single-float :displaced-to target))
         (objects (list plain target
                        (make-array '(0 0) :element-type 'single-float)
                        (make-array '(2 3) :element-type 'single-float :adjustable t)
                        (make-array '(2 3) :element-type 'single-float
                                           :displaced-to (make-array 8 :element-type 'single-float))
                        (make-array '(2 3) :element-type 'double-float)
                        (make-array '(2 3 1) :element-type 'single-float)
                        (make-array 6 :element-type 'single-float)
                        onto nil 7 "text")))
    (dolist (x objects)
      (is (eq (typep x '(simple-array single-float (* *)))
              (handler-case (progn (vec::check-f32-matrix "test" "x" x) t)
                (rontolisp:rontolisp-error () nil)))
          "~S: check-f32-matrix disagrees with TYPEP" x))))
