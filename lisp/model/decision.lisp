;;;; decision.lisp - the Laya decision head of a modern-bert GGUF file
;;;; (doc/decision.md): MODEL:LOAD reads it beside the encoder, and its
;;;; forward pass scores the options' marker rows of a token sequence
;;;; (MODEL:DECIDE-IDS).  Questions, their rendering and MODEL:DECIDE are
;;;; question.lisp's.
;;;;
;;;; The head runs on the encoder's final hidden states: the first rows plus
;;;; the question type's embedding, PyTorch nn.TransformerEncoderLayer
;;;; blocks (no mask, no positions), then a scorer on the rows of the
;;;; options' [MASK] tokens.  As in the encoder, Lisp drives and every
;;;; product, norm, attention and activation is a C kernel, so a decision
;;;; gives the same bits on every path and thread count.

(in-package "MODEL")

(defstruct (decision-head (:constructor make-decision-head))
  "A loaded decision head: its settings from the modern-bert.decision.*
keys (question TYPES, a vector of strings; HEADS; ACTIVATION :relu or
:gelu; NORM-FIRST; EPS; MAX-HEAD-TOKENS; MAX-TOKENS; TEMPERATURES, a list
of (type low high temperature) in key order; MASK-ID), the type embedding
rows (one d-vector per type), one plist of weights per block (FIRST, the
GGUF block index of the first) and the scorer's tensors; TEMPLATE, the
file's chat template compiled on first use (CHAT-TEMPLATE), and
TEXT-LIMIT, the longest text a question may render to, found on first use
(RENDERED-TEXT-LIMIT)."
  types heads activation norm-first eps max-head-tokens max-tokens temperatures mask-id
  type-rows blocks first cls cls-bias cls-norm cls-norm-bias cls-output cls-output-bias
  (template nil) (text-limit nil))

;;; Reading the keys.

