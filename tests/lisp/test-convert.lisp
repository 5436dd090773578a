;;;; test-convert.lisp - `rontolisp convert': preset shapes, tensor names and
;;;; keys, the type policy, the Laya directory round trip through our own
;;;; safetensors writer and reader.

(in-package "RONTOLISP-TESTS")

(def-suite convert :in all :description "The Laya -> GGUF converter.")
(in-suite convert)

(defun tensor-params (f)
  (reduce #'+ (mapcar (lambda (i) (reduce #'* (gguf:tensor-info-dims i))) (gguf:tensor-infos f))))

(defmacro with-converted ((f &rest args) &body body)
  (let ((out (gensym)))
    `(let ((,out (tmp-path "conv.gguf")))
       (unwind-protect
            (progn
              (is (= 0 (run-exe (list* "convert" "--random" "s1-pico" ,out (list ,@args)))))
              (gguf:with-file (,f ,out) ,@body))
         (ignore-errors (delete-file ,out))))))

(test convert-preset-parameter-counts
  "The presets' parameter counts are the seed's table."
  (loop for (name count) in '(("s1-pico" 202305) ("s1-nano" 1134209) ("s1-micro" 6630913))
        do (is (= count (reduce #'+ (mapcar (lambda (e) (reduce #'* (second e)))
                                            (apply #'command-line::laya-tensor-shapes
                                                   (command-line::preset name))))))))

(test convert-pico-default-types
  (with-converted (f)
    (is (= 202305 (tensor-params f)))
    (is (= 33 (length (gguf:tensor-infos f))))
    (is (string= "modern-bert" (gguf:value f "general.architecture")))
    (is (= 3 (gguf:value f "modern-bert.block_count")))
    (is (= 1 (gguf:value f "modern-bert.decision.block_count")))
    (is (= 64 (gguf:value f "modern-bert.embedding_length")))
    (is (string= "laya" (gguf:value f "modern-bert.decision.type")))
    (is-true (nth-value 2 (gguf:value f "modern-bert.decision.temperature.choice.3_5")))
    (is (string= "gpt2" (gguf:value f "tokenizer.ggml.model")))
    (is (= 1024 (length (gguf:value f "tokenizer.ggml.tokens"))))
    (is (equal '(2 3 4) (mapcar (lambda (k) (gguf:value f k))
                                '("tokenizer.ggml.bos_token_id" "tokenizer.ggml.seperator_token_id"
                                  "tokenizer.ggml.mask_token_id"))))
    (is (= 3 (gguf:value f "tokenizer.ggml.token_type_count")))
    (is (search "[MASK]" (gguf:value f "tokenizer.chat_template")))
    (dolist (info (gguf:tensor-infos f))
      (let ((name (gguf:tensor-info-name info))
            (type (gguf:tensor-info-type info)))
        (cond ((= 1 (length (gguf:tensor-info-dims info)))
               (is (string= "F32" type) "~A: 1-D should be F32" name))
              ((or (search "blk.2." name) (search "cls" name) (search "token_types" name))
               (is (string= "F32" type) "~A: head should be F32" name))
              (t (is (string= "F16" type) "~A: encoder matrix should be F16" name)))))))

(test convert-encoder-only-is-a-plain-modern-bert-encoder
  "--encoder-only: no decision-head tensor or key, block_count and
feed_forward_length of the encoder alone (one u32, as upstream writes it),
the keys llama.cpp's loader reads for the local layers and the FFN."
  (with-converted (f "--encoder-only")
    (is (= 14 (length (gguf:tensor-infos f))))
    (is (notany (lambda (i) (let ((n (gguf:tensor-info-name i)))
                              (or (search "cls" n) (search "token_types" n) (search "blk.2." n))))
                (gguf:tensor-infos f)))
    (is (notany (lambda (k) (search "decision" k)) (gguf:keys f)))
    (is (= 2 (gguf:value f "modern-bert.block_count")))
    (is (eql 128 (gguf:value f "modern-bert.feed_forward_length")))
    (is (= 10000.0 (gguf:value f "modern-bert.rope.freq_base_swa")))
    (is (= 160000.0 (gguf:value f "modern-bert.rope.freq_base")))
    (is (string= "gelu" (gguf:value f "modern-bert.hidden_activation")))
    (is (search "[MASK]" (gguf:value f "tokenizer.chat_template")))
    (is-false (nth-value 2 (gguf:value f "tokenizer.ggml.token_type_count")))))

