;;;; model.lisp - the ModernBERT encoder of a modern-bert GGUF file: MODEL:LOAD
;;;; reads its tensors and hyper-parameters, MODEL:ENCODE runs the forward
;;;; pass of doc/encoder.md (llama.cpp's src/models/modern-bert.cpp) on token ids,
;;;; and `rontolisp calibrate' names its outliers (`rontolisp embed' is embed.lisp).
;;;;
;;;; Lisp drives the graph; every product, normalization, rotation and
;;;; attention is a C kernel, so the encoder gives the same bits on every
;;;; path and thread count because the kernels do.  The operands are checked
;;;; once per encode (at load and on entry), then each layer is a handful of
;;;; primitive calls writing into the encode's scratch (model-scratch.lisp);
;;;; every weight product goes through VEC:MATMUL-INTO.  Weights stay as the file
;;;; holds them (Q8_0 over the mapped bytes, F16/BF16 packed), except the
;;;; token embedding, which is read row by row and so is widened once.

(in-package "MODEL")

(defstruct (encoder (:constructor make-encoder) (:predicate encoder-p))
  "A loaded modern-bert encoder: the hyper-parameters read from the file's
keys, the token embedding (single-float, vocab x d), the norms and one
plist of weights per layer, and the cache of scratch buffers its encodes
work in (lisp/model/model-scratch.lisp), its tokenizer once asked for
(lisp/model/tokenizer.lisp) and its decision head, if the file has one
(lisp/model/decision.lisp)."
  path file hyperparameters token-embedding token-norm output-norm layers
  (scratch (make-scratch-cache))
  (tokenizer nil)
  (decision nil))

(document-functions
  model:encoder-p "True when X is an encoder loaded by MODEL:LOAD."
  encoder-path "The path ENCODER was loaded from, as MODEL:LOAD was given it."
  encoder-file "The GGUF file object ENCODER was read from (closed once loaded): its
metadata and tensor table."
  encoder-token-embedding "ENCODER's token embedding, a single-float vocab x d matrix."
  encoder-layers "ENCODER's layers, one plist of weights each, first layer first."
  encoder-tokenizer "ENCODER's tokenizer once MODEL:TOKENIZE or TOKENIZER-OF has read it,
else NIL.")

(defun hyperparameters (encoder)
  "The hyper-parameters of ENCODER as a plist: :layers :embedding-length
:heads :head-dim :feed-forward-length :eps :rope-theta :rope-theta-swa
:sliding-window :sliding-window-pattern :context-length :vocab-size."
  (unless (model:encoder-p encoder)
    (element-type-error 'model:hyperparameters encoder
                        "expected an encoder from model:load, found ~S" encoder))
  (encoder-hyperparameters encoder))

(defmethod print-object ((e model:encoder) stream)
  (print-unreadable-object (e stream :type t)
    (let ((h (encoder-hyperparameters e)))
      (format stream "~A ~D layers d=~D" (encoder-path e)
              (getf h :layers) (getf h :embedding-length)))))

(defmethod describe-object ((e model:encoder) stream)
  ;; A summary, not the slots: those hold every weight array (megabytes of
  ;; text for the smallest model).
  (let* ((f (encoder-file e))
         (infos (and (gguf:gguf-file-p f) (gguf:tensor-infos f)))
         (types (let ((counts '()))
                  (dolist (ti infos (nreverse counts))
                    (let ((entry (assoc (gguf:tensor-info-type ti) counts :test #'string=)))
                      (if entry
                          (incf (cdr entry))
                          (push (cons (gguf:tensor-info-type ti) 1) counts))))))
         (head (encoder-decision e)))
    (format stream "~&~S~%  A ModernBERT encoder read by model:load from ~A.~%" e (encoder-path e))
    (format stream "  Hyper-parameters:~{~%    ~(~A~) ~A~}~%"
            (loop for (key value) on (encoder-hyperparameters e) by #'cddr
                  collect key collect (if (floatp value) (float-text value) value)))
    (when infos
      (format stream "  Tensors: ~D, ~,1F MiB (~{~{~D ~A~}~^, ~})~%"
              (length infos)
              (/ (reduce #'+ infos :key #'gguf:tensor-info-bytes) 1048576.0)
              (mapcar (lambda (c) (list (cdr c) (car c))) types)))
    (format stream "  Tokenizer: ~:[not read yet~;read~]~%" (encoder-tokenizer e))
    (format stream "  Decision head: ~:[none~;~:*~D question type~:P~]~%"
            (and head (length (decision-head-types head))))
    (values)))

;;; Reading the file.

(defun model-key (f path key &key (type 'integer) (default nil default-p))
  "The value of the modern-bert.KEY of F; signals MODEL-ERROR when it is
absent (and has no DEFAULT) or not of TYPE."
  (let ((full (concatenate 'string "modern-bert." key)))
    (multiple-value-bind (value gtype found) (gguf:value f full)
      (declare (ignore gtype))
      (cond ((not found)
             (if default-p
                 default
                 (model-error path "expected the key ~S, found none" full)))
            ((typep value type) value)
            (t (model-error path "key ~S: expected ~(~A~), found ~S" full type value))))))

(defun key-error (path key expected value)
  "Signal MODEL-ERROR: the modern-bert.KEY of the file PATH holds VALUE,
where EXPECTED (a phrase) was wanted."
  (model-error path "key \"modern-bert.~A\": expected ~A, found ~S" key expected value))

(defun count-key (f path key &key (min 1) (default nil default-p))
  "The integer modern-bert.KEY of F (DEFAULT when absent, if given),
checked to lie from MIN to the largest fixnum; MODEL-ERROR otherwise."
  (let ((value (if default-p
                   (model-key f path key :type t :default default)
                   (model-key f path key :type t))))
    (unless (typep value `(integer ,min ,most-positive-fixnum))
      (key-error path key (format nil "an integer from ~D to ~D" min most-positive-fixnum)
                 value))
    value))

(defun real-key (f path key low high &key low-open)
  "The real modern-bert.KEY of F as a single-float, checked to lie in
[LOW, HIGH) (in (LOW, HIGH) with LOW-OPEN); MODEL-ERROR otherwise, NaN and
infinities included."
  (let ((value (model-key f path key :type t)))
    (unless (and (realp value)
                 (not (and (floatp value)
                           (or (ext:float-nan-p value) (ext:float-infinity-p value))))
                 (if low-open (< low value) (<= low value))
                 (< value high))
      (key-error path key (format nil "a real from ~:[~;above ~]~A to below ~A" low-open low high)
                 value))
    (coerce value 'single-float)))

(defun find-tensor-info (f name)
  "The TENSOR-INFO of F's tensor NAME, or NIL: one lookup in F's table of
tensors by name, so that loading stays linear in the number of tensors."
  (car (gethash name (tensor-table f))))

(defun model-tensor (f path name dims)
  "F's tensor NAME, checked to have the row-major DIMS; MODEL-ERROR when it
is missing or of another shape."
  (let ((shape (gguf:tensor-info-shape (model-tensor-info f path name))))
    (unless (equal shape dims)
      (model-error path "tensor ~S: expected shape ~S, found ~S" name dims shape))
    (gguf:tensor f name)))

(defun model-tensor-info (f path name)
  "The TENSOR-INFO of F's tensor NAME; MODEL-ERROR when F has none."
  (or (find-tensor-info f name)
      (model-error path "expected the tensor ~S, found none" name)))

(defun encoder-layer-count (f path)
  "The encoder's layers: block_count less the decision head's blocks, which
continue the numbering after the encoder's."
  (let ((blocks (count-key f path "block_count"))
        (head (count-key f path "decision.block_count" :min 0 :default 0)))
    (unless (< head blocks)
      (key-error path "decision.block_count"
                 (format nil "an integer below block_count ~D" blocks) head))
    (- blocks head)))

(defun feed-forward-length (f path layers)
  "feed_forward_length: one integer, or one per block; the encoder's layers
must agree (the GeGLU's half), and it is at least 1."
  (let* ((v (model-key f path "feed_forward_length" :type '(or integer vector)))
         (ff (if (integerp v)
                 v
                 (let ((enc (subseq v 0 (min layers (length v)))))
                   (unless (and (= (length enc) layers)
                                (every (lambda (x) (eql x (aref enc 0))) enc))
                     (key-error path "feed_forward_length"
                                (format nil "one length for the ~D encoder layers" layers) v))
                   (aref enc 0)))))
    (unless (typep ff `(integer 1 ,most-positive-fixnum))
      (key-error path "feed_forward_length"
                 (format nil "an integer from 1 to ~D" most-positive-fixnum) v))
    ff))

(defun read-hyperparameters (f path)
  (let ((arch (gguf:value f "general.architecture")))
    (unless (equal arch "modern-bert")
      (model-error path "expected general.architecture \"modern-bert\", found ~S" arch)))
  (let* ((layers (encoder-layer-count f path))
         (d (count-key f path "embedding_length"))
         (heads (count-key f path "attention.head_count"))
         (window (count-key f path "attention.sliding_window" :min 0 :default 0))
         ;; A base below 1 makes the rotation faster the higher the pair, up
         ;; to angles beyond single-float range (NaN sines): meaningless.
         (theta (real-key f path "rope.freq_base" 1 most-positive-single-float)))
    (unless (and (zerop (mod d heads)) (evenp (floor d heads)))
      (key-error path "attention.head_count"
                 (format nil "a divisor of embedding_length ~D leaving an even head size" d)
                 heads))
    (list :layers layers :embedding-length d :heads heads :head-dim (floor d heads)
          :feed-forward-length (feed-forward-length f path layers)
          ;; Zero divides a constant row by zero; 1 or more drowns the variance.
          :eps (real-key f path "attention.layer_norm_epsilon" 0 1 :low-open t)
          :rope-theta theta
          ;; llama.cpp's loader reads the local theta only with a window.
          :rope-theta-swa (if (plusp window)
                              (real-key f path "rope.freq_base_swa" 1 most-positive-single-float)
                              theta)
          :sliding-window window
          :sliding-window-pattern (if (plusp window)
                                      (count-key f path "attention.sliding_window_pattern"
                                                 :default 3)
                                      1)
          :context-length (count-key f path "context_length")
          :vocab-size (first (gguf:tensor-info-shape
                              (model-tensor-info f path "token_embd.weight"))))))

(defun embedding-as-single (data)
  "DATA as a single-float array: F16/BF16 widened, Q8_0 dequantized."
  (cond ((or (float16-array-p data) (bfloat16-array-p data)) (half-array-to-single data))
        ((quantized-matrix-p data) (dequantize data))
        (t data)))

(defun simple-single (data)
  "DATA (a tensor of the file) as a simple single-float array of its
dimensions, the form the kernels read norms and the embedding table in."
  (let ((a (embedding-as-single data)))
    (if (typep a '(simple-array single-float))
        a
        (let ((copy (make-array (array-dimensions a) :element-type 'single-float)))
          (dotimes (i (array-total-size a) copy)
            (setf (row-major-aref copy i) (coerce (row-major-aref a i) 'single-float)))))))

(defun load (source &key quantize calibration)
  "The modern-bert encoder of SOURCE, a GGUF file's path (the first shard
of a llama-gguf-split set stands for the set) or a file object of
GGUF:READ or GGUF:MAKE-FILE: the hyper-parameters from its keys
(block_count less decision.block_count, embedding_length, head_count,
layer_norm_epsilon, rope.freq_base for global layers and rope.freq_base_swa
for local ones, attention.sliding_window and its pattern,
feed_forward_length, context_length) and the encoder's tensors (F32, F16,
BF16, Q8_0, Q4_0..Q5_1, Q2_K..Q6_K, IQ4_NL or IQ4_XS; the quantized ones
stay the file's bytes, each type's products run on them, doc/encoder.md); when decision.block_count is above 0, the decision head too
(its modern-bert.decision.* keys and tensors, doc/decision.md), which
MODEL:DECIDE runs and MODEL:ENCODE ignores.  A missing or malformed key or
tensor signals MODEL:MODEL-ERROR naming the file; so does a key whose value
is meaningless (a count or length below 1, a head count that does not split
embedding_length into even heads, an epsilon outside (0, 1), a rotary base
below 1), naming the key, the range expected and the value found.

QUANTIZE :q8_0 quantizes the encoder matrices (F32, F16 or BF16 in the file)
in memory, keeping each matrix's outlier input columns (doc/outliers.md) out of the
int8 product: y = Q8_0(W without them) x + W[:, outliers] x[outliers] in
f32, the same bits on every path and thread count (model-quantize.lisp).
CALIBRATION names the outliers: a calibration file's path (`rontolisp
calibrate') or MODEL:CALIBRATE's list, one vector per encoder matrix; without
it the file is calibrated in memory first (MODEL:CALIBRATE, a few seconds
for small models).  An unknown QUANTIZE signals UNKNOWN-FORMAT-ERROR, a
calibration that does not fit TENSOR-DATA-ERROR."
  (let* ((f (if (gguf:gguf-file-p source) source (gguf:read source :shards t)))
         (path (or (gguf:path f) "(in-memory GGUF file)"))
         (h (read-hyperparameters f path))
         (d (getf h :embedding-length))
         (ff (getf h :feed-forward-length))
         (decision (load-decision-head f path h)))
    (flet ((tensor (name dims) (model-tensor f path name dims))
           (blk (i s) (format nil "blk.~D.~A" i s)))
      (quantize-encoder
       (make-encoder
       :path path :file f :hyperparameters h :decision decision
       :token-embedding (simple-single (tensor "token_embd.weight"
                                               (list (getf h :vocab-size) d)))
       :token-norm (simple-single (tensor "token_embd_norm.weight" (list d)))
       :output-norm (simple-single (tensor "output_norm.weight" (list d)))
       :layers (loop for i below (getf h :layers)
                     collect (list :attn-norm (and (or (plusp i)
                                                       (find-tensor-info f (blk i "attn_norm.weight")))
                                                   (simple-single
                                                    (tensor (blk i "attn_norm.weight") (list d))))
                                   :qkv (tensor (blk i "attn_qkv.weight") (list (* 3 d) d))
                                   :out (tensor (blk i "attn_output.weight") (list d d))
                                   :ffn-norm (simple-single
                                              (tensor (blk i "ffn_norm.weight") (list d)))
                                   :up (tensor (blk i "ffn_up.weight") (list (* 2 ff) d))
                                   :down (tensor (blk i "ffn_down.weight") (list d ff)))))
       quantize calibration))))

;;; The forward pass.

(defmacro kernel-call (fn form)
  "FORM, a call of a kernel primitive answering its output or (values nil
status message); signal for the status in the latter case."
  (let ((r (gensym)) (st (gensym)) (msg (gensym)))
    `(multiple-value-bind (,r ,st ,msg) ,form
       (or ,r (kernel-failure ,fn ,st ,msg)))))

(defun check-token-ids (encoder ids &optional (where 'model:encode))
  "IDS as a list of integers, or an error naming what is wrong and WHERE
the ids came from (by default, the caller of MODEL:ENCODE)."
  (let* ((h (encoder-hyperparameters encoder))
         (vocab (getf h :vocab-size))
         (ctx (getf h :context-length)))
    (unless (and (typep ids 'sequence) (not (stringp ids)))
      (element-type-error where ids "expected a sequence of token ids, found ~S" ids))
    (let ((ids (if (listp ids) ids (coerce ids 'list))))
      (when (null ids)
        (shape-error where '(1) '(0) "expected at least one token id, found none"))
      (unless (typep (list-length ids) 'fixnum)
        (element-type-error where ids "expected a proper list of token ids, found ~S" ids))
      (when (> (length ids) ctx)
        (shape-error where (list ctx) (list (length ids))
                     "expected at most context_length = ~D tokens, found ~D" ctx (length ids)))
      (loop for id in ids for pos fixnum from 0
            unless (and (typep id 'fixnum) (< -1 id vocab))
              do (index-error where "expected token ids from 0 to ~D, found ~S at ~
position ~D" (1- vocab) id pos))
      ids)))

;;; Every matrix product of the forward pass goes through LAYER-PRODUCT, so
;;; that calibration sees the activations of the very pass that encodes.

(defvar *channel-maxima* nil
  "While MODEL:CALIBRATE runs, a hash table from a weight matrix's tensor
name to the max |x| per input channel its products have seen; NIL otherwise.")

(defun layer-matrix-name (i key)
  "The tensor name of the matrix KEY (:qkv, :out, :up, :down) of layer I."
  (format nil "blk.~D.~A" i (ecase key
                              (:qkv "attn_qkv.weight") (:out "attn_output.weight")
                              (:up "ffn_up.weight") (:down "ffn_down.weight"))))

(defun record-channel-maxima (name x)
  "Raise the maxima recorded for NAME to the column-wise max |x| of the
n x d single-float matrix X."
  (let* ((d (array-dimension x 1))
         (maxima (or (gethash name *channel-maxima*)
                     (setf (gethash name *channel-maxima*)
                           (make-array d :element-type 'single-float :initial-element 0.0)))))
    (dotimes (i (array-dimension x 0))
      (dotimes (j d)
        (setf (aref maxima j) (max (aref maxima j) (abs (aref x i j))))))))

(defun layer-product (layer key i x out activations)
  "The product of the matrix KEY of LAYER (layer I) with the rows of X,
stored in OUT, recording X's channel maxima when calibrating."
  (when *channel-maxima*
    (record-channel-maxima (layer-matrix-name i key) x))
  (vec:matmul-into (getf layer key) x out :activations activations))

(defun step-description (layer step)
  "The words for the encoder's STEP (a keyword) of LAYER (NIL outside the
layers) in a message: the product or step, and the tensor it used."
  (flet ((blk (suffix) (format nil "blk.~D.~A" layer suffix)))
    (ecase step
      (:token-embd "the rows of token_embd.weight")
      (:token-norm "the LayerNorm by token_embd_norm.weight")
      (:output-norm "the LayerNorm by output_norm.weight")
      (:attn-norm (format nil "the LayerNorm by ~A" (blk "attn_norm.weight")))
      ((:qkv :up) (format nil "the product by ~A" (layer-matrix-name layer step)))
      ((:out :down) (format nil "the product by ~A plus the residual"
                            (layer-matrix-name layer step)))
      (:rope "the rotary embedding of q and k (rope.freq_base)")
      (:attention "the attention")
      (:ffn-norm (format nil "the LayerNorm by ~A" (blk "ffn_norm.weight")))
      (:geglu "the GeGLU")
      ;; the decision head's (lisp/model/decision.lisp)
      (:head-input "the hidden states plus the row of token_types.weight")
      ((:head-out :head-down) (format nil "the product by ~A plus its bias"
                                      (layer-matrix-name layer (if (eq step :head-out) :out :down))))
      (:head-up (format nil "the product by ~A, its bias and the activation"
                        (layer-matrix-name layer :up)))
      (:residual "the residual sum")
      (:cls "the product by cls.weight, its bias and the GELU")
      (:cls-norm "the LayerNorm by cls.norm.weight")
      (:logits "the product by cls.output.weight plus its bias"))))

(defun report-non-finite (path layer steps)
  "Signal MODEL-ERROR about the file PATH naming the first of STEPS,
(step-1 m-1 ...) as CHECKED-STEP takes them, whose output M holds a NaN
or an infinity (one of them does)."
  (loop for (step m) on steps by #'cddr
        for at = (%first-non-finite m 0)
        when at
          do (multiple-value-bind (token column) (floor at (array-dimension m 1))
               (model-error path "~@[layer ~D, ~]~A: expected finite hidden states, ~
found ~A at token ~D, column ~D" layer (step-description layer step)
                                   (float-text (row-major-aref m at)) token column))))

(defmacro checked-step ((fn path layer &rest steps) form)
  "FORM, a call of a step's primitive that tests its output as it writes
it (%LAYER-NORM, %LAYER-NORM-BIAS, %BIAS-ACT, %GEGLU, %ADD-INTO,
%ATTENTION, %ATTENTION-ROWS): it answers (values output non-finite-p), or
(values nil status message), for which KERNEL-FAILURE signals naming FN.
STEPS, (step-1 m-1 step-2 m-2 ...), are the outputs M of steps (keywords
of STEP-DESCRIPTION) of LAYER (NIL outside the layers) in the order they
ran, each the input of the next, the last FORM's output.  When that holds
a NaN or an infinity, signal MODEL-ERROR about the file PATH naming the
first step whose output holds one: a non-finite value reaches every later
step's output, so the last step of a run stands for the run, and only a
failing check scans the others.  A macro, so that a check that passes
conses no list of its steps.  The Ms are variables (evaluated twice).
Answers the output."
  (let ((r (gensym "R")) (flag (gensym "FLAG")) (msg (gensym "MSG")))
    `(multiple-value-bind (,r ,flag ,msg) ,form
       (cond ((null ,r) (kernel-failure ,fn ,flag ,msg))
             (,flag (report-non-finite ,path ,layer (list ,@steps))))
       ,r)))

(defun encoder-layer (s layer i heads hd eps theta window activations gelu path)
  "One encoder layer of doc/encoder.md (layer I, its weights the plist LAYER, its
rotary base THETA and attention WINDOW, 0 for global) on the hidden states
in the X of the scratch S, left there; the other matrices of S hold the
layer's intermediates.  The input of every product and the result are
checked to be finite, so a NaN or infinity is reported (MODEL-ERROR about
the file PATH) by the step that made it."
  (let* ((x (encode-scratch-x s)) (a (encode-scratch-a s)) (qkv (encode-scratch-qkv s))
         (q (encode-scratch-q s)) (k (encode-scratch-k s)) (v (encode-scratch-v s))
         (att (encode-scratch-att s)) (ffn-in (encode-scratch-ffn-in s))
         (up (encode-scratch-up s)) (gate (encode-scratch-gate s))
         (down (encode-scratch-down s))
         (norm (getf layer :attn-norm)))
    (when norm
      (checked-step ('model:encode path i :attn-norm a) (%layer-norm x norm eps a)))
    (layer-product layer :qkv i (if norm a x) qkv activations)
    (kernel-call 'model:encode (%qkv-rope qkv q k v heads hd theta))
    (checked-step ('model:encode path i :qkv qkv :rope q :rope k :attention att)
      (%attention q k v heads hd window att))
    (%add-into ffn-in (layer-product layer :out i att ffn-in activations) x)
    (checked-step ('model:encode path i :out ffn-in :ffn-norm a)
      (%layer-norm ffn-in (getf layer :ffn-norm) eps a))
    (layer-product layer :up i a up activations)
    (checked-step ('model:encode path i :up up :geglu gate) (%geglu up (eq gelu :tanh) gate))
    (checked-step ('model:encode path i :down x)
      (%add-into x (layer-product layer :down i gate down activations) ffn-in))))

(defmacro with-encoder-scratch ((var encoder n) &body body)
  "Run BODY with VAR bound to a scratch of ENCODER's pool set to N rows
(model-scratch.lisp): made, when none is free, for the longest question
of ENCODER's decision head (decision.max_tokens, at most context_length)
or N tokens, whichever is more."
  (let ((e (gensym "ENCODER")) (h (gensym "H")))
    `(let* ((,e ,encoder) (,h (encoder-hyperparameters ,e)))
       (with-encode-scratch (,var (encoder-scratch ,e) ,n (scratch-capacity ,e)
                                  (getf ,h :embedding-length) (getf ,h :feed-forward-length))
         ,@body))))

(defun scratch-capacity (encoder)
  "The rows a new scratch of ENCODER is made for at least: its decision
head's decision.max_tokens (at most context_length), or 1 without a head."
  (let ((head (encoder-decision encoder)))
    (if head
        (min (decision-head-max-tokens head)
             (getf (encoder-hyperparameters encoder) :context-length))
        1)))

(defvar *layer-hook* nil
  "NIL, or a function MODEL:ENCODE calls after each encoder layer with the
layer's index, the scratch matrix holding its output (the hidden states
before the output norm) and the sequence's token count, its rows in use:
`eval --svg' takes each layer's error this way.  The matrix is reused
afterwards: a hook keeps a copy.")

(defun encode-layers (encoder ids s activations gelu)
  "The embeddings and the layers of ENCODER on the token IDS (checked, a
list or a fixnum vector) in the scratch S (set to their count): the hidden
states before the output norm are left in S's X."
  (let* ((h (encoder-hyperparameters encoder))
         (eps (getf h :eps))
         (path (encoder-path encoder))
         (x (encode-scratch-x s)) (a (encode-scratch-a s)))
    (%gather-rows (encoder-token-embedding encoder) ids a)
    (checked-step ('model:encode path nil :token-embd a :token-norm x)
      (%layer-norm a (encoder-token-norm encoder) eps x))
    (stage-mark :embed)
    ;; The hyper-parameters read once: GETF checks the whole plist.
    (let ((heads (getf h :heads)) (hd (getf h :head-dim))
          (pattern (getf h :sliding-window-pattern)) (window (getf h :sliding-window))
          (theta (getf h :rope-theta)) (theta-swa (getf h :rope-theta-swa)))
      (loop for layer in (encoder-layers encoder) for i fixnum from 0
            for global = (zerop (mod i pattern))
            do (encoder-layer s layer i heads hd eps (if global theta theta-swa)
                              (if (or global (not (plusp window))) 0 window)
                              activations gelu path)
               (stage-mark i)
               (let ((hook *layer-hook*))
                 (when hook (funcall hook i x (length ids))))))
    x))

(defun matrix-row (m i)
  "Row I of the n x d single-float matrix M as a fresh d-vector."
  (let* ((d (array-dimension m 1))
         (row (make-array d :element-type 'single-float)))
    (replace row (make-array (array-total-size m) :element-type 'single-float :displaced-to m)
             :start2 (* i d))))

(defun pool (hidden pooling)
  "The n x d hidden states HIDDEN pooled as POOLING says: :none, HIDDEN
itself; :cls, the first row; :last, the last; :mean, the mean of the rows."
  (destructuring-bind (n d) (array-dimensions hidden)
    (ecase pooling
      (:none hidden)
      (:cls (matrix-row hidden 0))
      (:last (matrix-row hidden (1- n)))
      (:mean (let ((out (make-array d :element-type 'single-float)))
               ;; Typed, so that the sums are not boxed doubles, one per value.
               (dotimes (j d out)
                 (setf (aref out j)
                       (%double-to-single (/ (mean-column-sum hidden n j) n)))))))))

(defun mean-column-sum (hidden n j)
  "The sum in double-float of column J of the N rows of HIDDEN, row 0 first."
  (declare (type (simple-array single-float (* *)) hidden) (type fixnum n j)
           (optimize speed))
  (let ((sum 0d0))
    (declare (type double-float sum))
    (dotimes (i n sum)
      (incf sum (float (aref hidden i j) 1d0)))))

(defun encode (encoder token-ids &key (pooling :none) (activations :q8) (gelu :erf))
  "The final hidden states of ENCODER (from MODEL:LOAD) for the sequence
TOKEN-IDS (integers from 0 below the vocabulary size, at most
context_length of them): with POOLING :none an n x d (simple-array
single-float (* *)), with :mean the mean of the rows, with :cls the first
row and with :last the last (llama.cpp's LAST pooling), each a d-vector.
ACTIVATIONS (:q8 or :q8x2, doc/products.md §2) is how Q8_0 weights see the
activations; GELU :erf is the exact GELU of the
Hugging Face model, :tanh llama.cpp's tanh approximation.  The graph is
doc/encoder.md.  Signals INDEX-ERROR for an id out of range, SHAPE-ERROR for no
tokens or more than context_length, and MODEL:MODEL-ERROR when a hidden
state is a NaN or an infinity (hostile weights), naming the layer and the
product or step that made it.

The intermediates live in scratch matrices ENCODER keeps and reuses for
any token count up to the rows they were made for (model-scratch.lisp);
the result is always fresh.  Several threads may
encode with one encoder at once: each encode takes a scratch no other is
using."
  (unless (model:encoder-p encoder)
    (element-type-error 'model:encode encoder "expected an encoder from model:load, found ~S"
                        encoder))
  (unless (member pooling '(:none :mean :cls :last))
    (rontolisp-error 'model:encode "expected pooling :none, :mean, :cls or :last, found ~S"
                     pooling))
  (unless (member activations '(:q8 :q8x2))
    (rontolisp-error 'model:encode "expected activations :q8 or :q8x2, found ~S" activations))
  (unless (member gelu '(:erf :tanh))
    (rontolisp-error 'model:encode "expected gelu :erf or :tanh, found ~S" gelu))
  (let* ((ids (check-token-ids encoder token-ids))
         (n (length ids))
         (h (encoder-hyperparameters encoder))
         (d (getf h :embedding-length))
         (eps (getf h :eps))
         (path (encoder-path encoder)))
    (with-encoder-scratch (s encoder n)
      (encode-layers encoder ids s activations gelu)
      ;; Only the result is fresh: it must outlive the scratch.
      (let ((out (if (eq pooling :none)
                     (make-array (list n d) :element-type 'single-float)
                     (encode-scratch-a s))))
        (checked-step ('model:encode path nil :output-norm out)
          (%layer-norm (encode-scratch-x s) (encoder-output-norm encoder) eps out))
        (pool out pooling)))))

;;; Calibration (doc/outliers.md): max |x| per input channel of every encoder
;;; matrix, from the f32 model over built-in sequences.

(defun calibration-sequences (h)
  "The built-in calibration token sequences for hyper-parameters H: lengths
1, 2, 3, around the sliding window and up to context_length, cycled until
every token id of the vocabulary has appeared (ids in a fixed stride
order coprime to the vocabulary size), deterministic."
  (let* ((vocab (getf h :vocab-size))
         (ctx (getf h :context-length))
         (window (getf h :sliding-window))
         (lengths (remove-duplicates
                   (remove-if-not (lambda (n) (<= 1 n ctx))
                                  (list 1 2 3 (1- window) window (1+ window)
                                        (+ (* 2 window) 1) ctx))))
         (stride (loop for s from 7919 when (= 1 (gcd s vocab)) return s))
         (next 0))
    (loop for k from 0
          for n = (nth (mod k (length lengths)) lengths)
          while (or (< next vocab) (< k (length lengths)))
          collect (loop repeat n
                        collect (mod (* stride next) vocab)
                        do (incf next)))))

(defun as-f32-layer (layer)
  "LAYER with every weight matrix widened or dequantized to single-float."
  (loop for (key value) on layer by #'cddr
        append (list key (if (member key '(:qkv :out :up :down))
                             (embedding-as-single value)
                             value))))

(defun calibrate (source &key progress)
  "The calibration of the encoder of SOURCE (what MODEL:LOAD takes), its
weights used as f32 whatever their type: a list of (tensor-name .
magnitudes), one per encoder matrix in layer order, MAGNITUDES a
single-float vector of max |x| per input channel over the products the
forward pass made on the built-in calibration sequences (doc/outliers.md).
With PROGRESS, each sequence run is shown on stderr when it is a terminal."
  (let* ((encoder (model:load source))
         (f32 (copy-encoder encoder))
         (*channel-maxima* (make-hash-table :test 'equal))
         (sequences (calibration-sequences (encoder-hyperparameters encoder)))
         (report (progress-reporter (if progress (length sequences) 0))))
    (setf (encoder-layers f32) (mapcar #'as-f32-layer (encoder-layers encoder))
          (encoder-scratch f32) (make-scratch-cache))
    (loop for ids in sequences
          for done from 1
          do (model:encode f32 ids)
             (funcall report done (format nil "calibrating: a sequence of ~D token~:P" (length ids))))
    (loop for i below (length (encoder-layers encoder))
          append (loop for key in '(:qkv :out :up :down)
                       for name = (layer-matrix-name i key)
                       collect (cons name (gethash name *channel-maxima*))))))
