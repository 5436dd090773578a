;;;; test-model-scratch.lisp - MODEL:ENCODE working in reused scratch
;;;; buffers (lisp/model/model-scratch.lisp) and the primitives it calls between
;;;; the products: the same bits as the forward pass composed of the VEC
;;;; kernels with fresh arrays (written here from doc/encoder.md), for several token
;;;; counts in any order; results that never alias the scratch; encodes of
;;;; one encoder in two threads at once; the cache's limits; calibration's
;;;; maxima taken from the inputs the fresh-array pass multiplies; and the
;;;; conditions the new primitives signal.

(in-package "RONTOLISP-TESTS")

(def-suite model-scratch :in all :description "The encoder's scratch buffers.")
(in-suite model-scratch)

(defun fresh-arrays-layer (x layer i h activations gelu &optional note)
  "One encoder layer of doc/encoder.md on X through the VEC kernels, each step a
fresh array: the forward pass as it was before the scratch.  NOTE, when
given, is called with the key (:qkv :out :up :down) and input of each
product."
  (let* ((d (getf h :embedding-length)) (heads (getf h :heads)) (hd (getf h :head-dim))
         (eps (getf h :eps)) (n (array-dimension x 0))
         (global (zerop (mod i (getf h :sliding-window-pattern))))
         (theta (if global (getf h :rope-theta) (getf h :rope-theta-swa)))
         (window (and (not global) (plusp (getf h :sliding-window)) (getf h :sliding-window)))
         (a (if (getf layer :attn-norm) (vec:layer-norm x (getf layer :attn-norm) eps) x))
         (qkv (fresh-product layer :qkv a activations note)))
    (flet ((block-of (start)
             (let ((out (make-array (list n d) :element-type 'single-float)))
               (dotimes (r n out)
                 (dotimes (c d)
                   (setf (aref out r c) (aref qkv r (+ start c)))))))
           (plus (p q)
             (let ((out (make-array (array-dimensions p) :element-type 'single-float)))
               (dotimes (j (array-total-size p) out)
                 (setf (row-major-aref out j) (+ (row-major-aref p j) (row-major-aref q j)))))))
      (let* ((q (vec:rope-neox (block-of 0) heads hd theta))
             (k (vec:rope-neox (block-of d) heads hd theta))
             (v (block-of (* 2 d)))
             (att (vec:attention q k v heads hd :window window))
             (ffn-in (plus (fresh-product layer :out att activations note) x))
             (up (fresh-product layer :up (vec:layer-norm ffn-in (getf layer :ffn-norm) eps)
                          activations note))
             (down (fresh-product layer :down (vec:geglu up :gelu gelu) activations note)))
        (plus down ffn-in)))))

(defun fresh-product (layer key x activations note)
  "The product of the matrix KEY of LAYER with X, fresh; NOTE sees KEY and X first."
  (when note (funcall note key x))
  (vec:matmul (getf layer key) x :activations activations))

(defun fresh-arrays-encode (e ids &key (activations :q8) (gelu :erf) note)
  "The hidden states of the encoder E for IDS (pooling none) through
FRESH-ARRAYS-LAYER; NOTE is called with the layer, key and input of each
product."
  (let* ((h (model:hyperparameters e))
         (d (getf h :embedding-length))
         (emb (model::encoder-token-embedding e))
         (x (make-array (list (length ids) d) :element-type 'single-float)))
    (loop for id in ids for r from 0
          do (dotimes (c d) (setf (aref x r c) (aref emb id c))))
    (setf x (vec:layer-norm x (model::encoder-token-norm e) (getf h :eps)))
    (loop for layer in (model::encoder-layers e) for i from 0
          do (setf x (fresh-arrays-layer x layer i h activations gelu
                                         (and note (let ((i i))
                                                     (lambda (key x) (funcall note i key x)))))))
    (vec:layer-norm x (model::encoder-output-norm e) (getf h :eps))))

(defun matrix-same-bits-p (a b)
  "True when the single-float matrices A and B have the same dimensions and
bits (signs of zeros included)."
  (and (equal (array-dimensions a) (array-dimensions b))
       (loop for j below (array-total-size a)
             always (let ((u (row-major-aref a j)) (v (row-major-aref b j)))
                      (and (= u v) (= (float-sign u) (float-sign v)))))))

(test scratch-encode-has-the-bits-of-fresh-arrays
  ;; Token counts up, down and repeated, so a cached scratch of another
  ;; count or of the same count is reused with stale contents in it.
  (dolist (type '(:f16 :q8_0 :f32))
    (let ((e (model:load (encoder-file "s1-pico" type))))
      (dolist (n '(16 5 40 16 1 300 5))
        (let ((ids (token-sequence n :seed n)))
          (dolist (act (if (eq type :q8_0) '(:q8 :q8x2) '(:q8)))
            (dolist (gelu '(:erf :tanh))
              (is (matrix-same-bits-p (model:encode e ids :activations act :gelu gelu)
                                      (fresh-arrays-encode e ids :activations act :gelu gelu))
                  "~A, ~D tokens, ~A, ~A: the scratch encode differs" type n act gelu))))))))

(test scratch-results-are-not-aliased
  (let* ((e (model:load (encoder-file "s1-pico" :f32)))
         (ids-a (token-sequence 12 :seed 1))
         (ids-b (token-sequence 12 :seed 2))
         (a (model:encode e ids-a))
         (a-copy (copy-seq (make-array (array-total-size a) :element-type 'single-float
                                                           :displaced-to a)))
         (cls (model:encode e ids-a :pooling :cls))
         (mean (model:encode e ids-a :pooling :mean))
         (cls-copy (copy-seq cls)) (mean-copy (copy-seq mean))
         (b (model:encode e ids-b))
         (b2 (model:encode e ids-b :pooling :cls)))
    (is (not (eq a b)))
    (is (not (matrix-same-bits-p a b)) "two sequences should give two results")
    (is (equalp a-copy (make-array (array-total-size a) :element-type 'single-float
                                                       :displaced-to a))
        "the first result changed when the encoder ran again")
    (is (equalp cls cls-copy))
    (is (equalp mean mean-copy))
    (is (not (eq cls b2)))))

(test scratch-encodes-in-two-threads-at-once
  ;; Each thread must get its own scratch: shared buffers would mix the
  ;; two sequences' states.
  (let* ((e (model:load (encoder-file "s1-pico" :q8_0)))
         (seqs (list (token-sequence 24 :seed 5) (token-sequence 24 :seed 9)))
         (want (mapcar (lambda (ids) (model:encode e ids)) seqs))
         (old-threads (rontolisp:threads))
         (bad (list 0)) (lock (mp:make-lock)))
    (unwind-protect
         (progn
           (setf (rontolisp:threads) 1)
           (let ((procs (loop for ids in seqs for w in want
                              collect (let ((ids ids) (w w))
                                        (mp:process-run-function
                                         "encode"
                                         (lambda ()
                                           (dotimes (r 25)
                                             (unless (matrix-same-bits-p (model:encode e ids) w)
                                               (mp:with-lock (lock) (incf (first bad)))))))))))
             (mapc #'mp:process-join procs)))
      (setf (rontolisp:threads) old-threads))
    (is (= 0 (first bad)) "~D of 50 concurrent encodes differ" (first bad))))

(test scratch-pool-grows-only-for-a-longer-sequence
  ;; One scratch serves every shorter sequence: encodes of 9, 3 and 9
  ;; tokens reuse it; a longer one replaces it.
  (let* ((e (model:load (encoder-file "s1-pico" :f32)))
         (free (model::scratch-cache-free (model::encoder-scratch e))))
    (flet ((kept () (coerce (remove nil free) (quote list))))
      (model:encode e (token-sequence 9))
      (let ((s (first (kept))))
        (is (= 1 (length (kept))))
        (is (= 9 (model::encode-scratch-capacity s)))
        (model:encode e (token-sequence 3))
        (model:encode e (token-sequence 9 :seed 2))
        (is (equal (list s) (kept)) "a shorter sequence made another scratch")
        (is (= 9 (model::encode-scratch-n s)))
        (model:encode e (token-sequence 20))
        (is (= 1 (length (kept))) "the shorter scratch stayed beside the longer")
        (is (= 20 (model::encode-scratch-capacity (first (kept)))))
        (is (<= (length free) model::+scratch-cache-entries+))))))

(test scratch-set-matrix-rows-stays-within-the-storage
  (let* ((a (make-array '(6 8) :element-type 'single-float :initial-element 1.0))
         (b (make-array '(6 3) :element-type 'single-float :initial-element 2.0))
         (both (vector a b)))
    (is (eq both (model::%set-matrix-rows both 2)))
    (is (equal '(2 8) (array-dimensions a)))
    (is (equal '(2 3) (array-dimensions b)))
    (is (= 16 (array-total-size a)))
    (model::%set-matrix-rows both 6)
    (is (equal '(6 8) (array-dimensions a)))
    (is (= 1.0 (aref a 5 7)))
    ;; far past the storage: refused, nothing changed
    (signals rontolisp:shape-error (model::%set-matrix-rows both 1000))
    (is (equal '(6 8) (array-dimensions a)))
    (signals error (model::%set-matrix-rows (list a) 2))
    (signals error (model::%set-matrix-rows (vector (make-array 4 :element-type 'single-float)) 2))
    (signals error (model::%set-matrix-rows both -1))))

(test row-step-primitives-answer-whether-their-output-is-finite
  ;; The encoder's finite-value checks read this second value instead of
  ;; scanning each step's output again.
  (flet ((m (r c &optional (v 1.0))
           (make-array (list r c) :element-type 'single-float :initial-element v))
         (flag (&rest values) (second values)))
    (let ((w (make-array 8 :element-type 'single-float :initial-element 1.0))
          (big (m 3 8 3e38)))
      (setf (aref big 2 0) -3e38)
      (is (null (multiple-value-call #'flag (model::%add-into (m 3 5) (m 3 5) (m 3 5)))))
      ;; the sum overflows in the last value, past the four-at-a-time part
      (let ((b (m 3 5)))
        (setf (aref b 2 4) 3e38)
        (is-true (multiple-value-call #'flag (model::%add-into (m 3 5) (m 3 5 3e38) b))))
      (is-true (multiple-value-call #'flag (model::%add-into (m 3 8) big big)))
      (is (null (multiple-value-call #'flag (vec::%layer-norm (m 3 8) w 1e-5 (m 3 8)))))
      ;; finite values whose variance is not: NaN rows
      (is-true (multiple-value-call #'flag (vec::%layer-norm big w 1e-5 (m 3 8))))
      (is-true (multiple-value-call #'flag (model::%layer-norm-bias big w w 1e-5 (m 3 8))))
      (is (null (multiple-value-call #'flag (model::%bias-act (m 3 8) w :gelu (m 3 8)))))
      (is-true (multiple-value-call #'flag
                 (model::%bias-act big (make-array 8 :element-type 'single-float
                                                     :initial-element 3e38)
                                   :none (m 3 8))))
      (is (null (multiple-value-call #'flag (vec::%geglu (m 3 16) nil (m 3 8)))))
      (is-true (multiple-value-call #'flag (vec::%geglu (m 3 16 3e38) nil (m 3 8))))
      ;; attention: an infinite value reaches the rows that weigh it
      (let ((v (m 5 16)))
        (flet ((whole () (multiple-value-call #'flag
                           (model::%attention (m 5 16) (m 5 16) v 2 8 0 (m 5 16))))
               (rows () (multiple-value-call #'flag
                          (model::%attention-rows (m 2 16) (m 5 16) v 2 8 (m 2 16)))))
          (is (null (whole)))
          (is (null (rows)))
          (setf (aref v 4 15) ext:single-float-positive-infinity)
          (is-true (whole))
          (is-true (rows)))))))

(test scratch-primitives-signal-on-bad-operands
  (flet ((m (r c) (make-array (list r c) :element-type 'single-float :initial-element 1.0)))
    (let ((table (m 10 8)))
      (signals rontolisp:index-error (model::%gather-rows table '(1 10) (m 2 8)))
      (signals rontolisp:index-error (model::%gather-rows table '(1 -1) (m 2 8)))
      (signals rontolisp:shape-error (model::%gather-rows table '(1 2 3) (m 2 8)))
      (signals rontolisp:shape-error (model::%gather-rows table '(1) (m 2 8)))
      (signals rontolisp:shape-error (model::%gather-rows table '(1 2) (m 2 4)))
      (signals error (model::%gather-rows table #(1 2) (m 2 8)))
      (let ((out (model::%gather-rows table '(3 0) (m 2 8))))
        (is (= 1.0 (aref out 1 7)))))
    (signals rontolisp:shape-error (model::%add-into (m 2 8) (m 2 8) (m 3 8)))
    (let ((a (m 2 3)))
      (is (eq a (model::%add-into a a (m 2 3))))
      (is (= 2.0 (aref a 0 1)))  ; the four-at-a-time part
      (is (= 2.0 (aref a 1 2)))) ; the rest
    (let ((q (m 2 16)) (k (m 5 16)) (v (m 5 16)) (out (m 2 16)))
      (is (eq out (model::%attention-rows q k v 2 8 out)))
      (is (= 1.0 (aref out 1 15))) ; equal values: any weights average to them
      (signals rontolisp:shape-error (model::%attention-rows q k (m 4 16) 2 8 out))
      (signals rontolisp:shape-error (model::%attention-rows q k v 2 8 (m 3 16)))
      (signals rontolisp:shape-error (model::%attention-rows q (m 0 16) (m 0 16) 2 8 out))
      (signals rontolisp:shape-error (model::%attention-rows q k v 3 8 out))
      (signals rontolisp:rontolisp-error (model::%attention-rows q k v 2 8 q)))
    (let ((qkv (m 4 48)) (q (m 4 16)) (k (m 4 16)) (v (m 4 16)))
      (signals rontolisp:rontolisp-error (model::%qkv-rope qkv q q v 2 8 10000.0))
      (signals rontolisp:shape-error (model::%qkv-rope qkv q k (m 4 8) 2 8 10000.0))
      (signals rontolisp:shape-error (model::%qkv-rope qkv q k v 3 8 10000.0))
      (signals rontolisp:shape-error (model::%qkv-rope (m 4 47) q k v 2 8 10000.0))
      (dotimes (j 48) (setf (aref qkv 2 j) (float j)))
      (is (eq q (model::%qkv-rope qkv q k v 2 8 10000.0)))
      (is (= 40.0 (aref v 2 8)))
      (is (matrix-same-bits-p
           q (vec:rope-neox (let ((b (m 4 16)))
                              (dotimes (j 16 b) (setf (aref b 2 j) (float j))))
                            2 8 10000.0))))))

(test scratch-mean-pooling-has-the-bits-of-the-generic-sum
  ;; MODEL:ENCODE :POOLING :MEAN sums each column in typed double-float; the
  ;; generic sum of the same values in the same order has the same bits.
  (let ((e (model:load (encoder-file "s1-pico" :q8_0))))
    (dolist (n '(1 7 64))
      (let* ((ids (token-sequence n :seed 4))
             (all (model:encode e ids))
             (mean (model:encode e ids :pooling :mean))
             (want (make-array (array-dimension all 1) :element-type 'single-float)))
        (dotimes (j (length want))
          (setf (aref want j)
                (rontolisp::%double-to-single
                 (/ (loop for i below n sum (float (aref all i j) 1d0)) n))))
        (is (matrix-same-bits-p (make-array (list 1 (length want)) :element-type 'single-float
                                                                 :displaced-to mean)
                                (make-array (list 1 (length want)) :element-type 'single-float
                                                                 :displaced-to want))
            "~D tokens" n)))))

(test scratch-calibration-records-each-product-input
  ;; The maxima are taken from the scratch matrix a product reads, at the
  ;; moment it reads it: they must be those of the fresh-array pass.
  (let* ((e (model:load (encoder-file "s1-pico" :f32)))
         (ids (token-sequence 30 :seed 6))
         (want (make-hash-table :test 'equal))
         (got (let ((model::*channel-maxima* (make-hash-table :test 'equal)))
                (model:encode e (token-sequence 9 :seed 2)) ; another count first
                (clrhash model::*channel-maxima*)
                (model:encode e ids)
                model::*channel-maxima*)))
    (fresh-arrays-encode
     e ids :note (lambda (i key x)
                   (let ((m (make-array (array-dimension x 1) :element-type 'single-float
                                                              :initial-element 0.0)))
                     (dotimes (r (array-dimension x 0))
                       (dotimes (c (length m))
                         (setf (aref m c) (max (aref m c) (abs (aref x r c))))))
                     (setf (gethash (model::layer-matrix-name i key) want) m))))
    (is (= (hash-table-count want) (hash-table-count got)))
    (maphash (lambda (name m)
               (is (equalp m (gethash name got)) "~A: other maxima recorded" name))
             want)))
