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
;;;; Type policy (doc/converter.md): 1-D tensors F32; the decision head --head-type
;;;; (F32 by default); encoder matrices --type (F16 by default); with q8_0
;;;; the token embeddings stay F16; a row that is not a multiple of 32 falls
;;;; back to F16.

(in-package "COMMAND-LINE")

;;; The pieces: convert-names.lisp (tensor names and shapes),
;;; convert-input.lisp (the input checks), convert-random.lisp (random
;;; models); this file assembles the GGUF file and holds the command.

(defparameter *convert-types* '("f32" "f16" "bf16" "q8_0")
  "The tensor types the converter writes, as --type and --head-type name them.")

(defun type-keyword (name)
  "The keyword of the tensor type NAME, one of *CONVERT-TYPES* (\"q8_0\" -> :Q8_0)."
  (tensor-type-keyword (find-tensor-type name)))

(defun tensor-type (gguf-name dims head-p type head-type)
  "The GGUF type of a tensor under doc/converter.md's policy."
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
                  (and labels (array-entry (k "classifier.output_labels") :string labels))
                  (list (k "attention.sliding_window") :u32 (getf hp :window))
                  (list (k "attention.sliding_window_pattern") :u32 (getf hp :pattern))
                  (list (k "rope.scaling.type") :string "none")
                  (list (k "vocab_size") :u32 (getf hp :vocab))
                  (list (k "hidden_activation") :string (getf hp :act))))))

