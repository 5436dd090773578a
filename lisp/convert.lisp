;;;; convert.lisp - `rontolisp convert': a Laya model directory (a ModernBERT
;;;; encoder plus a decision head, in Hugging Face's layout) to one GGUF file
;;;; that llama.cpp's modern-bert loader reads, or a model of a preset shape
;;;; with random weights (--random).
;;;;
;;;; Tensor names and keys follow llama.cpp's ModernBERT conversion: the
;;;; encoder's blocks are blk.0 .. blk.L-1, the decision head's transformer
;;;; layers continue as blk.L ..; token_types, cls, cls.norm and cls.output
;;;; hold the head's type embeddings and scorer.  The input schema read is in
;;;; README.org ("The converter's input").
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

;;; The Hugging Face tensors of a Laya model.

(defun laya-tensor-shapes (&key hidden vocab layers intermediate head-layers &allow-other-keys)
  "The (hf-name shape init) of every tensor of a Laya model of that shape,
INIT :normal, :one or :zero."
  (let ((h hidden) (out '()))
    (flet ((add (name shape init) (push (list name shape init) out)))
      (add "encoder.model.embeddings.tok_embeddings.weight" (list vocab h) :normal)
      (add "encoder.model.embeddings.norm.weight" (list h) :one)
      (dotimes (i layers)
        (flet ((n (s) (format nil "encoder.model.layers.~D.~A" i s)))
          (unless (zerop i) (add (n "attn_norm.weight") (list h) :one)) ; layer 0: Identity
          (add (n "attn.Wqkv.weight") (list (* 3 h) h) :normal)
          (add (n "attn.Wo.weight") (list h h) :normal)
          (add (n "mlp_norm.weight") (list h) :one)
          (add (n "mlp.Wi.weight") (list (* 2 intermediate) h) :normal)
          (add (n "mlp.Wo.weight") (list h intermediate) :normal)))
      (add "encoder.model.final_norm.weight" (list h) :one)
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

(defparameter *head-renames*
  '(("self_attn.in_proj_weight" . "attn_qkv.weight") ("self_attn.in_proj_bias" . "attn_qkv.bias")
    ("self_attn.out_proj.weight" . "attn_output.weight") ("self_attn.out_proj.bias" . "attn_output.bias")
    ("linear1.weight" . "ffn_up.weight") ("linear1.bias" . "ffn_up.bias")
    ("linear2.weight" . "ffn_down.weight") ("linear2.bias" . "ffn_down.bias")
    ("norm1.weight" . "attn_norm.weight") ("norm1.bias" . "attn_norm.bias")
    ("norm2.weight" . "ffn_norm.weight") ("norm2.bias" . "ffn_norm.bias"))
  "Decision-head layer tensors (PyTorch nn.TransformerEncoderLayer) and their
GGUF block names.")

(defparameter *fixed-renames*
  '(("encoder.model.embeddings.tok_embeddings.weight" . "token_embd.weight")
    ("encoder.model.embeddings.norm.weight" . "token_embd_norm.weight")
    ("encoder.model.final_norm.weight" . "output_norm.weight")
    ("head.type_embeddings.weight" . "token_types.weight")
    ("head.dense.weight" . "cls.weight") ("head.dense.bias" . "cls.bias")
    ("head.norm.weight" . "cls.norm.weight") ("head.norm.bias" . "cls.norm.bias")
    ("head.out.weight" . "cls.output.weight") ("head.out.bias" . "cls.output.bias"))
  "Tensors outside the blocks: Hugging Face name to GGUF name.")

(defparameter *encoder-renames*
  '(("attn_norm.weight" . "attn_norm.weight") ("attn.Wqkv.weight" . "attn_qkv.weight")
    ("attn.Wo.weight" . "attn_output.weight") ("mlp_norm.weight" . "ffn_norm.weight")
    ("mlp.Wi.weight" . "ffn_up.weight") ("mlp.Wo.weight" . "ffn_down.weight"))
  "Encoder layer tensors (ModernBERT) and their GGUF block names, as
llama.cpp's tensor mapping for MODEL_ARCH.MODERN_BERT.")

(defun split-layer-name (name prefix)
  "For NAME = PREFIX N.REST answer N and REST, else NIL."
  (when (and (> (length name) (length prefix)) (string= prefix name :end2 (length prefix)))
    (multiple-value-bind (n end) (parse-integer name :start (length prefix) :junk-allowed t)
      (when (and n (< end (length name)) (char= #\. (char name end)))
        (values n (subseq name (1+ end)))))))

(defun gguf-tensor-name (hf-name layers)
  "The GGUF name of the Hugging Face tensor HF-NAME and whether it belongs
to the decision head, or NIL for a tensor the converter does not know."
  (let ((fixed (cdr (assoc hf-name *fixed-renames* :test #'string=))))
    (when fixed
      (return-from gguf-tensor-name
        (values fixed (not (member fixed '("token_embd.weight" "token_embd_norm.weight"
                                           "output_norm.weight")
                                   :test #'string=))))))
  (multiple-value-bind (n rest) (split-layer-name hf-name "encoder.model.layers.")
    (when n
      (let ((g (cdr (assoc rest *encoder-renames* :test #'string=))))
        (return-from gguf-tensor-name (and g (values (format nil "blk.~D.~A" n g) nil))))))
  (multiple-value-bind (n rest) (split-layer-name hf-name "head.layers.")
    (when n
      (let ((g (cdr (assoc rest *head-renames* :test #'string=))))
        (return-from gguf-tensor-name (and g (values (format nil "blk.~D.~A" (+ layers n) g) t))))))
  nil)

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

(defun random-laya (preset-name &key (seed 1))
  "The files of a Laya directory for a random model of PRESET-NAME, as
Lisp data: (values tensors encoder-config rl-agent-config config tokenizer),
TENSORS a list of (hf-name array)."
  (let* ((p (preset preset-name))
         (r (make-rng (ldb (byte 64 0) (+ #x9E3779B97F4A7C15 (* seed 7919)))))
         (h (getf p :hidden)))
    (values
     (loop for (name shape init) in (apply #'laya-tensor-shapes p)
           collect (list name (ecase init
                                (:normal (random-normal-array r shape 0.02d0))
                                (:one (constant-array shape 1.0))
                                (:zero (constant-array shape 0.0)))))
     (list :object
           (cons "architectures" #("ModernBertModel")) (cons "model_type" "modernbert")
           (cons "hidden_size" h) (cons "intermediate_size" (getf p :intermediate))
           (cons "num_hidden_layers" (getf p :layers))
           (cons "num_attention_heads" (getf p :heads)) (cons "vocab_size" (getf p :vocab))
           (cons "max_position_embeddings" 1024) (cons "norm_eps" 1d-5)
           (cons "local_attention" 128) (cons "global_attn_every_n_layers" 3)
           (cons "global_rope_theta" 160000d0) (cons "local_rope_theta" 10000d0)
           (cons "hidden_activation" "gelu")
           (cons "pad_token_id" 0) (cons "cls_token_id" 2) (cons "sep_token_id" 3)
           (cons "mask_token_id" 4))
     (list :object
           (cons "head_layers" (getf p :head-layers)) (cons "max_len" 1024)
           (cons "head_max_len" 96)
           (cons "temperatures" (list :object (cons "choice:2" 1.0d0) (cons "choice:3-5" 1.1d0)
                                      (cons "score:2" 0.9d0) (cons "noul:2" 1.0d0))))
     (list :object (cons "model_type" "laya") (cons "name" (format nil "skycmd-~A-random" preset-name)))
     (random-tokenizer (getf p :vocab)))))

(defun write-json-file (path value)
  (with-output-to-file (s path)
    (write-json value s :indent 2)
    (terpri s)))

(defun write-random-laya (dir preset-name &key (seed 1))
  "Write a Laya model directory DIR (created if needed) for a random model
of PRESET-NAME: model.safetensors, config.json, encoder/config.json,
rl_agent_config.json and tokenizer/tokenizer.json.  Answers DIR."
  (let ((root (concatenate 'string (string-right-trim "/" (namestring dir)) "/")))
    (ensure-directories-exist (concatenate 'string root "encoder/"))
    (ensure-directories-exist (concatenate 'string root "tokenizer/"))
    (multiple-value-bind (tensors encoder rl config tokenizer) (random-laya preset-name :seed seed)
      (write-safetensors (concatenate 'string root "model.safetensors") tensors
                         :metadata '(("format" . "pt")))
      (write-json-file (concatenate 'string root "encoder/config.json") encoder)
      (write-json-file (concatenate 'string root "rl_agent_config.json") rl)
      (write-json-file (concatenate 'string root "config.json") config)
      (write-json-file (concatenate 'string root "tokenizer/tokenizer.json") tokenizer))
    dir))

;;; Reading a Laya directory.

(defun json-like (value)
  "VALUE written by WRITE-JSON's mapping read back as PARSE-JSON answers
it (for --random, which builds the files in memory)."
  (parse-json (with-output-to-string (s) (write-json value s))))

(defun cfg (table key path &key (type 'integer) default)
  (multiple-value-bind (v found) (gethash key table)
    (cond ((and (not found) default) default)
          ((not found) (convert-error path "expected a key ~S, found none" key))
          ((typep v type) v)
          ((and (eq type 'real) (realp v)) v)
          (t (convert-error path "key ~S: expected ~(~A~), found ~S" key type v)))))

(defun temperature-key (bucket)
  "A Laya bucket name as a GGUF key part: choice:3-5 -> choice.3_5."
  (substitute #\_ #\- (substitute #\. #\: bucket)))

(defun systemone-template (cls sep mask)
  "The Jinja chat template llama.cpp's server renders for a decision:
CLS {type} question: {instructions} SEP (MASK option)* SEP state SEP."
  (format nil "~A{{ type }} question: {{ instructions }}~A~
{% for o in options %}~A{{ o.text if o.text is defined else o }}{% endfor %}~
~A{{ state }}~A" cls sep mask sep sep))

(defun tokenizer-metadata (tok path pre &key token-types)
  "The tokenizer.ggml.* and skycmd.tokenizer.* keys of the tokenizer.json
data TOK, and the chat template; TOKEN-TYPES, when given, is
token_type_count (the decision head's type embeddings)."
  (let* ((model (cfg tok "model" path :type 'hash-table))
         (vocab (cfg model "vocab" path :type 'hash-table))
         (n (hash-table-count vocab))
         (tokens (make-array n :initial-element nil))
         (types (make-array n :element-type '(signed-byte 32) :initial-element 1))
         (added (cfg tok "added_tokens" path :type 'vector :default #()))
         (merges (map 'vector (lambda (m) (if (stringp m) m (format nil "~A ~A" (aref m 0) (aref m 1))))
                      (cfg model "merges" path :type 'vector)))
         (lstrip '()) (rstrip '()))
    (maphash (lambda (k id)
               (unless (and (integerp id) (< -1 id n) (null (aref tokens id)))
                 (convert-error path "token ~S: expected a unique id below ~D, found ~S" k n id))
               (setf (aref tokens id) k))
             vocab)
    (loop for a across added
          for id = (gethash "id" a)
          when (and (integerp id) (< -1 id n))
            do (when (gethash "special" a) (setf (aref types id) 3))
               (when (gethash "lstrip" a) (push id lstrip))
               (when (gethash "rstrip" a) (push id rstrip)))
    (flet ((id-of (tok) (or (gethash tok vocab)
                            (convert-error path "expected a token ~A, found none" tok))))
      (let ((normalizer (gethash "normalizer" tok)))
        (remove nil (list (list "tokenizer.ggml.model" :string "gpt2")
                          (list "tokenizer.ggml.pre" :string pre)
                          (list "tokenizer.ggml.tokens" '(:array :string) tokens)
                          (list "tokenizer.ggml.token_type" '(:array :i32) types)
                          (list "tokenizer.ggml.merges" '(:array :string) merges)
                          (list "tokenizer.ggml.bos_token_id" :u32 (id-of "[CLS]"))
                          (list "tokenizer.ggml.eos_token_id" :u32 (id-of "[SEP]"))
                          (list "tokenizer.ggml.seperator_token_id" :u32 (id-of "[SEP]"))
                          (list "tokenizer.ggml.cls_token_id" :u32 (id-of "[CLS]"))
                          (list "tokenizer.ggml.mask_token_id" :u32 (id-of "[MASK]"))
                          (list "tokenizer.ggml.unknown_token_id" :u32 (id-of "[UNK]"))
                          (list "tokenizer.ggml.padding_token_id" :u32 (id-of "[PAD]"))
                          (list "tokenizer.ggml.add_bos_token" :bool t)
                          (list "tokenizer.ggml.add_eos_token" :bool t)
                          (list "tokenizer.ggml.add_sep_token" :bool t)
                          (and token-types (list "tokenizer.ggml.token_type_count" :u32 token-types))
                          ;; The default template: llama.cpp's server renders only
                          ;; this one unless a named template is asked for.
                          (list "tokenizer.chat_template" :string
                                (systemone-template "[CLS]" "[SEP]" "[MASK]"))
                          (list "skycmd.tokenizer.normalizer" :string
                                (if (hash-table-p normalizer) (gethash "type" normalizer "none") "none"))
                          (list "skycmd.tokenizer.lstrip_ids" '(:array :i32)
                                (coerce (sort lstrip #'<) '(vector (signed-byte 32))))
                          (list "skycmd.tokenizer.rstrip_ids" '(:array :i32)
                                (coerce (sort rstrip #'<) '(vector (signed-byte 32))))
                          (list "skycmd.tokenizer.ignore_merges" :bool
                                (and (gethash "ignore_merges" model) t))))))))

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

(defun encoder-hparams (encoder path)
  "The ModernBERT hyper-parameters of the config ENCODER (a parsed JSON
object of the file PATH) as a plist.  A key the config leaves out takes
the default of Hugging Face's ModernBertConfig, as upstream's converter
sees it through AutoConfig."
  (list :hidden (cfg encoder "hidden_size" path)
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
        :act (cfg encoder "hidden_activation" path :type 'string :default "gelu")))

(defun modern-bert-metadata (hp &key (blocks (getf hp :layers)) feed-forward pooling)
  "The modern-bert.* keys upstream's converter (ModernBertModel over
TextModel and BertModel) writes for the hyper-parameters HP, with the
types it gives them.  BLOCKS and FEED-FORWARD (a u32, or a vector of them
for a file that also holds the decision head's blocks) override the
encoder's own; POOLING, when given, is the pooling_type."
  (flet ((k (s) (concatenate 'string "modern-bert." s))
         (f32 (x) (coerce x 'single-float)))
    (remove nil
            (list (list (k "block_count") :u32 blocks)
                  (list (k "context_length") :u32 (getf hp :context))
                  (list (k "embedding_length") :u32 (getf hp :hidden))
                  (if (vectorp feed-forward)
                      (list (k "feed_forward_length") '(:array :u32) feed-forward)
                      (list (k "feed_forward_length") :u32 (or feed-forward (getf hp :intermediate))))
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
                  (list (k "attention.sliding_window") :u32 (getf hp :window))
                  (list (k "attention.sliding_window_pattern") :u32 (getf hp :pattern))
                  (list (k "rope.scaling.type") :string "none")
                  (list (k "vocab_size") :u32 (getf hp :vocab))
                  (list (k "hidden_activation") :string (getf hp :act))))))

(defun decision-metadata (rl rl-path head-layers)
  "The modern-bert.decision.* keys of the Laya decision head (ours, not
upstream's) from rl_agent_config.json's data RL."
  (flet ((k (s) (concatenate 'string "modern-bert.decision." s)))
    (let* ((temps (cfg rl "temperatures" rl-path :type 'hash-table :default (make-hash-table)))
           (keys (sort (loop for key being the hash-keys of temps collect key) #'string<)))
      (append
       (list (list (k "type") :string "laya")
             (list (k "block_count") :u32 head-layers)
             (list (k "max_head_tokens") :u32 (cfg rl "head_max_len" rl-path :default 192))
             (list (k "max_tokens") :u32 (cfg rl "max_len" rl-path :default 1024)))
       (loop for key in keys
             collect (list (k (format nil "temperature.~A" (temperature-key key)))
                           :f32 (coerce (cfg temps key rl-path :type 'real) 'single-float)))))))

(defun general-metadata (name type)
  "The general.* keys: architecture, type, name, file type (from the
encoder's TYPE, as upstream's ftype) and quantization version."
  (list (list "general.architecture" :string "modern-bert")
        (list "general.type" :string "model")
        (list "general.name" :string name)
        (list "general.file_type" :u32 (file-type-id type))
        (list "general.quantization_version" :u32 2)))

(defun laya-gguf-file (tensors encoder rl config tokenizer
                       &key (type :f16) (head-type :f32) (pre "modern-bert") name paths
                            encoder-only)
  "The GGUF file object (GGUF:MAKE-FILE's, ready for GGUF:WRITE) of a Laya
model's parts, as READ-SAFETENSORS and PARSE-JSON answer them.  PATHS: a
plist naming the files, for errors.  ENCODER-ONLY drops the decision head
(its tensors, keys and token types): what is left is a plain ModernBERT
encoder, which llama.cpp loads."
  (let* ((enc-path (getf paths :encoder "encoder/config.json"))
         (rl-path (getf paths :rl "rl_agent_config.json"))
         (hp (encoder-hparams encoder enc-path))
         (h (getf hp :hidden))
         (layers (getf hp :layers))
         (head-layers (cfg rl "head_layers" rl-path))
         (report (progress-reporter (length tensors)))
         (done 0)
         (out-tensors '()))
    (dolist (entry tensors)
      (destructuring-bind (hf data) entry
        (multiple-value-bind (g head-p) (gguf-tensor-name hf layers)
          (unless g
            (convert-error (getf paths :model "model.safetensors") "tensor ~S: expected a ~
ModernBERT encoder or decision-head tensor name, found an unknown one" hf))
          (unless (and head-p encoder-only)
            (let* ((dims (packed-dimensions data))
                   (ty (tensor-type g dims head-p type head-type))
                   (bad (first-non-finite data)))
              (when bad
                (tensor-data-error (getf paths :model "model.safetensors") hf "has invalid data: ~
expected finite values, found a NaN or infinity at element ~D" bad))
              (push (list g (convert-tensor-data (if (and (eq ty :q8_0) (> (length dims) 2))
                                                     (data-as-matrix data (reverse dims))
                                                     data)
                                                 ty)
                          :dims (reverse dims))
                    out-tensors))))
        (funcall report (incf done) hf)))
    (let ((metadata
            (append
             (general-metadata (or name (gethash "name" config) "modern-bert") type)
             (if encoder-only
                 (modern-bert-metadata hp :pooling 2)
                 (modern-bert-metadata
                  hp :blocks (+ layers head-layers) :pooling 2
                     :feed-forward (coerce (append (make-list layers :initial-element (getf hp :intermediate))
                                                   (make-list head-layers :initial-element (* 4 h)))
                                           '(vector (unsigned-byte 32)))))
             (unless encoder-only (decision-metadata rl rl-path head-layers))
             (tokenizer-metadata tokenizer (getf paths :tokenizer "tokenizer/tokenizer.json") pre
                                 :token-types (if encoder-only nil 3)))))
      (gguf:make-file :metadata metadata :tensors (reverse out-tensors)))))

(defun write-gguf-file (out f)
  "Write the file object F to the GGUF file OUT; answer its tensor count."
  (gguf:write out f)
  (length (gguf:tensor-infos f)))

(defun convert-laya (dir out &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                  encoder-only)
  "Convert the Laya model directory DIR (model.safetensors, config.json,
encoder/config.json, rl_agent_config.json, tokenizer/tokenizer.json) to the
GGUF file OUT with encoder matrices of TYPE and decision head of HEAD-TYPE
(:f32 :f16 :bf16 :q8_0); ENCODER-ONLY leaves the head out.  Answers the
number of tensors written."
  (let* ((root (concatenate 'string (string-right-trim "/" (namestring dir)) "/"))
         (paths (list :model (concatenate 'string root "model.safetensors")
                      :encoder (concatenate 'string root "encoder/config.json")
                      :rl (concatenate 'string root "rl_agent_config.json")
                      :config (concatenate 'string root "config.json")
                      :tokenizer (concatenate 'string root "tokenizer/tokenizer.json"))))
    (unless (probe-file (getf paths :model))
      (convert-error (getf paths :model) "no such file (expected a Laya model directory)"))
    (write-gguf-file
     out (laya-gguf-file (read-safetensors (getf paths :model))
                         (read-json-file (getf paths :encoder))
                         (read-json-file (getf paths :rl))
                         (if (probe-file (getf paths :config))
                             (read-json-file (getf paths :config))
                             (make-hash-table :test 'equal))
                         (read-json-file (getf paths :tokenizer))
                         :type type :head-type head-type :pre pre :name name :paths paths
                         :encoder-only encoder-only))))

(defun random-model (preset-name &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                       (seed 1) encoder-only)
  "The GGUF file object (GGUF:MAKE-FILE's, in memory) of a model of
PRESET-NAME (s1-pico, s1-nano, s1-micro) with random weights from SEED and
a small test tokenizer, its tensors of TYPE and HEAD-TYPE as CONVERT-LAYA
makes them (without the decision head when ENCODER-ONLY)."
  (multiple-value-bind (tensors encoder rl config tokenizer) (random-laya preset-name :seed seed)
    (laya-gguf-file tensors (json-like encoder) (json-like rl) (json-like config)
                    (json-like tokenizer)
                    :type type :head-type head-type :pre pre :name name
                    :encoder-only encoder-only)))

(defun convert-random (preset-name out &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                            (seed 1) encoder-only)
  "Write the GGUF file OUT for a model of PRESET-NAME (s1-pico, s1-nano,
s1-micro) with random weights from SEED and a small test tokenizer (see
RANDOM-MODEL).  Answers the number of tensors written."
  (write-gguf-file out (random-model preset-name :type type :head-type head-type :pre pre
                                                 :name name :seed seed
                                                 :encoder-only encoder-only)))

(define-command "convert" (&optional source out)
    (:usage "<laya_dir | --random s1-pico|s1-nano|s1-micro> OUT.gguf [--type f32|f16|bf16|q8_0] [--head-type f32|f16|bf16|q8_0] [--pre NAME] [--name NAME] [--seed N] [--write-laya DIR] [--encoder-only]"
     :summary "convert a Laya model directory (or a random model of a preset shape) to GGUF"
     :details "Type policy: 1-D tensors F32; the decision head --head-type; encoder
matrices --type, except that with q8_0 the token embeddings stay F16; a row
that is not a multiple of 32 falls back to F16."
     :options ((random "--random NAME" :parse (choice-parser (mapcar #'first *presets*))
                       :help "a model of that preset shape with random weights and a
small test tokenizer, instead of a Laya directory")
               (type "--type TYPE" :parse (choice-parser *convert-types* :key #'type-keyword)
                     :default :f16 :help "the encoder matrices' type (default f16)")
               (head-type "--head-type TYPE" :parse (choice-parser *convert-types* :key #'type-keyword)
                          :default :f32 :help "the decision head's type (default f32)")
               (pre "--pre NAME" :default "modern-bert"
                    :help "tokenizer.ggml.pre (default modern-bert)")
               (name "--name NAME" :help "general.name (default: config.json's name)")
               (seed "--seed N" :parse (integer-parser) :default 1
                     :help "the random weights' seed (default 1)")
               (laya-dir "--write-laya DIR"
                         :help "with --random: also write the model as a Laya directory
DIR, and convert from it")
               (encoder-only "--encoder-only"
                             :help "leave the decision head out: a plain ModernBERT
encoder, the file llama.cpp loads")))
  (when (and random source (null out))
    (setf out source source nil))
  (unless (and out (or source random) (not (and source random)))
    (usage-error "expected a Laya directory or --random NAME, and OUT.gguf"))
  (when (and laya-dir (not random))
    (usage-error "--write-laya goes with --random"))
  (let ((n (cond (laya-dir
                  (write-random-laya laya-dir random :seed seed)
                  (convert-laya laya-dir out :type type :head-type head-type :pre pre :name name
                                            :encoder-only encoder-only))
                 (random (convert-random random out :type type :head-type head-type :pre pre
                                                     :name name :seed seed
                                                     :encoder-only encoder-only))
                 (t (convert-laya source out :type type :head-type head-type :pre pre :name name
                                             :encoder-only encoder-only)))))
    (if encoder-only
        (format t "~A: ~D tensors (encoder ~(~A~), no head)~%" out n type)
        (format t "~A: ~D tensors (encoder ~(~A~), head ~(~A~))~%" out n type head-type))
    0))