(test convert-pico-q8-0-types
  (with-converted (f "--type" "q8_0" "--head-type" "bf16")
    (is (string= "F16" (gguf:tensor-info-type (gguf:tensor-info f "token_embd.weight"))))
    (is (string= "Q8_0" (gguf:tensor-info-type (gguf:tensor-info f "blk.0.attn_qkv.weight"))))
    (is (string= "Q8_0" (gguf:tensor-info-type (gguf:tensor-info f "blk.1.ffn_down.weight"))))
    (is (string= "BF16" (gguf:tensor-info-type (gguf:tensor-info f "blk.2.attn_qkv.weight"))))
    (is (string= "F32" (gguf:tensor-info-type (gguf:tensor-info f "blk.2.attn_qkv.bias"))))
    (is (= 7 (gguf:value f "general.file_type")))
    ;; the Q8_0 tensors read back as quantized matrices of the right shape
    (is (equal '(192 64) (array-dimensions (gguf:tensor f "blk.0.attn_qkv.weight"))))))

(test convert-type-policy
  (is (eq :f16 (rontolisp::tensor-type "blk.0.x.weight" '(48 48) nil :q8_0 :f32)))
  (is (eq :q8_0 (rontolisp::tensor-type "blk.0.x.weight" '(48 64) nil :q8_0 :f32)))
  (is (eq :f32 (rontolisp::tensor-type "blk.0.x.weight" '(64) nil :q8_0 :q8_0)))
  (is (eq :f16 (rontolisp::tensor-type "token_embd.weight" '(1024 64) nil :q8_0 :f32)))
  (is (eq :bf16 (rontolisp::tensor-type "cls.weight" '(64 64) t :f16 :bf16)))
  (is (string= "choice.3_5" (command-line::temperature-key "choice:3-5"))))

(test convert-laya-directory-round-trip
  "--write-laya writes a directory that converts to the same file as the
in-memory random model; the safetensors round trip is exact."
  (let ((dir (tmp-path "laya")) (a (tmp-path "a.gguf")) (b (tmp-path "b.gguf")))
    (unwind-protect
         (progn
           (is (= 0 (run-exe (list "convert" "--random" "s1-pico" a "--write-laya" dir))))
           (is (= 0 (run-exe (list "convert" "--random" "s1-pico" b))))
           (is (equalp (read-octets a 0 (with-open-file (s a :element-type '(unsigned-byte 8)) (file-length s)))
                       (read-octets b 0 (with-open-file (s b :element-type '(unsigned-byte 8)) (file-length s)))))
           (let ((tensors (rontolisp:read-safetensors (concatenate 'string dir "/model.safetensors")))
                 (orig (command-line::random-laya "s1-pico")))
             (is (= (length orig) (length tensors)))
             (is (every (lambda (x y) (and (string= (first x) (first y)) (equalp (second x) (second y))))
                        orig tensors)))
           (is (= 0 (run-exe (list "convert" dir b "--type" "q8_0"))))
           (gguf:with-file (f b)
             (is (string= "Q8_0" (gguf:tensor-info-type (gguf:tensor-info f "blk.1.attn_qkv.weight"))))))
      (ignore-errors (delete-file a))
      (ignore-errors (delete-file b)))))

(test convert-writes-the-decision-head-keys-with-their-defaults
  "Without the head_* keys in rl_agent_config.json: the encoder's head
count, relu, post-norm, 1e-5; the question types are the temperature
buckets' types in the file's order, and the buckets keep that order."
  (with-converted (f)
    (flet ((v (k) (gguf:value f (concatenate 'string "modern-bert.decision." k))))
      (is (equalp #("choice" "score" "noul") (v "question_types")))
      (is (= 4 (v "head_count")))
      (is (string= "relu" (v "activation")))
      (is (eq nil (v "norm_first")))
      (is (= 1f-5 (v "layer_norm_epsilon")))
      (is (equal '("choice.2" "choice.3_5" "score.2" "noul.2")
                 (loop for k in (gguf:keys f)
                       when (search "decision.temperature." k)
                         collect (subseq k (+ (search "temperature." k) 12))))))))

(test convert-reads-the-decision-head-keys-from-rl-agent-config
  "head_heads, head_activation, head_norm_first, head_norm_eps and
question_types as rl_agent_config.json gives them; without question_types,
the types of the temperature buckets in the order the file writes them
(which no sorting gives), each once."
  (let ((dir (tmp-path "laya-keys")) (out (tmp-path "keys.gguf")))
    (flet ((rl (text)
             (write-file-string (concatenate 'string dir "/rl_agent_config.json") text)
             (is (= 0 (run-exe (list "convert" dir out))))
             (gguf:read out)))
      (unwind-protect
           (progn
             (is (= 0 (run-exe (list "convert" "--random" "s1-pico" out "--write-laya" dir))))
             (let ((f (rl "{\"head_layers\": 1, \"question_types\": [\"noul\", \"score\"],
 \"head_heads\": 8, \"head_activation\": \"gelu\", \"head_norm_first\": true,
 \"head_norm_eps\": 1e-6, \"temperatures\": {\"choice:2\": 1.0}}")))
               (flet ((v (k) (gguf:value f (concatenate 'string "modern-bert.decision." k))))
                 (is (equalp #("noul" "score") (v "question_types")))
                 (is (= 8 (v "head_count")))
                 (is (string= "gelu" (v "activation")))
                 (is (eq t (v "norm_first")))
                 (is (= 1f-6 (v "layer_norm_epsilon"))))
               (gguf:close f))
             (let ((f (rl "{\"head_layers\": 1, \"temperatures\": {\"score:2\": 1.0,
 \"noul:2-4\": 1.5, \"choice:2\": 0.5, \"score:3\": 2.0}}")))
               (is (equalp #("score" "noul" "choice")
                           (gguf:value f "modern-bert.decision.question_types")))
               (gguf:close f))
             (let ((f (rl "{\"head_layers\": 1, \"temperatures\": {}}")))
               (multiple-value-bind (value type found)
                   (gguf:value f "modern-bert.decision.question_types")
                 (declare (ignore value type))
                 (is-false found "no types: the key is left out, not an empty array"))
               (gguf:close f)))
        (ignore-errors (delete-file out))
        (uiop:delete-directory-tree (pathname (concatenate 'string dir "/")) :validate t
                                                                             :if-does-not-exist :ignore)))))

(test convert-usage-and-missing-input
  (is (= 2 (run-exe (list "convert"))))
  (is (= 2 (run-exe (list "convert" "--random" "s1-huge" (tmp-path "x.gguf")))))
  (is (= 2 (run-exe (list "convert" "--random" "s1-pico" (tmp-path "x.gguf") "--type" "q4_k"))))
  (multiple-value-bind (code out err) (run-exe (list "convert" "/nonexistent-dir" (tmp-path "x.gguf")))
    (declare (ignore out))
    (is (= 1 code))
    (is (= 1 (count #\Newline err)))))

(test random-normal-fill-is-a-function-of-the-state
  "--random's weights come from prims/rng.c: the same state gives the same
values and the same next state; the values look like N(0, sigma)."
  (flet ((fill-from (state)
           (let ((a (make-array 20001 :element-type 'single-float)))
             (multiple-value-bind (next) (command-line::%random-normal-fill a 0.02d0 state)
               (values a next)))))
    (multiple-value-bind (a sa) (fill-from 42)
      (multiple-value-bind (b sb) (fill-from 42)
        (is (equalp a b))
        (is (= sa sb))
        (is (/= sa 42)))
      (is (not (equalp a (fill-from (1- (expt 2 64))))))
      (let* ((n (length a))
             (mean (/ (loop for x across a sum x) n))
             (sd (sqrt (/ (loop for x across a sum (expt (- x mean) 2)) n))))
        (is (< (abs mean) 0.001) "mean ~A" mean)
        (is (< 0.019 sd 0.021) "deviation ~A" sd)))))

;;; Hugging Face ModernBERT directories.

(defparameter *upstream-hf-keys*
  '("general.architecture" "general.type" "general.name" "general.size_label"
    "general.file_type" "general.quantization_version"
    "modern-bert.block_count" "modern-bert.context_length" "modern-bert.embedding_length"
    "modern-bert.feed_forward_length" "modern-bert.attention.head_count"
    "modern-bert.attention.causal" "modern-bert.rope.freq_base" "modern-bert.rope.freq_base_swa"
    "modern-bert.attention.layer_norm_rms_epsilon" "modern-bert.attention.sliding_window"
    "modern-bert.attention.sliding_window_pattern" "modern-bert.rope.scaling.type"
    "modern-bert.vocab_size" "modern-bert.hidden_activation"
    "tokenizer.ggml.model" "tokenizer.ggml.pre" "tokenizer.ggml.tokens"
    "tokenizer.ggml.token_type" "tokenizer.ggml.merges" "tokenizer.ggml.bos_token_id"
    "tokenizer.ggml.eos_token_id" "tokenizer.ggml.seperator_token_id"
    "tokenizer.ggml.cls_token_id" "tokenizer.ggml.mask_token_id"
    "tokenizer.ggml.unknown_token_id" "tokenizer.ggml.padding_token_id"
    "tokenizer.ggml.add_bos_token" "tokenizer.ggml.add_eos_token" "tokenizer.ggml.add_sep_token")
  "The keys upstream's convert_hf_to_gguf.py writes for write-random-hf's
ModernBertModel directory (no modules.json, no chat template, no id2label),
read from its source: ModelBase.prepare_metadata (general.type, name,
size_label, quantization_version; basename, finetune and version come from
heuristics on the directory name and are not written here),
TextModel.set_gguf_parameters (block_count, context_length,
embedding_length, feed_forward_length, head_count, rope.freq_base from
global_rope_theta, rope.freq_base_swa from local_rope_theta,
layer_norm_rms_epsilon from norm_eps, file_type), BertModel's
attention.causal, ModernBertModel.set_gguf_parameters (sliding_window,
sliding_window_pattern, rope.scaling.type, vocab_size, hidden_activation),
ModernBertModel.set_vocab with _set_vocab_gpt2 and SpecialVocab (the
tokenizer keys; bos/eos from config.json's bos_token_id/eos_token_id).")

(defparameter *our-extra-hf-keys*
  '("general.alignment" "modern-bert.attention.layer_norm_epsilon"
    "skycmd.tokenizer.normalizer" "skycmd.tokenizer.lstrip_ids"
    "skycmd.tokenizer.rstrip_ids" "skycmd.tokenizer.ignore_merges")
  "Keys we write beyond upstream's: the alignment (always written),
layer_norm_epsilon (the key llama.cpp's modern-bert loader requires, where
upstream files norm_eps only as the RMS epsilon) and our tokenizer details.")

(defmacro with-hf-dir ((dir &rest options) &body body)
  `(let ((,dir (tmp-path "hf")))
     (unwind-protect
          (progn (rontolisp:write-random-hf ,dir "s1-pico" ,@options) ,@body)
       (sh "rm -rf \"$1\"" ,dir))))

(defun convert-to-file (args)
  "Run convert with ARGS (the output path last); answer exit status and stderr."
  (multiple-value-bind (code out err) (run-exe (list* "convert" args))
    (declare (ignore out))
    (values code err)))

(test convert-hf-key-set-is-upstream-s
  (with-hf-dir (dir)
    (let ((out (tmp-path "hf.gguf")))
      (is (= 0 (convert-to-file (list dir out "--type" "f32"))))
      (gguf:with-file (f out)
        (let ((ours (gguf:keys f)))
          (is (null (set-difference *upstream-hf-keys* ours :test #'string=))
              "upstream keys we lack: ~A" (set-difference *upstream-hf-keys* ours :test #'string=))
          (is (null (set-difference ours (append *upstream-hf-keys* *our-extra-hf-keys*)
                                    :test #'string=))
              "keys upstream does not write: ~A"
              (set-difference ours (append *upstream-hf-keys* *our-extra-hf-keys*) :test #'string=)))
        (is (eq :u32 (gguf:value-type f "modern-bert.feed_forward_length")))
        (is (eq :f32 (gguf:value-type f "modern-bert.rope.freq_base_swa")))
        (is (eq :string (gguf:value-type f "modern-bert.hidden_activation")))
        (is (string= "148K" (gguf:value f "general.size_label")))
        (is-false (nth-value 2 (gguf:value f "tokenizer.chat_template")))
        (is (= 14 (length (gguf:tensor-infos f)))))
      ;; A template in tokenizer_config.json becomes the default one.
      (edit-json (concatenate 'string dir "/tokenizer_config.json")
                 (set-key "chat_template" "{{ messages }}"))
      (is (= 0 (convert-to-file (list dir out))))
      (gguf:with-file (f out)
        (is (string= "{{ messages }}" (gguf:value f "tokenizer.chat_template"))))
      (delete-file out))))

(test convert-hf-layouts-give-the-same-encoder
  "One model written as one file or three shards, with or without the
model. prefix, in F32, F16 or BF16: the same tensor names and, for F32 and
a lossless F16 output, the same bytes as the Laya encoder."
  (let ((laya (tmp-path "laya.gguf")))
    (is (= 0 (convert-to-file (list "--random" "s1-pico" laya "--encoder-only" "--type" "bf16"))))
    (gguf:with-file (ref laya)
      (loop for (options) in '(((:prefix "model." :dtype :f32 :shards 1))
                               ((:prefix "" :dtype :f32 :shards 3))
                               ((:prefix "model." :dtype :bf16 :shards 2))
                               ((:prefix "" :dtype :f16 :shards 1)))
            do (let ((dir (tmp-path "hf")) (out (tmp-path "hf.gguf")))
                 (apply #'rontolisp:write-random-hf dir "s1-pico" options)
                 (is (= 0 (convert-to-file (list dir out "--type" "bf16"))) "~S" options)
                 (gguf:with-file (f out)
                   (is (equal (mapcar #'gguf:tensor-info-name (gguf:tensor-infos ref))
                              (mapcar #'gguf:tensor-info-name (gguf:tensor-infos f))))
                   (unless (eq (getf options :dtype) :f16)
                     (dolist (name '("blk.1.attn_qkv.weight" "token_embd.weight"))
                       (is (equalp (rontolisp:half-array-bits (gguf:tensor ref name))
                                   (rontolisp:half-array-bits (gguf:tensor f name)))
                           "~S ~A" options name))))
                 (delete-file out)
                 (sh "rm -rf \"$1\"" dir))))
    (delete-file laya)))

(test convert-hf-heads-map-as-upstream-or-are-dropped-with-a-message
  (with-hf-dir (dir :head :masked-lm :shards 2)
    (let ((out (tmp-path "mlm.gguf")))
      (multiple-value-bind (code err) (convert-to-file (list dir out))
        (is (= 0 code))
        (is (contains err "\"decoder.bias\" left out")))
      (gguf:with-file (f out)
        (let ((names (mapcar #'gguf:tensor-info-name (gguf:tensor-infos f))))
          (is (member "cls.weight" names :test #'string=))
          (is (member "cls.norm.weight" names :test #'string=))
          (is (= 16 (length names)))))
      (delete-file out)))
  (with-hf-dir (dir :head :classifier)
    (let ((out (tmp-path "cls.gguf")))
      (is (= 0 (convert-to-file (list dir out))))
      (gguf:with-file (f out)
        (is (equal '(64 2) (gguf:tensor-info-dims (gguf:tensor-info f "cls.output.weight"))))
        (is (equalp #("wrong" "right") (gguf:value f "modern-bert.classifier.output_labels"))))
      (multiple-value-bind (code err) (convert-to-file (list dir out "--encoder-only"))
        (is (= 0 code))
        (is (contains err "head left out")))
      (gguf:with-file (f out)
        (is (= 14 (length (gguf:tensor-infos f))))
        (is-false (nth-value 2 (gguf:value f "modern-bert.classifier.output_labels"))))
      (delete-file out))))

;;; Broken inputs: each refused before anything is written, in one line
;;; naming the input file and the key or tensor.

(defun edit-text (path old new)
  "Replace the text OLD (which must be there) by NEW in the file PATH: for
what the JSON writer cannot write, such as 1e999."
  (let* ((text (read-file-string path))
         (at (search old text)))
    (assert at () "~A does not hold ~S" path old)
    (with-open-file (s path :direction :output :if-exists :supersede :external-format :utf-8)
      (write-string (concatenate 'string (subseq text 0 at) new (subseq text (+ at (length old))))
                    s))))

(defun edit-tensors (path fn)
  "Replace the safetensors file PATH by FN of its list of (name array)."
  (rontolisp:write-safetensors path (funcall fn (rontolisp:read-safetensors path))))

(defun rename-tensor (from to)
  (lambda (ts) (mapcar (lambda (e) (if (string= (first e) from) (list to (second e)) e)) ts)))

(defun move-layer (index)
  "Layer 1's Wo of a Laya model renamed into layer INDEX (a string)."
  (rename-tensor "encoder.model.layers.1.attn.Wo.weight"
                 (format nil "encoder.model.layers.~A.attn.Wo.weight" index)))

(defun replace-tensor (name dims value)
  "The tensor NAME replaced by a single-float array of DIMS filled with VALUE."
  (lambda (ts)
    (mapcar (lambda (e)
              (if (string= (first e) name)
                  (list name (make-array dims :element-type 'single-float :initial-element value))
                  e))
            ts)))

(defun set-element (name index value)
  "Element INDEX (row-major) of the tensor NAME set to VALUE."
  (lambda (ts)
    (dolist (e ts ts)
      (when (string= (first e) name)
        (setf (row-major-aref (second e) index) value)))))

(defun drop-tensors (test)
  (lambda (ts) (remove-if (lambda (e) (funcall test (first e))) ts)))

(defun set-key (key value)
  (lambda (h) (setf (gethash key h) value) h))

(defparameter *broken-laya-inputs*
  `(("empty header" "model.safetensors" ("tok_embeddings" "expected it")
     ("model.safetensors" ,(lambda (ts) (declare (ignore ts)) '())))
    ("a layer's Wqkv missing" "model.safetensors" ("layers.1.attn.Wqkv.weight" "found none")
     ("model.safetensors" ,(drop-tensors (lambda (n) (string= n "encoder.model.layers.1.attn.Wqkv.weight")))))
    ("token embeddings missing" "model.safetensors" ("tok_embeddings.weight" "found none")
     ("model.safetensors" ,(drop-tensors (lambda (n) (search "tok_embeddings" n)))))
    ("the whole head missing" "model.safetensors"
     ("head.layers.0" "rl_agent_config.json head_layers)" "found none")
     ("model.safetensors" ,(drop-tensors (lambda (n) (string= "head." n :end2 (min 5 (length n)))))))
    ("the head's scorer missing" "model.safetensors"
     ("\"head.out.weight\": expected it (from " "rl_agent_config.json)" "found none")
     ("model.safetensors" ,(drop-tensors (lambda (n) (string= n "head.out.weight")))))
    ("wrong shape" "model.safetensors" ("attn.Wo.weight" "expected shape [64, 64]" "found [64, 32]")
     ("model.safetensors"
,(replace-tensor "encoder.model.layers.0.attn.Wo.weight" '(64 32) 0.0)))
    ("wrong rank" "model.safetensors" ("mlp_norm.weight" "found [1, 64]")
     ("model.safetensors"
,(replace-tensor "encoder.model.layers.1.mlp_norm.weight" '(1 64) 1.0)))
    ("layer 7 of 2" "model.safetensors" ("layers.7.attn.Wo.weight" "below 2" "found 7")
     ("model.safetensors" ,(move-layer "7")))
    ("layer -1" "model.safetensors" ("layers.-1.attn.Wo" "found \"-1\"")
     ("model.safetensors" ,(move-layer "-1")))
    ("layer \" 1\"" "model.safetensors" ("layer index" "found \" 1\"")
     ("model.safetensors" ,(move-layer " 1")))
    ("layer +1" "model.safetensors" ("layer index" "found \"+1\"")
     ("model.safetensors" ,(move-layer "+1")))
    ("layer 10^23" "model.safetensors" ("below 2" "found 99999999999999999999999")
     ("model.safetensors" ,(move-layer "99999999999999999999999")))
    ("head layer 5 of 1" "model.safetensors" ("head.layers.5.linear1.weight" "below 1")
     ("model.safetensors" ,(rename-tensor "head.layers.0.linear1.weight" "head.layers.5.linear1.weight")))
    ("an unknown tensor" "model.safetensors" ("\"encoder.model.extra.weight\"" "unknown")
     ("model.safetensors" ,(lambda (ts) (append ts (list (list "encoder.model.extra.weight"
                                                               (make-array 4 :element-type 'single-float
                                                                             :initial-element 0.0)))))))
    ("hidden_size against the tensors" "model.safetensors" ("tok_embeddings.weight" "expected shape [1024, 32]")
     ("encoder/config.json" ,(set-key "hidden_size" 32)))
    ("hidden_size 0" "config.json" ("\"hidden_size\"" "from 1 to 65536" "found 0")
     ("encoder/config.json" ,(set-key "hidden_size" 0)))
    ("num_attention_heads 0" "config.json" ("\"num_attention_heads\"" "found 0")
     ("encoder/config.json" ,(set-key "num_attention_heads" 0)))
    ("num_attention_heads not dividing" "config.json" ("\"num_attention_heads\"" "divisor of hidden_size 64" "found 3")
     ("encoder/config.json" ,(set-key "num_attention_heads" 3)))
    ("num_hidden_layers 10^9" "config.json" ("\"num_hidden_layers\"" "found 1000000000")
     ("encoder/config.json" ,(set-key "num_hidden_layers" 1000000000)))
    ("head_layers 2^31" "rl_agent_config.json" ("\"head_layers\"" "found 2147483648")
     ("rl_agent_config.json" ,(set-key "head_layers" 2147483648)))
    ("head_layers 0 with a head layer" "model.safetensors" ("head.layers.0." "below 0")
     ("rl_agent_config.json" ,(set-key "head_layers" 0)))
    ("hidden_size a string" "config.json" ("\"hidden_size\"" "expected an integer" "found \"64\"")
     ("encoder/config.json" ,(set-key "hidden_size" "64")))
    ("norm_eps 1e300" "config.json" ("\"norm_eps\"" "finite number")
     ("encoder/config.json" ,(set-key "norm_eps" 1d300)))
    ("a temperature 1e300" "rl_agent_config.json" ("\"choice:2\"" "finite number")
     ("rl_agent_config.json" ,(lambda (h) (setf (gethash "choice:2" (gethash "temperatures" h)) 1d300) h)))
    ("norm_eps 1e-50, 0 as f32" "config.json"
     ("\"norm_eps\"" "from 1.1754944e-38 to 3.4028235e38" "found 1.0e-50")
     ("encoder/config.json" ,(set-key "norm_eps" 1d-50)))
    ("global_rope_theta 1e-46" "config.json" ("\"global_rope_theta\"" "found 1.0e-46")
     ("encoder/config.json" ,(set-key "global_rope_theta" 1d-46)))
    ("local_rope_theta 0" "config.json" ("\"local_rope_theta\"" "found 0")
     ("encoder/config.json" ,(set-key "local_rope_theta" 0)))
    ("norm_eps 1e999" "encoder/config.json" ("at byte" "expected a number of magnitude below 1.8e308"
                                             "1e999")
     ("encoder/config.json" (:text "\"norm_eps\": 1.0e-5" "\"norm_eps\": 1e999")))
    ("global_attn_every_n_layers 0" "config.json" ("\"global_attn_every_n_layers\"" "found 0")
     ("encoder/config.json" ,(set-key "global_attn_every_n_layers" 0)))
    ("max_position_embeddings 0" "config.json" ("\"max_position_embeddings\"" "found 0")
     ("encoder/config.json" ,(set-key "max_position_embeddings" 0)))
    ("a temperature 0" "rl_agent_config.json" ("\"choice:2\"" "found 0")
     ("rl_agent_config.json" ,(lambda (h) (setf (gethash "choice:2" (gethash "temperatures" h)) 0) h)))
    ("a temperature 1e-60" "rl_agent_config.json" ("\"score:2\"" "found 1.0e-60")
     ("rl_agent_config.json" ,(lambda (h) (setf (gethash "score:2" (gethash "temperatures" h)) 1d-60) h)))
    ("head activation swish" "rl_agent_config.json"
     ("\"head_activation\"" "\"relu\" or \"gelu\"" "found \"swish\"")
     ("rl_agent_config.json" ,(set-key "head_activation" "swish")))
    ("head_heads not dividing" "rl_agent_config.json" ("\"head_heads\"" "divisor of hidden_size 64" "found 3")
     ("rl_agent_config.json" ,(set-key "head_heads" 3)))
    ("head_heads 0" "rl_agent_config.json" ("\"head_heads\"" "from 1 to 65536" "found 0")
     ("rl_agent_config.json" ,(set-key "head_heads" 0)))
    ("head_norm_first 1" "rl_agent_config.json" ("\"head_norm_first\"" "true or false" "found 1")
     ("rl_agent_config.json" ,(set-key "head_norm_first" 1)))
    ("head_norm_eps 0" "rl_agent_config.json" ("\"head_norm_eps\"" "found 0")
     ("rl_agent_config.json" ,(set-key "head_norm_eps" 0)))
    ("a question type with a dot" "rl_agent_config.json" ("\"question_types\"[1]" "found \"a.b\"")
     ("rl_agent_config.json" ,(set-key "question_types" #("choice" "a.b"))))
    ("four question types" "rl_agent_config.json" ("\"question_types\"" "at most 3" "found 4")
     ("rl_agent_config.json" ,(set-key "question_types" #("a" "b" "c" "d"))))
    ("four types of temperatures" "rl_agent_config.json" ("\"temperatures\"" "at most 3" "found 4")
     ("rl_agent_config.json" ,(lambda (h) (setf (gethash "other:2" (gethash "temperatures" h)) 1d0) h)))
    ("a question type twice" "rl_agent_config.json" ("\"question_types\"[1]" "found \"choice\"")
     ("rl_agent_config.json" ,(set-key "question_types" #("choice" "choice"))))
    ("two temperatures with one GGUF key" "rl_agent_config.json"
     ("\"temperatures\"" "\"score:2\" and \"score.2\"" "temperature.score.2")
     ("rl_agent_config.json" ,(lambda (h) (setf (gethash "score.2" (gethash "temperatures" h)) 1d0) h)))
    ("attention biases" "config.json" ("\"attention_bias\"" "expected false")
     ("encoder/config.json" ,(set-key "attention_bias" t)))
    ("encoder config not an object" "config.json" ("expected a JSON object" "found [1, 2]")
     ("encoder/config.json" ,(lambda (h) (declare (ignore h)) (vector 1 2))))
    ("vocab_size below the tokens" "tokenizer.json" ("expected an id below 1000" "vocab_size")
     ("encoder/config.json" ,(set-key "vocab_size" 1000))
     ("model.safetensors"
,(replace-tensor "encoder.model.embeddings.tok_embeddings.weight" '(1000 64) 0.0)))
    ("a three-part merge" "tokenizer.json" ("model.merges[0]" "found [\"a\", \"b\", \"c\"]")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (aref (gethash "merges" (gethash "model" h)) 0) (vector "a" "b" "c")) h)))
    ("a merge \" b\"" "tokenizer.json" ("model.merges[1]" "two non-empty tokens" "found \" b\"")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (aref (gethash "merges" (gethash "model" h)) 1) " b") h)))
    ("a merge \"a \"" "tokenizer.json" ("model.merges[1]" "two non-empty tokens" "found \"a \"")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (aref (gethash "merges" (gethash "model" h)) 1) "a ") h)))
    ("a merge [\"\", \"b\"]" "tokenizer.json" ("model.merges[1]" "two non-empty tokens"
                                          "found [\"\", \"b\"]")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (aref (gethash "merges" (gethash "model" h)) 1) (vector "" "b")) h)))
    ("a merge [[\"x\"],5]" "tokenizer.json" ("model.merges[0]" "found [[\"x\"], 5]")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (aref (gethash "merges" (gethash "model" h)) 0) (vector (vector "x") 5)) h)))
    ("\"false\" as a boolean" "tokenizer.json" ("\"special\"" "true or false" "found \"false\"")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (gethash "special" (aref (gethash "added_tokens" h) 0)) "false") h)))
    ("an empty token" "tokenizer.json" ("added_tokens[2]" "non-empty string" "found \"\"")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (gethash "content" (aref (gethash "added_tokens" h) 2)) "") h)))
    ("an added token at 999999" "tokenizer.json" ("added_tokens[1]" "below 1024" "found 999999")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (gethash "id" (aref (gethash "added_tokens" h) 1)) 999999) h)))
    ("added tokens as a string" "tokenizer.json" ("\"added_tokens\"" "expected an array"
                                                 "found the string \"\"")
     ("tokenizer/tokenizer.json" ,(lambda (h) (setf (gethash "added_tokens" h) "") h)))
    ("a merge with a NUL" "tokenizer.json" ("\\u0000 is not allowed")
     ("tokenizer/tokenizer.json"
      ,(lambda (h) (setf (aref (gethash "merges" (gethash "model" h)) 1) (format nil "a~C b" (code-char 0))) h)))
    ("a weight beyond binary16" "model.safetensors" ("layers.0.attn.Wo.weight" "cannot be F16" "overflows")
     ("model.safetensors"
,(set-element "encoder.model.layers.0.attn.Wo.weight" 5 1e6)))
    ("a NaN weight" "model.safetensors" ("layers.0.attn.Wo.weight" "NaN")
     ("model.safetensors"
,(set-element "encoder.model.layers.0.attn.Wo.weight" 5
                                  (rontolisp::%bits-single #x7fc00000)))))
  "Broken Laya inputs: (description file-in-message (substrings of the
message) (file edit)...), each edit applied to a fresh s1-pico directory.")

(test convert-refuses-every-broken-input-before-writing
  (let ((base (tmp-path "laya-base")))
    (rontolisp:write-random-laya base "s1-pico")
    (unwind-protect
         (loop for (what file expected . edits) in *broken-laya-inputs*
               do (let ((dir (tmp-path "laya")) (out (tmp-path "broken.gguf")))
                    (sh "cp -r \"$1\" \"$2\"" base dir)
                    (loop for (rel fn) in edits
                          for path = (concatenate 'string dir "/" rel)
                          do (cond ((search ".safetensors" rel) (edit-tensors path fn))
                                   ((consp fn) (edit-text path (second fn) (third fn)))
                                   (t (edit-json path fn))))
                    (multiple-value-bind (code err) (convert-to-file (list dir out))
                      (is (= 1 code) "~A: exit ~D, ~A" what code err)
                      (is (= 1 (count #\Newline err)) "~A: ~S" what err)
                      (is (contains err file) "~A: ~A does not name ~A" what err file)
                      (dolist (e expected)
                        (is (contains err e) "~A: ~S does not say ~S" what err e))
                      ;; the message's own words, whatever the temporary
                      ;; directory's name is long
                      (is (< (length (rontolisp:replace-all err dir "DIR")) 300)
                          "~A: a long message ~S" what err))
                    (is (null (probe-file out)) "~A: ~A written" what out)
                    (sh "rm -rf \"$1\"" dir)))
      (sh "rm -rf \"$1\"" base))))

(test convert-refuses-broken-hf-inputs
  (flet ((refused (dir file &rest expected)
           (let ((out (tmp-path "broken.gguf")))
             (multiple-value-bind (code err) (convert-to-file (list dir out))
               (is (= 1 code) "exit ~D: ~A" code err)
               (is (= 1 (count #\Newline err)) "~S" err)
               (dolist (e (cons file expected)) (is (contains err e) "~S does not say ~S" err e)))
             (is (null (probe-file out))))))
    (with-hf-dir (dir)
      (edit-json (concatenate 'string dir "/config.json") (set-key "model_type" "bert"))
      (refused dir "config.json" "\"model_type\"" "expected \"modernbert\""))
    (with-hf-dir (dir)
      (edit-json (concatenate 'string dir "/config.json")
                 (set-key "architectures" (vector "ModernBertForTokenClassification")))
      (refused dir "config.json" "\"architectures\"" "ModernBertForTokenClassification"))
    (with-hf-dir (dir :shards 2)
      (edit-json (concatenate 'string dir "/model.safetensors.index.json")
                 (lambda (h) (setf (gethash "model.extra" (gethash "weight_map" h))
                                   "model-00001-of-00002.safetensors")
                   h))
      (refused dir "model.safetensors.index.json" "weight_map.model.extra" "found none"))
    (with-hf-dir (dir)
      (edit-json (concatenate 'string dir "/config.json") (set-key "hidden_activation" "relu"))
      (refused dir "config.json" "\"hidden_activation\"" "found \"relu\""))
    (with-hf-dir (dir)
      (edit-json (concatenate 'string dir "/tokenizer_config.json") (set-key "chat_template" 5))
      (refused dir "tokenizer_config.json" "\"chat_template\"" "expected a string"))
    (with-hf-dir (dir :head :classifier)
      (edit-json (concatenate 'string dir "/config.json")
                 (lambda (h) (remhash "1" (gethash "id2label" h))
                   (setf (gethash "00" (gethash "id2label" h)) "zero")
                   h))
      (refused dir "config.json" "id2label." "expected each id once" "found id 0"))
    (with-hf-dir (dir :head :classifier)
      (edit-tensors (concatenate 'string dir "/model.safetensors")
                    (drop-tensors (lambda (n) (string= n "classifier.bias"))))
      (refused dir "model.safetensors" "\"classifier.bias\"" "found none"))
    (with-hf-dir (dir)
      (sh "rm -f \"$1/model.safetensors\" && mkdir \"$1/model.safetensors\"" dir)
      (refused dir "model.safetensors" "directory"))))

(test convert-progress-follows-every-phase
  "On a terminal (script(1) gives the command one) the progress lines follow
generating the weights and converting them, each phase counting every
tensor, not only the final write."
  (if (not (probe-file "/usr/bin/script"))
      (skip "script(1) is not installed: no terminal to show progress on")
      (let ((out (tmp-path "progress.gguf")))
        (multiple-value-bind (code text)
            (sh "script -qec \"$0 convert --random s1-pico '$1'\" /dev/null" out)
          (is (= 0 code))
          (is (contains text (format nil "[33/33] generating head.out.bias")))
          (is (contains text (format nil "[33/33] converting head.out.bias")))
          (is (contains text "[1/33] converting encoder.model.embeddings.tok_embeddings.weight")))
        (ignore-errors (delete-file out)))))

(test convert-progress-in-a-log
  "Without a terminal, plain progress lines at most every
RL_PROGRESS_SECONDS (0: one per tensor), then the summary on stdout."
  (let ((out (tmp-path "log.gguf")))
    (unwind-protect
         (multiple-value-bind (code stdout stderr)
             (sh "RL_PROGRESS_SECONDS=0 exec \"$0\" convert --random s1-pico \"$1\"" out)
           (is (= 0 code) "~A" stderr)
           (is (contains stderr (format nil "[33/33] converting head.out.bias~%")) "~A" stderr)
           (is (contains stderr (format nil "[1/33] generating ")) "~A" stderr)
           (is (not (find #\Return stderr)) "~A" stderr)
           (is (contains stdout "33 tensors") "~A" stdout))
      (ignore-errors (delete-file out)))))

(test convert-refuses-a-weight-whose-q8-0-scale-overflows
  (with-hf-dir (dir)
    (edit-tensors (concatenate 'string dir "/model.safetensors")
                  (set-element "model.layers.0.attn.Wqkv.weight" 40 1e9))
    (let ((out (tmp-path "q8.gguf")))
      (multiple-value-bind (code err) (convert-to-file (list dir out "--type" "q8_0"))
        (is (= 1 code))
        (is (= 1 (count #\Newline err)))
        (is (contains err "model.safetensors: tensor \"model.layers.0.attn.Wqkv.weight\" cannot be Q8_0: row 0, block 1")))
      (is (null (probe-file out))))))

(defun channels-equal-to (vector value)
  "The indices of VECTOR whose element is = VALUE."
  (loop for i below (length vector) when (= value (aref vector i)) collect i))

(test convert-massive-channels
  "--massive K: K residual channels RATIO times larger in the token embedding
and the embedding, attention and MLP norms, the same channels everywhere,
the final norm untouched; the other weights as without --massive; the same
file again for the same seed."
  (let ((plain (tmp-path "plain.gguf")) (again (tmp-path "again.gguf")))
    (unwind-protect
         (progn
           (is (= 0 (run-exe (list "convert" "--random" "s1-pico" plain "--type" "f32"
                                   "--encoder-only" "--seed" "3"))))
           (is (= 0 (run-exe (list "convert" "--random" "s1-pico" again "--type" "f32"
                                   "--encoder-only" "--seed" "3" "--massive" "3"))))
           (with-converted (f "--type" "f32" "--encoder-only" "--seed" "3" "--massive" "3")
             (let ((channels (channels-equal-to (gguf:tensor f "token_embd_norm.weight") 20)))
               (is (= 3 (length channels)))
               (dolist (norm '("blk.1.attn_norm.weight" "blk.0.ffn_norm.weight"
                               "blk.1.ffn_norm.weight"))
                 (let ((w (gguf:tensor f norm)))
                   (is (equal channels (channels-equal-to w 20)) "~A" norm)
                   (is (= (- (length w) 3) (length (channels-equal-to w 1))) "~A" norm)))
               (is (= 64 (length (channels-equal-to (gguf:tensor f "output_norm.weight") 1))))
               (gguf:with-file (p plain)
                 (let ((e (gguf:tensor f "token_embd.weight"))
                       (e0 (gguf:tensor p "token_embd.weight")))
                   (dotimes (row (array-dimension e 0))
                     (dotimes (c 64)
                       (unless (= (aref e row c) (* (if (member c channels) 20 1) (aref e0 row c)))
                         (is (= (aref e row c) (* (if (member c channels) 20 1) (aref e0 row c)))
                             "token_embd[~D,~D]" row c)
                         (return)))))
                 (is (equalp (gguf:tensor p "blk.1.attn_qkv.weight")
                             (gguf:tensor f "blk.1.attn_qkv.weight")))))
             (is (equalp (file-octets again) (file-octets (gguf:path f))))))
      (ignore-errors (delete-file plain))
      (ignore-errors (delete-file again)))))

(test convert-massive-checks-its-options
  (let ((out (tmp-path "bad.gguf")))
    (is (= 2 (run-exe (list "convert" "--random" "s1-pico" out "--massive" "65"))))
    (is (= 2 (run-exe (list "convert" "--random" "s1-pico" out "--massive-ratio" "5"))))
    (is (= 2 (run-exe (list "convert" "--random" "s1-pico" out "--massive" "-1"))))
    (is (= 2 (run-exe (list "convert" "/nonexistent" out "--massive" "2"))))
    (is (= 2 (run-exe (list "convert" "--random" "s1-pico" out "--massive" "2"
                            "--massive-ratio" "0"))))
    (is (not (probe-file out)))))

;;; The tensors are checked from the safetensors header, before any data is
;;; read: a huge tensor of an unknown name costs neither memory nor time.

(defun add-header-tensor (path name elements)
  "Rewrite the safetensors file PATH with one more F32 tensor NAME of
ELEMENTS elements in its header, its data after the others' and never
written: the file is extended as a sparse file to hold it.  Answers the
offset of that data in the file."
  (let* ((octets (file-octets path))
         (n (loop for i below 8 sum (ash (aref octets i) (* 8 i))))
         (header (rontolisp:parse-json
                  (rontolisp::%utf8-string (subseq octets 8 (+ 8 n)))))
         (data (subseq octets (+ 8 n)))
         (begin (length data)))
    (setf (gethash name header)
          (let ((e (make-hash-table :test 'equal)))
            (setf (gethash "dtype" e) "F32"
                  (gethash "shape" e) (vector elements)
                  (gethash "data_offsets" e) (vector begin (+ begin (* 4 elements))))
            e))
    (let* ((text (with-output-to-string (s) (text::write-json (json-data header) s)))
           (h (rontolisp::%utf8-octets (concatenate 'string text
                                                    (make-string (mod (- (length text)) 8)
                                                                 :initial-element #\Space))))
           (prefix (make-array 8 :element-type '(unsigned-byte 8))))
      (dotimes (i 8) (setf (aref prefix i) (ldb (byte 8 (* 8 i)) (length h))))
      (with-open-file (s path :direction :output :element-type '(unsigned-byte 8)
                              :if-exists :supersede)
        (write-sequence prefix s)
        (write-sequence h s)
        (write-sequence data s))
      (sh "truncate -s \"$2\" \"$1\"" path (princ-to-string (+ 8 (length h) begin (* 4 elements))))
      (+ 8 (length h) begin))))

(defun peak-kilobytes (args)
  "Run the executable with ARGS under /usr/bin/time; answer its exit
status, its stderr (time's line last) and its peak resident set in KB."
  (multiple-value-bind (code out err)
      (apply #'sh "t=\"$1\"; shift; /usr/bin/time -f 'peak %M' -o \"$t\" \"$0\" \"$@\"; r=$?; cat \"$t\" >&2; rm -f \"$t\"; exit $r"
             (tmp-path "time") args)
    (declare (ignore out))
    (let ((at (search "peak " err :from-end t)))
      (values code err (and at (parse-integer err :start (+ at 5) :junk-allowed t))))))

(test convert-refuses-an-unknown-tensor-from-the-header
  "A model.safetensors whose header names an unknown 1 GB tensor (a sparse
file) is refused naming the tensor, before any data is read: the converter
stays small (it read every tensor into memory first, 3.9 GB for a 2 GB
file).  A header whose tensor runs past the end of the file is refused too."
  (if (not (probe-file "/usr/bin/time"))
      (skip "/usr/bin/time is not installed: no peak memory to measure")
      (let ((out (tmp-path "huge.gguf")))
        (with-hf-dir (dir)
          (let* ((model (concatenate 'string dir "/model.safetensors"))
                 (data (add-header-tensor model "model.extra.weight" (expt 2 28))))
            (multiple-value-bind (code err kb) (peak-kilobytes (list "convert" dir out))
              (is (= 1 code) "exit ~D: ~A" code err)
              (is (contains err "model.safetensors: tensor \"model.extra.weight\": expected a ModernBERT tensor name")
                  "~S" err)
              (is (and kb (< kb 262144)) "peak ~A KB" kb))
            (sh "truncate -s \"$2\" \"$1\"" model (princ-to-string (+ data 4)))
            (multiple-value-bind (code err) (convert-to-file (list dir out))
              (is (= 1 code))
              (is (contains err "\"model.extra.weight\"") "~S" err)
              (is (contains err "past the end") "~S" err))))
        (let ((dir (tmp-path "laya")))
          (rontolisp:write-random-laya dir "s1-pico")
          (add-header-tensor (concatenate 'string dir "/model.safetensors")
                             "encoder.model.extra.weight" (expt 2 28))
          (multiple-value-bind (code err kb) (peak-kilobytes (list "convert" dir out))
            (is (= 1 code) "exit ~D: ~A" code err)
            (is (contains err "model.safetensors: tensor \"encoder.model.extra.weight\": expected a ModernBERT tensor name")
                "~S" err)
            (is (and kb (< kb 262144)) "peak ~A KB" kb))
          (sh "rm -rf \"$1\"" dir))
        (is (null (probe-file out))))))

(test convert-hf-shards-name-the-shard-at-fault
  (with-hf-dir (dir :shards 2)
    (let ((shard (concatenate 'string dir "/model-00002-of-00002.safetensors")))
      (edit-tensors shard (lambda (ts)
                            (let ((e (first ts)))
                              (cons (list (first e) (make-array 3 :element-type 'single-float
                                                                  :initial-element 0.0))
                                    (rest ts)))))
      (multiple-value-bind (code err) (convert-to-file (list dir (tmp-path "shard.gguf")))
        (is (= 1 code))
        (is (contains err "model-00002-of-00002.safetensors: tensor") "~S" err)
        (is (contains err "found [3]") "~S" err)))))

(defun hf-convert-seconds (layers)
  "The seconds converting a Hugging Face ModernBERT of LAYERS tiny layers
takes in this process, in CPU time (the least of two runs): the wall clock of a
loaded machine made the ratio below a coin toss."
  (let ((command-line::*presets* (cons (list "many" :hidden 2 :vocab 300 :layers layers
                                          :intermediate 1 :head-layers 1 :heads 1)
                                    command-line::*presets*))
        (dir (tmp-path "hf-many")) (out (tmp-path "many.gguf"))
        (*error-output* (make-broadcast-stream)))
    (unwind-protect
         (progn
           (rontolisp:write-random-hf dir "many")
           (loop repeat 2
                 minimize (let ((start (get-internal-run-time)))
                            (rontolisp::convert-hf dir out :type :f32)
                            (/ (- (get-internal-run-time) start) internal-time-units-per-second))))
      (ignore-errors (delete-file out))
      (sh "rm -rf \"$1\"" dir))))

(test convert-hf-time-grows-linearly-with-the-tensors
  "Four times the layers take about four times as long, not sixteen (the
tensors were sorted and matched by a search of the expected list each:
4,000 tiny layers took 259 s)."
  (let* ((small (hf-convert-seconds 300))
         (large (hf-convert-seconds 1200))
         (ratio (/ large (max small 1/1000))))
    ;; linear is 4, the quadratic search it guards against 16
    (is (< ratio 10) "300 layers ~,2Fs, 1200 layers ~,2Fs: ratio ~,1F" small large ratio)))

(test convert-summary-names-the-head-the-file-has
  "The summary line names the head the written file holds: the decision
head of a Laya model, a Hugging Face classifier, or none (--encoder-only,
or a Hugging Face model without a head), never a head type for a file
without one."
  (let ((out (tmp-path "summary.gguf")))
    (unwind-protect
         (flet ((summary (&rest args)
                  (multiple-value-bind (code stdout err) (run-exe (append (list "convert") args (list out)))
                    (is (eql 0 code) "~A" err)
                    stdout)))
           (is (contains (summary "--random" "s1-pico") "decision head f32"))
           (is (contains (summary "--random" "s1-pico" "--encoder-only") "no head)"))
           (dolist (head '(:none :classifier))
             (with-tmp-dir (dir)
               (rontolisp:write-random-hf dir "s1-pico" :head head)
               (let ((line (summary dir)))
                 (is (contains line (if (eq head :none) "no head)" "classifier head f32"))
                     "~S: ~A" head line)))))
      (ignore-errors (delete-file out)))))
