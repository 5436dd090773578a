;;;; model.lisp - the ModernBERT encoder of a modern-bert GGUF file: MODEL:LOAD
;;;; reads its tensors and hyper-parameters, MODEL:ENCODE runs the forward
;;;; pass of SPEC 9 (llama.cpp's src/models/modern-bert.cpp) on token ids,
;;;; and `rontolisp embed' prints the result.
;;;;
;;;; Lisp drives the graph; every product, normalization, rotation and
;;;; attention is a VEC kernel, so the encoder gives the same bits on every
;;;; path and thread count because the kernels do.  Weights stay as the file
;;;; holds them (Q8_0 over the mapped bytes, F16/BF16 packed), except the
;;;; token embedding, which is read row by row and so is widened once.

(in-package "RONTOLISP")

(defstruct (model:encoder (:constructor make-encoder) (:predicate model:encoder-p))
  "A loaded modern-bert encoder: the hyper-parameters read from the file's
keys, the token embedding (single-float, vocab x d), the norms and one
plist of weights per layer."
  path file hyperparameters token-embedding token-norm output-norm layers)

(setf (documentation 'model:encoder-p 'function)
      "True when X is an encoder loaded by MODEL:LOAD.")

(defun model:hyperparameters (encoder)
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
                 (model::model-error path "expected the key ~S, found none" full)))
            ((typep value type) value)
            (t (model::model-error path "key ~S: expected ~(~A~), found ~S" full type value))))))

(defun model-tensor (f path name dims)
  "F's tensor NAME, checked to have the row-major DIMS; MODEL-ERROR when it
is missing or of another shape."
  (unless (member name (gguf:tensor-names f) :test #'string=)
    (model::model-error path "expected the tensor ~S, found none" name))
  (let ((shape (gguf:tensor-info-shape (gguf:tensor-info f name))))
    (unless (equal shape dims)
      (model::model-error path "tensor ~S: expected shape ~S, found ~S" name dims shape))
    (gguf:tensor f name)))

(defun encoder-layer-count (f path)
  "The encoder's layers: block_count less the decision head's blocks, which
continue the numbering after the encoder's."
  (let ((blocks (model-key f path "block_count"))
        (head (model-key f path "decision.block_count" :default 0)))
    (unless (< -1 head blocks)
      (model::model-error path "expected decision.block_count below block_count ~D, found ~D"
                          blocks head))
    (- blocks head)))

(defun feed-forward-length (f path layers)
  "feed_forward_length: one integer, or one per block; the encoder's layers
must agree (the GeGLU's half)."
  (let ((v (model-key f path "feed_forward_length" :type '(or integer vector))))
    (if (integerp v)
        v
        (let ((enc (subseq v 0 (min layers (length v)))))
          (unless (and (= (length enc) layers) (every (lambda (x) (eql x (aref enc 0))) enc))
            (model::model-error path "key \"modern-bert.feed_forward_length\": expected one ~
length for the ~D encoder layers, found ~S" layers v))
          (aref enc 0)))))

(defun read-hyperparameters (f path)
  (let ((arch (gguf:value f "general.architecture")))
    (unless (equal arch "modern-bert")
      (model::model-error path "expected general.architecture \"modern-bert\", found ~S" arch)))
  (let* ((layers (encoder-layer-count f path))
         (d (model-key f path "embedding_length"))
         (heads (model-key f path "attention.head_count"))
         (window (model-key f path "attention.sliding_window" :default 0))
         (theta (model-key f path "rope.freq_base" :type 'real)))
    (unless (and (plusp layers) (plusp d) (plusp heads) (zerop (mod d heads))
                 (evenp (floor d heads)))
      (model::model-error path "expected positive block_count, embedding_length and ~
head_count, an even head size: found ~D layers, d ~D, ~D heads" layers d heads))
    (list :layers layers :embedding-length d :heads heads :head-dim (floor d heads)
          :feed-forward-length (feed-forward-length f path layers)
          :eps (coerce (model-key f path "attention.layer_norm_epsilon" :type 'real) 'single-float)
          :rope-theta (coerce theta 'single-float)
          ;; llama.cpp's loader reads the local theta only with a window.
          :rope-theta-swa (coerce (if (plusp window)
                                      (model-key f path "rope.freq_base_swa" :type 'real)
                                      theta)
                                  'single-float)
          :sliding-window window
          :sliding-window-pattern (if (plusp window)
                                      (model-key f path "attention.sliding_window_pattern"
                                                 :default 3)
                                      1)
          :context-length (model-key f path "context_length")
          :vocab-size (first (gguf:tensor-info-shape
                              (progn (model-tensor-present f path "token_embd.weight")
                                     (gguf:tensor-info f "token_embd.weight")))))))

(defun model-tensor-present (f path name)
  (unless (member name (gguf:tensor-names f) :test #'string=)
    (model::model-error path "expected the tensor ~S, found none" name)))

(defun embedding-as-single (data)
  (cond ((or (float16-array-p data) (bfloat16-array-p data)) (half-array-to-single data))
        ((quantized-matrix-p data) (dequantize data))
        (t data)))

(defun model:load (source &key quantize calibration)
  "The modern-bert encoder of SOURCE, a GGUF file's path or a file object
of GGUF:READ or GGUF:MAKE-FILE: the hyper-parameters from its keys
(block_count less decision.block_count, embedding_length, head_count,
layer_norm_epsilon, rope.freq_base for global layers and rope.freq_base_swa
for local ones, attention.sliding_window and its pattern,
feed_forward_length, context_length) and the encoder's tensors (F32, F16,
BF16 or Q8_0); a decision head is ignored.  A missing or malformed key or
tensor signals MODEL:MODEL-ERROR naming the file.

QUANTIZE :q8_0 quantizes the encoder matrices (F32, F16 or BF16 in the file)
in memory, keeping each matrix's outlier input columns (SPEC 10) out of the
int8 product: y = Q8_0(W without them) x + W[:, outliers] x[outliers] in
f32, the same bits on every path and thread count (model-quantize.lisp).
CALIBRATION names the outliers: a calibration file's path (`rontolisp
calibrate') or MODEL:CALIBRATE's list, one vector per encoder matrix; without
it the file is calibrated in memory first (MODEL:CALIBRATE, a few seconds
for small models).  An unknown QUANTIZE signals UNKNOWN-FORMAT-ERROR, a
calibration that does not fit TENSOR-DATA-ERROR."
  (let* ((f (if (gguf:gguf-file-p source) source (gguf:read source)))
         (path (or (gguf:path f) "(in-memory GGUF file)"))
         (h (read-hyperparameters f path))
         (d (getf h :embedding-length))
         (ff (getf h :feed-forward-length)))
    (flet ((tensor (name dims) (model-tensor f path name dims))
           (blk (i s) (format nil "blk.~D.~A" i s)))
      (quantize-encoder
       (make-encoder
       :path path :file f :hyperparameters h
       :token-embedding (embedding-as-single (tensor "token_embd.weight"
                                                     (list (getf h :vocab-size) d)))
       :token-norm (tensor "token_embd_norm.weight" (list d))
       :output-norm (tensor "output_norm.weight" (list d))
       :layers (loop for i below (getf h :layers)
                     collect (list :attn-norm (and (or (plusp i)
                                                       (member (blk i "attn_norm.weight")
                                                               (gguf:tensor-names f) :test #'string=))
                                                   (tensor (blk i "attn_norm.weight") (list d)))
                                   :qkv (tensor (blk i "attn_qkv.weight") (list (* 3 d) d))
                                   :out (tensor (blk i "attn_output.weight") (list d d))
                                   :ffn-norm (tensor (blk i "ffn_norm.weight") (list d))
                                   :up (tensor (blk i "ffn_up.weight") (list (* 2 ff) d))
                                   :down (tensor (blk i "ffn_down.weight") (list d ff)))))
       quantize calibration))))

;;; The forward pass.

(defun column-block (xs start width)
  "Columns START .. START+WIDTH-1 of the n x m single-float array XS."
  ;; Typed, with no displaced arrays consed per row: it runs three times
  ;; a layer, on every token.
  (declare (type (simple-array single-float (* *)) xs) (type fixnum start width)
           (optimize speed (safety 0)))
  (let* ((n (array-dimension xs 0)) (m (array-dimension xs 1))
         (out (make-array (list n width) :element-type 'single-float)))
    (declare (type fixnum n m))
    (dotimes (i n out)
      (let ((from (+ (* i m) start)) (to (* i width)))
        (declare (type fixnum from to))
        (dotimes (j width)
          (setf (row-major-aref out (+ to j)) (row-major-aref xs (+ from j))))))))

(defun token-embedding-rows (emb ids d)
  "The rows IDS of the embedding table EMB as an n x D single-float matrix."
  (let ((x (make-array (list (length ids) d) :element-type 'single-float)))
    (declare (type (simple-array single-float (* *)) x))
    (if (typep emb '(simple-array single-float (* *)))
        (let ((emb emb) (d d))
          (declare (type (simple-array single-float (* *)) emb) (type fixnum d)
                   (optimize speed))
          (loop for id of-type fixnum in ids for i of-type fixnum from 0
                do (dotimes (j d)
                     (setf (row-major-aref x (+ (* i d) j)) (row-major-aref emb (+ (* id d) j))))))
        (loop for id in ids for i from 0
              do (dotimes (j d) (setf (aref x i j) (aref emb id j)))))
    x))

(defun add-into (xs ys)
  "XS := XS + YS, element by element in single-float (two n x d matrices)."
  (declare (type (simple-array single-float (* *)) xs ys) (optimize speed (safety 0)))
  (dotimes (i (array-total-size xs) xs)
    (setf (row-major-aref xs i) (+ (row-major-aref xs i) (row-major-aref ys i)))))

(defun check-token-ids (encoder ids)
  "IDS as a list of integers, or an error naming what is wrong."
  (let* ((h (encoder-hyperparameters encoder))
         (vocab (getf h :vocab-size))
         (ctx (getf h :context-length)))
    (unless (and (typep ids 'sequence) (not (stringp ids)))
      (element-type-error 'model:encode ids "expected a sequence of token ids, found ~S" ids))
    (let ((ids (coerce ids 'list)))
      (when (null ids)
        (shape-error 'model:encode '(1) '(0) "expected at least one token id, found none"))
      (when (> (length ids) ctx)
        (shape-error 'model:encode (list ctx) (list (length ids))
                     "expected at most context_length = ~D tokens, found ~D" ctx (length ids)))
      (loop for id in ids for pos from 0
            unless (and (integerp id) (< -1 id vocab))
              do (index-error 'model:encode "expected token ids from 0 to ~D, found ~S at ~
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

(defun layer-product (layer key i x activations)
  "The product of the matrix KEY of LAYER (layer I) with the rows of X,
recording X's channel maxima when calibrating."
  (when *channel-maxima*
    (record-channel-maxima (layer-matrix-name i key) x))
  (vec:matmul (getf layer key) x :activations activations))

(defun encoder-layer (x layer i h activations gelu)
  "One encoder layer of SPEC 9 on the n x d hidden states X; answers the
new hidden states."
  (let* ((d (getf h :embedding-length)) (heads (getf h :heads)) (hd (getf h :head-dim))
         (eps (getf h :eps))
         (global (zerop (mod i (getf h :sliding-window-pattern))))
         (theta (if global (getf h :rope-theta) (getf h :rope-theta-swa)))
         (window (and (not global) (plusp (getf h :sliding-window)) (getf h :sliding-window)))
         (a (if (getf layer :attn-norm) (vec:layer-norm x (getf layer :attn-norm) eps) x))
         (qkv (layer-product layer :qkv i a activations))
         (q (vec:rope-neox (column-block qkv 0 d) heads hd theta))
         (k (vec:rope-neox (column-block qkv d d) heads hd theta))
         (v (column-block qkv (* 2 d) d))
         (att (vec:attention q k v heads hd :window window))
         (ffn-in (add-into (layer-product layer :out i att activations) x))
         (up (layer-product layer :up i (vec:layer-norm ffn-in (getf layer :ffn-norm) eps)
                            activations))
         (down (layer-product layer :down i (vec:geglu up :gelu gelu) activations)))
    (add-into down ffn-in)))

(defun matrix-row (m i)
  "Row I of the n x d single-float matrix M as a fresh d-vector."
  (let* ((d (array-dimension m 1))
         (row (make-array d :element-type 'single-float)))
    (replace row (make-array (array-total-size m) :element-type 'single-float :displaced-to m)
             :start2 (* i d))))

(defun pool (hidden pooling)
  (destructuring-bind (n d) (array-dimensions hidden)
    (ecase pooling
      (:none hidden)
      (:cls (matrix-row hidden 0))
      (:mean (let ((out (make-array d :element-type 'single-float)))
               (dotimes (j d out)
                 (setf (aref out j)
                       (%double-to-single (/ (loop for i below n sum (float (aref hidden i j) 1d0))
                                             n)))))))))

(defun model:encode (encoder token-ids &key (pooling :none) (activations :q8) (gelu :erf))
  "The final hidden states of ENCODER (from MODEL:LOAD) for the sequence
TOKEN-IDS (integers from 0 below the vocabulary size, at most
context_length of them): with POOLING :none an n x d (simple-array
single-float (* *)), with :mean the mean of the rows and with :cls the
first row, each a d-vector.  ACTIVATIONS (:q8 or :q8x2, SPEC 4.1) is how
Q8_0 weights see the activations; GELU :erf is the exact GELU of the
Hugging Face model, :tanh llama.cpp's tanh approximation.  The graph is
SPEC 9.  Signals INDEX-ERROR for an id out of range, SHAPE-ERROR for no
tokens or more than context_length."
  (unless (model:encoder-p encoder)
    (element-type-error 'model:encode encoder "expected an encoder from model:load, found ~S"
                        encoder))
  (unless (member pooling '(:none :mean :cls))
    (rontolisp-error 'model:encode "expected pooling :none, :mean or :cls, found ~S" pooling))
  (unless (member activations '(:q8 :q8x2))
    (rontolisp-error 'model:encode "expected activations :q8 or :q8x2, found ~S" activations))
  (unless (member gelu '(:erf :tanh))
    (rontolisp-error 'model:encode "expected gelu :erf or :tanh, found ~S" gelu))
  (let* ((ids (check-token-ids encoder token-ids))
         (h (encoder-hyperparameters encoder))
         (d (getf h :embedding-length))
         (x (token-embedding-rows (encoder-token-embedding encoder) ids d)))
    (setf x (vec:layer-norm x (encoder-token-norm encoder) (getf h :eps)))
    (loop for layer in (encoder-layers encoder) for i from 0
          do (setf x (encoder-layer x layer i h activations gelu)))
    (pool (vec:layer-norm x (encoder-output-norm encoder) (getf h :eps)) pooling)))

;;; Calibration (SPEC 10): max |x| per input channel of every encoder
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

(defun model:calibrate (source)
  "The calibration of the encoder of SOURCE (what MODEL:LOAD takes), its
weights used as f32 whatever their type: a list of (tensor-name .
magnitudes), one per encoder matrix in layer order, MAGNITUDES a
single-float vector of max |x| per input channel over the products the
forward pass made on the built-in calibration sequences (SPEC 10)."
  (let* ((encoder (model:load source))
         (f32 (copy-encoder encoder))
         (*channel-maxima* (make-hash-table :test 'equal)))
    (setf (encoder-layers f32) (mapcar #'as-f32-layer (encoder-layers encoder)))
    (dolist (ids (calibration-sequences (encoder-hyperparameters encoder)))
      (model:encode f32 ids))
    (loop for i below (length (encoder-layers encoder))
          append (loop for key in '(:qkv :out :up :down)
                       for name = (layer-matrix-name i key)
                       collect (cons name (gethash name *channel-maxima*))))))

(define-command "calibrate" (file out)
    (:usage "FILE.gguf OUT.gguf"
     :summary "record max |x| per input channel of every encoder matrix (SPEC 10)"
     :details "Runs the encoder of FILE, its weights as f32, over built-in token
sequences covering the vocabulary and lengths up to context_length, and
writes OUT: a GGUF file of one F32 vector per encoder matrix, named after
the matrix's tensor, as quantize --calibration reads it.")
  (gguf:write out (gguf:make-file :tensors (loop for (name . v) in (model:calibrate file)
                                                 collect (list name v))))
  0)

;;; `rontolisp embed'.

(defun parse-token-list (string where)
  "The token ids of STRING, integers separated by commas or blanks; WHERE
names its source for the usage error."
  (let ((ids '()) (start 0) (n (length string)))
    (loop
      (loop while (and (< start n) (find (char string start) '(#\, #\Space #\Tab #\Return)))
            do (incf start))
      (when (>= start n) (return))
      (let* ((end (or (position-if (lambda (c) (find c '(#\, #\Space #\Tab #\Return)))
                                   string :start start)
                      n))
             (id (ignore-errors (parse-integer string :start start :end end))))
        (unless (and id (>= id 0))
          (usage-error "~A: expected token ids (integers from 0) separated by commas, found ~S"
                       where (subseq string start end)))
        (push id ids)
        (setf start end)))
    (nreverse ids)))

(defun read-token-file (path)
  "The token sequences of the file PATH, one per non-empty line."
  (let ((octets (read-file-octets path)))
    (loop for line in (split-lines (map 'string #'code-char octets))
          for i from 1
          for ids = (parse-token-list line (format nil "~A line ~D" path i))
          when ids collect ids)))

(defun split-lines (text)
  (loop with start = 0
        for nl = (position #\Newline text :start start)
        collect (subseq text start (or nl (length text)))
        while nl
        do (setf start (1+ nl))))

(defun embedding-rows (result)
  "The rows of an encode result (a matrix or one pooled vector) as vectors."
  (if (= 1 (array-rank result))
      (vector result)
      (coerce (loop for i below (array-dimension result 0) collect (matrix-row result i))
              'vector)))

(defun option-keyword (choice)
  "The keyword of an option value as spelled in its list (\"q8x2\" -> :Q8X2)."
  (intern (string-upcase choice) "KEYWORD"))

(define-command "embed" (file)
    (:usage "FILE.gguf (--tokens 2,17,9,3 | --tokens-file F) [--pooling none|mean|cls] [--activations q8|q8x2] [--gelu erf|tanh] [--json]"
     :summary "run a modern-bert encoder on token ids and print its hidden states"
     :details "The forward pass of SPEC 9 on each token sequence: one line of floats
per token (pooling none) or one line per sequence (mean, cls).  With --json,
one JSON object per sequence and line: file, tokens, pooling, activations,
embeddings.  A decision head in the file is ignored."
     :options ((tokens "--tokens IDS" :help "one sequence: token ids separated by commas")
               (tokens-file "--tokens-file F"
                            :help "a file of sequences, one per line (ids separated by
commas or blanks)")
               (pooling "--pooling MODE" :parse (choice-parser '("none" "mean" "cls")
                                                               :key #'option-keyword)
                        :default :none :help "none (default), mean or cls")
               (activations "--activations A" :parse (choice-parser '("q8" "q8x2")
                                                                    :key #'option-keyword)
                            :default :q8 :help "how Q8_0 weights see the activations:
q8 (default) or q8x2 (SPEC 4.1)")
               (gelu "--gelu G" :parse (choice-parser '("erf" "tanh") :key #'option-keyword)
                     :default :erf :help "erf (exact, default) or tanh (llama.cpp's)")
               (json "--json" :help "one JSON object per sequence")))
  (unless (and (or tokens tokens-file) (not (and tokens tokens-file)))
    (usage-error "expected exactly one of --tokens and --tokens-file"))
  (let* ((sequences (if tokens
                        (list (parse-token-list tokens "--tokens"))
                        (read-token-file tokens-file)))
         (encoder (model:load file)))
    (when (some #'null sequences)
      (usage-error "--tokens: expected at least one token id, found none"))
    (dolist (ids sequences)
      (let ((rows (embedding-rows (model:encode encoder ids :pooling pooling
                                                            :activations activations
                                                            :gelu gelu))))
        (if json
            (progn
              (write-json (list :object (cons "file" file)
                                (cons "tokens" (coerce ids 'vector))
                                (cons "pooling" (string-downcase (symbol-name pooling)))
                                (cons "activations" (string-downcase (symbol-name activations)))
                                (cons "embeddings" rows))
                          *standard-output*)
              (terpri))
            (loop for row across rows
                  do (format t "~{~A~^ ~}~%" (map 'list #'float-text row)))))))
  0)

;;; llama.cpp as the reference: tools/llama_embed runs llama.cpp's own
;;; encoder (its libraries, dlopened) in a child process, so that a crash in
;;; it cannot take rontolisp down.

(defun llama-library-directory ()
  "The directory of llama.cpp's libraries (RL_LLAMA_LIB's directory when
that names libggml-base.so, else build/cache/llama), or NIL when
libllama is not there."
  (let* ((lib (ext:getenv "RL_LLAMA_LIB"))
         (dir (if (and lib (plusp (length lib)))
                  (directory-namestring (merge-pathnames lib))
                  "build/cache/llama/")))
    (and (probe-file (merge-pathnames "libllama.v0.5.0.so" dir))
         (namestring (truename dir)))))

(defun llama-embed-program ()
  "The llama_embed tool: RL_LLAMA_EMBED when set, else built beside the
executable (build/tools/), else build/tools/ of the current directory (a
stock ECL running the code); NIL when none exists."
  (let* ((exe (ignore-errors (truename "/proc/self/exe")))
         (env (ext:getenv "RL_LLAMA_EMBED"))
         (found (find-if #'probe-file
                         (remove nil (list (and env (plusp (length env)) env)
                                           (and exe (merge-pathnames "tools/llama_embed" exe))
                                           "build/tools/llama_embed")))))
    (and found (namestring (truename found)))))

(defun llama-encode (file sequences &key (threads 1) (repeat 1))
  "llama.cpp's final hidden states of the GGUF FILE for each token sequence
of SEQUENCES (pooling none): a list of (microseconds . n x d matrix), the
microseconds the median of REPEAT calls of llama_encode with THREADS
threads.  NIL when llama.cpp's libraries or the tool are missing; a refusal
by llama.cpp signals RONTOLISP-ERROR with its message."
  (let ((dir (llama-library-directory)) (program (llama-embed-program)))
    (when (and dir program)
      (let* ((base (format nil "~A/rl-llama-~D-~D" (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp"))
                           (ext:getpid) (random 1000000000)))
             (in (concatenate 'string base ".in")) (out (concatenate 'string base ".out"))
             (err (concatenate 'string base ".err")))
        (unwind-protect
             (progn
               (with-open-file (s in :direction :output :if-exists :supersede)
                 (dolist (ids sequences) (format s "~{~D~^,~}~%" ids)))
               (let ((code (nth-value 1 (ext:run-program
                                         program (list dir (namestring (merge-pathnames file))
                                                       (princ-to-string threads)
                                                       (princ-to-string repeat))
                                         :input in :output out :error err :wait t
                                         :if-output-exists :supersede
                                         :if-error-exists :supersede))))
                 (unless (eql code 0)
                   (rontolisp-error 'llama-encode "~A: llama.cpp failed (exit ~A): ~A" file code
                                    (string-trim '(#\Newline)
                                                 (map 'string #'code-char (read-file-octets err)))))
                 (loop for line in (split-lines (map 'string #'code-char (read-file-octets out)))
                       when (plusp (length line))
                         collect (let* ((obj (parse-json line))
                                        (rows (gethash "embeddings" obj)))
                                   (cons (gethash "us" obj)
                                         (make-array (list (length rows) (gethash "n_embd" obj))
                                                     :element-type 'single-float
                                                     :initial-contents
                                                     (map 'list (lambda (r)
                                                                  (map 'list (lambda (x) (coerce x 'single-float)) r))
                                                          rows)))))))
          (dolist (f (list in out err)) (ignore-errors (delete-file f))))))))

(defun hidden-state-error (a b)
  "How far the n x d hidden states A are from the reference B: (values
max-abs-difference max-abs-of-B cosine), the cosine of the flattened
arrays, all in double-float."
  (let ((fa (make-array (array-total-size a) :element-type 'single-float :displaced-to a))
        (fb (make-array (array-total-size b) :element-type 'single-float :displaced-to b))
        (diff 0d0) (big 0d0) (ab 0d0) (aa 0d0) (bb 0d0))
    (dotimes (i (length fa))
      (let ((x (float (aref fa i) 1d0)) (y (float (aref fb i) 1d0)))
        (setf diff (max diff (abs (- x y))) big (max big (abs y)))
        (incf ab (* x y)) (incf aa (* x x)) (incf bb (* y y))))
    (values diff big (if (or (zerop aa) (zerop bb)) 0d0 (/ ab (sqrt (* aa bb)))))))

;;; `rontolisp bench --model FILE | --random NAME --tokens N': the encoder's
;;; latency per sequence by weight format, activations and threads, against
;;; llama.cpp on the same file and threads, and each format's error against
;;; the F32 weights -- the seed chapter's table, measured.

(defun widen-weight (data)
  "DATA as a single-float array: F16/BF16 widened, Q8_0 dequantized."
  (cond ((or (float16-array-p data) (bfloat16-array-p data)) (half-array-to-single data))
        ((quantized-matrix-p data) (dequantize data))
        (t data)))

(defun formatted-weight (name data format)
  "The tensor NAME (its values DATA) as the converter's type policy stores it
in a file of FORMAT (:f32 :f16 :q8_0): 1-D tensors F32, with Q8_0 the token
embedding F16 and rows that are not multiples of 32 F16."
  (let ((f32 (widen-weight data)))
    (cond ((or (= 1 (array-rank f32)) (eq format :f32)) f32)
          ((or (eq format :f16) (string= name "token_embd.weight")
               (plusp (mod (array-dimension f32 1) 32)))
           (make-float16-array f32))
          (t (quantize f32 'q8-0)))))

(defun file-in-format (enc format)
  "An in-memory copy of the GGUF file object ENC with its matrices in
FORMAT."
  (gguf:make-file
     :metadata (mapcar (lambda (e)
                         (if (string= (first e) "general.file_type")
                             (list (first e) :u32 (file-type-id format))
                             e))
                       (remove "general.alignment" (gguf:metadata enc) :key #'first
                                                                       :test #'string=))
     :tensors (loop for info in (gguf:tensor-infos enc)
                    for name = (gguf:tensor-info-name info)
                    collect (list name (formatted-weight name (gguf:tensor enc name) format)
                                  :dims (gguf:tensor-info-dims info)))))

(defparameter *model-bench-rows*
  '(("F16 (f32 compute)" :f16 :q8) ("Q8_0 :q8" :q8_0 :q8) ("Q8_0 :q8x2" :q8_0 :q8x2)
    ("F32" :f32 :q8))
  "The rows of the encoder benchmark: label, file format, activations.")

(defun median-microseconds (thunk reps)
  "The median over REPS rounds of THUNK's wall time per call, in
microseconds.  ECL's real-time clock counts milliseconds, so a round calls
THUNK until 100 ms have passed and divides."
  (flet ((now () (get-internal-real-time)))
    ;; A call of half a second or more is timed once: rounds would only
    ;; make a slow row slower to report.
    (let ((times (sort (loop repeat reps
                             for first = t then nil
                             for time = (let ((t0 (now)) (calls 0))
                                       (loop do (funcall thunk) (incf calls)
                                             until (>= (- (now) t0)
                                                       (/ internal-time-units-per-second 10)))
                                       (/ (* 1d6 (- (now) t0))
                                          (* calls internal-time-units-per-second)))
                             collect time
                             until (and first (>= time 5d5)))
                       #'<)))
      (nth (floor (length times) 2) times))))

(defun bench-token-ids (n vocab)
  "A fixed token sequence of length N below VOCAB."
  (loop for i below n collect (mod (+ 3 (* i 37)) vocab)))

(defun run-model-bench (&key file random token-counts (thread-counts '(1 2)) (reps 3)
                          (stream *standard-output*))
  "Time MODEL:ENCODE on the encoder of FILE (or of a random model of the
preset RANDOM) stored as F16, Q8_0 and F32 for each token count of
TOKEN-COUNTS and thread count of THREAD-COUNTS, with llama.cpp on the same
file and threads where its libraries are present; print the table and the
error of each format against F32 (max abs, cosine, for the first token
count) on STREAM.  Answers the rows as a list of plists."
  (let* ((source (if file (gguf:read file) (random-model random :type :f32 :encoder-only t)))
         (label (or file (format nil "random ~A" random)))
         (files (loop for format in '(:f32 :f16 :q8_0)
                      collect (let ((path (format nil "~A/rl-bench-~D-~(~A~).gguf"
                                                  (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp"))
                                                  (ext:getpid) format)))
                                (gguf:write path (file-in-format source format))
                                (cons format path))))
         (old-threads (threads))
         (rows '()))
    (unwind-protect
         (let* ((encoders (loop for (format . path) in files
                                collect (cons format (model:load path))))
                (vocab (getf (model:hyperparameters (cdr (first encoders))) :vocab-size))
                ;; llama.cpp refuses the decision head's tensors.
                (head-p (nth-value 2 (gguf:value source "modern-bert.decision.block_count")))
                (llama-p (and (not head-p) (llama-library-directory) (llama-embed-program)))
                (ids0 (bench-token-ids (first token-counts) vocab))
                (reference (model:encode (cdr (assoc :f32 encoders)) ids0)))
           (format stream "~&encoder benchmark: ~A, µs per sequence (median of ~D)~@[, ~
llama.cpp ~A~]~%" label reps
                   (cond (llama-p "on the same file and threads")
                         (head-p "not run (the file has a decision head, which it refuses)")
                         (t "not run (its libraries or tools/llama_embed are missing)")))
           (format stream "~18A ~7@A ~7@A ~12@A ~12@A ~9@A ~11@A ~12@A~%" "format" "tokens" "threads"
                   "µs" "llama.cpp µs" "ratio" "max |err|" "cosine")
           (dolist (row *model-bench-rows*)
             (destructuring-bind (name format activations) row
               (let* ((e (cdr (assoc format encoders)))
                      (path (cdr (assoc format files))))
                 (multiple-value-bind (err big cos)
                     (hidden-state-error (model:encode e ids0 :activations activations) reference)
                   (declare (ignore big))
                   (dolist (n token-counts)
                     (let ((ids (bench-token-ids n vocab)))
                       (dolist (th thread-counts)
                         (setf (threads) th)
                         (let* ((us (median-microseconds
                                     (lambda () (model:encode e ids :activations activations))
                                     reps))
                                (llama (and llama-p
                                            (car (first (llama-encode path (list ids) :threads th
                                                                                      :repeat reps)))))
                                (ratio (and llama (/ us llama))))
                           (format stream "~18A ~7D ~7D ~12,1F ~12@A ~9@A ~11,3,2,,,,'eE ~12,8F~%"
                                   name n th us (if llama (format nil "~,1F" llama) "-")
                                   (if ratio (format nil "~,2Fx" ratio) "-") err cos)
                           (finish-output stream)
                           (push (list :format name :tokens n :threads th :us us :llama-us llama
                                       :ratio ratio :max-abs-error err :cosine cos)
                                 rows)))))))))
           (format stream "ratio: our time over llama.cpp's (below 1: faster); error: hidden ~
states against the F32 file's, ~D tokens~%" (first token-counts)))
      (setf (threads) old-threads)
      (dolist (entry files) (ignore-errors (delete-file (cdr entry))))
      (when file (gguf:close source)))
    (nreverse rows)))
