;;;; serve.lisp - `rontolisp serve': one model answering HTTP requests in
;;;; llama-server's shapes (doc/serve.md), plus POST /decide.
;;;;
;;;; The HTTP layer is C (prims/http.c on libmicrohttpd): it reads each
;;;; request, refuses what it can on its own (a body over --max-body, a
;;;; missing API key, a full queue) and queues the rest.  Here, --parallel
;;;; Lisp workers take requests from that queue, compute the answer with
;;;; the same functions as the commands (so /tokenize, /embedding and
;;;; /decide give `tokenize', `embed --json' and `decide --json''s numbers,
;;;; printed by the same JSON writer) and hand it back.  Every request a
;;;; worker takes is answered, whatever happens while it computes; every
;;;; refusal is one JSON shape, {"error": {"code", "message", "type"}}.
;;;; GET / is the page of serve-page.html beside this file, read into the
;;;; executable when this file is compiled.

(in-package "COMMAND-LINE")

(defstruct (server (:constructor make-server))
  "What the workers share: the model (MODEL:LOAD) of the file PATH, whether
it has a decision head (HEAD), its pooling, the worker count, whether
/metrics answers, when it started (universal time) and the counters
/metrics reports, under LOCK: requests answered and in progress, the
tokens encoded and the seconds it took, the encoder's passes (one a text or
question) and the longest of them in tokens."
  model path head pooling parallel metrics started
  (lock (mp:make-lock :name "serve counters"))
  (answered 0) (processing 0) (prompt-tokens 0) (prompt-seconds 0d0) (passes 0) (tokens-max 0))

(defparameter *json-type* "application/json; charset=utf-8")

(defparameter *serve-page* (source-file-text "serve-page.html")
  "The page GET / answers (lisp/jobs/serve-page.html): a question form
for /decide and a text box for /tokenize, HTML with its CSS and script
inline.")

;;; Reading requests.

(defun invalid-request (control &rest args)
  "Refuse the request: 400, invalid_request_error, the message CONTROL
formatted with ARGS."
  (apply #'request-error 400 "invalid_request_error" control args))

(defun request-object (body)
  "The JSON object of the request BODY (octets) as an EQUAL hash table; a
400 naming what is wrong when it is not JSON or not an object."
  (let ((value (handler-case (parse-json-octets body)
                 (json-error (c)
                   (invalid-request "expected a JSON body, found ~A" (rontolisp-error-message c))))))
    (unless (hash-table-p value)
      (invalid-request "expected a JSON object, found ~A" (json-brief value)))
    value))

(defun field (object name &key (type t) (default nil default-p) (what "a value"))
  "The field NAME of the request OBJECT, which must be of TYPE (WHAT names
it in the message); DEFAULT when absent, or a 400 when there is none."
  (multiple-value-bind (value found) (gethash name object)
    (cond ((not found)
           (if default-p default (invalid-request "expected the field ~S, found none" name)))
          ((typep value type) value)
          (t (invalid-request "field ~S: expected ~A, found ~A" name what (json-brief value))))))

(defun flag-field (object name default)
  "The boolean field NAME of OBJECT, DEFAULT when absent."
  (field object name :type '(member t nil) :default default :what "true or false"))

(defun token-id-p (x)
  (typep x '(integer 0 #.(1- (expt 2 31)))))

(defun mixed-prompt-p (x)
  "True when X is an array of strings and token ids (llama-server's
\"mixed\" prompt; of ids alone, a tokenized one)."
  (and (vectorp x) (not (stringp x))
       (every (lambda (e) (or (stringp e) (token-id-p e))) x)))

(defun prompt-list (value name)
  "The prompts of the field NAME as llama-server reads them: an array
without numbers holds one prompt an element, anything else is one prompt;
a prompt is a string, an array of strings and token ids (ids alone: the
prompt tokenized), or an object whose \"prompt_string\" is either.  A
list of strings and vectors."
  (flet ((one (x)
           (let ((prompt (if (hash-table-p x) (gethash "prompt_string" x) x)))
             (if (or (stringp prompt) (mixed-prompt-p prompt))
                 prompt
                 (invalid-request "field ~S: expected a string, an array of strings and token ~
ids (integers from 0) or an object with \"prompt_string\", found ~A" name (json-brief x))))))
    (cond ((and (vectorp value) (not (stringp value)) (notany #'numberp value))
           (when (zerop (length value))
             (invalid-request "field ~S: expected one prompt or more, found []" name))
           (map 'list #'one value))
          (t (list (one value))))))

(defun mixed-ids (server prompt add-special parse-special)
  "The token ids of PROMPT as llama-server's tokenize_mixed makes them: a
string tokenized (ADD-SPECIAL: with the file's bos and eos; PARSE-SPECIAL:
the texts of special tokens as those tokens), or an array of strings and
ids, each string tokenized so but with ADD-SPECIAL only for a first
element, each id as it is."
  (let ((tok (tokenizer-of (server-model server) 'model:tokenize)))
    (flet ((text-ids (text add)
             (coerce (tokenize-octets tok (check-text text tok 'model:tokenize) add parse-special)
                     'list)))
      (if (stringp prompt)
          (text-ids prompt add-special)
          (loop for x across prompt
                for first = t then nil
                append (if (stringp x) (text-ids x (and first add-special)) (list x)))))))

(defun prompt-ids (server prompt where)
  "The token ids of PROMPT (of PROMPT-LIST), strings tokenized with the
file's bos and eos as `embed --text' does, as a list; a 400 for an empty
one, and for ids the model cannot take (out of its vocabulary, more than
its context_length) a 400 whose message begins with WHERE, the field and
prompt they came from."
  (check-token-ids (server-model server)
                   (or (mixed-ids server prompt t t)
                       (invalid-request "Input content cannot be empty"))
                   where))

