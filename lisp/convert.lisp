;;;; convert.lisp - `rontolisp convert': a Laya model directory (a ModernBERT
;;;; encoder plus a decision head, in Hugging Face's layout) or a Hugging
;;;; Face ModernBERT directory to one GGUF file, or a model of a preset
;;;; shape with random weights (--random).
;;;;
;;;; Tensor names and keys are the ones upstream llama.cpp's converter
;;;; (conversion/bert.py, ModernBertModel) writes for the same config: the
;;;; encoder's blocks are blk.0 .. blk.L-1.  The Laya decision head is ours:
;;;; its transformer layers continue as blk.L ..; token_types, cls, cls.norm
;;;; and cls.output hold its type embeddings and scorer; modern-bert.decision.*
;;;; its settings.  llama.cpp's loader refuses tensors it does not know, so
;;;; only a file without the head (--encoder-only) loads there.  Every input
;;;; is checked against its config before anything is written.  The input
;;;; schema read is in README.org ("The converter's input").
;;;;
;;;; Type policy (SPEC 7): 1-D tensors F32; the decision head --head-type
;;;; (F32 by default); encoder matrices --type (F16 by default); with q8_0
;;;; the token embeddings stay F16; a row that is not a multiple of 32 falls
;;;; back to F16.

(in-package "RONTOLISP")

;;; Presets: shapes whose parameter counts are the seed's table (202,305,
;;; 1,134,209 and 6,630,913).

(defparameter *presets*
  '(("s1-pico"  :hidden 64  :vocab 1024 :layers 2 :intermediate 128 :head-layers 1 :heads 4)
    ("s1-nano"  :hidden 128 :vocab 2048 :layers 4 :intermediate 256 :head-layers 1 :heads 8)
    ("s1-micro" :hidden 256 :vocab 4096 :layers 6 :intermediate 512 :head-layers 2 :heads 8))
  "The --random model shapes: hidden size, vocabulary, encoder layers,
intermediate size (the GLU's half), decision-head layers, attention heads.")

(defun preset (name)
  (or (rest (assoc name *presets* :test #'string=))
      (rontolisp-error 'convert-random "expected a preset ~{~A~^, ~}, found ~S"
                       (mapcar #'first *presets*) name)))

;;; Reproducible random numbers: prims/rng.c's generator (the one the C
;;; tests and bench use), independent of the Lisp's own so a seed gives the
;;; same model everywhere, and in C because boxing each weight made
;;; s1-micro take seconds.

(defstruct (rng (:constructor make-rng (state))) (state 1 :type (unsigned-byte 64)))

(defun random-normal-array (r dims sigma)
  (let ((a (make-array dims :element-type 'single-float)))
    (setf (rng-state r) (%random-normal-fill a (coerce sigma 'double-float) (rng-state r)))
    a))

(defun constant-array (dims value)
  (make-array dims :element-type 'single-float :initial-element value))

;;; The Hugging Face tensors: a ModernBERT encoder (under a prefix:
;;; "encoder.model." in a Laya directory, "model." or none in a Hugging
;;; Face one) and the Laya decision head.

(defun encoder-tensor-shapes (prefix &key hidden vocab layers intermediate &allow-other-keys)
  "The (hf-name shape init) of every tensor of a ModernBERT encoder of that
shape, its names under PREFIX; INIT is :normal, :one or :zero."
  (let ((h hidden) (out '()))
    (flet ((add (name shape init)
             (push (list (concatenate 'string prefix name) shape init) out)))
      (add "embeddings.tok_embeddings.weight" (list vocab h) :normal)
      (add "embeddings.norm.weight" (list h) :one)
      (dotimes (i layers)
        (flet ((n (s) (format nil "layers.~D.~A" i s)))
          (unless (zerop i) (add (n "attn_norm.weight") (list h) :one)) ; layer 0: Identity
          (add (n "attn.Wqkv.weight") (list (* 3 h) h) :normal)
          (add (n "attn.Wo.weight") (list h h) :normal)
          (add (n "mlp_norm.weight") (list h) :one)
          (add (n "mlp.Wi.weight") (list (* 2 intermediate) h) :normal)
          (add (n "mlp.Wo.weight") (list h intermediate) :normal)))
      (add "final_norm.weight" (list h) :one))
    (reverse out)))

(defun decision-head-tensor-shapes (&key hidden head-layers &allow-other-keys)
  "The (hf-name shape init) of every tensor of a Laya decision head."
  (let ((h hidden) (out '()))
    (flet ((add (name shape init) (push (list name shape init) out)))
      (dotimes (i head-layers)
        (flet ((n (s) (format nil "head.layers.~D.~A" i s)))
          (add (n "self_attn.in_proj_weight") (list (* 3 h) h) :normal)
          (add (n "self_attn.in_proj_bias") (list (* 3 h)) :zero)
          (add (n "self_attn.out_proj.weight") (list h h) :normal)
          (add (n "self_attn.out_proj.bias") (list h) :zero)
          (add (n "linear1.weight") (list (* 4 h) h) :normal)
          (add (n "linear1.bias") (list (* 4 h)) :zero)
          (add (n "linear2.weight") (list h (* 4 h)) :normal)
          (add (n "linear2.bias") (list h) :zero)
          (add (n "norm1.weight") (list h) :one)
          (add (n "norm1.bias") (list h) :zero)
          (add (n "norm2.weight") (list h) :one)
          (add (n "norm2.bias") (list h) :zero)))
      (add "head.type_embeddings.weight" (list 3 h) :normal)
      (add "head.dense.weight" (list h h) :normal)
      (add "head.dense.bias" (list h) :zero)
      (add "head.norm.weight" (list h) :one)
      (add "head.norm.bias" (list h) :zero)
      (add "head.out.weight" (list 1 h) :normal)
      (add "head.out.bias" (list 1) :zero))
    (reverse out)))

(defun laya-tensor-shapes (&rest shape &key &allow-other-keys)
  "The (hf-name shape init) of every tensor of a Laya model of SHAPE (the
plist of a preset): the encoder, then the decision head."
  (append (apply #'encoder-tensor-shapes "encoder.model." shape)
          (apply #'decision-head-tensor-shapes shape)))

(defparameter *head-renames*
  '(("self_attn.in_proj_weight" . "attn_qkv.weight") ("self_attn.in_proj_bias" . "attn_qkv.bias")
    ("self_attn.out_proj.weight" . "attn_output.weight") ("self_attn.out_proj.bias" . "attn_output.bias")
    ("linear1.weight" . "ffn_up.weight") ("linear1.bias" . "ffn_up.bias")
    ("linear2.weight" . "ffn_down.weight") ("linear2.bias" . "ffn_down.bias")
    ("norm1.weight" . "attn_norm.weight") ("norm1.bias" . "attn_norm.bias")
    ("norm2.weight" . "ffn_norm.weight") ("norm2.bias" . "ffn_norm.bias"))
  "Decision-head layer tensors (PyTorch nn.TransformerEncoderLayer) and their
GGUF block names.")

(defparameter *encoder-fixed-renames*
  '(("embeddings.tok_embeddings.weight" . "token_embd.weight")
    ("embeddings.norm.weight" . "token_embd_norm.weight")
    ("final_norm.weight" . "output_norm.weight"))
  "Encoder tensors outside the blocks (under the encoder's prefix) and their
GGUF names.")

(defparameter *decision-fixed-renames*
  '(("head.type_embeddings.weight" . "token_types.weight")
    ("head.dense.weight" . "cls.weight") ("head.dense.bias" . "cls.bias")
    ("head.norm.weight" . "cls.norm.weight") ("head.norm.bias" . "cls.norm.bias")
    ("head.out.weight" . "cls.output.weight") ("head.out.bias" . "cls.output.bias"))
  "Decision-head tensors outside its layers and their GGUF names.")

(defparameter *encoder-renames*
  '(("attn_norm.weight" . "attn_norm.weight") ("attn.Wqkv.weight" . "attn_qkv.weight")
    ("attn.Wo.weight" . "attn_output.weight") ("mlp_norm.weight" . "ffn_norm.weight")
    ("mlp.Wi.weight" . "ffn_up.weight") ("mlp.Wo.weight" . "ffn_down.weight"))
  "Encoder layer tensors (ModernBERT) and their GGUF block names, as
llama.cpp's tensor mapping for MODEL_ARCH.MODERN_BERT.")

(defparameter *hf-head-renames*
  '(("head.dense.weight" . "cls.weight") ("head.norm.weight" . "cls.norm.weight")
    ("classifier.weight" . "cls.output.weight") ("classifier.bias" . "cls.output.bias"))
  "The tensors of Hugging Face's ModernBERT heads (MaskedLM, sequence
classification) that upstream's tensor map names and llama.cpp's loader
reads (its rank pooling: dense, GELU, norm, classifier).")

(defparameter *hf-dropped-tensors*
  '(("decoder.weight" . "the masked-LM decoder (tied to the token embeddings)")
    ("decoder.bias" . "the masked-LM decoder's bias")
    ("head.dense.bias" . "the head's dense bias")
    ("head.norm.bias" . "the head's norm bias"))
  "Tensors of Hugging Face's ModernBERT heads that llama.cpp's modern-bert
loader has no place for (it refuses a file holding them): left out, each
with a message.")

(defun layer-index (name prefix)
  "For NAME = PREFIX N.REST answer N (or the string between PREFIX and the
next dot when it is not a plain decimal number, such as \"-1\" or \" 1\")
and REST; NIL when NAME does not start with PREFIX."
  (when (and (> (length name) (length prefix)) (string= prefix name :end2 (length prefix)))
    (let* ((start (length prefix))
           (dot (position #\. name :start start))
           (part (subseq name start dot)))
      (values (if (and (plusp (length part)) (every #'digit-char-p part)
                       (or (= 1 (length part)) (char/= #\0 (char part 0))))
                  (parse-integer part)
                  part)
              (if dot (subseq name (1+ dot)) "")))))

(defun gguf-tensor-name (hf-name layers &key (prefix "encoder.model.") (head :decision))
  "The GGUF name of the Hugging Face tensor HF-NAME of an encoder of LAYERS
layers whose names start with PREFIX, and whether it belongs to a head (the
Laya decision head when HEAD is :decision, Hugging Face's when :hf); NIL
for a name the converter does not know."
  (flet ((rel (table name) (cdr (assoc name table :test #'string=))))
    (let ((encoder-name (and (>= (length hf-name) (length prefix))
                             (string= prefix hf-name :end2 (length prefix))
                             (subseq hf-name (length prefix)))))
      (when encoder-name
        (let ((fixed (rel *encoder-fixed-renames* encoder-name)))
          (when fixed (return-from gguf-tensor-name (values fixed nil))))
        (multiple-value-bind (n rest) (layer-index encoder-name "layers.")
          (when (integerp n)
            (let ((g (rel *encoder-renames* rest)))
              (return-from gguf-tensor-name (and g (values (format nil "blk.~D.~A" n g) nil))))))))
    (ecase head
      (:decision
       (let ((fixed (rel *decision-fixed-renames* hf-name)))
         (when fixed (return-from gguf-tensor-name (values fixed t))))
       (multiple-value-bind (n rest) (layer-index hf-name "head.layers.")
         (when (integerp n)
           (let ((g (rel *head-renames* rest)))
             (return-from gguf-tensor-name
               (and g (values (format nil "blk.~D.~A" (+ layers n) g) t)))))))
      (:hf (let ((g (rel *hf-head-renames* hf-name)))
             (when g (return-from gguf-tensor-name (values g t))))))
    nil))

;;; The test tokenizer of --random models: GPT-2 byte-level BPE.

(defun byte-level-alphabet ()
  "GPT-2's byte-to-character table: a vector of 256 one-character strings."
  (let ((table (make-array 256)) (extra 0))
    (dotimes (b 256 table)
      (setf (aref table b)
            (string (code-char (if (or (<= 33 b 126) (<= 161 b 172) (<= 174 b 255))
                                   b
                                   (prog1 (+ 256 extra) (incf extra)))))))))

(defparameter *special-tokens* '("[PAD]" "[UNK]" "[CLS]" "[SEP]" "[MASK]")
  "The special tokens at ids 0-4: [CLS]=2, [SEP]=3, [MASK]=4.")

(defun random-tokenizer (vocab)
  "A Hugging Face tokenizer.json (as the Lisp data WRITE-JSON takes) of
VOCAB tokens: the specials, the 256 byte-level symbols, then merges of
pairs of printable ASCII characters."
  (let* ((alphabet (byte-level-alphabet))
         (tokens (append *special-tokens* (coerce alphabet 'list)))
         (merges '()))
    (loop with printable = (loop for c from 33 to 126 collect (string (code-char c)))
          for a in printable
          do (loop for b in printable
                   while (< (+ (length tokens) (length merges)) vocab)
                   do (push (format nil "~A ~A" a b) merges)))
    (setf merges (reverse merges))
    (let ((all (append tokens (mapcar (lambda (m) (remove #\Space m)) merges))))
      (list :object
            (cons "version" "1.0")
            (cons "added_tokens"
                  (coerce (loop for tok in *special-tokens* for id from 0
                                collect (list :object (cons "id" id) (cons "content" tok)
                                              (cons "single_word" :false)
                                              (cons "lstrip" (if (string= tok "[MASK]") :true :false))
                                              (cons "rstrip" :false) (cons "normalized" :false)
                                              (cons "special" :true)))
                          'vector))
            (cons "normalizer" (list :object (cons "type" "NFC")))
            (cons "pre_tokenizer" (list :object (cons "type" "ByteLevel")
                                        (cons "add_prefix_space" :false)))
            (cons "model" (list :object (cons "type" "BPE") (cons "ignore_merges" :false)
                                (cons "vocab" (cons :object (loop for tok in all for id from 0
                                                                  collect (cons tok id))))
                                (cons "merges" (coerce merges 'vector))))))))

(defun massive-channels (hidden k seed)
  "K distinct residual channels out of HIDDEN, chosen from SEED: the K
largest of HIDDEN normal draws from a generator of their own, so the
weights themselves do not depend on K."
  (let* ((draws (random-normal-array (make-rng (ldb (byte 64 0) (+ #x5851F42D4C957F2D seed)))
                                     (list hidden) 1d0))
         (order (stable-sort (loop for c below hidden collect c) #'>
                             :key (lambda (c) (aref draws c)))))
    (sort (subseq order 0 k) #'<)))

(defun plant-massive-channels (tensors channels ratio)
  "Make CHANNELS of the residual stream RATIO times larger, as trained
encoders end up: those columns of the token embedding scaled by RATIO, and
those entries of the embedding norm and of every layer's attention and MLP
norm set to RATIO, so the LayerNorms keep the channels massive and every
matrix that reads the residual stream sees them as massive input channels.
The final norm is left alone: the channels belong to the residual stream,
not to the encoder's output.  Answers TENSORS, changed in place."
  (flet ((suffixp (suffix name)
           (let ((n (length name)) (m (length suffix)))
             (and (>= n m) (string= suffix name :start2 (- n m))))))
    (loop for (name a) in tensors
          do (cond ((suffixp "embeddings.tok_embeddings.weight" name)
                    (dotimes (row (array-dimension a 0))
                      (dolist (c channels)
                        (setf (aref a row c) (* ratio (aref a row c))))))
                   ((and (search "encoder." name)
                         (some (lambda (s) (suffixp s name))
                               '("embeddings.norm.weight" "attn_norm.weight" "mlp_norm.weight")))
                    (dolist (c channels)
                      (setf (aref a c) (float ratio 1f0))))))
    tensors))

(defun random-laya (preset-name &key (seed 1) (massive 0) (massive-ratio 20)
                                     (report (lambda (done name) (declare (ignore done name)))))
  "The files of a Laya directory for a random model of PRESET-NAME, as
Lisp data: (values tensors encoder-config rl-agent-config config tokenizer),
TENSORS a list of (hf-name array).  MASSIVE residual channels (0 to the
hidden size) are MASSIVE-RATIO times larger than the rest (see
PLANT-MASSIVE-CHANNELS).  REPORT, a function of (done name), is called after
each tensor is made."
  (let* ((p (preset preset-name))
         (r (make-rng (ldb (byte 64 0) (+ #x9E3779B97F4A7C15 (* seed 7919)))))
         (h (getf p :hidden))
         (done 0))
    (unless (and (integerp massive) (<= 0 massive h))
      (rontolisp-error 'convert-random "expected from 0 to ~D massive channels for ~A, found ~S"
                       h preset-name massive))
    (unless (and (realp massive-ratio) (plusp massive-ratio))
      (rontolisp-error 'convert-random "expected a positive massive-channel ratio, found ~S"
                       massive-ratio))
    (values
     (plant-massive-channels
      (loop for (name shape init) in (apply #'laya-tensor-shapes p)
            collect (list name (ecase init
                                 (:normal (random-normal-array r shape 0.02d0))
                                 (:one (constant-array shape 1.0))
                                 (:zero (constant-array shape 0.0))))
            do (funcall report (incf done) name))
      (massive-channels h massive seed) massive-ratio)
     (list :object
           (cons "architectures" #("ModernBertModel")) (cons "model_type" "modernbert")
           (cons "hidden_size" h) (cons "intermediate_size" (getf p :intermediate))
           (cons "num_hidden_layers" (getf p :layers))
           (cons "num_attention_heads" (getf p :heads)) (cons "vocab_size" (getf p :vocab))
           (cons "max_position_embeddings" 1024) (cons "norm_eps" 1d-5)
           (cons "local_attention" 128) (cons "global_attn_every_n_layers" 3)
           (cons "global_rope_theta" 160000d0) (cons "local_rope_theta" 10000d0)
           (cons "hidden_activation" "gelu")
           (cons "pad_token_id" 0) (cons "bos_token_id" 2) (cons "eos_token_id" 3)
           (cons "cls_token_id" 2) (cons "sep_token_id" 3)
           (cons "mask_token_id" 4))
     (list :object
           (cons "head_layers" (getf p :head-layers)) (cons "max_len" 1024)
           (cons "head_max_len" 96)
           (cons "temperatures" (list :object (cons "choice:2" 1.0d0) (cons "choice:3-5" 1.1d0)
                                      (cons "score:2" 0.9d0) (cons "noul:2" 1.0d0))))
     (list :object (cons "model_type" "laya") (cons "name" (format nil "skycmd-~A-random" preset-name)))
     (random-tokenizer (getf p :vocab)))))

(defun random-progress (preset-name)
  "A progress reporter for making a random model of PRESET-NAME."
  (let ((report (progress-reporter (length (apply #'laya-tensor-shapes (preset preset-name))))))
    (lambda (done name) (funcall report done (concatenate 'string "generating " name)))))

(defun write-json-file (path value)
  (with-output-to-file (s path)
    (write-json value s :indent 2)
    (terpri s)))

(defun directory-prefix (dir)
  "DIR as a string that ends in a slash, for appending file names."
  (concatenate 'string (string-right-trim "/" (namestring dir)) "/"))

(defun write-random-laya (dir preset-name &key (seed 1) (massive 0) (massive-ratio 20))
  "Write a Laya model directory DIR (created if needed) for a random model
of PRESET-NAME: model.safetensors, config.json, encoder/config.json,
rl_agent_config.json and tokenizer/tokenizer.json, MASSIVE residual
channels MASSIVE-RATIO times larger than the rest (see RANDOM-LAYA).
Answers DIR."
  (let ((root (directory-prefix dir)))
    (ensure-directories-exist (concatenate 'string root "encoder/"))
    (ensure-directories-exist (concatenate 'string root "tokenizer/"))
    (multiple-value-bind (tensors encoder rl config tokenizer)
        (random-laya preset-name :seed seed :massive massive :massive-ratio massive-ratio
                                 :report (random-progress preset-name))
      (write-safetensors (concatenate 'string root "model.safetensors") tensors
                         :metadata '(("format" . "pt")))
      (write-json-file (concatenate 'string root "encoder/config.json") encoder)
      (write-json-file (concatenate 'string root "rl_agent_config.json") rl)
      (write-json-file (concatenate 'string root "config.json") config)
      (write-json-file (concatenate 'string root "tokenizer/tokenizer.json") tokenizer))
    dir))

(defun write-random-hf (dir preset-name &key (seed 1) (prefix "model.") (dtype :f32) (shards 1)
                                            (head :none))
  "Write a Hugging Face ModernBERT directory DIR (created if needed) for
the encoder of a random model of PRESET-NAME, as transformers saves one:
config.json, tokenizer.json, tokenizer_config.json and model.safetensors,
or SHARDS files with model.safetensors.index.json.  Tensor names start with
PREFIX; DTYPE is :f32, :f16 or :bf16; HEAD is :none (ModernBertModel),
:masked-lm or :classifier (two labels).  Answers DIR."
  (let ((root (directory-prefix dir)))
    (ensure-directories-exist root)
    (multiple-value-bind (tensors encoder rl config tokenizer) (random-laya preset-name :seed seed)
      (declare (ignore rl config))
      (let* ((h (cdr (assoc "hidden_size" (rest encoder) :test #'string=)))
             (vocab (cdr (assoc "vocab_size" (rest encoder) :test #'string=)))
             (r (make-rng (+ 17 seed)))
             (encoder-tensors
               (loop for (name data) in tensors
                     for rel = (and (string= "encoder.model." name :end2 (min 14 (length name)))
                                    (subseq name 14))
                     when rel collect (list (concatenate 'string prefix rel) data)))
             (head-tensors
               (ecase head
                 (:none '())
                 (:masked-lm (list (list "head.dense.weight" (random-normal-array r (list h h) 0.02d0))
                                   (list "head.norm.weight" (constant-array (list h) 1.0))
                                   (list "decoder.bias" (constant-array (list vocab) 0.0))))
                 (:classifier (list (list "head.dense.weight" (random-normal-array r (list h h) 0.02d0))
                                    (list "head.norm.weight" (constant-array (list h) 1.0))
                                    (list "classifier.weight" (random-normal-array r (list 2 h) 0.02d0))
                                    (list "classifier.bias" (constant-array (list 2) 0.0))))))
             (all (loop for (name data) in (append encoder-tensors head-tensors)
                        collect (list name (ecase dtype
                                             (:f32 data)
                                             (:f16 (make-float16-array data))
                                             (:bf16 (make-bfloat16-array data))))))
             (config (append (list :object
                                   (cons "architectures"
                                         (vector (ecase head
                                                   (:none "ModernBertModel")
                                                   (:masked-lm "ModernBertForMaskedLM")
                                                   (:classifier "ModernBertForSequenceClassification")))))
                             (remove "architectures" (rest encoder) :key #'car :test #'string=)
                             (when (eq head :classifier)
                               (list (cons "id2label" (list :object (cons "0" "wrong") (cons "1" "right")))
                                     (cons "label2id" (list :object (cons "wrong" 0) (cons "right" 1)))))
                             (list (cons "torch_dtype" (string-downcase (symbol-name dtype)))))))
        (if (= shards 1)
            (write-safetensors (concatenate 'string root "model.safetensors") all
                               :metadata '(("format" . "pt")))
            (let ((map '()))
              (loop for i from 1 to shards
                    for file = (format nil "model-~5,'0D-of-~5,'0D.safetensors" i shards)
                    for part = (loop for e in all for j from 0
                                     when (= (1- i) (mod j shards)) collect e)
                    do (write-safetensors (concatenate 'string root file) part
                                          :metadata '(("format" . "pt")))
                       (dolist (e part) (push (cons (first e) file) map)))
              (write-json-file (concatenate 'string root "model.safetensors.index.json")
                               (list :object (cons "metadata"
                                           (list :object
                                                 (cons "total_size"
                                                       (loop for (nil data) in all
                                                             sum (* (reduce #'* (packed-dimensions data))
                                                                    (if (eq dtype :f32) 4 2))))))
                                     (cons "weight_map" (cons :object (reverse map)))))))
        (write-json-file (concatenate 'string root "config.json") config)
        (write-json-file (concatenate 'string root "tokenizer.json") tokenizer)
        (write-json-file (concatenate 'string root "tokenizer_config.json")
                         (list :object (cons "tokenizer_class" "PreTrainedTokenizerFast")
                               (cons "cls_token" "[CLS]") (cons "sep_token" "[SEP]")
                               (cons "mask_token" "[MASK]") (cons "pad_token" "[PAD]")
                               (cons "unk_token" "[UNK]")
                               (cons "model_max_length" 1024)))))
    dir))

;;; Checking the input before anything is written.  Every value read from
;;; a config is checked for its JSON type and range; every tensor's name,
;;; layer index and shape against what the config implies; a failure is a
;;; CONVERT-ERROR naming the input file and its key or tensor.

(defparameter *config-limits*
  '(("hidden_size" 1 65536) ("num_hidden_layers" 1 4096) ("intermediate_size" 1 1048576)
    ("num_attention_heads" 1 65536) ("vocab_size" 1 16777216)
    ("max_position_embeddings" 1 16777216) ("local_attention" 0 16777216)
    ("global_attn_every_n_layers" 1 4096) ("head_layers" 0 4096)
    ("head_max_len" 1 16777216) ("max_len" 1 16777216) ("num_labels" 1 65536))
  "The integer configuration keys with their least and greatest sane
values: a config beyond them is refused before anything is allocated.")

(defun json-brief (value)
  "VALUE (parsed JSON) described in a few words, for a message."
  (typecase value
    (hash-table "an object")
    (string (if (> (length value) 40) "a long string" (format nil "~S" value)))
    (vector (if (and (<= (length value) 4) (every (lambda (x) (or (stringp x) (integerp x))) value))
                (format nil "[~{~S~^, ~}]" (coerce value 'list))
                (format nil "an array of ~D" (length value))))
    ((eql t) "true")
    (null "false")
    ((eql :null) "null")
    (double-float (let ((*read-default-float-format* 'double-float)) (format nil "~A" value)))
    (t (format nil "~A" value))))

(defun json-object (value path &optional key)
  "VALUE when it is a JSON object; else a CONVERT-ERROR naming PATH (and
KEY, the member it was read from)."
  (if (hash-table-p value)
      value
      (convert-error path "~:[~;key ~:*~S: ~]expected a JSON object, found ~A" key (json-brief value))))

(defun cfg (table key path &key (type 'integer) (default nil default-p))
  "The value of KEY in the JSON object TABLE of the file PATH, of TYPE
(integer, real, string, hash-table, vector or boolean); DEFAULT when the
key is absent (an error without one).  A real is a finite number within
single-float range; an integer named in *CONFIG-LIMITS* is within its
limits."
  (multiple-value-bind (v found) (gethash key table)
    (flet ((bad (what) (convert-error path "key ~S: expected ~A, found ~A" key what (json-brief v))))
      (cond ((not found)
             (if default-p default (convert-error path "expected a key ~S, found none" key)))
            ((eq type 'boolean) (if (member v '(t nil)) v (bad "true or false")))
            ((eq type 'real)
             (if (and (realp v) (< (abs v) most-positive-single-float)) v (bad "a finite number")))
            ((eq type 'integer)
             (let ((limits (rest (assoc key *config-limits* :test #'string=))))
               (cond ((not (integerp v)) (bad "an integer"))
                     ((and limits (not (<= (first limits) v (second limits))))
                      (bad (format nil "an integer from ~D to ~D" (first limits) (second limits))))
                     (t v))))
            ((typep v type) v)
            (t (bad (ecase type (string "a string") (hash-table "a JSON object")
                      (vector "an array"))))))))

(defun encoder-hparams (encoder path)
  "The ModernBERT hyper-parameters of the config ENCODER (a parsed JSON
object of the file PATH) as a plist, each checked.  A key the config leaves
out takes the default of Hugging Face's ModernBertConfig, as upstream's
converter sees it through AutoConfig."
  (json-object encoder path)
  (let ((hp (list :hidden (cfg encoder "hidden_size" path)
                  :layers (cfg encoder "num_hidden_layers" path)
                  :intermediate (cfg encoder "intermediate_size" path)
                  :heads (cfg encoder "num_attention_heads" path)
                  :vocab (cfg encoder "vocab_size" path :default 50368)
                  :context (cfg encoder "max_position_embeddings" path :default 8192)
                  :eps (cfg encoder "norm_eps" path :type 'real :default 1d-5)
                  :global-theta (cfg encoder "global_rope_theta" path :type 'real :default 160000d0)
                  :local-theta (cfg encoder "local_rope_theta" path :type 'real :default 10000d0)
                  :window (cfg encoder "local_attention" path :default 128)
                  :pattern (cfg encoder "global_attn_every_n_layers" path :default 3)
                  :act (cfg encoder "hidden_activation" path :type 'string :default "gelu"))))
    (destructuring-bind (&key hidden heads eps global-theta local-theta act &allow-other-keys) hp
      (unless (and (zerop (mod hidden heads)) (evenp (floor hidden heads)))
        (convert-error path "key \"num_attention_heads\": expected a divisor of hidden_size ~D ~
leaving an even head size, found ~D" hidden heads))
      (loop for (key value) in `(("norm_eps" ,eps) ("global_rope_theta" ,global-theta)
                                 ("local_rope_theta" ,local-theta))
            unless (plusp value)
              do (convert-error path "key ~S: expected a positive number, found ~A" key value))
      ;; The names llama.cpp's loader maps to a gated FFN (GeGLU, SwiGLU);
      ;; any other it would silently run as GeGLU.
      (unless (member act '("gelu" "geglu" "silu" "swish" "swiglu") :test #'string=)
        (convert-error path "key \"hidden_activation\": expected gelu, geglu, silu, swish or ~
swiglu, found ~S" act))
      ;; llama.cpp's ModernBERT graph has no biases: a model with them
      ;; would load without them and compute something else.
      (dolist (key '("norm_bias" "attention_bias" "mlp_bias"))
        (when (cfg encoder key path :type 'boolean :default nil)
          (convert-error path "key ~S: expected false (llama.cpp's ModernBERT has no such ~
biases), found true" key))))
    hp))

(defun shape-string (dims)
  (format nil "[~{~D~^, ~}]" dims))

(defun check-tensors (tensors expected path config-path layer-prefixes)
  "Check the input TENSORS, a list of (name data) read from PATH, against
EXPECTED, a list of (name shape) that the config CONFIG-PATH implies:
every name known, every layer index in range, every shape right, nothing
missing.  LAYER-PREFIXES lists (prefix count source) for the layered
names, COUNT their layers and SOURCE the config file and key that say so."
  (let ((shapes (make-hash-table :test 'equal)))
    (loop for (name shape) in expected do (setf (gethash name shapes) shape))
    (loop for (name data) in tensors
          for shape = (gethash name shapes)
          do (unless shape
               (loop for (prefix count source) in layer-prefixes
                     do (let ((n (layer-index name prefix)))
                          (cond ((stringp n)
                                 (convert-error path "tensor ~S: expected a layer index (digits), ~
found ~S" name n))
                                ((and n (>= n count))
                                 (convert-error path "tensor ~S: expected a layer index below ~D ~
(~A), found ~D" name count source n)))))
               (convert-error path "tensor ~S: expected a ModernBERT tensor name, found an unknown ~
one" name))
             (let ((dims (packed-dimensions data)))
               (unless (equal dims shape)
                 (convert-error path "tensor ~S: expected shape ~A (from ~A), found ~A" name
                                (shape-string shape) config-path (shape-string dims)))))
    (let ((given (make-hash-table :test 'equal)))
      (loop for (name) in tensors do (setf (gethash name given) t))
      (loop for (name) in expected
            unless (gethash name given)
              do (convert-error path "tensor ~S: expected it (from ~A), found none" name
                                config-path)))))

(defun temperature-key (bucket)
  "A Laya bucket name as a GGUF key part: choice:3-5 -> choice.3_5."
  (substitute #\_ #\- (substitute #\. #\: bucket)))

(defun systemone-template (cls sep mask)
  "The Jinja chat template llama.cpp's server renders for a decision:
CLS {type} question: {instructions} SEP (MASK option)* SEP state SEP."
  (format nil "~A{{ type }} question: {{ instructions }}~A~
{% for o in options %}~A{{ o.text if o.text is defined else o }}{% endfor %}~
~A{{ state }}~A" cls sep mask sep sep))

(defun token-string (value path what)
  "VALUE, a token string from the tokenizer file PATH (WHAT says where);
refused when it is not a non-empty string.  (A NUL never gets here: the
JSON reader refuses it.)"
  (unless (and (stringp value) (plusp (length value)))
    (convert-error path "~A: expected a non-empty string, found ~A" what (json-brief value)))
  value)

(defun merge-string (m i path)
  "The I-th BPE merge M of the tokenizer file PATH as GGUF keeps it, \"a
b\": M is that string or the pair [\"a\", \"b\"]."
  (let ((what (format nil "model.merges[~D]" i)))
    (cond ((stringp m)
           (unless (= 1 (count #\Space m))
             (convert-error path "~A: expected two tokens separated by one space, found ~S" what m))
           (token-string m path what))
          ((and (vectorp m) (= 2 (length m)) (every #'stringp m))
           (format nil "~A ~A" (token-string (aref m 0) path what) (token-string (aref m 1) path what)))
          (t (convert-error path "~A: expected \"a b\" or a pair of strings, found ~A" what
                            (json-brief m))))))

(defun special-token-name (tokenizer-config key default)
  "The special token KEY (\"cls_token\") names in tokenizer_config.json's
data TOKENIZER-CONFIG (a string, or an object with its content), or DEFAULT."
  (let ((v (and tokenizer-config (gethash key tokenizer-config))))
    (cond ((stringp v) v)
          ((hash-table-p v) (or (gethash "content" v) default))
          (t default))))

(defun tokenizer-metadata (tok path pre vocab-size
                           &key token-types tokenizer-config template (config-path "config.json")
                                (tokenizer-config-path "tokenizer_config.json"))
  "The tokenizer.ggml.* and skycmd.tokenizer.* keys of the tokenizer.json
data TOK (the file PATH) for a model of VOCAB-SIZE token embeddings, ids
without a token becoming [PADn] as upstream writes them.  TOKEN-TYPES, when
given, is token_type_count (the decision head's type embeddings);
TOKENIZER-CONFIG (the data of TOKENIZER-CONFIG-PATH) names the special
tokens; TEMPLATE is the chat template (default: tokenizer_config's).
CONFIG-PATH names the file that gives VOCAB-SIZE, for errors."
  (json-object tok path)
  (let* ((model (json-object (cfg tok "model" path :type 'hash-table) path "model"))
         (vocab (cfg model "vocab" path :type 'hash-table))
         (tokens (make-array vocab-size :initial-element nil))
         (types (make-array vocab-size :element-type '(signed-byte 32) :initial-element 1))
         (added (cfg tok "added_tokens" path :type 'vector :default #()))
         (merges (let ((ms (cfg model "merges" path :type 'vector)))
                   (map 'vector (let ((i -1)) (lambda (m) (merge-string m (incf i) path))) ms)))
         (ids (make-hash-table :test 'equal))
         (lstrip '()) (rstrip '()))
    (unless (member (gethash "type" model "BPE") '("BPE") :test #'equal)
      (convert-error path "key \"model.type\": expected \"BPE\", found ~A" (json-brief (gethash "type" model))))
    (flet ((place (tok id what)
             (token-string tok path what)
             (unless (and (integerp id) (< -1 id vocab-size))
               (convert-error path "~A: expected an id below ~D (~A vocab_size), found ~A" what
                              vocab-size config-path (json-brief id)))
             (let ((old (aref tokens id)))
               (when (and old (string/= old tok))
                 (convert-error path "~A: expected a free id, found ~D taken by ~S" what id old)))
             (setf (aref tokens id) tok (gethash tok ids) id)))
      (maphash (lambda (k id) (place k id (format nil "token ~S" k))) vocab)
      (loop for a across added
            for i from 0
            for what = (format nil "added_tokens[~D]" i)
            do (json-object a path what)
               (let ((id (gethash "id" a)))
                 (place (gethash "content" a) id what)
                 (flet ((flag (key) (cfg a key path :type 'boolean :default nil)))
                   (setf (aref types id) (if (flag "special") 3 4))
                   (when (flag "lstrip") (push id lstrip))
                   (when (flag "rstrip") (push id rstrip))
                   (flag "single_word") (flag "normalized")))))
    (dotimes (id vocab-size)
      (unless (aref tokens id)
        (setf (aref tokens id) (format nil "[PAD~D]" id) (aref types id) 5)))
    (flet ((id-of (key default)
             (let ((name (special-token-name tokenizer-config key default)))
               (or (gethash name ids)
                   (convert-error path "expected a token ~A (~A), found none" name key)))))
      (let ((normalizer (gethash "normalizer" tok))
            (template (or template
                          (and tokenizer-config
                               (cfg tokenizer-config "chat_template" tokenizer-config-path
                                    :type 'string :default nil))))
            (cls (id-of "cls_token" "[CLS]")) (sep (id-of "sep_token" "[SEP]")))
        (remove nil
                (list (list "tokenizer.ggml.model" :string "gpt2")
                      (list "tokenizer.ggml.pre" :string pre)
                      (list "tokenizer.ggml.tokens" '(:array :string) tokens)
                      (list "tokenizer.ggml.token_type" '(:array :i32) types)
                      (list "tokenizer.ggml.merges" '(:array :string) merges)
                      ;; ModernBERT's config has bos = [CLS] and eos = [SEP].
                      (list "tokenizer.ggml.bos_token_id" :u32 cls)
                      (list "tokenizer.ggml.eos_token_id" :u32 sep)
                      (list "tokenizer.ggml.seperator_token_id" :u32 sep)
                      (list "tokenizer.ggml.cls_token_id" :u32 cls)
                      (list "tokenizer.ggml.mask_token_id" :u32 (id-of "mask_token" "[MASK]"))
                      (list "tokenizer.ggml.unknown_token_id" :u32 (id-of "unk_token" "[UNK]"))
                      (list "tokenizer.ggml.padding_token_id" :u32 (id-of "pad_token" "[PAD]"))
                      (list "tokenizer.ggml.add_bos_token" :bool t)
                      (list "tokenizer.ggml.add_eos_token" :bool t)
                      (list "tokenizer.ggml.add_sep_token" :bool t)
                      (and token-types (list "tokenizer.ggml.token_type_count" :u32 token-types))
                      ;; The default template: llama.cpp's server renders
                      ;; only this one unless a named template is asked for.
                      (and template (list "tokenizer.chat_template" :string template))
                      (list "skycmd.tokenizer.normalizer" :string
                            (if (hash-table-p normalizer)
                                (cfg normalizer "type" path :type 'string :default "none")
                                "none"))
                      (list "skycmd.tokenizer.lstrip_ids" '(:array :i32)
                            (coerce (sort lstrip #'<) '(vector (signed-byte 32))))
                      (list "skycmd.tokenizer.rstrip_ids" '(:array :i32)
                            (coerce (sort rstrip #'<) '(vector (signed-byte 32))))
                      (list "skycmd.tokenizer.ignore_merges" :bool
                            (cfg model "ignore_merges" path :type 'boolean :default nil))))))))

(defparameter *convert-types* '("f32" "f16" "bf16" "q8_0")
  "The tensor types the converter writes, as --type and --head-type name them.")

(defun type-keyword (name)
  "The keyword of the tensor type NAME, one of *CONVERT-TYPES* (\"q8_0\" -> :Q8_0)."
  (tensor-type-keyword (find-tensor-type name)))

(defun tensor-type (gguf-name dims head-p type head-type)
  "The GGUF type of a tensor under SPEC 7's policy."
  (let ((ty (cond ((< (length dims) 2) :f32)
                  (head-p head-type)
                  ((and (string= gguf-name "token_embd.weight") (eq type :q8_0)) :f16)
                  (t type))))
    (if (and (eq ty :q8_0) (/= 0 (mod (car (last dims)) 32))) :f16 ty)))

(defun file-type-id (type)
  (ecase type (:f32 0) (:f16 1) (:q8_0 7) (:bf16 32)))

(defun modern-bert-metadata (hp &key (blocks (getf hp :layers)) feed-forward pooling labels)
  "The modern-bert.* keys upstream's converter (ModernBertModel over
TextModel and BertModel) writes for the hyper-parameters HP, with the
types it gives them.  BLOCKS and FEED-FORWARD (a u32, or a vector of them
for a file that also holds the decision head's blocks) override the
encoder's own; POOLING, when given, is the pooling_type; LABELS, a vector
of strings, the classifier's output labels."
  (flet ((k (s) (concatenate 'string "modern-bert." s))
         (f32 (x) (coerce x 'single-float)))
    (remove nil
            (list (list (k "block_count") :u32 blocks)
                  (list (k "context_length") :u32 (getf hp :context))
                  (list (k "embedding_length") :u32 (getf hp :hidden))
                  (if (vectorp feed-forward)
                      (list (k "feed_forward_length") '(:array :u32) feed-forward)
                      (list (k "feed_forward_length") :u32 (getf hp :intermediate)))
                  (list (k "attention.head_count") :u32 (getf hp :heads))
                  (list (k "rope.freq_base") :f32 (f32 (getf hp :global-theta)))
                  (list (k "rope.freq_base_swa") :f32 (f32 (getf hp :local-theta)))
                  ;; Upstream files norm_eps under the RMS key, but the
                  ;; loader reads layer_norm_epsilon (ModernBERT's norms are
                  ;; LayerNorms): both are written.
                  (list (k "attention.layer_norm_rms_epsilon") :f32 (f32 (getf hp :eps)))
                  (list (k "attention.layer_norm_epsilon") :f32 (f32 (getf hp :eps)))
                  (list (k "attention.causal") :bool nil)
                  (and pooling (list (k "pooling_type") :u32 pooling))
                  (and labels (list (k "classifier.output_labels") '(:array :string) labels))
                  (list (k "attention.sliding_window") :u32 (getf hp :window))
                  (list (k "attention.sliding_window_pattern") :u32 (getf hp :pattern))
                  (list (k "rope.scaling.type") :string "none")
                  (list (k "vocab_size") :u32 (getf hp :vocab))
                  (list (k "hidden_activation") :string (getf hp :act))))))

(defun decision-metadata (rl rl-path head-layers)
  "The modern-bert.decision.* keys of the Laya decision head (ours, not
upstream's) from rl_agent_config.json's data RL."
  (flet ((k (s) (concatenate 'string "modern-bert.decision." s)))
    (let* ((temps (json-object (cfg rl "temperatures" rl-path :type 'hash-table
                                                               :default (make-hash-table))
                               rl-path "temperatures"))
           (keys (sort (loop for key being the hash-keys of temps collect key) #'string<)))
      (append
       (list (list (k "type") :string "laya")
             (list (k "block_count") :u32 head-layers)
             (list (k "max_head_tokens") :u32 (cfg rl "head_max_len" rl-path :default 192))
             (list (k "max_tokens") :u32 (cfg rl "max_len" rl-path :default 1024)))
       (loop for key in keys
             collect (list (k (format nil "temperature.~A" (temperature-key key)))
                           :f32 (coerce (cfg temps key rl-path :type 'real) 'single-float)))))))

(defun size-label (params)
  "PARAMS as upstream's general.size_label spells a parameter count: 152K,
6.6M (at least two significant digits, K M B T)."
  (multiple-value-bind (scaled suffix)
      (cond ((> params 1d12) (values (* params 1d-12) "T"))
            ((> params 1d9) (values (* params 1d-9) "B"))
            ((> params 1d6) (values (* params 1d-6) "M"))
            (t (values (* params 1d-3) "K")))
    (let ((fix (max (- 2 (length (string-left-trim "0" (princ-to-string (round scaled))))) 0)))
      (if (zerop fix)
          (format nil "~D~A" (round scaled) suffix)
          (format nil "~,vF~A" fix scaled suffix)))))

(defun general-metadata (name type tensors)
  "The general.* keys: architecture, type, name, size label (of the output
TENSORS, (name data ...) lists), file type (from the encoder's TYPE, as
upstream's ftype) and quantization version."
  (list (list "general.architecture" :string "modern-bert")
        (list "general.type" :string "model")
        (list "general.name" :string name)
        (list "general.size_label" :string
              (size-label (loop for e in tensors sum (reduce #'* (packed-dimensions (second e))))))
        (list "general.file_type" :u32 (file-type-id type))
        (list "general.quantization_version" :u32 2)))

(defun convert-tensors (tensors path name-of type head-type)
  "The output tensors, (gguf-name data :dims ne), of the input TENSORS
(name data) of the file PATH: NAME-OF maps an input name to its GGUF name
and whether it is a head tensor (NIL: left out).  Values that are not
finite, or that the output type cannot hold (beyond binary16's range for
F16, a Q8_0 scale that overflows), are refused naming the input tensor."
  (let ((report (progress-reporter (length tensors)))
        (done 0)
        (out '()))
    (loop for (hf data) in tensors
          do (multiple-value-bind (g head-p) (funcall name-of hf)
               (when g
                 (let* ((dims (packed-dimensions data))
                        (ty (tensor-type g dims head-p type head-type))
                        (bad (first-non-finite data)))
                   (when bad
                     (tensor-data-error path hf "has invalid data: expected finite values, found ~
a NaN or infinity at element ~D" bad))
                   (let* ((converted
                            (handler-case
                                (convert-tensor-data (if (and (eq ty :q8_0) (> (length dims) 2))
                                                         (data-as-matrix data (reverse dims))
                                                         data)
                                                     ty)
                              (scale-overflow-error (c)
                                (tensor-data-error path hf "cannot be Q8_0: row ~D, block ~D: ~
expected a block absmax below 8321040, found a scale that overflows binary16"
                                                   (scale-overflow-error-row c)
                                                   (scale-overflow-error-block c)))))
                          (over (and (member ty '(:f16 :bf16)) (first-non-finite converted))))
                     (when over
                       (tensor-data-error path hf "cannot be ~A: element ~D overflows it (~
expected magnitudes below ~A)" ty over (if (eq ty :f16) 65520 "3.39e38")))
                     (push (list g converted :dims (reverse dims)) out)))))
             (funcall report (incf done) (concatenate 'string "converting " hf)))
    (reverse out)))

(defun laya-gguf-file (tensors encoder rl config tokenizer
                       &key (type :f16) (head-type :f32) (pre "modern-bert") name paths
                            encoder-only)
  "The GGUF file object (GGUF:MAKE-FILE's, ready for GGUF:WRITE) of a Laya
model's parts, as READ-SAFETENSORS and PARSE-JSON answer them, every part
checked first.  PATHS: a plist naming the files, for errors.  ENCODER-ONLY
drops the decision head (its tensors, keys and token types): what is left
is a plain ModernBERT encoder, which llama.cpp loads."
  (let* ((model-path (getf paths :model "model.safetensors"))
         (enc-path (getf paths :encoder "encoder/config.json"))
         (rl-path (getf paths :rl "rl_agent_config.json"))
         (hp (encoder-hparams encoder enc-path))
         (h (getf hp :hidden))
         (layers (getf hp :layers))
         (head-layers (cfg (json-object rl rl-path) "head_layers" rl-path)))
    (json-object config (getf paths :config "config.json"))
    (check-tensors tensors
                   (append (apply #'encoder-tensor-shapes "encoder.model." hp)
                           (decision-head-tensor-shapes :hidden h :head-layers head-layers))
                   model-path enc-path
                   `(("encoder.model.layers." ,layers ,(format nil "~A num_hidden_layers" enc-path))
                     ("head.layers." ,head-layers ,(format nil "~A head_layers" rl-path))))
    (let* ((out (convert-tensors tensors model-path
                                 (lambda (hf)
                                   (multiple-value-bind (g head-p) (gguf-tensor-name hf layers)
                                     (and (not (and head-p encoder-only)) (values g head-p))))
                                 type head-type))
           (metadata
             (append
              (general-metadata (or name (cfg config "name" (getf paths :config "config.json")
                                              :type 'string :default "modern-bert"))
                                type out)
              (if encoder-only
                  (modern-bert-metadata hp :pooling 2)
                  (modern-bert-metadata
                   hp :blocks (+ layers head-layers) :pooling 2
                      :feed-forward (coerce (append (make-list layers :initial-element (getf hp :intermediate))
                                                    (make-list head-layers :initial-element (* 4 h)))
                                            '(vector (unsigned-byte 32)))))
              (unless encoder-only (decision-metadata rl rl-path head-layers))
              (tokenizer-metadata tokenizer (getf paths :tokenizer "tokenizer/tokenizer.json") pre
                                  (getf hp :vocab)
                                  :token-types (if encoder-only nil 3) :config-path enc-path
                                  :template (systemone-template "[CLS]" "[SEP]" "[MASK]")))))
      (gguf:make-file :metadata metadata :tensors out))))

(defun write-gguf-file (out f)
  "Write the file object F to the GGUF file OUT; answer its tensor count."
  (gguf:write out f)
  (length (gguf:tensor-infos f)))

(defun read-input-json (path &optional (default nil default-p))
  "The JSON object in the file PATH (READ-JSON-FILE), or DEFAULT when
given and PATH does not exist."
  (if (and default-p (not (probe-file path)))
      default
      (json-object (read-json-file path) path)))

(defun convert-laya (dir out &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                  encoder-only)
  "Convert the Laya model directory DIR (model.safetensors, config.json,
encoder/config.json, rl_agent_config.json, tokenizer/tokenizer.json) to the
GGUF file OUT with encoder matrices of TYPE and decision head of HEAD-TYPE
(:f32 :f16 :bf16 :q8_0); ENCODER-ONLY leaves the head out.  Every input is
checked before anything is written (CONVERT-ERROR, TENSOR-DATA-ERROR).
Answers the number of tensors written."
  (let* ((root (directory-prefix dir))
         (paths (list :model (concatenate 'string root "model.safetensors")
                      :encoder (concatenate 'string root "encoder/config.json")
                      :rl (concatenate 'string root "rl_agent_config.json")
                      :config (concatenate 'string root "config.json")
                      :tokenizer (concatenate 'string root "tokenizer/tokenizer.json"))))
    ;; The configs first: an absurd one is refused before the weights are read.
    (let* ((encoder (read-input-json (getf paths :encoder)))
           (rl (read-input-json (getf paths :rl)))
           (config (read-input-json (getf paths :config) (make-hash-table :test 'equal)))
           (tokenizer (read-input-json (getf paths :tokenizer))))
      (encoder-hparams encoder (getf paths :encoder))
      (cfg rl "head_layers" (getf paths :rl))
      (write-gguf-file
       out (laya-gguf-file (read-safetensors (getf paths :model)) encoder rl config tokenizer
                           :type type :head-type head-type :pre pre :name name :paths paths
                           :encoder-only encoder-only)))))

;;; Hugging Face ModernBERT directories, as upstream's convert_hf_to_gguf.py
;;; takes them: config.json (model_type modernbert), the weights in
;;; model.safetensors or in shards listed by model.safetensors.index.json,
;;; tokenizer.json and tokenizer_config.json, and the sentence-transformers
;;; pooling (modules.json) when there is one.

(defparameter *hf-architectures*
  '(("ModernBertModel" . :none) ("ModernBertForMaskedLM" . :masked-lm)
    ("ModernBertForSequenceClassification" . :classifier))
  "The Hugging Face architectures upstream's ModernBertModel converts, and
the head each carries.")

(defun read-hf-tensors (root)
  "The tensors, a list of (name data), of the Hugging Face directory ROOT
(a string ending in a slash): model.safetensors, or the shards that
model.safetensors.index.json lists, each tensor where the index says."
  (let ((index-path (concatenate 'string root "model.safetensors.index.json")))
    (if (not (probe-file index-path))
        (read-safetensors (concatenate 'string root "model.safetensors"))
        (let* ((index (read-input-json index-path))
               (weight-map (json-object (cfg index "weight_map" index-path :type 'hash-table)
                                        index-path "weight_map"))
               (files '()) (tensors '()))
          (maphash (lambda (name file)
                     (unless (and (stringp file) (plusp (length file)) (not (find #\/ file)))
                       (convert-error index-path "key ~S: expected a shard file name in the ~
directory, found ~A" (format nil "weight_map.~A" name) (json-brief file)))
                     (pushnew file files :test #'string=))
                   weight-map)
          (dolist (file (sort files #'string<))
            (let ((path (concatenate 'string root file)))
              (loop for entry in (read-safetensors path)
                    for name = (first entry)
                    do (unless (equal (gethash name weight-map) file)
                         (convert-error path "tensor ~S: expected it in ~A as ~A lists it, found ~
it here" name (or (gethash name weight-map) "no shard") index-path))
                       (push entry tensors))))
          (let ((found (make-hash-table :test 'equal)))
            (dolist (e tensors) (setf (gethash (first e) found) t))
            (maphash (lambda (name file)
                       (unless (gethash name found)
                         (convert-error index-path "key ~S: expected the tensor in ~A, found none"
                                        (format nil "weight_map.~A" name) file)))
                     weight-map))
          (reverse tensors)))))

(defun hf-pooling (root)
  "The pooling_type of the sentence-transformers pooling module that
modules.json in ROOT names (1 mean, 2 CLS, 3 last token, as upstream
reads it), or NIL when there is none."
  (let ((modules-path (concatenate 'string root "modules.json")))
    (when (probe-file modules-path)
      (let ((modules (read-json-file modules-path)))
        (unless (vectorp modules)
          (convert-error modules-path "expected a JSON array, found ~A" (json-brief modules)))
        (loop for m across modules
              for i from 0
              do (json-object m modules-path (format nil "[~D]" i))
                 (let ((type (cfg m "type" modules-path :type 'string :default "")))
                   (when (and (>= (length type) 7) (string= "Pooling" type :start2 (- (length type) 7)))
                     (let* ((dir (cfg m "path" modules-path :type 'string))
                            (path (concatenate 'string root dir "/config.json"))
                            (pooling (read-input-json path)))
                       (flet ((on (key) (cfg pooling key path :type 'boolean :default nil)))
                         (return
                           (cond ((on "pooling_mode_mean_tokens") 1)
                                 ((on "pooling_mode_cls_token") 2)
                                 ((on "pooling_mode_lasttoken") 3)
                                 (t (convert-error path "expected a mean, CLS or last-token ~
pooling mode, found none")))))))))))))

(defun hf-labels (config path)
  "The classifier's output labels of the Hugging Face CONFIG (id2label,
in id order; else num_labels labels LABEL_i)."
  (let ((id2label (cfg config "id2label" path :type 'hash-table :default nil)))
    (if id2label
        (let ((pairs '()))
          (maphash (lambda (k v)
                     (let ((id (ignore-errors (parse-integer k))))
                       (unless (and id (< -1 id (hash-table-count id2label)) (stringp v))
                         (convert-error path "key ~S: expected a label string at an id below ~D, ~
found ~A" (format nil "id2label.~A" k) (hash-table-count id2label) (json-brief v)))
                       (push (cons id v) pairs)))
                   id2label)
          (map 'vector #'cdr (sort pairs #'< :key #'car)))
        (coerce (loop for i below (cfg config "num_labels" path :default 2)
                      collect (format nil "LABEL_~D" i))
                'vector))))

(defun hf-expected-tensors (prefix hp head config path)
  "The (name shape optional) of every tensor a Hugging Face ModernBERT of
the hyper-parameters HP with HEAD (:none, :masked-lm, :classifier) holds."
  (let ((h (getf hp :hidden)))
    (append (mapcar (lambda (e) (list (first e) (second e)))
                    (apply #'encoder-tensor-shapes prefix hp))
            (unless (eq head :none)
              (list (list "head.dense.weight" (list h h))
                    (list "head.norm.weight" (list h))
                    (list "head.dense.bias" (list h) t)))
            (case head
              (:masked-lm (list (list "decoder.weight" (list (getf hp :vocab) h) t)
                                (list "decoder.bias" (list (getf hp :vocab)) t)))
              (:classifier (let ((n (length (hf-labels config path))))
                             (list (list "classifier.weight" (list n h))
                                   (list "classifier.bias" (list n)))))))))

(defun hf-gguf-file (tensors config tokenizer tokenizer-config
                     &key (type :f16) (head-type :f32) (pre "modern-bert") name paths pooling
                          encoder-only)
  "The GGUF file object of a Hugging Face ModernBERT's parts (see
LAYA-GGUF-FILE; PATHS names :model, :config and :tokenizer for errors;
POOLING is HF-POOLING's answer).  The head's dense layer, norm and
classifier map as upstream maps them; tensors llama.cpp has no place for
are left out with a message on *ERROR-OUTPUT*, and every head tensor with
ENCODER-ONLY."
  (let* ((model-path (getf paths :model "model.safetensors"))
         (config-path (getf paths :config "config.json"))
         (hp (encoder-hparams config config-path))
         (model-type (cfg config "model_type" config-path :type 'string))
         (archs (cfg config "architectures" config-path :type 'vector))
         (head (progn
                 (unless (string= model-type "modernbert")
                   (convert-error config-path "key \"model_type\": expected \"modernbert\", found ~S"
                                  model-type))
                 (or (and (= 1 (length archs))
                          (cdr (assoc (aref archs 0) *hf-architectures* :test #'equal)))
                     (convert-error config-path "key \"architectures\": expected one of ~{~A~^, ~}, ~
found ~A" (mapcar #'car *hf-architectures*) (json-brief archs)))))
         (prefix (if (some (lambda (e) (string= "model.embeddings." (first e)
                                                :end2 (min 17 (length (first e)))))
                           tensors)
                     "model." ""))
         (layers (getf hp :layers))
         (labels (and (eq head :classifier) (not encoder-only) (hf-labels config config-path)))
         (expected (hf-expected-tensors prefix hp head config config-path)))
    ;; Shards and files list tensors in any order: the output keeps the
    ;; encoder's (the order of the expected table), so the same model
    ;; gives the same file however it was saved.
    (setf tensors (stable-sort (copy-list tensors) #'<
                               :key (lambda (e) (or (position (first e) expected :key #'first
                                                                                 :test #'string=)
                                                    (length expected)))))
    (check-tensors (remove-if (lambda (e) (third (assoc (first e) expected :test #'string=)))
                              tensors)
                   (remove-if #'third expected)
                   model-path config-path
                   `((,(concatenate 'string prefix "layers.") ,layers
                      ,(format nil "~A num_hidden_layers" config-path))))
    (loop for (name data) in tensors
          for entry = (assoc name expected :test #'string=)
          when (third entry)
            do (unless (equal (packed-dimensions data) (second entry))
                 (convert-error model-path "tensor ~S: expected shape ~A (from ~A), found ~A" name
                                (shape-string (second entry)) config-path
                                (shape-string (packed-dimensions data))))
               (format *error-output* "~A: tensor ~S left out: ~A, which llama.cpp's ~
modern-bert has no place for~%" model-path name
                       (cdr (assoc name *hf-dropped-tensors* :test #'string=))))
    (when (and encoder-only (not (eq head :none)))
      (format *error-output* "~A: the ~(~A~) head left out (--encoder-only)~%" model-path head))
    (let* ((out (convert-tensors tensors model-path
                                 (lambda (hf)
                                   (multiple-value-bind (g head-p)
                                       (gguf-tensor-name hf layers :prefix prefix :head :hf)
                                     (and (not (and head-p encoder-only)) (values g head-p))))
                                 type head-type))
           (metadata
            (append
             (general-metadata (or name (car (last (pathname-directory
                                                    (pathname (directory-prefix (getf paths :root "./")))))))
                               type out)
             (modern-bert-metadata hp :pooling pooling :labels labels)
             (tokenizer-metadata tokenizer (getf paths :tokenizer "tokenizer.json") pre
                                 (getf hp :vocab) :tokenizer-config tokenizer-config
                                 :config-path config-path
                                 :tokenizer-config-path (concatenate 'string (getf paths :root "")
                                                                     "tokenizer_config.json")))))
      (gguf:make-file :metadata metadata :tensors out))))

(defun convert-hf (dir out &key (type :f16) (head-type :f32) (pre "modern-bert") name encoder-only)
  "Convert the Hugging Face ModernBERT directory DIR (config.json,
model.safetensors or shards with model.safetensors.index.json,
tokenizer.json, tokenizer_config.json, modules.json) to the GGUF file OUT,
as upstream's converter names and keys it, with matrices of TYPE and the
head's of HEAD-TYPE; ENCODER-ONLY leaves the head out.  Every input is
checked before anything is written.  Answers the number of tensors
written."
  (let* ((root (directory-prefix dir))
         (index (concatenate 'string root "model.safetensors.index.json"))
         (paths (list :root root
                      :model (if (probe-file index) index (concatenate 'string root "model.safetensors"))
                      :config (concatenate 'string root "config.json")
                      :tokenizer (concatenate 'string root "tokenizer.json"))))
    ;; The configs first: an absurd one is refused before the weights are read.
    (let ((config (read-input-json (getf paths :config)))
          (tokenizer (read-input-json (getf paths :tokenizer)))
          (tokenizer-config (read-input-json (concatenate 'string root "tokenizer_config.json") nil))
          (pooling (hf-pooling root)))
      (encoder-hparams config (getf paths :config))
      (write-gguf-file
       out (hf-gguf-file (read-hf-tensors root) config tokenizer tokenizer-config
                         :type type :head-type head-type :pre pre :name name :paths paths
                         :pooling pooling :encoder-only encoder-only)))))

(defun convert-directory (dir out &rest options &key &allow-other-keys)
  "Convert DIR, a Laya directory (it has encoder/config.json) or a Hugging
Face ModernBERT directory (a config.json without it), with CONVERT-LAYA or
CONVERT-HF and OPTIONS."
  (let ((root (directory-prefix dir)))
    (cond ((probe-file (concatenate 'string root "encoder/config.json"))
           (apply #'convert-laya dir out options))
          ((probe-file (concatenate 'string root "config.json"))
           (apply #'convert-hf dir out options))
          (t (convert-error dir "expected a Laya directory (encoder/config.json) or a Hugging ~
Face ModernBERT directory (config.json), found neither")))))

(defun random-model (preset-name &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                       (seed 1) encoder-only (massive 0) (massive-ratio 20))
  "The GGUF file object (GGUF:MAKE-FILE's, in memory) of a model of
PRESET-NAME (s1-pico, s1-nano, s1-micro) with random weights from SEED and
a small test tokenizer, its tensors of TYPE and HEAD-TYPE as CONVERT-LAYA
makes them (without the decision head when ENCODER-ONLY), MASSIVE residual
channels MASSIVE-RATIO times larger than the rest (see RANDOM-LAYA)."
  (multiple-value-bind (tensors encoder rl config tokenizer)
      (random-laya preset-name :seed seed :massive massive :massive-ratio massive-ratio
                               :report (random-progress preset-name))
    (laya-gguf-file tensors (json-like encoder) (json-like rl) (json-like config)
                    (json-like tokenizer)
                    :type type :head-type head-type :pre pre :name name
                    :encoder-only encoder-only)))

(defun json-like (value)
  "VALUE written by WRITE-JSON's mapping read back as PARSE-JSON answers
it (for --random, which builds the files in memory)."
  (parse-json (with-output-to-string (s) (write-json value s))))

(defun convert-random (preset-name out &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                            (seed 1) encoder-only (massive 0) (massive-ratio 20))
  "Write the GGUF file OUT for a model of PRESET-NAME (s1-pico, s1-nano,
s1-micro) with random weights from SEED and a small test tokenizer, MASSIVE
residual channels MASSIVE-RATIO times larger than the rest (see
RANDOM-MODEL).  Answers the number of tensors written."
  (write-gguf-file out (random-model preset-name :type type :head-type head-type :pre pre
                                                 :name name :seed seed :massive massive
                                                 :massive-ratio massive-ratio
                                                 :encoder-only encoder-only)))

(define-command "convert" (&optional source out)
    (:usage "<model_dir | --random s1-pico|s1-nano|s1-micro> OUT.gguf [--type f32|f16|bf16|q8_0] [--head-type f32|f16|bf16|q8_0] [--encoder-only] [--pre NAME] [--name NAME] [--seed N] [--massive K [--massive-ratio R]] [--write-laya DIR]"
     :summary "convert a Laya or Hugging Face ModernBERT directory (or a random model) to GGUF"
     :details "model_dir: a Laya directory (encoder/config.json, rl_agent_config.json, ...)
or a Hugging Face ModernBERT directory (config.json, model.safetensors or
shards, tokenizer.json).  Type policy: 1-D tensors F32; the head --head-type;
encoder matrices --type, except that with q8_0 the token embeddings stay
F16; a row that is not a multiple of 32 falls back to F16."
     :options ((random "--random NAME" :parse (choice-parser (mapcar #'first *presets*))
                       :help "a model of that preset shape with random weights and a
small test tokenizer, instead of a model directory")
               (type "--type TYPE" :parse (choice-parser *convert-types* :key #'type-keyword)
                     :default :f16 :help "the encoder matrices' type (default f16)")
               (head-type "--head-type TYPE" :parse (choice-parser *convert-types* :key #'type-keyword)
                          :default :f32 :help "the head's type (default f32)")
               (encoder-only "--encoder-only"
                             :help "leave the head out: a plain ModernBERT encoder, the
file llama.cpp loads")
               (pre "--pre NAME" :default "modern-bert"
                    :help "tokenizer.ggml.pre (default modern-bert)")
               (name "--name NAME" :help "general.name (default: config.json's name, or the
Hugging Face directory's)")
               (seed "--seed N" :parse (integer-parser) :default 1
                     :help "the random weights' seed (default 1)")
               (massive "--massive K" :parse (integer-parser :min 0) :default 0
                        :help "with --random: K residual channels larger than the rest
(token embedding and norm weights), as trained encoders have")
               (massive-ratio "--massive-ratio R" :parse (integer-parser :min 1)
                              :help "with --massive: how many times larger (default 20)")
               (laya-dir "--write-laya DIR"
                         :help "with --random: also write the model as a Laya directory
DIR, and convert from it")))
  (when (and random source (null out))
    (setf out source source nil))
  (unless (and out (or source random) (not (and source random)))
    (usage-error "expected a model directory or --random NAME, and OUT.gguf"))
  (when (and laya-dir (not random))
    (usage-error "--write-laya goes with --random"))
  (when (and (plusp massive) (not random))
    (usage-error "--massive goes with --random"))
  (when (and massive-ratio (zerop massive))
    (usage-error "--massive-ratio goes with --massive"))
  (when (and random (> massive (getf (preset random) :hidden)))
    (usage-error "--massive expects at most ~D channels for ~A (its hidden size), found ~D"
                 (getf (preset random) :hidden) random massive))
  (let* ((options (list :type type :head-type head-type :pre pre :name name
                        :encoder-only encoder-only))
         (n (cond (laya-dir
                   (write-random-laya laya-dir random :seed seed :massive massive
                                                      :massive-ratio (or massive-ratio 20))
                   (apply #'convert-laya laya-dir out options))
                  (random (apply #'convert-random random out :seed seed :massive massive
                                                  :massive-ratio (or massive-ratio 20) options))
                  (t (apply #'convert-directory source out options)))))
    (if encoder-only
        (format t "~A: ~D tensors (encoder ~(~A~), no head)~%" out n type)
        (format t "~A: ~D tensors (encoder ~(~A~), head ~(~A~))~%" out n type head-type))
    0))
