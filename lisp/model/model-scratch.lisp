;;;; model-scratch.lisp - the buffers one MODEL:ENCODE works in: every
;;;; intermediate matrix of a layer (normed input, QKV, Q, K, V, attention,
;;;; FFN input, up, GeGLU, down, the hidden states), allocated once per token
;;;; count and reused, so that an encode allocates only its result.
;;;;
;;;; Each encoder owns a small cache of scratches keyed by token count.  An
;;;; encode takes a scratch out of the cache (under the cache's lock) and
;;;; gives it back when it returns or unwinds, so two threads encoding with
;;;; the same encoder at once never share one: the second finds none free
;;;; and makes its own.  The cache keeps at most +SCRATCH-CACHE-ENTRIES+
;;;; scratches and +SCRATCH-CACHE-FLOATS+ floats in all (the least recently
;;;; used go first); a scratch larger than that is never kept.

(in-package "MODEL")

(defstruct (encode-scratch (:constructor %make-encode-scratch))
  "The n x cols single-float matrices of one encode of N tokens: X the
hidden states, A the normed input of a product, QKV, Q, K, V, ATT the
attention's output, FFN-IN the feed-forward's input, UP, GATE (the GeGLU)
and DOWN."
  (n 0 :type fixnum) (floats 0 :type fixnum) x a qkv q k v att ffn-in up gate down)

(defun make-encode-scratch (n d ff)
  "A scratch for N tokens of an encoder of width D and feed-forward length FF."
  (flet ((m (cols) (make-array (list n cols) :element-type 'single-float)))
    (%make-encode-scratch :n n :floats (* n (+ (* 9 d) (* 3 ff)))
                          :x (m d) :a (m d) :qkv (m (* 3 d)) :q (m d) :k (m d) :v (m d)
                          :att (m d) :ffn-in (m d) :up (m (* 2 ff)) :gate (m ff) :down (m d))))

(defconstant +scratch-cache-entries+ 4
  "The most scratches an encoder keeps between encodes.")

(defconstant +scratch-cache-floats+ (* 32 1024 1024)
  "The most single-floats (4 octets each) an encoder's cached scratches hold
in all.")

(defstruct (scratch-cache (:constructor make-scratch-cache ()))
  "The free scratches of one encoder, most recently used first, and the
lock that guards the list."
  (lock (mp:make-lock :name "encoder scratch")) (free '()))

(defun take-scratch (cache n d ff)
  "A scratch for N tokens (width D, feed-forward length FF) that no one
else uses: one of CACHE's, removed from it, or a fresh one."
  (or (mp:with-lock ((scratch-cache-lock cache))
        (let ((s (find n (scratch-cache-free cache) :key #'encode-scratch-n)))
          (when s
            (setf (scratch-cache-free cache) (remove s (scratch-cache-free cache))))
          s))
      (make-encode-scratch n d ff)))

(defun give-back-scratch (cache scratch)
  "Return SCRATCH to CACHE, most recent first, dropping the oldest entries
beyond the cache's limits."
  (when (<= (encode-scratch-floats scratch) +scratch-cache-floats+)
    (mp:with-lock ((scratch-cache-lock cache))
      (let ((floats 0) (count 0))
        (setf (scratch-cache-free cache)
              (loop for s in (cons scratch (scratch-cache-free cache))
                    do (incf floats (encode-scratch-floats s)) (incf count)
                    while (and (<= count +scratch-cache-entries+)
                               (<= floats +scratch-cache-floats+))
                    collect s)))))
  nil)

(defmacro with-encode-scratch ((var cache n d ff) &body body)
  "Run BODY with VAR bound to a scratch of CACHE for N tokens (width D,
feed-forward length FF), given back to CACHE when BODY returns or unwinds."
  (let ((c (gensym "CACHE")))
    `(let* ((,c ,cache) (,var (take-scratch ,c ,n ,d ,ff)))
       (unwind-protect (progn ,@body)
         (give-back-scratch ,c ,var)))))
