;;;; convert-input.lisp - the converter's checks of its input, made before
;;;; anything is written: config values typed and bounded, tensors against
;;;; the shapes the config implies, the tokenizer strict.  A failure is a
;;;; CONVERT-ERROR naming the input file and its key or tensor.

(in-package "COMMAND-LINE")

;;; Checking the input before anything is written.  Every value read from
;;; a config is checked for its JSON type and range; every tensor's name,
;;; layer index and shape against what the config implies; a failure is a
;;; CONVERT-ERROR naming the input file and its key or tensor.

(defparameter *config-limits*
  '(("hidden_size" 1 65536) ("num_hidden_layers" 1 4096) ("intermediate_size" 1 1048576)
    ("num_attention_heads" 1 65536) ("vocab_size" 1 16777216)
    ("max_position_embeddings" 1 16777216) ("local_attention" 0 16777216)
    ("global_attn_every_n_layers" 1 4096) ("head_layers" 0 4096)
    ("head_max_len" 1 16777216) ("max_len" 1 16777216) ("num_labels" 1 65536)
    ("head_heads" 1 65536))
  "The integer configuration keys with their least and greatest sane
values: a config beyond them is refused before anything is allocated.")

(defun json-object (value path &optional key)
  "VALUE when it is a JSON object; else a CONVERT-ERROR naming PATH (and
KEY, the member it was read from)."
  (if (hash-table-p value)
      value
      (convert-error path "~:[~;key ~:*~S: ~]expected a JSON object, found ~A" key (json-brief value))))

(defun single-float-magnitude-p (x)
  "True when the real X is 0 or a magnitude that a single-float holds as a
normal number: the file keeps it as f32, where a smaller one becomes 0 (or
loses its precision) and a larger one infinity."
  (or (zerop x)
      (and (<= least-positive-normalized-single-float (abs x))
           (< (abs x) most-positive-single-float))))