(defun decision-key (f path key &key (type t) (default nil default-p))
  "The value of modern-bert.decision.KEY of F, as MODEL-KEY reads it."
  (if default-p
      (model-key f path (concatenate 'string "decision." key) :type type :default default)
      (model-key f path (concatenate 'string "decision." key) :type type)))

(defun question-type-name-p (x)
  "True for a question type's name: a non-empty string without a dot (the
dot separates it from N in a temperature key)."
  (and (stringp x) (plusp (length x)) (not (find #\. x))))

(defun temperature-suffix (key)
  "The part of the GGUF key KEY after modern-bert.decision.temperature.,
or NIL for another key."
  (let ((prefix "modern-bert.decision.temperature."))
    (and (> (length key) (length prefix)) (string= prefix key :end2 (length prefix))
         (subseq key (length prefix)))))

(defun parse-temperature-suffix (suffix)
  "SUFFIX, TYPE.N or TYPE.LO_HI, as (values type low high), or NIL when it
is neither (LO above HI included)."
  (let ((dot (position #\. suffix :from-end t)))
    (when (and dot (plusp dot))
      (let* ((range (subseq suffix (1+ dot)))
             (bar (position #\_ range))
             (low (parse-count (subseq range 0 bar)))
             (high (if bar (parse-count (subseq range (1+ bar))) low)))
        (when (and low high (<= low high))
          (values (subseq suffix 0 dot) low high))))))

(defun parse-count (s)
  "The non-negative integer the decimal digits S spell, or NIL."
  (and (plusp (length s)) (<= (length s) 9) (every #'digit-char-p s) (parse-integer s)))

(defun read-temperatures (f path)
  "The temperature keys of F as a list of (type low high temperature), in
key order; a key that is not TYPE.N or TYPE.LO_HI or a value that is not
a finite positive real signals MODEL-ERROR naming it."
  (loop for key in (gguf:keys f)
        for suffix = (temperature-suffix key)
        when suffix
          collect (multiple-value-bind (type low high) (parse-temperature-suffix suffix)
                    (unless type
                      (model-error path "key ~S: expected a name TYPE.N or TYPE.LO_HI ~
(LO <= HI), found the suffix ~S" key suffix))
                    (list type low high
                          (real-key f path (subseq key (length "modern-bert.")) 0
                                    most-positive-single-float :low-open t)))))

(defun read-question-types (f path temperatures rows)
  "The question types of F: decision.question_types, else (older files)
the types of the TEMPERATURES in key order, each once.  At most ROWS (the
rows of token_types.weight), each a non-empty string without a dot, none
twice; MODEL-ERROR otherwise."
  (let* ((key "decision.question_types")
         (given (decision-key f path "question_types" :type t :default nil))
         (types (cond ((null given)
                       (let ((seen '()))
                         (dolist (entry temperatures (coerce (reverse seen) 'vector))
                           (pushnew (first entry) seen :test #'string=))))
                      ((and (vectorp given) (not (stringp given))
                            (every #'question-type-name-p given)
                            (= (length given)
                               (length (remove-duplicates given :test #'string=))))
                       given)
                      (t (key-error path key "an array of distinct type names (non-empty ~
strings without a dot)" given)))))
    (when (> (length types) rows)
      (key-error path key (format nil "at most ~D types (the rows of token_types.weight)" rows)
                 types))
    types))

(defun read-activation (f path)
  (let ((value (decision-key f path "activation" :default "relu")))
    (cond ((equal value "relu") :relu)
          ((equal value "gelu") :gelu)
          (t (key-error path "decision.activation" "\"relu\" or \"gelu\"" value)))))

(defun read-mask-id (f path vocab)
  "tokenizer.ggml.mask_token_id of F, an id below VOCAB; MODEL-ERROR
otherwise."
  (multiple-value-bind (value type found) (gguf:value f "tokenizer.ggml.mask_token_id")
    (declare (ignore type))
    (unless (and found (typep value 'fixnum) (< -1 value vocab))
      (model-error path "key \"tokenizer.ggml.mask_token_id\": expected a token id from ~
0 to ~D (the options' markers), found ~:[none~;~:*~A~]" (1- vocab) (and found (json-brief value))))
    value))

;;; Reading the tensors.

(defun tensor-rows (f path name)
  "The first dimension of F's tensor NAME (row-major), which must be a
matrix; MODEL-ERROR otherwise."
  (let ((shape (gguf:tensor-info-shape (model-tensor-info f path name))))
    (unless (and (= 2 (length shape)) (plusp (first shape)))
      (model-error path "tensor ~S: expected a matrix of at least one row, found shape ~S"
                          name shape))
    (first shape)))

(defun load-head-block (f path i d)
  "The weights of the head block I (blk.I.*) of width D as a plist."
  (flet ((tensor (s dims) (model-tensor f path (format nil "blk.~D.~A" i s) dims))
         (vector (s n) (simple-single (model-tensor f path (format nil "blk.~D.~A" i s) (list n)))))
    (let ((ff (tensor-rows f path (format nil "blk.~D.ffn_up.weight" i)))
          (qkv-bias (vector "attn_qkv.bias" (* 3 d))))
      (list :ff ff
            :qkv (tensor "attn_qkv.weight" (list (* 3 d) d))
            :qkv-bias qkv-bias
            ;; the biases of q, k and v apart, for the last block's
            ;; products of a part of attn_qkv (HEAD-BLOCK)
            :q-bias (subseq qkv-bias 0 d) :k-bias (subseq qkv-bias d (* 2 d))
            :v-bias (subseq qkv-bias (* 2 d))
            :out (tensor "attn_output.weight" (list d d))
            :out-bias (vector "attn_output.bias" d)
            :up (tensor "ffn_up.weight" (list ff d))
            :up-bias (vector "ffn_up.bias" ff)
            :down (tensor "ffn_down.weight" (list d ff))
            :down-bias (vector "ffn_down.bias" d)
            :attn-norm (vector "attn_norm.weight" d) :attn-norm-bias (vector "attn_norm.bias" d)
            :ffn-norm (vector "ffn_norm.weight" d) :ffn-norm-bias (vector "ffn_norm.bias" d)))))

(defun cls-output-matrix (f path d)
  "F's cls.output.weight as the 1 x D matrix the scorer multiplies by.  A
file may hold it as ggml dims [D, 1] or, as llama-quantize writes a tensor
whose trailing dims are 1, [D]: the same tensor to ggml, here widened to a
1 x D single-float matrix (exactly, so the product's bits are those of the
float path either way).  A rank-1 quantized one is a MODEL-ERROR."
  (let ((name "cls.output.weight"))
    (if (equal (gguf:tensor-info-shape (model-tensor-info f path name)) (list d))
        (let ((v (model-tensor f path name (list d))))
          (when (quantized-matrix-p v)
            (model-error path "tensor ~S: expected a float type for a rank-1 ~
cls.output.weight, found ~A" name (gguf:tensor-info-type (model-tensor-info f path name))))
          (let ((m (f32-matrix 1 d)) (w (simple-single v)))
            (dotimes (j d m) (setf (aref m 0 j) (aref w j)))))
        (model-tensor f path name (list 1 d)))))

(defun load-decision-head (f path h)
  "The decision head of F (read from PATH) for the encoder of
hyper-parameters H, or NIL when decision.block_count is 0 or absent.
Every key and tensor is checked as MODEL:LOAD checks the encoder's."
  (let ((blocks (count-key f path "decision.block_count" :min 0 :default 0))
        (d (getf h :embedding-length))
        (first (getf h :layers)))
    (when (plusp blocks)
      (let* ((heads (count-key f path "decision.head_count" :default (getf h :heads)))
             (rows (tensor-rows f path "token_types.weight"))
             (token-types (simple-single (model-tensor f path "token_types.weight" (list rows d))))
             (temperatures (read-temperatures f path))
             (types (read-question-types f path temperatures rows)))
        (unless (zerop (mod d heads))
          (key-error path "decision.head_count"
                     (format nil "a divisor of embedding_length ~D" d) heads))
        (make-decision-head
         :types types :heads heads :activation (read-activation f path)
         :norm-first (let ((v (decision-key f path "norm_first" :default nil)))
                       (unless (member v '(t nil))
                         (key-error path "decision.norm_first" "true or false" v))
                       v)
         :eps (if (nth-value 2 (gguf:value f "modern-bert.decision.layer_norm_epsilon"))
                  (real-key f path "decision.layer_norm_epsilon" 0 1 :low-open t)
                  1f-5)
         :max-head-tokens (count-key f path "decision.max_head_tokens")
         :max-tokens (count-key f path "decision.max_tokens")
         :temperatures temperatures
         :mask-id (read-mask-id f path (getf h :vocab-size))
         :type-rows (loop for r below (length types) collect (matrix-row token-types r))
         :blocks (loop for i from first below (+ first blocks)
                       collect (load-head-block f path i d))
         :first first
         :cls (model-tensor f path "cls.weight" (list d d))
         :cls-bias (simple-single (model-tensor f path "cls.bias" (list d)))
         :cls-norm (simple-single (model-tensor f path "cls.norm.weight" (list d)))
         :cls-norm-bias (simple-single (model-tensor f path "cls.norm.bias" (list d)))
         :cls-output (cls-output-matrix f path d)
         :cls-output-bias (simple-single (model-tensor f path "cls.output.bias" (list 1))))))))

;;; The forward pass.

;; Called through their names, not directly from this file, so that a test
;; can count them: each runs once per question (test-decision.lisp).
(declaim (notinline head-of))

(defun head-of (model where)
  "MODEL's decision head; MODEL-ERROR when its file has none."
  (unless (model:encoder-p model)
    (element-type-error where model "expected an encoder from model:load, found ~S" model))
  (or (encoder-decision model)
      (model-error (encoder-path model) "expected a decision head ~
(modern-bert.decision.block_count above 0), found none")))

(defun f32-matrix (rows cols)
  (make-array (list rows cols) :element-type 'single-float))

(defstruct (head-scratch (:constructor %make-head-scratch))
  "The decision head's matrices in an encode scratch (model-scratch.lisp),
each CAPACITY rows of storage.  The m rows of the head's window: X the
head's hidden states, QKV, Q, K, V, ATT, OUT (attention's projection), A
(the normed input with norm-first), UPS (the feed-forward's, one per
block), DOWN; ROWS a vector of them.  The k rows of the options' markers,
all that the last block goes on with after attention: MX (its hidden
states, then its output), MQ, MATT, MOUT, MA, MUP, MDOWN, then the
scorer's CLS and LOGITS (k x 1); MARKER-ROWS a vector of them."
  (capacity 0 :type fixnum)
  x qkv q k v att out a ups down rows
  mx mq matt mout ma mup mdown cls logits marker-rows)

(defun make-head-scratch (head capacity d)
  "A head scratch for up to CAPACITY rows (window and markers) of HEAD,
of width D."
  (flet ((m (cols) (make-array (list capacity cols) :element-type 'single-float)))
    (let* ((blocks (decision-head-blocks head))
           (s (%make-head-scratch
               :capacity capacity
               :x (m d) :qkv (m (* 3 d)) :q (m d) :k (m d) :v (m d) :att (m d) :out (m d)
               :a (m d) :ups (map 'simple-vector (lambda (b) (m (getf b :ff))) blocks)
               :down (m d)
               :mx (m d) :mq (m d) :matt (m d) :mout (m d) :ma (m d)
               :mup (m (getf (car (last blocks)) :ff)) :mdown (m d) :cls (m d) :logits (m 1))))
      (setf (head-scratch-rows s)
            (concatenate 'simple-vector
                         (vector (head-scratch-x s) (head-scratch-qkv s) (head-scratch-q s)
                                 (head-scratch-k s) (head-scratch-v s) (head-scratch-att s)
                                 (head-scratch-out s) (head-scratch-a s) (head-scratch-down s))
                         (head-scratch-ups s))
            (head-scratch-marker-rows s)
            (vector (head-scratch-mx s) (head-scratch-mq s) (head-scratch-matt s)
                    (head-scratch-mout s) (head-scratch-ma s) (head-scratch-mup s)
                    (head-scratch-mdown s) (head-scratch-cls s) (head-scratch-logits s)))
      s)))

(defun head-scratch-of (s head m k d)
  "The head scratch of the encode scratch S, set to M window rows and K
marker rows: the one S keeps, or (the first time, or for more rows than
it holds) a new one of min(S's capacity, decision.max_head_tokens) rows
or M and K, whichever is more, kept in S."
  (let ((hs (encode-scratch-head s)))
    (unless (and hs (<= (max m k) (head-scratch-capacity hs)))
      (setf hs (make-head-scratch head (max m k (min (encode-scratch-capacity s)
                                                      (decision-head-max-head-tokens head)))
                                  d)
            (encode-scratch-head s) hs))
    (%set-matrix-rows (head-scratch-rows hs) m)
    (%set-matrix-rows (head-scratch-marker-rows hs) k)
    hs))

(defun head-block (head block i hs up activations path markers)
  "The head block I (weights BLOCK, UP its feed-forward matrix in the head
scratch HS) on the rows of HS's X: post-norm x = norm1(x + attn(x)), x =
norm2(x + ff(x)), or with norm-first x = x + attn(norm1(x)), x = x +
ff(norm2(x)).  With MARKERS NIL every row goes on and the output replaces
X.  With MARKERS (the last block), keys and values are made for every
row and the rest (queries, attention, its projection, the feed-forward,
the norms) for the marker rows only, the output in HS's MX, row r that of
marker r: the same arithmetic on the rows that are read (the queries
from attn_qkv's first d rows, VEC:MATMUL-ROWS-INTO), so the same bits as
the whole block's rows at MARKERS."
  (let* ((x (head-scratch-x hs)) (d (array-dimension x 1))
         (heads (decision-head-heads head)) (hd (floor d heads))
         (eps (decision-head-eps head)) (norm-first (decision-head-norm-first head))
         (q (head-scratch-q hs)) (k (head-scratch-k hs)) (v (head-scratch-v hs)))
    (flet ((ln (in key out)
             (checked-step ('model:decide path i key out)
               (%layer-norm-bias in (getf block key)
                                 (getf block (if (eq key :attn-norm)
                                                 :attn-norm-bias :ffn-norm-bias))
                                 eps out)))
           (linear (key in out act)
             (vec:matmul-into (getf block key) in out :activations activations)
             (checked-step ('model:decide path i (case key
                                                   (:out :head-out) (:down :head-down)
                                                   (:up :head-up) (t :qkv))
                                          out)
               (%bias-act out (getf block (ecase key
                                            (:qkv :qkv-bias) (:out :out-bias)
                                            (:up :up-bias) (:down :down-bias)))
                          act out)))
           (residual (a b)
             (checked-step ('model:decide path i :residual a) (%add-into a a b))))
      (let ((in (if norm-first (ln x :attn-norm (head-scratch-a hs)) x)))
        (if markers
            ;; Keys and values of every row, queries of the marker rows:
            ;; each a part of attn_qkv's rows with its part of the bias.
            (flet ((part (first in out bias)
                     (vec:matmul-rows-into (getf block :qkv) first d in out
                                           :activations activations)
                     (checked-step ('model:decide path i :qkv out)
                       (%bias-act out (getf block bias) :none out))))
              (part d in k :k-bias)
              (part (* 2 d) in v :v-bias)
              (%gather-rows in markers (head-scratch-ma hs))
              (part 0 (head-scratch-ma hs) (head-scratch-mq hs) :q-bias))
            (progn
              (linear :qkv in (head-scratch-qkv hs) :none)
              (kernel-call 'model:decide (%qkv-rope (head-scratch-qkv hs) q k v heads hd nil)))))
      (multiple-value-bind (rx att out a up down)
          (if markers
              (values (head-scratch-mx hs) (head-scratch-matt hs) (head-scratch-mout hs)
                      (head-scratch-ma hs) (head-scratch-mup hs) (head-scratch-mdown hs))
              (values x (head-scratch-att hs) (head-scratch-out hs) (head-scratch-a hs) up
                      (head-scratch-down hs)))
        (if markers
            (progn
              (%gather-rows x markers rx)
              (checked-step ('model:decide path i :attention att)
                (%attention-rows (head-scratch-mq hs) k v heads hd att)))
            (checked-step ('model:decide path i :attention att)
              (%attention q k v heads hd 0 att)))
        (linear :out att out :none)
        (flet ((feed-forward (in)
                 (linear :down (linear :up in up (decision-head-activation head)) down :none)))
          (if norm-first
              (progn
                (residual rx out)
                (stage-mark :head-attention)
                (residual rx (feed-forward (ln rx :ffn-norm a)))
                (stage-mark :head-ffn))
              (progn
                (ln (residual out rx) :attn-norm rx)
                (stage-mark :head-attention)
                (ln (residual (feed-forward rx) rx) :ffn-norm rx)
                (stage-mark :head-ffn))))
        rx))))

(defun check-markers (head markers n)
  "MARKERS, a list or fixnum vector of positions below N, each below the
head's window m = min(N, max_head_tokens); QUESTION-ERROR otherwise.
Answers m."
  (let ((m (min n (decision-head-max-head-tokens head))))
    (when (zerop (length markers))
      (question-error "expected at least one option marker, found none"))
    (dotimes (k (length markers))
      (let ((p (elt markers k)))
        (unless (and (typep p 'fixnum) (<= 0 p) (< p n))
          (question-error "expected marker positions from 0 to ~D, found ~A (option ~D)"
                          (1- n) (json-brief p) (1+ k)))
        (unless (< p m)
          (question-error "option ~D: expected its marker within the head's first ~D ~
tokens (decision.max_head_tokens), found it at position ~D" (1+ k) m p))))
    m))

(defun type-index (head type)
  "The index of the question TYPE among the head's types; QUESTION-ERROR
naming the known ones otherwise."
  (or (and (stringp type) (position type (decision-head-types head) :test #'string=))
      (question-error "expected a question type ~{~S~^, ~}, found ~A"
                      (coerce (decision-head-types head) 'list) (json-brief type))))

(defun decision-logits (model head ids markers type activations out)
  "The logits of the head of MODEL for the token IDS (a list), MARKERS
(positions) and question TYPE, one per marker, stored in OUT (a
single-float vector of that length) and answered.  Every intermediate
lives in a scratch of MODEL's pool (model-scratch.lisp): nothing is
consed."
  (with-encoder-scratch (s model (length ids))
    (copy-logits (scratch-logits model head s ids markers type activations) out)))

(defun scratch-logits (model head s ids markers type activations)
  "The logits of DECISION-LOGITS worked out in the encode scratch S (set
to the rows of IDS, a list or fixnum vector; MARKERS likewise), answered
as the head scratch's k x 1 matrix: valid until S is used again."
  (let* ((n (length ids))
         (ti (type-index head type))
         (m (check-markers head markers n))
         (k (length markers))
         (path (encoder-path model))
         (h (encoder-hyperparameters model))
         (d (getf h :embedding-length))
         (eps (getf h :eps)))
    (let ((hidden (encode-scratch-a s)))
      (checked-step ('model:encode path nil :output-norm hidden)
        (%layer-norm (encode-layers model ids s activations :erf) (encoder-output-norm model)
                     eps hidden))
      (stage-mark :output-norm)
      (let* ((hs (head-scratch-of s head m k d))
             (x (head-scratch-x hs)))
        (checked-step ('model:decide path nil :head-input x)
          (%bias-act hidden (nth ti (decision-head-type-rows head)) :none x))
        (stage-mark :head-input)
        (loop for (block . more) on (decision-head-blocks head)
              for i from (decision-head-first head)
              for up across (head-scratch-ups hs)
              do (head-block head block i hs up activations path (and (null more) markers)))
        (let ((rows (head-scratch-mx hs)) (c (head-scratch-cls hs))
              (logits (head-scratch-logits hs)))
          (vec:matmul-into (decision-head-cls head) rows c :activations activations)
          (checked-step ('model:decide path nil :cls c)
            (%bias-act c (decision-head-cls-bias head) :gelu c))
          (checked-step ('model:decide path nil :cls-norm c)
            (%layer-norm-bias c (decision-head-cls-norm head) (decision-head-cls-norm-bias head)
                              eps c))
          (vec:matmul-into (decision-head-cls-output head) c logits :activations activations)
          (checked-step ('model:decide path nil :logits logits)
            (%bias-act logits (decision-head-cls-output-bias head) :none logits))
          (stage-mark :cls)
          logits)))))

(defun copy-logits (logits out)
  "The k x 1 LOGITS into the k-vector OUT.  Typed, so that no float is
boxed on the way (an untyped AREF conses each one)."
  (declare (type (simple-array single-float (* *)) logits)
           (type (simple-array single-float (*)) out))
  (dotimes (r (length out) out)
    (setf (aref out r) (aref logits r 0))))

(defun temperature (head type options)
  "The temperature of questions of TYPE with OPTIONS options:
decision.temperature.TYPE.N, else the first TYPE.LO_HI with LO <= N <= HI
in key order, else 1.  Conses nothing."
  (flet ((find-entry (exact)
           (dolist (e (decision-head-temperatures head))
             (destructuring-bind (name low high temperature) e
               (when (and (string= name type)
                          (if exact (= low high options) (<= low options high)))
                 (return temperature))))))
    (or (find-entry t) (find-entry nil) 1f0)))

(defun softmax (logits temperature)
  "The softmax in double-float of LOGITS (a simple single-float vector) /
TEMPERATURE (the largest subtracted first), as a fresh single-float vector
(%SOFTMAX-INTO)."
  (%softmax-into logits (float temperature 1d0)
                 (make-array (length logits) :element-type 'single-float) nil))

(defun check-token-count (head n)
  "QUESTION-ERROR naming both numbers when N tokens are more than HEAD's
decision.max_tokens."
  (when (> n (decision-head-max-tokens head))
    (question-error "expected at most ~D tokens (decision.max_tokens), found ~D"
                    (decision-head-max-tokens head) n)))

(defun check-decide-ids (model head ids)
  "IDS as a list, at most decision.max_tokens of them (CHECK-TOKEN-COUNT;
other checks are MODEL:ENCODE's)."
  (declare (ignore model))
  (let ((ids (if (listp ids) ids (coerce ids 'list))))
    (check-token-count head (length ids))
    ids))

(defun decide-ids (model ids markers type &key (activations :q8))
  "The decision of MODEL's head on a question already tokenized: IDS (token
ids), MARKERS (the positions of the options' [MASK] tokens, in option
order) and TYPE (a question type of the head).  Answers the probabilities
and the logits, single-float vectors."
  (head-decide-ids model (head-of model 'model:decide) ids markers type activations))

(defun check-activations (activations)
  "ACTIVATIONS, :q8 or :q8x2; RONTOLISP-ERROR otherwise."
  (unless (member activations '(:q8 :q8x2))
    (rontolisp-error 'model:decide "expected activations :q8 or :q8x2, found ~S" activations)))

(defun head-decide-ids (model head ids markers type activations)
  "DECIDE-IDS with MODEL's decision HEAD already found."
  (let ((ids (check-decide-ids model head ids)))
    (check-activations activations)
    (let* ((logits (decision-logits model head ids markers type activations
                                    (make-array (length markers) :element-type 'single-float)))
           (probabilities (softmax logits (temperature head type (length markers)))))
      (stage-mark :softmax)
      (values probabilities logits))))

;;; What a question costs at the least (`bench --questions --breakdown').

(defun window-keys (n window)
  "The (query, key) pairs of attention over N tokens with the symmetric
WINDOW (0: every key), as the attention kernel ranges them."
  (if (zerop window)
      (* n n)
      (let ((half (floor window 2)))
        (loop for i below n sum (- (min n (+ i half 1)) (max 0 (- i half)))))))

(defun question-macs (model n k)
  "The multiply-adds of MODEL's forward pass (encoder and head) on a
question of N tokens and K options, as (values weight-macs other-macs):
those of the encoder's weight matrices (int8 products for Q8_0 weights),
and the rest (attention's scores and sums, the head's products, cls), in
single-float.  The head's last block counts keys and values for its m
rows and everything else for the K marker rows only: the work whose
result is read."
  (let* ((h (encoder-hyperparameters model))
         (head (head-of model 'question-macs))
         (d (getf h :embedding-length)) (ff (getf h :feed-forward-length))
         (pattern (getf h :sliding-window-pattern)) (window (getf h :sliding-window))
         (m (min n (decision-head-max-head-tokens head)))
         (blocks (decision-head-blocks head)))
    (values (* (getf h :layers) n (+ (* 4 d d) (* 3 ff d)))
            (+ (loop for i below (getf h :layers)
                     sum (* 2 d (window-keys n (if (zerop (mod i pattern)) 0 window))))
               (loop for (block . more) on blocks
                     for rows = (if more m k)
                     sum (+ (* 2 m d d) (* rows d d) (* 2 rows m d) (* rows d d)
                            (* 2 rows d (getf block :ff))))
               (* k (+ (* d d) d))))))
