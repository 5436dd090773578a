;;;; model-scratch.lisp - the buffers one MODEL:ENCODE or MODEL:DECIDE works
;;;; in: every intermediate matrix of a layer (normed input, QKV, Q, K, V,
;;;; attention, FFN input, up, GeGLU, down, the hidden states) and, for a
;;;; decision, the head's (lisp/model/decision.lisp), allocated for a
;;;; number of rows (the scratch's capacity) and reused for any token count
;;;; up to it: before a pass, %SET-MATRIX-ROWS makes every matrix n rows
;;;; over the same storage, so that a pass conses nothing but its result.
;;;;
;;;; Each encoder owns a small pool of scratches.  A pass takes a scratch
;;;; out of the pool (under the pool's lock) and gives it back when it
;;;; returns or unwinds, so two threads working with the same encoder at
;;;; once never share one: the second finds none free and makes its own.
;;;; A scratch is made for the longest question the model's decision head
;;;; takes (decision.max_tokens) or for the sequence at hand, whichever is
;;;; longer, and replaced by a larger one only when a longer sequence
;;;; comes.  The pool keeps at most +SCRATCH-CACHE-ENTRIES+ scratches and
;;;; +SCRATCH-CACHE-FLOATS+ floats in all; a scratch larger than that is
;;;; never kept.

(in-package "MODEL")

(defstruct (encode-scratch (:constructor %make-encode-scratch))
  "The CAPACITY x cols single-float matrices of an encode, each N rows
long for the pass at hand: X the hidden states, A the normed input of a
product, QKV, Q, K, V, ATT the attention's output, FFN-IN the
feed-forward's input, UP, GATE (the GeGLU) and DOWN; ROWS, a simple vector
of them all (what %SET-MATRIX-ROWS takes); FLOATS, their storage; HEAD,
the decision head's scratch once a decision has used this one (NIL
before); QUESTION, a question's text, ids and markers once MODEL:DECIDE
has used it (a QUESTION-SCRATCH, NIL before)."
  (capacity 0 :type fixnum) (n 0 :type fixnum) (floats 0 :type fixnum)
  x a qkv q k v att ffn-in up gate down rows (head nil) (question nil))

(defstruct (question-scratch (:constructor %make-question-scratch))
  "Where MODEL:DECIDE makes a question's text and finds its tokens, kept
with an encode scratch so that each thread has its own: TEXT the rendered
question (an adjustable string), IDS its token ids and MARKERS the
positions of its options' markers (adjustable fixnum vectors), each with
a fill pointer and grown only for a longer question; RENDER the
template's kept loop frames (TEXT:MAKE-RENDER-SCRATCH)."
  text ids markers render)

(defun question-scratch-of (s)
  "The QUESTION-SCRATCH of the encode scratch S, made the first time."
  (or (encode-scratch-question s)
      (setf (encode-scratch-question s)
            (flet ((fixnums (n) (make-array n :element-type 'fixnum :adjustable t :fill-pointer 0)))
              (%make-question-scratch
               :text (make-array 1024 :element-type 'character :adjustable t :fill-pointer 0)
               :ids (fixnums (max 16 (encode-scratch-capacity s))) :markers (fixnums 16)
               :render (make-render-scratch))))))

(defun set-scratch-rows (s n)
  "Set every matrix of the encode scratch S to N rows (at most its
capacity)."
  (%set-matrix-rows (encode-scratch-rows s) n)
  (setf (encode-scratch-n s) n)
  s)

(defun make-encode-scratch (capacity d ff)
  "A scratch for up to CAPACITY tokens of an encoder of width D and
feed-forward length FF, its matrices CAPACITY rows long."
  (flet ((m (cols) (make-array (list capacity cols) :element-type 'single-float)))
    (let ((s (%make-encode-scratch
              :capacity capacity :n capacity :floats (* capacity (+ (* 9 d) (* 3 ff)))
              :x (m d) :a (m d) :qkv (m (* 3 d)) :q (m d) :k (m d) :v (m d)
              :att (m d) :ffn-in (m d) :up (m (* 2 ff)) :gate (m ff) :down (m d))))
      (setf (encode-scratch-rows s)
            (vector (encode-scratch-x s) (encode-scratch-a s) (encode-scratch-qkv s)
                    (encode-scratch-q s) (encode-scratch-k s) (encode-scratch-v s)
                    (encode-scratch-att s) (encode-scratch-ffn-in s) (encode-scratch-up s)
                    (encode-scratch-gate s) (encode-scratch-down s)))
      s)))

(defconstant +scratch-cache-entries+ 4
  "The most scratches an encoder keeps between passes.")

(defconstant +scratch-cache-floats+ (* 32 1024 1024)
  "The most single-floats (4 octets each) an encoder's kept scratches hold
in all.")

(defstruct (scratch-cache (:constructor make-scratch-cache ()))
  "The free scratches of one encoder (FREE, a simple vector of
+SCRATCH-CACHE-ENTRIES+ slots, NIL where none) and the lock that guards
them.  A vector, not a list: taking and giving back cons nothing."
  (lock (mp:make-lock :name "encoder scratch"))
  (free (make-array +scratch-cache-entries+ :initial-element nil) :type simple-vector))

(defun take-scratch (cache n capacity d ff)
  "A scratch of at least N rows (width D, feed-forward length FF) that no
one else uses, its matrices set to N rows: one of CACHE's, removed from
it, or a fresh one of max(N, CAPACITY) rows.  A free scratch too short for
N is dropped, so that the pool holds the longer one once it is given
back."
  (let ((s (mp:with-lock ((scratch-cache-lock cache))
             (let ((free (scratch-cache-free cache)))
               (dotimes (i (length free) nil)
                 (let ((s (svref free i)))
                   (when s
                     (setf (svref free i) nil)
                     (when (>= (encode-scratch-capacity s) n)
                       (return s)))))))))
    (set-scratch-rows (or s (make-encode-scratch (max n capacity) d ff)) n)))

(defun give-back-scratch (cache scratch)
  "Return SCRATCH to CACHE: into a free slot when the pool's floats stay
within +SCRATCH-CACHE-FLOATS+, else it is dropped."
  (mp:with-lock ((scratch-cache-lock cache))
    (let ((free (scratch-cache-free cache)) (floats (encode-scratch-floats scratch)))
      (dotimes (i (length free))
        (when (svref free i)
          (incf floats (encode-scratch-floats (svref free i)))))
      (when (<= floats +scratch-cache-floats+)
        (let ((slot (position nil free)))
          (when slot
            (setf (svref free slot) scratch))))))
  nil)

(defmacro with-encode-scratch ((var cache n capacity d ff) &body body)
  "Run BODY with VAR bound to a scratch of CACHE of N rows (at least
CAPACITY made, width D, feed-forward length FF), given back to CACHE when
BODY returns or unwinds."
  (let ((c (gensym "CACHE")))
    `(let* ((,c ,cache) (,var (take-scratch ,c ,n ,capacity ,d ,ff)))
       (unwind-protect (progn ,@body)
         (give-back-scratch ,c ,var)))))
