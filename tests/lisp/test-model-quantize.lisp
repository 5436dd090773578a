;;;; test-model-quantize.lisp - int8 that keeps its accuracy on a model with
;;;; massive channels (doc/outliers.md): `convert --type q8_0 --outlier-aware' writes
;;;; the outlier-aware scales of its own calibration as plain Q8_0 that
;;;; llama.cpp loads, and MODEL:LOAD :quantize :q8_0 quantizes an F16/F32
;;;; file in memory with the outlier columns kept in f32.  On s1-nano with 4
;;;; massive channels both are closer to the F32 model than plain Q8_0.

(in-package "RONTOLISP-TESTS")

(def-suite model-quantize :in all
  :description "Outlier-aware Q8_0 files and quantize-at-load.")
(in-suite model-quantize)

(defvar *massive-files* (make-hash-table :test 'equal)
  "Encoder-only s1-nano files with 4 massive channels, written once per run
by `rontolisp convert', keyed by their extra arguments.")

(defun massive-file (&rest args)
  "The path of `convert --random s1-nano --encoder-only --massive 4' with
ARGS (such as \"--type\" \"q8_0\" \"--outlier-aware\"), written on first use."
  (or (gethash args *massive-files*)
      (let ((path (tmp-path (format nil "nano-massive~{~A~}.gguf" args))))
        (multiple-value-bind (code out err)
            (run-exe (append (list "convert" "--random" "s1-nano" path "--encoder-only"
                                   "--massive" "4")
                             args))
          (unless (eql code 0)
            (error "convert ~{~A~^ ~} failed (~A): ~A~A" args code out err)))
        (setf (gethash args *massive-files*) path))))

(defun tensor-bytes (f name)
  (copy-seq (gguf:tensor-octets f name)))

;;; `convert --type q8_0 --outlier-aware'.

(test convert-outlier-aware-writes-its-calibration-scales
  "Every encoder matrix holds QUANTIZE :outliers of the F32 model's values
with the columns OUTLIER-COLUMNS picks from MODEL:CALIBRATE of the F32
model; every other tensor is byte for byte plain --type q8_0's."
  (let* ((f32 (massive-file "--type" "f32"))
         (plain (massive-file "--type" "q8_0"))
         (aware (massive-file "--type" "q8_0" "--outlier-aware"))
         (calibration (model:calibrate f32))
         (changed 0))
    (is (= 16 (length calibration)))
    (gguf:with-file (s f32)
      (gguf:with-file (p plain)
        (gguf:with-file (a aware)
          (is (equal (gguf:tensor-names p) (gguf:tensor-names a)))
          (is (equal (mapcar #'gguf:tensor-info-type (gguf:tensor-infos p))
                     (mapcar #'gguf:tensor-info-type (gguf:tensor-infos a))))
          (dolist (name (gguf:tensor-names a))
            (let ((entry (assoc name calibration :test #'string=)))
              (if entry
                  (let ((want (rontolisp:quantize (gguf:tensor s name) 'q8-0
                                                  :outliers (rontolisp:outlier-columns
                                                             (cdr entry)))))
                    (is (equalp (rontolisp:quantized-matrix-octets want) (tensor-bytes a name))
                        "~A: not the outlier-aware quantization of its calibration" name)
                    (unless (equalp (tensor-bytes p name) (tensor-bytes a name))
                      (incf changed)))
                  (is (equalp (tensor-bytes p name) (tensor-bytes a name))
                      "~A: differs from plain q8_0" name)))))))
    ;; The massive channels feed the attention and MLP inputs of every layer.
    (is (>= changed 8) "only ~D encoder matrices changed" changed)))

(test convert-outlier-aware-loads-in-llama-cpp
  "llama.cpp's loader reads the outlier-aware file, and its encoder agrees
with ours on it as it does on plain Q8_0 files."
  (let* ((aware (massive-file "--type" "q8_0" "--outlier-aware"))
         (ids (token-sequence 40 :vocab 2048))
         (ref (llama-or-skip aware (list ids))))
    (when ref
      (let ((ours (model:encode (model:load aware) ids :gelu :tanh)))
        (is (equal (array-dimensions ours) (array-dimensions (cdr (first ref)))))
        (multiple-value-bind (rel cos) (relative-error ours (cdr (first ref)))
          (format t "~&  s1-nano --massive 4 outlier-aware Q8_0 vs llama.cpp: max difference ~
~,3e of the largest, cosine ~,8F~%" rel cos)
          (is (< rel 2d-2) "max difference ~,3e of the largest" rel))))))

(test convert-outlier-aware-wants-q8_0
  (multiple-value-bind (code out err)
      (run-exe (list "convert" "--random" "s1-pico" (tmp-path "never.gguf") "--type" "f16"
                     "--outlier-aware"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "--outlier-aware goes with --type q8_0"))))

;;; MODEL:LOAD :quantize :q8_0.

(defun planted-matrix (rows cols outliers &key (seed 11))
  "A ROWS x COLS single-float matrix of small pseudo-random values with the
columns OUTLIERS 30 times larger."
  (let ((m (make-array (list rows cols) :element-type 'single-float)) (s seed))
    (dotimes (i rows m)
      (dotimes (j cols)
        (setf s (mod (+ (* s 1103515245) 12345) 2147483648))
        (setf (aref m i j) (* (if (member j outliers) 30.0 1.0)
                              (- (/ (float s 1.0) 2147483648.0) 0.5)))))))

(defun double-product (w xs)
  "XS times W transposed, in double-float: the exact reference."
  (let ((out (make-array (list (array-dimension xs 0) (array-dimension w 0))
                         :element-type 'double-float)))
    (dotimes (tt (array-dimension xs 0) out)
      (dotimes (r (array-dimension w 0))
        (setf (aref out tt r)
              (loop for j below (array-dimension w 1)
                    sum (* (float (aref w r j) 1d0) (float (aref xs tt j) 1d0))))))))

(defun max-difference (a b)
  (loop for i below (array-total-size a)
        maximize (abs (- (float (row-major-aref a i) 1d0) (float (row-major-aref b i) 1d0)))))

(test outlier-matrix-product-is-int8-part-plus-f32-columns
  "The product of a weight quantized at load is, bit for bit, the int8
product of the weights and activations without the outlier columns plus the
f32 product of those columns, and it is far closer to the exact product
than plain Q8_0 when the activations carry massive channels."
  (let* ((cols '(3 40 77)) (w (planted-matrix 48 96 '()))
         (xs (planted-matrix 5 96 cols :seed 5))
         (m (model::split-weight w cols))
         (zw (planted-matrix 48 96 '())) (zx (planted-matrix 5 96 cols :seed 5))
         (wo (make-array '(48 3) :element-type 'single-float))
         (xo (make-array '(5 3) :element-type 'single-float)))
    (loop for c in cols for k from 0
          do (dotimes (r 48) (setf (aref wo r k) (aref w r c) (aref zw r c) 0.0))
             (dotimes (tt 5) (setf (aref xo tt k) (aref xs tt c) (aref zx tt c) 0.0)))
    (is (typep m 'vec::outlier-matrix))
    (dolist (act '(:q8 :q8x2))
      (let ((want (vec:matmul (rontolisp:quantize zw 'q8-0) zx :activations act))
            (f32 (vec:matmul wo xo)))
        (dotimes (i (array-total-size want))
          (incf (row-major-aref want i) (row-major-aref f32 i)))
        (is (equalp want (vec:matmul m xs :activations act)) "~A" act)
        (let ((out (make-array '(5 48) :element-type 'single-float)))
          (is (eq out (vec:matmul-into m xs out :activations act)))
          (is (equalp want out)))
        (let* ((exact (double-product w xs))
               (split (max-difference (vec:matmul m xs :activations act) exact))
               (plain (max-difference (vec:matmul (rontolisp:quantize w 'q8-0) xs
                                                  :activations act)
                                      exact)))
          (is (< split (/ plain 2)) "~A: split ~,3e, plain ~,3e" act split plain))))
    ;; No outlier column: a plain quantized matrix.
    (is (rontolisp:quantized-matrix-p (model::split-weight w '())))
    ;; The int8 product's conditions, for the outlier columns too, naming
    ;; the value; OUT is left as it was.
    (setf (aref xs 2 40) ext:single-float-negative-infinity)
    (signals rontolisp:non-finite-error (vec:matmul m xs))
    (let ((out (make-array '(5 48) :element-type 'single-float :initial-element 7.0)))
      (handler-case (progn (vec:matmul-into m xs out) (is nil "no error"))
        (rontolisp:non-finite-error (e)
          (is (equal '(2 40) (rontolisp:non-finite-error-index e)))))
      (is (every (lambda (v) (= v 7.0))
                 (make-array 240 :element-type 'single-float :displaced-to out))))
    (setf (aref xs 2 40) 1.0 (aref xs 3 10) ext:single-float-positive-infinity)
    (handler-case (progn (vec:matmul m xs) (is nil "no error"))
      (rontolisp:non-finite-error (e)
        (is (equal '(3 10) (rontolisp:non-finite-error-index e)))))
    ;; a block whose scale overflows binary16, outside the outlier columns
    (setf (aref xs 3 10) 1e30)
    (handler-case (progn (vec:matmul m xs) (is nil "no error"))
      (rontolisp:scale-overflow-error (e)
        (is (equal '(3 0) (list (rontolisp:scale-overflow-error-row e)
                                (rontolisp:scale-overflow-error-block e))))))
    (setf (aref xs 3 10) 1.0)
    ;; the primitive refuses columns out of order or range
    (dolist (bad (list (make-array 3 :element-type 'fixnum :initial-contents '(40 3 77))
                       (make-array 3 :element-type 'fixnum :initial-contents '(3 40 96))
                       (vector 3 40 77)))
      (signals rontolisp:rontolisp-error
        (vec::%outlier-matmul (vec::outlier-matrix-quantized m) bad
                                    (vec::outlier-matrix-weights m) xs
                                    (make-array '(5 48) :element-type 'single-float) nil)))
    (setf (aref xs 2 40) (coerce (rontolisp:f16-value #x7e00) 'single-float))
    (signals rontolisp:non-finite-error (vec:matmul m xs))
    (signals rontolisp:shape-error (vec:matmul m (planted-matrix 5 64 '())))
    (signals rontolisp:unknown-format-error (vec:matmul m zx :activations :q4))))

(defvar *massive-encoders* (make-hash-table :test 'equal)
  "Encoders of the massive-channel files, loaded once per run.")

(defun massive-encoder (key)
  "The encoder of KEY: :f32, :q8_0, :outlier-aware (files) or :load (the F32
file quantized at load)."
  (or (gethash key *massive-encoders*)
      (setf (gethash key *massive-encoders*)
            (ecase key
              (:f32 (model:load (massive-file "--type" "f32")))
              (:q8_0 (model:load (massive-file "--type" "q8_0")))
              (:outlier-aware (model:load (massive-file "--type" "q8_0" "--outlier-aware")))
              (:load (model:load (massive-file "--type" "f32") :quantize :q8_0))))))

(defparameter *error-sequences*
  (list (token-sequence 40 :vocab 2048) (token-sequence 150 :vocab 2048 :seed 11))
  "The token sequences the error figures are taken over.")

(defun max-error-against-f32 (key activations)
  (loop for ids in *error-sequences*
        maximize (command-line::hidden-state-error
                  (model:encode (massive-encoder key) ids :activations activations)
                  (model:encode (massive-encoder :f32) ids))))

(test outlier-aware-and-quantize-at-load-beat-plain-q8_0
  "On s1-nano with 4 massive channels, both ways of keeping the outliers are
closer to the F32 model than plain Q8_0, with either activations, over two
sequences of 40 and 150 tokens.  (With :q8 activations the outlier-aware
file's lead on the worst token is thin: `rontolisp eval' shows 3 of the 14
calibration sequences where it trails plain Q8_0.  Quantize-at-load leads on
every one.)"
  (dolist (act '(:q8 :q8x2))
    (let ((plain (max-error-against-f32 :q8_0 act))
          (aware (max-error-against-f32 :outlier-aware act))
          (load (max-error-against-f32 :load act)))
      (format t "~&  s1-nano --massive 4, ~(~A~): max |error| against F32: Q8_0 ~,3e, ~
outlier-aware Q8_0 ~,3e, quantize-at-load ~,3e~%" act plain aware load)
      (is (< aware plain) "~A: outlier-aware ~,3e, plain ~,3e" act aware plain)
      (is (< load plain) "~A: quantize-at-load ~,3e, plain ~,3e" act load plain))))

(test quantize-at-load-same-bits-on-every-path-and-thread-count
  (check-same-bits-on-every-path (massive-encoder :load) (token-sequence 70 :vocab 2048)
                                 :thread-counts '(1 2 3)))

(test quantize-at-load-calibration-file-or-memory
  "A calibration file of `rontolisp calibrate', MODEL:CALIBRATE's list and
no calibration at all give the same weights, so the same bits; an F16 file
quantizes at load too."
  (let ((f32 (massive-file "--type" "f32")) (cal (tmp-path "massive.cal.gguf"))
        (ids (token-sequence 30 :vocab 2048)))
    (unwind-protect
         (progn
           (is (= 0 (run-exe (list "calibrate" f32 cal))))
           (let ((want (model:encode (massive-encoder :load) ids)))
             (is (equalp want (model:encode (model:load f32 :quantize :q8_0 :calibration cal)
                                            ids)))
             (is (equalp want (model:encode (model:load f32 :quantize :q8_0
                                                            :calibration (model:calibrate f32))
                                            ids))))
           (let* ((f16 (massive-file "--type" "f16"))
                  (e (model:load f16 :quantize :q8_0 :calibration cal)))
             (is (typep (getf (first (model::encoder-layers e)) :qkv)
                        'vec::outlier-matrix))
             (is (< (command-line::hidden-state-error (model:encode e ids)
                                                   (model:encode (massive-encoder :f32) ids))
                    (command-line::hidden-state-error (model:encode (massive-encoder :q8_0) ids)
                                                   (model:encode (massive-encoder :f32) ids))))))
      (ignore-errors (delete-file cal)))))

(test quantize-at-load-signals-on-bad-input
  (let* ((f32 (massive-file "--type" "f32"))
         (good (model:calibrate f32))
         (cal (tmp-path "bad.cal.gguf")))
    (signals rontolisp:unknown-format-error (model:load f32 :quantize :q4_0))
    (signals rontolisp:unknown-format-error (model:load f32 :quantize t))
    ;; A vector of the wrong length, an unknown name, a missing matrix.
    (signals rontolisp:tensor-data-error
      (model:load f32 :quantize :q8_0
                      :calibration (cons (cons (car (first good)) (subseq (cdr (first good)) 1))
                                         (rest good))))
    (signals rontolisp:tensor-data-error
      (model:load f32 :quantize :q8_0
                      :calibration (cons (cons "blk.9.attn_qkv.weight" (cdr (first good))) good)))
    (signals rontolisp:tensor-data-error
      (model:load f32 :quantize :q8_0 :calibration (rest good)))
    (signals rontolisp:element-type-error
      (model:load f32 :quantize :q8_0 :calibration 42))
    ;; The same as a file: the calibration of s1-pico for s1-nano.
    (unwind-protect
         (progn
           (is (= 0 (run-exe (list "calibrate" (encoder-file "s1-pico" :f32) cal))))
           (handler-case (progn (model:load f32 :quantize :q8_0 :calibration cal)
                                (fail "a calibration of s1-pico loaded for s1-nano"))
             (rontolisp:tensor-data-error (c)
               (is (contains (rontolisp:rontolisp-error-message c) "expected 128")
                   "~A" (rontolisp:rontolisp-error-message c)))))
      (ignore-errors (delete-file cal)))
    ;; Q8_0 weights cannot be quantized again.
    (signals model:model-error (model:load (massive-file "--type" "q8_0") :quantize :q8_0
                                                                          :calibration good))))