(defparameter *head-activations* '("relu" "gelu")
  "The feed-forward activations of a decision head's blocks: PyTorch's
nn.TransformerEncoderLayer relu and exact gelu.")

(defun question-types (rl rl-path keys)
  "The decision head's question types, a vector of strings, one per row of
its token_types: rl_agent_config.json's question_types, else the types of
its temperature buckets (TYPE:N or TYPE:LO-HI, TYPE the part before the
first dot of the GGUF key) in the order KEYS of the file, each once."
  (let ((given (cfg rl "question_types" rl-path :type 'vector :default nil)))
    (if given
        (let ((seen '()))
          (loop for ty across given for i from 0
                unless (and (stringp ty) (plusp (length ty)) (not (find #\. ty))
                            (not (member ty seen :test #'string=)))
                  do (convert-error rl-path "key \"question_types\"[~D]: expected a non-empty ~
string without a dot, not named before, found ~A" i (json-brief ty))
                do (push ty seen))
          (check-question-type-count given rl-path "question_types")
          given)
        (let ((types '()))
          (dolist (key keys)
            (let* ((gguf-key (temperature-key key)) ; as the reader of the file splits it
                   (ty (subseq gguf-key 0 (position #\. gguf-key))))
              (pushnew ty types :test #'string=)))
          (check-question-type-count types rl-path "temperatures")
          (coerce (reverse types) 'vector)))))

(defun check-question-type-count (types rl-path key)
  "Refuse more question TYPES (from KEY of rl_agent_config.json) than the
head's type embeddings have rows."
  (when (> (length types) *question-type-rows*)
    (convert-error rl-path "key ~S: expected at most ~D question types (the rows of ~
head.type_embeddings.weight), found ~D" key *question-type-rows* (length types))))

(defun decision-metadata (rl rl-path head-layers &key hidden hidden-heads key-order)
  "The modern-bert.decision.* keys of the Laya decision head (ours, not
upstream's) from rl_agent_config.json's data RL: its blocks, windows,
question types, heads (HIDDEN-HEADS, the encoder's, by default; a divisor
of the HIDDEN size),
activation, norm placement, epsilon and temperatures (doc/decision.md).
KEY-ORDER, READ-JSON-FILE's second value, gives the temperature buckets'
file order (sorted without it)."
  (flet ((k (s) (concatenate 'string "modern-bert.decision." s)))
    (let* ((temps (json-object (cfg rl "temperatures" rl-path :type 'hash-table
                                                               :default (make-hash-table))
                               rl-path "temperatures"))
           (keys (or (and key-order (gethash temps key-order))
                     (sort (loop for key being the hash-keys of temps collect key) #'string<)))
           (activation (cfg rl "head_activation" rl-path :type 'string :default "relu"))
           (heads (cfg rl "head_heads" rl-path :default (or hidden-heads 1)))
           (seen (make-hash-table :test 'equal)))
      (when (and hidden (/= 0 (mod hidden heads)))
        (convert-error rl-path "key \"head_heads\": expected a divisor of hidden_size ~D, found ~D"
                       hidden heads))
      (unless (member activation *head-activations* :test #'string=)
        (convert-error rl-path "key \"head_activation\": expected ~{~S~^ or ~}, found ~S"
                       *head-activations* activation))
      ;; Two buckets may spell one GGUF key (score:2 and score.2): the
      ;; writer would refuse the second at a byte of the output.
      (dolist (key keys)
        (let ((other (gethash (temperature-key key) seen)))
          (when other
            (convert-error rl-path "key \"temperatures\": expected bucket names that give distinct ~
GGUF keys, found ~S and ~S, both temperature.~A" other key (temperature-key key)))
          (setf (gethash (temperature-key key) seen) key)))
      (let ((types (question-types rl rl-path keys)))
        (append
         (list (list (k "type") :string "laya")
               (list (k "block_count") :u32 head-layers)
               (list (k "max_head_tokens") :u32 (cfg rl "head_max_len" rl-path :default 192))
               (list (k "max_tokens") :u32 (cfg rl "max_len" rl-path :default 1024)))
         ;; An empty array is left out: readers take an absent key for "none".
         (when (plusp (length types))
           (list (list (k "question_types") '(:array :string) types)))
         (list (list (k "head_count") :u32 heads)
               (list (k "activation") :string activation)
               (list (k "norm_first") :bool (cfg rl "head_norm_first" rl-path :type 'boolean
                                                                           :default nil))
               (list (k "layer_norm_epsilon") :f32
                     (coerce (cfg rl "head_norm_eps" rl-path :type 'positive-real :default 1d-5)
                             'single-float)))
         (loop for key in keys
               collect (list (k (format nil "temperature.~A" (temperature-key key)))
                             :f32 (coerce (cfg temps key rl-path :type 'positive-real)
                                          'single-float))))))))

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

(defun convert-tensors (tensors path name-of type head-type &key outliers)
  "The output tensors, (gguf-name data :dims ne), of the input TENSORS
(name data) of the file PATH: NAME-OF maps an input name to its GGUF name
and whether it is a head tensor (NIL: left out).  OUTLIERS, a hash table
from GGUF names to outlier columns (or NIL), gives the Q8_0 matrices it
names the outlier-aware scales of doc/outliers.md.  Values that are not
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
                                                     ty
                                                     :outliers (and outliers
                                                                    (gethash g outliers)))
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

(defun check-laya-tensors (header hp head-layers paths)
  "Check the tensors of a Laya model.safetensors, HEADER a list of (name
dims), against the encoder's hyper-parameters HP and the decision head's
HEAD-LAYERS (CHECK-TENSORS): a head tensor is expected from
rl_agent_config.json, its shape from the encoder's config.  PATHS: as
LAYA-GGUF-FILE's."
  (let* ((model-path (getf paths :model "model.safetensors"))
         (enc-path (getf paths :encoder "encoder/config.json"))
         (rl-path (getf paths :rl "rl_agent_config.json"))
         (head-source (format nil "~A head_layers" rl-path)))
    (check-tensors header
                   (append (loop for (name shape) in (apply #'encoder-tensor-shapes "encoder.model." hp)
                                 collect (list name shape enc-path))
                           (loop for (name shape) in (decision-head-tensor-shapes
                                                      :hidden (getf hp :hidden)
                                                      :head-layers head-layers)
                                 collect (list name shape enc-path
                                               (if (layer-index name "head.layers.")
                                                   head-source
                                                   rl-path))))
                   model-path
                   `(("encoder.model.layers." ,(getf hp :layers)
                                              ,(format nil "~A num_hidden_layers" enc-path))
                     ("head.layers." ,head-layers ,head-source)))))

(defun laya-gguf-file (tensors encoder rl config tokenizer
                       &key (type :f16) (head-type :f32) (pre "modern-bert") name paths
                            encoder-only outliers rl-key-order)
  "The GGUF file object (GGUF:MAKE-FILE's, ready for GGUF:WRITE) of a Laya
model's parts, as READ-SAFETENSORS and PARSE-JSON answer them, every part
checked first.  PATHS: a plist naming the files, for errors.  ENCODER-ONLY
drops the decision head (its tensors, keys and token types): what is left
is a plain ModernBERT encoder, which llama.cpp loads.  OUTLIERS: see
CONVERT-TENSORS.  RL-KEY-ORDER: the key order of RL's objects
(READ-JSON-FILE's second value), for the temperature buckets' order."
  (let* ((model-path (getf paths :model "model.safetensors"))
         (enc-path (getf paths :encoder "encoder/config.json"))
         (rl-path (getf paths :rl "rl_agent_config.json"))
         (hp (encoder-hparams encoder enc-path))
         (h (getf hp :hidden))
         (layers (getf hp :layers))
         (head-layers (cfg (json-object rl rl-path) "head_layers" rl-path)))
    (json-object config (getf paths :config "config.json"))
    (check-laya-tensors (tensor-dimensions tensors) hp head-layers paths)
    (let* ((out (convert-tensors tensors model-path
                                 (lambda (hf)
                                   (multiple-value-bind (g head-p) (gguf-tensor-name hf layers)
                                     (and (not (and head-p encoder-only)) (values g head-p))))
                                 type head-type :outliers outliers))
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
              (unless encoder-only (decision-metadata rl rl-path head-layers
                                                      :hidden (getf hp :hidden) :hidden-heads (getf hp :heads)
                                                      :key-order rl-key-order))
              (tokenizer-metadata tokenizer (getf paths :tokenizer "tokenizer/tokenizer.json") pre
                                  (getf hp :vocab)
                                  :token-types (if encoder-only nil 3) :config-path enc-path
                                  :template (systemone-template "[CLS]" "[SEP]" "[MASK]")))))
      (gguf:make-file :metadata metadata :tensors out))))

(defun converted-file (build type outlier-aware)
  "The GGUF file object BUILD answers for TYPE: BUILD is a function of the
keys :type and :outliers (LAYA-GGUF-FILE or HF-GGUF-FILE on the parts
read).  With OUTLIER-AWARE (TYPE :q8_0 only) the model is first built with
F32 matrices and calibrated (MODEL:CALIBRATE), and each encoder matrix gets
the outlier-aware scales of doc/outliers.md for the outlier columns of its calibration:
still plain Q8_0 bytes."
  (cond ((not outlier-aware) (funcall build :type type))
        ((eq type :q8_0)
         (let ((f32 (let ((*error-output* (make-broadcast-stream))) ; said once, below
                      (funcall build :type :f32))))
           (funcall build :type type
                         :outliers (calibration-outlier-table (model:calibrate f32)))))
        (t (rontolisp-error 'convert "expected the type q8_0 with outlier-aware scales, ~
found ~(~A~)" type))))

(defun write-gguf-file (out f)
  "Write the file object F to the GGUF file OUT; answer its tensor count."
  (gguf:write out f)
  (length (gguf:tensor-infos f)))

(defun read-input-json (path &optional (default nil default-p))
  "The JSON object in the file PATH (READ-JSON-FILE), or DEFAULT when
given and PATH does not exist."
  (if (and default-p (not (path-kind path)))
      default
      (json-object (read-json-file path) path)))

(defun convert-laya (dir out &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                  encoder-only outlier-aware)
  "Convert the Laya model directory DIR (model.safetensors, config.json,
encoder/config.json, rl_agent_config.json, tokenizer/tokenizer.json) to the
GGUF file OUT with encoder matrices of TYPE and decision head of HEAD-TYPE
(:f32 :f16 :bf16 :q8_0); ENCODER-ONLY leaves the head out; OUTLIER-AWARE
(with TYPE :q8_0) calibrates the model first (see CONVERTED-FILE).  Every input is
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
           (rl-read (multiple-value-list (read-json-file (getf paths :rl) :key-order t)))
           (rl (json-object (first rl-read) (getf paths :rl)))
           (rl-order (second rl-read))
           (config (read-input-json (getf paths :config) (make-hash-table :test 'equal)))
           (tokenizer (read-input-json (getf paths :tokenizer))))
      (let* ((hp (encoder-hparams encoder (getf paths :encoder)))
             (head-layers (cfg (json-object rl (getf paths :rl)) "head_layers" (getf paths :rl)))
             ;; The tensors' names and shapes from the header, before any
             ;; data is read: an unknown or misshapen tensor costs nothing.
             (tensors (progn
                        (decision-metadata rl (getf paths :rl) head-layers
                                           :hidden (getf hp :hidden) :hidden-heads (getf hp :heads) :key-order rl-order)
                        (read-safetensors (getf paths :model)
                                          :check (lambda (header)
                                                   (check-laya-tensors header hp head-layers
                                                                       paths))))))
        (write-gguf-file
         out (converted-file (lambda (&rest keys)
                               (apply #'laya-gguf-file tensors encoder rl config tokenizer
                                      :head-type head-type :pre pre :name name :paths paths
                                      :rl-key-order rl-order
                                      :encoder-only encoder-only keys))
                             type outlier-aware))))))

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

(defun read-hf-tensors (root &key check)
  "The tensors, a list of (name data), of the Hugging Face directory ROOT
(a string ending in a slash): model.safetensors, or the shards that
model.safetensors.index.json lists, each tensor where the index says.
CHECK, when given, is called with every file's header entries, (name dims
file), before any tensor's data is read (see READ-SAFETENSORS)."
  (let ((index-path (concatenate 'string root "model.safetensors.index.json")))
    (if (not (path-kind index-path))
        (let ((path (concatenate 'string root "model.safetensors")))
          (read-safetensors path :check (and check
                                             (lambda (header)
                                               (funcall check (loop for (name dims) in header
                                                                    collect (list name dims path)))))))
        (let* ((index (read-input-json index-path))
               (weight-map (json-object (cfg index "weight_map" index-path :type 'hash-table)
                                        index-path "weight_map"))
               (files (make-hash-table :test 'equal))
               (found (make-hash-table :test 'equal))
               (header '()))
          (maphash (lambda (name file)
                     (unless (and (stringp file) (plusp (length file)) (not (find #\/ file)))
                       (convert-error index-path "key ~S: expected a shard file name in the ~
directory, found ~A" (format nil "weight_map.~A" name) (json-brief file)))
                     (setf (gethash file files) t))
                   weight-map)
          (let ((paths (mapcar (lambda (file) (concatenate 'string root file))
                               (sort (loop for file being the hash-keys of files collect file)
                                     #'string<))))
            ;; Every shard's header first, then the data.
            (dolist (path paths)
              (let ((file (subseq path (length root))))
                (loop for (name dims) in (read-safetensors-header path)
                      do (unless (equal (gethash name weight-map) file)
                           (convert-error path "tensor ~S: expected it in ~A as ~A lists it, found ~
it here" name (or (gethash name weight-map) "no shard") index-path))
                         (setf (gethash name found) t)
                         (push (list name dims path) header))))
            (maphash (lambda (name file)
                       (unless (gethash name found)
                         (convert-error index-path "key ~S: expected the tensor in ~A, found none"
                                        (format nil "weight_map.~A" name) file)))
                     weight-map)
            (when check (funcall check (reverse header)))
            (loop for path in paths append (read-safetensors path)))))))

(defun hf-pooling (root)
  "The pooling_type of the sentence-transformers pooling module that
modules.json in ROOT names (1 mean, 2 CLS, 3 last token, as upstream
reads it), or NIL when there is none."
  (let ((modules-path (concatenate 'string root "modules.json")))
    (when (path-kind modules-path)
      (let ((modules (read-json-file modules-path)))
        (unless (json-array-p modules)
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
        (let ((pairs '())
              (keys (make-hash-table)))
          (maphash (lambda (k v)
                     (let ((id (ignore-errors (parse-integer k))))
                       (unless (and id (< -1 id (hash-table-count id2label)) (stringp v))
                         (convert-error path "key ~S: expected a label string at an id below ~D, ~
found ~A" (format nil "id2label.~A" k) (hash-table-count id2label) (json-brief v)))
                       ;; "1" and "01" are one id: one label would be lost.
                       (when (gethash id keys)
                         (convert-error path "key ~S: expected each id once, found id ~D also as ~S"
                                        (format nil "id2label.~A" k) id (gethash id keys)))
                       (setf (gethash id keys) k)
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

(defun hf-head (config path)
  "The head (:none, :masked-lm, :classifier) of the Hugging Face ModernBERT
config CONFIG (the file PATH), its model_type and architectures checked."
  (let ((model-type (cfg config "model_type" path :type 'string))
        (archs (cfg config "architectures" path :type 'vector)))
    (unless (string= model-type "modernbert")
      (convert-error path "key \"model_type\": expected \"modernbert\", found ~S" model-type))
    (or (and (= 1 (length archs))
             (cdr (assoc (aref archs 0) *hf-architectures* :test #'equal)))
        (convert-error path "key \"architectures\": expected one of ~{~A~^, ~}, found ~A"
                       (mapcar #'car *hf-architectures*) (json-brief archs)))))

(defun check-hf-tensors (header hp head config paths)
  "Check the tensors of a Hugging Face ModernBERT, HEADER a list of (name
dims [file]), against its hyper-parameters HP, HEAD and CONFIG (see
CHECK-TENSORS; a tensor llama.cpp has no place for may be there or not,
its shape checked when it is).  PATHS: as HF-GGUF-FILE's.  Answers the
tensors' name prefix, \"model.\" or \"\"."
  (let* ((model-path (getf paths :model "model.safetensors"))
         (config-path (getf paths :config "config.json"))
         (prefix (if (some (lambda (e) (string= "model.embeddings." (first e)
                                                :end2 (min 17 (length (first e)))))
                           header)
                     "model." ""))
         (expected (hf-expected-tensors prefix hp head config config-path))
         (optional (make-hash-table :test 'equal)))
    (loop for (name shape optional-p) in expected
          when optional-p do (setf (gethash name optional) shape))
    (loop for (name dims file) in header
          for shape = (gethash name optional)
          when (and shape (not (equal dims shape)))
            do (convert-error (or file model-path) "tensor ~S: expected shape ~A (from ~A), ~
found ~A" name (shape-string shape) config-path (shape-string dims)))
    (check-tensors (remove-if (lambda (e) (gethash (first e) optional)) header)
                   (loop for (name shape optional-p) in expected
                         unless optional-p collect (list name shape config-path))
                   model-path
                   `((,(concatenate 'string prefix "layers.") ,(getf hp :layers)
                      ,(format nil "~A num_hidden_layers" config-path))))
    prefix))

(defun hf-gguf-file (tensors config tokenizer tokenizer-config
                     &key (type :f16) (head-type :f32) (pre "modern-bert") name paths pooling
                          encoder-only outliers)
  "The GGUF file object of a Hugging Face ModernBERT's parts (see
LAYA-GGUF-FILE; PATHS names :model, :config and :tokenizer for errors;
POOLING is HF-POOLING's answer).  The head's dense layer, norm and
classifier map as upstream maps them; tensors llama.cpp has no place for
are left out with a message on *ERROR-OUTPUT*, and every head tensor with
ENCODER-ONLY.  OUTLIERS: see CONVERT-TENSORS."
  (let* ((model-path (getf paths :model "model.safetensors"))
         (config-path (getf paths :config "config.json"))
         (hp (encoder-hparams config config-path))
         (head (hf-head config config-path))
         (prefix (check-hf-tensors (tensor-dimensions tensors) hp head config paths))
         (layers (getf hp :layers))
         (labels (and (eq head :classifier) (not encoder-only) (hf-labels config config-path)))
         (expected (hf-expected-tensors prefix hp head config config-path))
         (places (make-hash-table :test 'equal)))
    (loop for e in expected for i from 0 do (setf (gethash (first e) places) (cons i e)))
    ;; Shards and files list tensors in any order: the output keeps the
    ;; encoder's (the order of the expected table), so the same model
    ;; gives the same file however it was saved.
    (setf tensors (stable-sort (copy-list tensors) #'<
                               :key (lambda (e) (car (gethash (first e) places)))))
    (loop for (name) in tensors
          when (fourth (gethash name places)) ; an optional tensor
            do (format *error-output* "~A: tensor ~S left out: ~A, which llama.cpp's ~
modern-bert has no place for~%" model-path name
                       (cdr (assoc name *hf-dropped-tensors* :test #'string=))))
    (when (and encoder-only (not (eq head :none)))
      (format *error-output* "~A: the ~(~A~) head left out (--encoder-only)~%" model-path head))
    (let* ((out (convert-tensors tensors model-path
                                 (lambda (hf)
                                   (multiple-value-bind (g head-p)
                                       (gguf-tensor-name hf layers :prefix prefix :head :hf)
                                     (and (not (and head-p encoder-only)) (values g head-p))))
                                 type head-type :outliers outliers))
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

(defun convert-hf (dir out &key (type :f16) (head-type :f32) (pre "modern-bert") name encoder-only
                                outlier-aware)
  "Convert the Hugging Face ModernBERT directory DIR (config.json,
model.safetensors or shards with model.safetensors.index.json,
tokenizer.json, tokenizer_config.json, modules.json) to the GGUF file OUT,
as upstream's converter names and keys it, with matrices of TYPE and the
head's of HEAD-TYPE; ENCODER-ONLY leaves the head out; OUTLIER-AWARE (with
TYPE :q8_0) calibrates the model first (see CONVERTED-FILE).  Every input is
checked before anything is written.  Answers the number of tensors
written."
  (let* ((root (directory-prefix dir))
         (index (concatenate 'string root "model.safetensors.index.json"))
         (paths (list :root root
                      :model (if (path-kind index) index (concatenate 'string root "model.safetensors"))
                      :config (concatenate 'string root "config.json")
                      :tokenizer (concatenate 'string root "tokenizer.json"))))
    ;; The configs first: an absurd one is refused before the weights are read.
    (let ((config (read-input-json (getf paths :config)))
          (tokenizer (read-input-json (getf paths :tokenizer)))
          (tokenizer-config (read-input-json (concatenate 'string root "tokenizer_config.json") nil))
          (pooling (hf-pooling root)))
      (let* ((hp (encoder-hparams config (getf paths :config)))
             (head (hf-head config (getf paths :config)))
             ;; Names and shapes from the headers, before any data is read.
             (tensors (read-hf-tensors root :check (lambda (header)
                                                      (check-hf-tensors header hp head config
                                                                        paths)))))
        (write-gguf-file
         out (converted-file (lambda (&rest keys)
                               (apply #'hf-gguf-file tensors config tokenizer tokenizer-config
                                      :head-type head-type :pre pre :name name :paths paths
                                      :pooling pooling :encoder-only encoder-only keys))
                             type outlier-aware))))))

(defun convert-directory (dir out &rest options &key &allow-other-keys)
  "Convert DIR, a Laya directory (it has encoder/config.json) or a Hugging
Face ModernBERT directory (a config.json without it), with CONVERT-LAYA or
CONVERT-HF and OPTIONS."
  (let ((root (directory-prefix dir)))
    (cond ((path-kind (concatenate 'string root "encoder/config.json"))
           (apply #'convert-laya dir out options))
          ((path-kind (concatenate 'string root "config.json"))
           (apply #'convert-hf dir out options))
          (t (convert-error dir "expected a Laya directory (encoder/config.json) or a Hugging ~
Face ModernBERT directory (config.json), found neither")))))

(defun random-model (preset-name &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                       (seed 1) encoder-only (massive 0) (massive-ratio 20)
                                       outlier-aware)
  "The GGUF file object (GGUF:MAKE-FILE's, in memory) of a model of
PRESET-NAME (s1-pico, s1-nano, s1-micro) with random weights from SEED and
a small test tokenizer, its tensors of TYPE and HEAD-TYPE as CONVERT-LAYA
makes them (without the decision head when ENCODER-ONLY; OUTLIER-AWARE as
CONVERTED-FILE), MASSIVE residual channels MASSIVE-RATIO times larger than
the rest (see RANDOM-LAYA)."
  (multiple-value-bind (tensors encoder rl config tokenizer)
      (random-laya preset-name :seed seed :massive massive :massive-ratio massive-ratio
                               :report (random-progress preset-name))
    (multiple-value-bind (rl rl-order) (json-like rl :key-order t)
     (let ((encoder (json-like encoder)) (config (json-like config))
           (tokenizer (json-like tokenizer)))
      (converted-file (lambda (&rest keys)
                        (apply #'laya-gguf-file tensors encoder rl config tokenizer
                               :head-type head-type :pre pre :name name :rl-key-order rl-order
                               :encoder-only encoder-only keys))
                      type outlier-aware)))))

(defun json-like (value &key key-order)
  "VALUE written by WRITE-JSON's mapping read back as PARSE-JSON answers
it (for --random, which builds the files in memory), with PARSE-JSON's
KEY-ORDER."
  (parse-json (with-output-to-string (s) (write-json value s)) :key-order key-order))

(defun convert-random (preset-name out &key (type :f16) (head-type :f32) (pre "modern-bert") name
                                            (seed 1) encoder-only (massive 0) (massive-ratio 20)
                                            outlier-aware)
  "Write the GGUF file OUT for a model of PRESET-NAME (s1-pico, s1-nano,
s1-micro) with random weights from SEED and a small test tokenizer, MASSIVE
residual channels MASSIVE-RATIO times larger than the rest (see
RANDOM-MODEL, and CONVERTED-FILE for OUTLIER-AWARE).  Answers the number of
tensors written."
  (write-gguf-file out (random-model preset-name :type type :head-type head-type :pre pre
                                                 :name name :seed seed :massive massive
                                                 :massive-ratio massive-ratio
                                                 :encoder-only encoder-only
                                                 :outlier-aware outlier-aware)))

(defun check-massive-options (random massive massive-ratio)
  "The usage checks of --massive K and --massive-ratio R beside --random
RANDOM (a preset name or NIL)."
  (when (and (plusp massive) (not random))
    (usage-error "--massive goes with --random"))
  (when (and massive-ratio (zerop massive))
    (usage-error "--massive-ratio goes with --massive"))
  (when (and random (> massive (getf (preset random) :hidden)))
    (usage-error "--massive expects at most ~D channels for ~A (its hidden size), found ~D"
                 (getf (preset random) :hidden) random massive)))

(defun written-head-description (out head-type)
  "How the summary line of `convert' names the head of the file OUT it
wrote: the decision head or a Hugging Face classifier head, of HEAD-TYPE,
or none (--encoder-only, or a Hugging Face model without a classifier)."
  (gguf:with-file (f out)
    (cond ((nth-value 2 (gguf:value f "modern-bert.decision.block_count"))
           (format nil "decision head ~(~A~)" head-type))
          ((find "cls.output.weight" (gguf:tensor-names f) :test #'string=)
           (format nil "classifier head ~(~A~)" head-type))
          (t "no head"))))