;;; The endpoints.  Each takes the server and the request body and answers
;;; the JSON value of a 200.

(defun count-prompt (server lengths seconds)
  "Count encoder passes of LENGTHS tokens each (a list) that took SECONDS."
  (mp:with-lock ((server-lock server))
    (incf (server-prompt-tokens server) (reduce #'+ lengths))
    (incf (server-prompt-seconds server) seconds)
    (incf (server-passes server) (length lengths))
    (setf (server-tokens-max server)
          (reduce #'max lengths :initial-value (server-tokens-max server)))))

(defun embed-prompts (server prompts name normalize)
  "The embedding rows of each of PROMPTS (of the field NAME), as `embed
--json' prints them, and the token count of them all."
  (let* ((start (get-internal-real-time))
         (lengths '())
         (k 0)
         (rows (mapcar (lambda (prompt)
                         (let ((ids (prompt-ids server prompt
                                                (format nil "field ~S~@[, prompt ~D~]" name
                                                        (and (rest prompts) (incf k))))))
                           (push (length ids) lengths)
                           (normalized-embeddings (server-model server) ids
                                                  (server-pooling server) normalize :q8 :erf)))
                       prompts)))
    (count-prompt server lengths (seconds-since start))
    (values rows (reduce #'+ lengths))))

(defun seconds-since (start)
  "Seconds (a double) since the internal real time START."
  (/ (float (- (get-internal-real-time) start) 1d0) internal-time-units-per-second))

(defun normalize-field (object)
  (field object "embd_normalize" :type '(integer -1 1000) :default 2
                                 :what "an integer from -1 to 1000"))

(defun handle-embedding (server body)
  "POST /embedding: llama-server's non-OpenAI answer, one {index,
embedding} per prompt, the embedding an array of rows."
  (let* ((object (request-object body))
         (prompts (prompt-list (or (gethash "content" object) (gethash "input" object)
                                   (invalid-request "expected the field \"content\", found none"))
                               "content")))
    (coerce (loop for rows in (embed-prompts server prompts "content" (normalize-field object))
                  for i from 0
                  collect (list :object (cons "index" i) (cons "embedding" rows)))
            'vector)))

(defun base64-octets (octets)
  "OCTETS in base64 (RFC 4648, padded)."
  (let ((alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        (n (length octets)))
    (with-output-to-string (s)
      (loop for i from 0 below n by 3
            for k = (min 3 (- n i))
            for w = (loop for j below 3
                          sum (ash (if (< j k) (aref octets (+ i j)) 0) (* 8 (- 2 j))))
            do (loop for j below 4
                     do (write-char (if (<= j k) (char alphabet (ldb (byte 6 (* 6 (- 3 j))) w)) #\=)
                                    s))))))

(defun float32-base64 (row)
  "The single-floats of ROW as little-endian binary32, in base64."
  (base64-octets (float32-octets (list row))))

(defun handle-v1-embeddings (server body)
  "POST /v1/embeddings: OpenAI's answer (data, model, object, usage)."
  (let* ((object (request-object body))
         (prompts (prompt-list (or (gethash "input" object) (gethash "content" object)
                                   (invalid-request "expected the field \"input\", found none"))
                               "input"))
         (encoding (field object "encoding_format" :type 'string :default "float"
                                                 :what "\"float\" or \"base64\"")))
    (unless (member encoding '("float" "base64") :test #'string=)
      (invalid-request "field \"encoding_format\": expected \"float\" or \"base64\", found ~S"
                       encoding))
    (when (eq (server-pooling server) :none)
      (invalid-request "Pooling type 'none' is not OAI compatible. Please use a different ~
pooling type"))
    (multiple-value-bind (results tokens)
        (embed-prompts server prompts "input" (normalize-field object))
      (list :object
            (cons "data" (coerce (loop for rows in results for i from 0
                                       for row = (aref rows 0)
                                       collect (list* :object
                                                     (cons "embedding"
                                                           (if (equal encoding "base64")
                                                               (float32-base64 row)
                                                               row))
                                                     (cons "index" i)
                                                     (cons "object" "embedding")
                                                     ;; llama-server names a base64 one's format
                                                     (and (equal encoding "base64")
                                                          (list (cons "encoding_format"
                                                                      "base64")))))
                                 'vector))
            (cons "model" (field object "model" :type 'string :default (server-path server)
                                                :what "a string"))
            (cons "object" "list")
            (cons "usage" (list :object (cons "prompt_tokens" tokens)
                                (cons "total_tokens" tokens)))))))

(defun token-piece-json (server id)
  "The bytes of token ID as llama-server's /tokenize gives them: a string
when they are UTF-8, else the array of them (a byte-level token holding
part of a character)."
  (let* ((octets (model:detokenize-octets (server-model server) (list id)))
         (text (%utf8-string octets)))
    ;; %UTF8-STRING keeps a byte that is not UTF-8 as U+DC80..U+DCFF
    (if (some (lambda (c) (<= #xdc80 (char-code c) #xdcff)) text)
        octets
        text)))

(defun handle-tokenize (server body)
  "POST /tokenize: content (a string, or an array of strings and ids, as
MIXED-IDS reads it), add_special (default false), parse_special (default
true), with_pieces (default false)."
  (let* ((object (request-object body))
         (content (let ((c (field object "content" :type '(or string (satisfies mixed-prompt-p))
                                                   :what "a string or an array of strings and token ids")))
                    (if (stringp c) c (check-vocabulary-ids server c "content"))))
         (ids (coerce (mixed-ids server content (flag-field object "add_special" nil)
                                 (flag-field object "parse_special" t))
                      'vector)))
    (list :object
          (cons "tokens" (if (flag-field object "with_pieces" nil)
                             (map 'vector (lambda (id)
                                            (list :object (cons "id" id)
                                                  (cons "piece" (token-piece-json server id))))
                                  ids)
                             ids)))))

(defun check-vocabulary-ids (server array field)
  "ARRAY (a request's JSON array) when each of its elements that is not a
string is a token id of SERVER's model; else a 400 whose message names
the FIELD, what was expected and the first element that is not one, as
JSON writes it, with its position."
  (let ((last (1- (getf (model:hyperparameters (server-model server)) :vocab-size))))
    (loop for x across array for position from 0
          unless (or (stringp x) (and (integerp x) (<= 0 x last)))
            do (invalid-request "field ~S: expected token ids from 0 to ~D, found ~A at position ~D"
                                field last (json-brief x) position))
    array))

(defun handle-detokenize (server body)
  "POST /detokenize: tokens, an array of ids."
  (let* ((object (request-object body))
         (ids (field object "tokens" :type '(and vector (not string)) :what "an array of token ids")))
    (when (some #'stringp ids)
      (invalid-request "field \"tokens\": expected an array of token ids, found ~A" (json-brief ids)))
    (check-vocabulary-ids server ids "tokens")
    (list :object (cons "content" (model:detokenize (server-model server) ids)))))

(defun decide-answer (server question)
  "The answer to QUESTION (a parsed JSON value) as `decide --json' gives
it, with the options' texts."
  (unless (hash-table-p question)
    (model:question-error "expected a question as a JSON object, found ~A" (json-brief question)))
  (let ((start (get-internal-real-time))
        (question (parse-question question)))
    (multiple-value-bind (probabilities logits ids markers)
        (model:decide (server-model server) question)
      (count-prompt server (list (length ids)) (seconds-since start))
      (list :object
            (cons "options" (map 'vector #'option-text (parsed-question-options question)))
            (cons "ids" ids) (cons "markers" (coerce markers 'vector))
            (cons "logits" logits) (cons "probabilities" probabilities)))))

(defun handle-decide (server body)
  "POST /decide: one question, or {\"questions\": [...]} answered as
{\"answers\": [...]}; a question that cannot be answered is a 400 naming
it (from 1 in a list) and why."
  (unless (server-head server)
    (request-error 501 "not_supported_error" "expected a file with a decision head ~
(modern-bert.decision.block_count above 0), found none"))
  (let ((object (request-object body)))
    (flet ((answer (question where)
             (handler-case (decide-answer server question)
               (model:question-error (c)
                 (invalid-request "~@[question ~D: ~]~A" where (rontolisp-error-message c))))))
      (multiple-value-bind (questions found) (gethash "questions" object)
        (if found
            (progn
              (unless (and (vectorp questions) (not (stringp questions)))
                (invalid-request "field \"questions\": expected an array of questions, found ~A"
                                 (json-brief questions)))
              (list :object (cons "answers" (map 'vector (let ((k 0))
                                                           (lambda (q) (answer q (incf k))))
                                                 questions))))
            (answer object nil))))))

(defun handle-health (server body)
  (declare (ignore server body))
  (list :object (cons "status" "ok")))

(defun handle-props (server body)
  "GET /props: llama-server's global properties that mean something for an
encoder (doc/serve.md's table says which it leaves out)."
  (declare (ignore body))
  (let* ((model (server-model server))
         (file (encoder-file model))
         (template (gguf:value file "tokenizer.chat_template")))
    (flet ((special-text (key)
             (let ((id (gguf:value file key)))
               (or (and (integerp id) (model:token-piece model id)) ""))))
      (list :object
            (cons "default_generation_settings"
                  (list :object
                        (cons "n_ctx" (getf (model:hyperparameters model) :context-length))))
            (cons "total_slots" (server-parallel server))
            (cons "model_alias" (server-path server))
            (cons "model_ftype" (llama-ftype-name file))
            (cons "model_path" (server-path server))
            (cons "modalities" (list :object (cons "vision" :false) (cons "video" :false)
                                     (cons "audio" :false)))
            (cons "endpoint_slots" :false)
            (cons "endpoint_props" :false)
            (cons "endpoint_metrics" (if (server-metrics server) :true :false))
            (cons "ui" :true)
            (cons "ui_settings" (list :object))
            (cons "chat_template" (if (stringp template) template ""))
            (cons "bos_token" (special-text "tokenizer.ggml.bos_token_id"))
            (cons "eos_token" (special-text "tokenizer.ggml.eos_token_id"))
            (cons "build_info" (version))
            (cons "is_sleeping" :false)
            (cons "cors_proxy_enabled" :false)))))

(defparameter *llama-ftype-names*
  '(("ALL_F32" . "all F32") ("MOSTLY_MXFP4_MOE" . "MXFP4 MoE")
    ("MOSTLY_Q2_K" . "Q2_K - Medium") ("MOSTLY_Q2_K_S" . "Q2_K - Small")
    ("MOSTLY_Q3_K_S" . "Q3_K - Small") ("MOSTLY_Q3_K_M" . "Q3_K - Medium")
    ("MOSTLY_Q3_K_L" . "Q3_K - Large") ("MOSTLY_Q4_K_S" . "Q4_K - Small")
    ("MOSTLY_Q4_K_M" . "Q4_K - Medium") ("MOSTLY_Q5_K_S" . "Q5_K - Small")
    ("MOSTLY_Q5_K_M" . "Q5_K - Medium")
    ("MOSTLY_TQ1_0" . "TQ1_0 - 1.69 bpw ternary") ("MOSTLY_TQ2_0" . "TQ2_0 - 2.06 bpw ternary")
    ("MOSTLY_IQ2_XXS" . "IQ2_XXS - 2.0625 bpw") ("MOSTLY_IQ2_XS" . "IQ2_XS - 2.3125 bpw")
    ("MOSTLY_IQ2_S" . "IQ2_S - 2.5 bpw") ("MOSTLY_IQ2_M" . "IQ2_M - 2.7 bpw")
    ("MOSTLY_IQ3_XS" . "IQ3_XS - 3.3 bpw") ("MOSTLY_IQ3_XXS" . "IQ3_XXS - 3.0625 bpw")
    ("MOSTLY_IQ1_S" . "IQ1_S - 1.5625 bpw") ("MOSTLY_IQ1_M" . "IQ1_M - 1.75 bpw")
    ("MOSTLY_IQ4_NL" . "IQ4_NL - 4.5 bpw") ("MOSTLY_IQ4_XS" . "IQ4_XS - 4.25 bpw")
    ("MOSTLY_IQ3_S" . "IQ3_S - 3.4375 bpw") ("MOSTLY_IQ3_M" . "IQ3_S mix - 3.66 bpw"))
  "llama.cpp's wording (llama_ftype_name) of the general.file_type names
that are not the type's own name after MOSTLY_.")

(defun llama-ftype-name (file)
  "The file type of the GGUF FILE as llama.cpp names it in /props and
/v1/models: from general.file_type (\"all F32\", \"Q8_0\", \"Q4_K -
Medium\"), or, without the key, from the type most tensors have, as llama.cpp
guesses it."
  (let* ((n (gguf:value file "general.file_type"))
         (name (if (integerp n)
                   (file-type-name (logandc2 n 1024))
                   (let ((types (mapcar #'first (type-summary (gguf:tensor-infos file)))))
                     (if (every (lambda (type) (string= type "F32")) types)
                         "ALL_F32"
                         (let ((counts (type-summary (remove "F32" (gguf:tensor-infos file)
                                                             :key #'gguf:tensor-info-type
                                                             :test #'string=))))
                           (concatenate 'string "MOSTLY_"
                                        (first (first (sort counts #'> :key #'second))))))))))
    (cond ((null name) "unknown, may not work")
          ((cdr (assoc name *llama-ftype-names* :test #'string=)))
          ((and (> (length name) 7) (string= "MOSTLY_" name :end2 7)) (subseq name 7))
          (t name))))

(defun handle-models (server body)
  "GET /v1/models: OpenAI's list with llama-server's meta, and the same
model in the \"models\" list llama-server adds for Ollama's clients."
  (declare (ignore body))
  (let* ((model (server-model server))
         (file (encoder-file model))
         (h (model:hyperparameters model))
         (params 0) (bytes 0))
    (loop for (nil nil p b) in (type-summary (gguf:tensor-infos file))
          do (incf params p) (incf bytes b))
    (list :object
          (cons "models"
                (vector (list :object (cons "name" (server-path server))
                              (cons "model" (server-path server))
                              (cons "modified_at" "") (cons "size" "") (cons "digest" "")
                              (cons "type" "model") (cons "description" "") (cons "tags" #())
                              (cons "capabilities" (vector "embedding"))
                              (cons "parameters" "")
                              (cons "details" (list :object (cons "parent_model" "")
                                                    (cons "format" "gguf") (cons "family" "")
                                                    (cons "families" #())
                                                    (cons "parameter_size" "")
                                                    (cons "quantization_level" ""))))))
          (cons "object" "list")
          (cons "data"
                (vector (list :object (cons "id" (server-path server))
                              (cons "aliases" (vector (server-path server)))
                              (cons "tags" #())
                              (cons "object" "model")
                              (cons "created" (- (server-started server)
                                                 (encode-universal-time 0 0 0 1 1 1970 0)))
                              (cons "owned_by" "rontolisp")
                              (cons "meta" (list :object
                                                 ;; llama.cpp's LLAMA_VOCAB_TYPE_BPE: the
                                                 ;; byte-level BPE of tokenizer.ggml.model "gpt2",
                                                 ;; the one vocabulary model:load reads
                                                 (cons "vocab_type" 2)
                                                 (cons "n_vocab" (getf h :vocab-size))
                                                 (cons "n_ctx" (getf h :context-length))
                                                 (cons "n_ctx_train" (getf h :context-length))
                                                 (cons "n_embd" (getf h :embedding-length))
                                                 (cons "n_params" params)
                                                 (cons "size" bytes)
                                                 (cons "ftype" (llama-ftype-name file))))))))))

(defun metrics-text (server)
  "GET /metrics: the counters in Prometheus's text format: llama-server's
metrics (those of text generation, speculative decoding and its prompt
cache always 0), then rontolisp's own.  Called while answering the
/metrics request, which SERVER-PROCESSING counts."
  (multiple-value-bind (received queued held rejected) (%http-stats)
    (declare (ignore held))
    (with-output-to-string (s)
      (flet ((metric (name type help value)
               (format s "# HELP ~A ~A~%# TYPE ~A ~A~%~A ~A~%" name help name type name value)))
        (mp:with-lock ((server-lock server))
          (let ((tokens (server-prompt-tokens server)) (seconds (server-prompt-seconds server))
                (passes (server-passes server)))
            (metric "llamacpp:prompt_tokens_total" "counter" "Number of prompt tokens processed."
                    tokens)
            (metric "llamacpp:prompt_tokens_cached_total" "counter"
                    "Number of prompt tokens reused from the cache (none here)." 0)
            (metric "llamacpp:prompt_seconds_total" "counter" "Prompt process time in seconds."
                    (json-float-string seconds))
            (metric "llamacpp:tokens_predicted_total" "counter"
                    "Number of generation tokens processed (none here)." 0)
            (metric "llamacpp:tokens_predicted_seconds_total" "counter"
                    "Total time spent generating tokens (none here)." 0)
            (metric "llamacpp:n_decode_total" "counter"
                    "Number of encoder passes (one per text or question)." passes)
            (metric "llamacpp:n_tokens_max" "counter" "Largest observed sequence length."
                    (server-tokens-max server))
            (dolist (name '("spec_decode_num_draft_tokens_total"
                            "spec_decode_num_accepted_tokens_total" "spec_decode_num_drafts_total"))
              (metric (concatenate 'string "llamacpp:" name) "counter"
                      "Speculative decoding (none here)." 0))
            (metric "llamacpp:prompt_tokens_seconds" "gauge"
                    "Average prompt throughput in tokens/s."
                    (if (plusp seconds) (json-float-string (/ tokens seconds)) 0))
            (metric "llamacpp:predicted_tokens_seconds" "gauge"
                    "Average generation throughput in tokens/s (none here)." 0)
            ;; llama-server counts its busy slots, which a /metrics request
            ;; never takes: the requests in progress but this one.
            (metric "llamacpp:requests_processing" "gauge" "Number of requests processing."
                    (max 0 (1- (server-processing server))))
            (metric "llamacpp:requests_deferred" "gauge" "Number of requests deferred."
                    queued)
            (metric "llamacpp:n_busy_slots_per_decode" "gauge"
                    "Average number of sequences per encoder pass." (if (plusp passes) 1 0)))
          (metric "rontolisp:requests_received_total" "counter"
                  "Number of requests received." received)
          (metric "rontolisp:requests_answered_total" "counter"
                  "Number of requests answered by a worker." (server-answered server))
          (metric "rontolisp:requests_rejected_total" "counter"
                  "Number of requests refused because the queue was full." rejected))))))

(defparameter *routes*
  '(("/health" :get handle-health) ("/v1/health" :get handle-health)
    ("/props" :get handle-props)
    ("/v1/models" :get handle-models) ("/models" :get handle-models)
    ("/tokenize" :post handle-tokenize) ("/detokenize" :post handle-detokenize)
    ("/embedding" :post handle-embedding) ("/embeddings" :post handle-embedding)
    ("/v1/embeddings" :post handle-v1-embeddings)
    ("/decide" :post handle-decide)
    ("/metrics" :get :metrics)
    ("/" :get :page))
  "Each endpoint: its path, its method and the function that answers it.")

;;; Answering.

(defun error-body (status type message)
  (list :object (cons "error" (list :object (cons "code" status) (cons "message" message)
                                    (cons "type" type)))))

(defun json-octets (value)
  (%utf8-octets (with-output-to-string (s) (write-json value s))))

(defun route (server method path body)
  "The answer to one request: (values status content-type octets)."
  (let ((route (assoc path *routes* :test #'string=)))
    (unless route
      (request-error 404 "not_found_error" "File Not Found"))
    (destructuring-bind (verb handler) (rest route)
      (unless (string= method (symbol-name verb))
        (request-error 405 "invalid_request_error" "~A expects ~A, found ~A" path verb method))
      (case handler
        (:metrics
         (if (server-metrics server)
             (values 200 "text/plain; version=0.0.4" (%utf8-octets (metrics-text server)))
             (request-error 501 "not_supported_error" "This server does not support metrics ~
endpoint. Start it with `--metrics`")))
        (:page (values 200 "text/html; charset=utf-8" (%utf8-octets *serve-page*)))
        (t (values 200 *json-type* (json-octets (funcall handler server body))))))))

(defun request-answer (server method path body)
  "ROUTE's answer, or the JSON error of whatever it signalled: a
REQUEST-ERROR's own status, 400 for any other error of ours (the request
asked for something the model cannot do), 500 for the rest."
  (flet ((fail (status type condition)
           (values status *json-type*
                   (json-octets (error-body status type (condition-line condition))))))
    (handler-case (route server method path body)
      (request-error (c) (fail (request-error-status c) (request-error-type c) c))
      (model:model-error (c) (fail 500 "server_error" c))
      (rontolisp-error (c) (fail 400 "invalid_request_error" c))
      (serious-condition (c) (fail 500 "server_error" c)))))

(defun answer-request (server id)
  "Answer the held request ID; it is answered (500 at worst) however this
ends.  The counters are updated before the answer leaves, so that a client
that asks /metrics next finds its request counted."
  (let ((answered nil))
    (mp:with-lock ((server-lock server)) (incf (server-processing server)))
    (flet ((done ()
             (mp:with-lock ((server-lock server))
               (decf (server-processing server))
               (incf (server-answered server)))))
      (unwind-protect
           (multiple-value-bind (method path body) (%http-request id)
             (when method
               (multiple-value-bind (status type octets) (request-answer server method path body)
                 (setf answered t)
                 (done)
                 (%http-respond id status (%utf8-octets type) octets))))
        (unless answered
          (done)
          (ignore-errors
           (%http-respond id 500 (%utf8-octets *json-type*)
                          (json-octets (error-body 500 "server_error"
                                                   "the request was not answered")))))))))

(defun serve-requests (server)
  "A worker: answer requests until the server stops.  A failure outside
the computing of an answer (ANSWER-REQUEST has answered the request) is
one line on standard error, and the worker goes on."
  (loop for id = (%http-next)
        while id
        do (handler-case (answer-request server id)
             (serious-condition (c)
               (ignore-errors (report-error "rontolisp serve" c))))))

(defun host-address (host)
  "The octets of HOST, an address as inet_pton(3) reads it or localhost;
USAGE-ERROR naming it when it is neither."
  (or (parse-address host)
      (usage-error "--host expects an IPv4 or IPv6 address (or localhost), found ~S" host)))

(defun listen-socket (host address port)
  "A listening socket on ADDRESS (the octets of HOST) and PORT (0: a free
one): its descriptor and its port."
  (multiple-value-bind (fd message) (%tcp-listen address port 512)
    (unless fd
      (rontolisp-error nil "cannot listen on ~A port ~D: ~A" host port message))
    (values fd (%tcp-local-port fd))))

(defun serve (file &key (host "127.0.0.1") (port 8080) (parallel 4) (queue 64) api-key
                     (timeout 600) (max-body (* 16 1024 1024)) metrics (stream *standard-output*))
  "Load the model of FILE once and answer HTTP requests on HOST and PORT
with PARALLEL workers (doc/serve.md) until SIGINT, SIGTERM or
%HTTP-SHUTDOWN; then finish what is in flight (at most TIMEOUT seconds)
and answer the number of requests answered.  The first line on STREAM
says where it listens: \"listening on http://HOST:PORT\"."
  (let* ((address (host-address host))
         (model (model:load file))
         (server (make-server :model model :path file :parallel parallel :metrics metrics
                              :started (get-universal-time)
                              :head (handler-case (progn (model:prepare-decide model) t)
                                      ((or model:model-error model:tokenizer-error) () nil))
                              :pooling (file-pooling model))))
    (multiple-value-bind (fd bound) (listen-socket host address port)
      (multiple-value-bind (ok message)
          (%http-start fd max-body timeout queue (and api-key (%utf8-octets api-key)))
        (unless ok
          (rontolisp-error nil "cannot start the HTTP server: ~A" message)))
      (unwind-protect
           (let ((workers (loop for i from 1 below parallel
                                collect (mp:process-run-function
                                         (format nil "serve worker ~D" i)
                                         (lambda () (serve-requests server))))))
             (format stream "listening on http://~A:~D~%"
                     (if (find #\: host) (format nil "[~A]" host) host) bound)
             (finish-output stream)
             (unwind-protect (serve-requests server)
               (%http-shutdown)
               (mapc #'mp:process-join workers)))
        (%http-stop timeout)))
    (server-answered server)))
