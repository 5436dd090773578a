;;;; embed.lisp - `rontolisp embed': token ids or text through the encoder
;;;; of a GGUF file (model.lisp), pooled and normalized as llama.cpp's
;;;; llama-embedding does it, printed as text or JSON.

(in-package "MODEL")

;;; What `rontolisp embed' runs.

(defun embedding-rows (result)
  "The rows of an encode result (a matrix or one pooled vector) as vectors."
  (if (= 1 (array-rank result))
      (vector result)
      (coerce (loop for i below (array-dimension result 0) collect (matrix-row result i))
              'vector)))

(defparameter *pooling-types* '((0 . :none) (1 . :mean) (2 . :cls) (3 . :last) (4 . :rank))
  "llama.cpp's pooling types (modern-bert.pooling_type) by number.")

(defun file-pooling (encoder)
  "The pooling ENCODER's file names in modern-bert.pooling_type, as
llama.cpp takes it: :none when the key is absent; rank (4), which needs a
classifier head, or another number is a MODEL-ERROR."
  (let* ((n (model-key (encoder-file encoder) (encoder-path encoder) "pooling_type"
                       :type 'integer :default 0))
         (pooling (cdr (assoc n *pooling-types*))))
    (unless (member pooling '(:none :mean :cls :last))
      (key-error (encoder-path encoder) "pooling_type"
                 "0 (none), 1 (mean), 2 (cls) or 3 (last); --pooling chooses another" n))
    pooling))

(defun normalize-embedding (v norm)
  "The single-float vector V scaled as llama.cpp's common_embd_normalize
scales an embedding (llama-embedding --embd-normalize NORM): -1 not at all,
0 so that its largest magnitude is 32760 (an int16 range), 2 to unit
Euclidean length, another P to unit P-norm (1: taxicab).  The same
arithmetic: the sum in double (squares in single-float for 2), the scale
1/sum rounded to single-float, each element times it in single-float; a
sum of 0, or one that overflows (infinite there), scales by 0
(doc/command-line.md §6)."
  (declare (type (simple-array single-float (*)) v))
  (let* ((sum (handler-case
                  (case norm
                    (-1 1d0)
                    (0 (/ (loop for x across v maximize (float (abs x) 1d0)) 32760d0))
                    (2 (sqrt (loop for x across v sum (float (* x x) 1d0) of-type double-float)))
                    (t (expt (loop for x across v
                                   sum (expt (float (abs x) 1d0) (float norm 1d0))
                                     of-type double-float)
                             (/ 1d0 norm))))
                (floating-point-overflow () nil)))
         (scale (if (and sum (> sum 0d0)) (%double-to-single (/ 1d0 sum)) 0.0)))
    (map '(simple-array single-float (*)) (lambda (x) (* x scale)) v)))
