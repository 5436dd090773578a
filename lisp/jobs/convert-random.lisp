;;;; convert-random.lisp - models of a preset shape with random weights
;;;; (convert --random, bench --random): the presets, the weights from the one
;;;; C generator, a small test tokenizer, massive residual channels
;;;; (--massive), and Laya or Hugging Face directories written from them.

(in-package "COMMAND-LINE")

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

(defun byte-level-component (&key add-prefix-space)
  "A ByteLevel pre-tokenizer, post-processor or decoder of a tokenizer.json
(as the Lisp data WRITE-JSON takes), every field written as Hugging Face
tokenizers writes it: GPT-2's expression (use_regex), trimmed offsets."
  (list :object (cons "type" "ByteLevel")
        (cons "add_prefix_space" (if add-prefix-space :true :false))
        (cons "trim_offsets" :true) (cons "use_regex" :true)))

(defun special-template (cls sep)
  "A TemplateProcessing post-processor adding the tokens CLS and SEP, each
a (text . id): CLS A SEP for one sequence, CLS A SEP B SEP for a pair."
  (flet ((special (tok type) (list :object (cons "SpecialToken" (list :object (cons "id" (car tok))
                                                                       (cons "type_id" type)))))
         (seq (name type) (list :object (cons "Sequence" (list :object (cons "id" name)
                                                                (cons "type_id" type)))))
         (entry (tok) (cons (car tok) (list :object (cons "id" (car tok))
                                            (cons "ids" (vector (cdr tok)))
                                            (cons "tokens" (vector (car tok)))))))
    (list :object (cons "type" "TemplateProcessing")
          (cons "single" (vector (special cls 0) (seq "A" 0) (special sep 0)))
          (cons "pair" (vector (special cls 0) (seq "A" 0) (special sep 0)
                               (seq "B" 1) (special sep 1)))
          (cons "special_tokens" (list :object (entry cls) (entry sep))))))

(defun random-tokenizer (vocab)
  "A Hugging Face tokenizer.json (as the Lisp data WRITE-JSON takes) of
VOCAB tokens: the specials, the 256 byte-level symbols, then merges of
pairs of printable ASCII characters.  Complete as Hugging Face tokenizers
exports one (every field of the ByteLevel pre-tokenizer and decoder and of
the BPE model), so that library loads it; its post-processor adds [CLS]
and [SEP] as the GGUF the converter writes from it says (bos [CLS], eos
[SEP], both added)."
  (let* ((alphabet (byte-level-alphabet))
         (tokens (append *special-tokens* (coerce alphabet 'list)))
         (merges '()))
    (loop with printable = (loop for c from 33 to 126 collect (string (code-char c)))
          for a in printable
          do (loop for b in printable
                   while (< (+ (length tokens) (length merges)) vocab)
                   do (push (format nil "~A ~A" a b) merges)))
    (setf merges (reverse merges))
    (let ((all (append tokens (mapcar (lambda (m) (remove #\Space m)) merges)))
          (id (lambda (tok) (cons tok (position tok *special-tokens* :test #'string=)))))
      (list :object
            (cons "version" "1.0")
            (cons "truncation" :null)
            (cons "padding" :null)
            (cons "added_tokens"
                  (coerce (loop for tok in *special-tokens* for id from 0
                                collect (list :object (cons "id" id) (cons "content" tok)
                                              (cons "single_word" :false)
                                              (cons "lstrip" (if (string= tok "[MASK]") :true :false))
                                              (cons "rstrip" :false) (cons "normalized" :false)
                                              (cons "special" :true)))
                          'vector))
            (cons "normalizer" (list :object (cons "type" "NFC")))
            (cons "pre_tokenizer" (byte-level-component))
            (cons "post_processor" (special-template (funcall id "[CLS]") (funcall id "[SEP]")))
            (cons "decoder" (byte-level-component :add-prefix-space t))
            (cons "model" (list :object (cons "type" "BPE") (cons "dropout" :null)
                                (cons "unk_token" "[UNK]")
                                (cons "continuing_subword_prefix" "")
                                (cons "end_of_word_suffix" "")
                                (cons "fuse_unk" :false) (cons "byte_fallback" :false)
                                (cons "ignore_merges" :false)
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
            collect (list name (if (consp init) ; (:normal sigma)
                                   (random-normal-array r shape (second init))
                                   (ecase init
                                     (:normal (random-normal-array r shape 0.02d0))
                                     (:one (constant-array shape 1.0))
                                     (:zero (constant-array shape 0.0)))))
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
  "DIR (a string as the user wrote it, or a pathname) as a string that ends
in a slash, for appending file names; a string is taken as it is (NAMESTRING
would read \"~\" as the home directory)."
  (concatenate 'string (string-right-trim "/" (if (stringp dir) dir (namestring dir))) "/"))

(defun write-random-laya (dir preset-name &key (seed 1) (massive 0) (massive-ratio 20))
  "Write a Laya model directory DIR (created if needed) for a random model
of PRESET-NAME: model.safetensors, config.json, encoder/config.json,
rl_agent_config.json and tokenizer/tokenizer.json, MASSIVE residual
channels MASSIVE-RATIO times larger than the rest (see RANDOM-LAYA).
Answers DIR."
  (let ((root (directory-prefix dir)))
    (ensure-directories (concatenate 'string root "encoder/"))
    (ensure-directories (concatenate 'string root "tokenizer/"))
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
    (ensure-directories root)
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