(defun cfg (table key path &key (type 'integer) (default nil default-p))
  "The value of KEY in the JSON object TABLE of the file PATH, of TYPE
(integer, real, positive-real, string, hash-table, vector: an array, which
a string is not, or boolean); DEFAULT when the key is absent (an error
without one).  A real is 0 or a finite number whose magnitude a normal
single-float holds (the file keeps it as f32); a positive-real is such a
number above 0; an integer named in *CONFIG-LIMITS* is within its limits."
  (multiple-value-bind (v found) (gethash key table)
    (flet ((bad (what) (convert-error path "key ~S: expected ~A, found ~A" key what (json-brief v))))
      (cond ((not found)
             (if default-p default (convert-error path "expected a key ~S, found none" key)))
            ((eq type 'boolean) (if (member v '(t nil)) v (bad "true or false")))
            ((eq type 'real)
             (if (and (realp v) (single-float-magnitude-p v))
                 v
                 (bad (format nil "0 or a finite number of magnitude from ~A to ~A"
                              least-positive-normalized-single-float most-positive-single-float))))
            ((eq type 'positive-real)
             (if (and (realp v) (plusp v) (single-float-magnitude-p v))
                 v
                 (bad (format nil "a finite number from ~A to ~A"
                              least-positive-normalized-single-float most-positive-single-float))))
            ((eq type 'integer)
             (let ((limits (rest (assoc key *config-limits* :test #'string=))))
               (cond ((not (integerp v)) (bad "an integer"))
                     ((and limits (not (<= (first limits) v (second limits))))
                      (bad (format nil "an integer from ~D to ~D" (first limits) (second limits))))
                     (t v))))
            ((json-type-mismatch v type)
             (convert-error path "key ~S: ~A" key (json-type-mismatch v type)))
            (t v)))))

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
                  :eps (cfg encoder "norm_eps" path :type 'positive-real :default 1d-5)
                  :global-theta (cfg encoder "global_rope_theta" path :type 'positive-real
                                                                      :default 160000d0)
                  :local-theta (cfg encoder "local_rope_theta" path :type 'positive-real
                                                                    :default 10000d0)
                  :window (cfg encoder "local_attention" path :default 128)
                  :pattern (cfg encoder "global_attn_every_n_layers" path :default 3)
                  :act (cfg encoder "hidden_activation" path :type 'string :default "gelu"))))
    (destructuring-bind (&key hidden heads act &allow-other-keys) hp
      (unless (and (zerop (mod hidden heads)) (evenp (floor hidden heads)))
        (convert-error path "key \"num_attention_heads\": expected a divisor of hidden_size ~D ~
leaving an even head size, found ~D" hidden heads))
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

(defun tensor-dimensions (tensors)
  "The (name dims) of each of TENSORS, a list of (name data): what a
safetensors header says of them (READ-SAFETENSORS-HEADER)."
  (mapcar (lambda (e) (list (first e) (packed-dimensions (second e)))) tensors))

(defun check-tensors (header expected path layer-prefixes)
  "Check the input tensors HEADER, a list of (name dims [file]) -- of the
file PATH, or of FILE when given (a shard) -- against EXPECTED, a list of
(name shape shape-source [source]): the tensors the configs imply, the
config file (and key) that gives each its shape and the one that says the
tensor is there (SOURCE, by default SHAPE-SOURCE).  Every name known, every
layer index in range, every shape right, nothing missing.  LAYER-PREFIXES
lists (prefix count source) for the layered names, COUNT their layers and
SOURCE the config file and key that say so.  Only names and dimensions are
read: a file is checked from its header, before its data."
  (let ((entries (make-hash-table :test 'equal)))
    (dolist (e expected) (setf (gethash (first e) entries) e))
    (loop for (name dims file) in header
          for where = (or file path)
          for (nil shape shape-source) = (gethash name entries)
          do (unless shape
               (loop for (prefix count source) in layer-prefixes
                     do (let ((n (layer-index name prefix)))
                          (cond ((stringp n)
                                 (convert-error where "tensor ~S: expected a layer index (digits), ~
found ~S" name n))
                                ((and n (>= n count))
                                 (convert-error where "tensor ~S: expected a layer index below ~D ~
(~A), found ~D" name count source n)))))
               (convert-error where "tensor ~S: expected a ModernBERT tensor name, found an unknown ~
one" name))
             (unless (equal dims shape)
               (convert-error where "tensor ~S: expected shape ~A (from ~A), found ~A" name
                              (shape-string shape) shape-source (shape-string dims))))
    (let ((given (make-hash-table :test 'equal)))
      (loop for (name) in header do (setf (gethash name given) t))
      (loop for (name nil shape-source source) in expected
            unless (gethash name given)
              do (convert-error path "tensor ~S: expected it (from ~A), found none" name
                                (or source shape-source))))))

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

(defun array-entry (key element-type values)
  "The metadata entry (KEY (:array ELEMENT-TYPE) VALUES), or NIL when VALUES
is empty: an array key that would be empty is left out (doc/converter.md),
since gguf-py refuses to write an empty array (gguf_new_metadata could not
copy the file) and the readers take an absent key as an empty array."
  (and (plusp (length values)) (list key (list :array element-type) values)))

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
CONFIG-PATH names the file that gives VOCAB-SIZE, for errors.  A tokenizer
that MODEL:LOAD-TOKENIZER would refuse (another kind, a merge naming an
unknown token) is a CONVERT-ERROR with its reason."
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
        ;; The tokenizer the GGUF file will hold must be one MODEL:TOKENIZE
        ;; builds: the reader of tokenizer.json refuses another kind
        ;; (another pre-tokenizer, BPE dropout...), the builder a merge
        ;; naming an unknown token.
        (handler-case (build-tokenizer (json-tokenizer-spec tok path) path)
          (model:tokenizer-error (c)
            (error 'convert-error :path path :message (rontolisp-error-message c))))
        (remove nil
                (list (list "tokenizer.ggml.model" :string "gpt2")
                      (list "tokenizer.ggml.pre" :string pre)
                      (list "tokenizer.ggml.tokens" '(:array :string) tokens)
                      (list "tokenizer.ggml.token_type" '(:array :i32) types)
                      (array-entry "tokenizer.ggml.merges" :string merges)
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
                      (array-entry "skycmd.tokenizer.lstrip_ids" :i32
                                   (coerce (sort lstrip #'<) '(vector (signed-byte 32))))
                      (array-entry "skycmd.tokenizer.rstrip_ids" :i32
                                   (coerce (sort rstrip #'<) '(vector (signed-byte 32))))
                      (list "skycmd.tokenizer.ignore_merges" :bool
                            (cfg model "ignore_merges" path :type 'boolean :default nil))))))))
