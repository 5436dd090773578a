;;;; tokenizer.lisp - text to token ids and back: GPT-2's byte-level BPE,
;;;; as Hugging Face tokenizers encodes with a tokenizer.json of model BPE,
;;;; pre-tokenizer ByteLevel and normalizer NFC or none.
;;;;
;;;; Two readers fill in one spec: the tokenizer.ggml.* and
;;;; skycmd.tokenizer.* keys of a GGUF file (what `rontolisp convert'
;;;; writes), and a Hugging Face tokenizer.json.  Anything of another kind
;;;; (SentencePiece, WordPiece, another pre-tokenizer expression, BPE
;;;; dropout...) is refused by name before anything is built.  The
;;;; tokenizer itself is C (prims/tokenizer.c): a foreign handle freed by
;;;; the collector, which any number of threads may use at once.
;;;;
;;;; `rontolisp tokenize' prints the ids of texts; `rontolisp embed --text'
;;;; (model.lisp) encodes with a model's own tokenizer.

(in-package "MODEL")

(defstruct (tokenizer (:constructor make-tokenizer) (:predicate tokenizer-p)
                            (:copier nil))
  "A byte-level BPE tokenizer from MODEL:LOAD-TOKENIZER (or a model's own):
the file it was read from and its C handle."
  path handle)

(document-functions
  model:tokenizer-p "True when X is a tokenizer from MODEL:LOAD-TOKENIZER."
  model:tokenizer-path "The file a tokenizer was read from (a model's GGUF file for a model's own).")

(defmethod print-object ((tok model:tokenizer) stream)
  (print-unreadable-object (tok stream :type t)
    (format stream "~A, ~D tokens" (tokenizer-path tok) (%tok-vocab-size (tokenizer-handle tok)))))

;;; What a reader fills in: the C side's rl_tok_spec, as Lisp data.

(defstruct (tok-spec (:copier nil) (:predicate nil))
  (tokens #() :type simple-vector)      ; id -> its text (byte-to-unicode form)
  (types nil)                           ; (signed-byte 32) vector of GGUF token types
  (merges #() :type simple-vector)      ; "a b", in rank order
  (unk -1) (bos -1) (eos -1)
  add-bos add-eos nfc ignore-merges
  (lstrip '()) (rstrip '()))

(defparameter *tokenizer-limits*
  '(:json-bytes #.(* 256 1024 1024) :tokens 16777216 :merges 16777216)
  "The largest tokenizer.json read (bytes; the largest vocabularies in
use are a few tens of megabytes), and the most tokens and merges a
tokenizer may have: anything beyond is refused before it is parsed or
built.")

(defparameter *max-id-gaps* 65536
  "The most ids below a tokenizer.json's largest id that may have no
token (each becomes an unused [PADn] token).")

(defparameter *gpt2-pre-tokenizers*
  '("gpt-2" "phi-2" "jina-es" "jina-de" "gigachat" "jina-v2-es" "jina-v2-de" "a.x-4.0"
    "mellum" "modern-bert" "jina-v1-en" "jina-v2-code" "roberta-bpe" "exaone4"
    "mpt" "olmo" "jais" "trillion" "granite-docling")
  "The tokenizer.ggml.pre values that llama.cpp (src/llama-vocab.cpp)
splits with GPT-2's expression
's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+:
the pre-tokenizer types GPT2, MPT, OLMO, JAIS, TRILLION and GRANITE_DOCLING.")

(defparameter *tokenizer-model-kinds*
  '(("llama" . "SentencePiece") ("bert" . "WordPiece") ("t5" . "Unigram")
    ("rwkv" . "RWKV") ("plamo2" . "PLaMo-2") ("none" . "no tokenizer"))
  "What the other tokenizer.ggml.model values are, for the refusal.")

(defun pack-strings (strings)
  "The UTF-8 bytes of STRINGS one after the other, and the end offset of
each as an (unsigned-byte 64) vector: the form %TOK-NEW takes."
  (let* ((octets (map 'vector #'%utf8-octets strings))
         (ends (make-array (length octets) :element-type '(unsigned-byte 64)))
         (total 0))
    (loop for o across octets for i from 0
          do (setf (aref ends i) (incf total (length o))))
    (let ((bytes (make-array total :element-type '(unsigned-byte 8))) (pos 0))
      (loop for o across octets
            do (replace bytes o :start1 pos)
               (incf pos (length o)))
      (values bytes ends))))

(defun i32-vector (list)
  (make-array (length list) :element-type '(signed-byte 32) :initial-contents list))

(defun build-tokenizer (spec path)
  "The tokenizer of SPEC (a TOK-SPEC read from the file PATH); a spec the
C builder refuses (a duplicate token, a merge naming an unknown token, an
id out of range...) signals MODEL:TOKENIZER-ERROR naming PATH."
  (let ((n (length (tok-spec-tokens spec))))
    (when (zerop n)
      (model:tokenizer-error path "expected at least one token, found none"))
    (when (> n (getf *tokenizer-limits* :tokens))
      (model:tokenizer-error path "expected at most ~D tokens, found ~D"
                             (getf *tokenizer-limits* :tokens) n))
    (when (> (length (tok-spec-merges spec)) (getf *tokenizer-limits* :merges))
      (model:tokenizer-error path "expected at most ~D merges, found ~D"
                             (getf *tokenizer-limits* :merges) (length (tok-spec-merges spec))))
    (multiple-value-bind (tbytes tends) (pack-strings (tok-spec-tokens spec))
      (multiple-value-bind (mbytes mends) (pack-strings (tok-spec-merges spec))
        (flet ((flag (x) (if x 1 0)))
          (multiple-value-bind (handle status message)
              (%tok-new tbytes tends
                        (or (tok-spec-types spec)
                            (make-array n :element-type '(signed-byte 32) :initial-element 1))
                        mbytes mends
                        (i32-vector (list (tok-spec-unk spec) (tok-spec-bos spec) (tok-spec-eos spec)
                                          (flag (tok-spec-add-bos spec)) (flag (tok-spec-add-eos spec))
                                          (flag (tok-spec-nfc spec))
                                          (flag (tok-spec-ignore-merges spec))))
                        (i32-vector (tok-spec-lstrip spec)) (i32-vector (tok-spec-rstrip spec)))
            (declare (ignore status))
            (unless handle
              (model:tokenizer-error path "~A" message))
            (make-tokenizer :path path :handle handle)))))))

;;; GGUF keys.

(defun gguf-tokenizer-spec (f path)
  "The TOK-SPEC of the tokenizer.ggml.* and skycmd.tokenizer.* keys of the
GGUF file object F (read from PATH).  A tokenizer that is not GPT-2's
byte-level BPE, or a key of the wrong type, signals MODEL:TOKENIZER-ERROR
naming the key and what was found.  An absent merges, lstrip_ids or
rstrip_ids key is an empty array (doc/converter.md §2)."
  (labels ((key (name) (gguf:value f name))
           (present (name) (nth-value 2 (gguf:value f name)))
           (bad (name expected value)
             (model:tokenizer-error path "key ~A: expected ~A, found ~A" name expected
                                    (json-brief value)))
           (strings (name &key optional)
             ;; An OPTIONAL key absent is an empty array (the converter
             ;; leaves out an array key that would be empty).
             (let ((v (if (and optional (not (present name))) #() (key name))))
               (unless (and (vectorp v) (not (stringp v)) (every #'stringp v))
                 (if (present name)
                     (bad name "an array of strings" v)
                     (model:tokenizer-error path "expected a key ~A, found none" name)))
               (coerce v 'simple-vector)))
           (id (name n)
             (let ((v (key name)))
               (cond ((not (present name)) -1)
                     ((and (integerp v) (< -1 v n)) v)
                     (t (bad name (format nil "a token id below ~D" n) v)))))
           (flag (name)
             (let ((v (key name)))
               (cond ((not (present name)) nil)
                     ((member v '(t nil)) v)
                     (t (bad name "true or false" v)))))
           (ids (name n)
             (let ((v (if (present name) (key name) #())))
               (unless (and (vectorp v) (not (stringp v)) (every (lambda (i) (and (integerp i) (< -1 i n))) v))
                 (bad name (format nil "an array of token ids below ~D" n) v))
               (coerce v 'list))))
    (let ((model (key "tokenizer.ggml.model")))
      (unless (equal model "gpt2")
        (model:tokenizer-error
         path "expected tokenizer.ggml.model \"gpt2\" (byte-level BPE), found ~:[none~;~:*~S~@[ (~A)~]~]"
         (and (present "tokenizer.ggml.model") (if (stringp model) model (json-brief model)))
         (and (stringp model) (cdr (assoc model *tokenizer-model-kinds* :test #'string=))))))
    (let ((pre (key "tokenizer.ggml.pre")))
      (unless (and (stringp pre) (member pre *gpt2-pre-tokenizers* :test #'string=))
        (model:tokenizer-error
         path "expected tokenizer.ggml.pre naming a pre-tokenizer of GPT-2's expression (~{~A~^, ~}), found ~:[none~;~:*~A~]"
         *gpt2-pre-tokenizers*
         (and (present "tokenizer.ggml.pre") (if (stringp pre) (format nil "~S" pre) (json-brief pre))))))
    (let* ((tokens (strings "tokenizer.ggml.tokens"))
           (n (length tokens))
           (merges (strings "tokenizer.ggml.merges" :optional t))
           (types (and (present "tokenizer.ggml.token_type")
                       (let ((v (key "tokenizer.ggml.token_type")))
                         (unless (and (vectorp v) (not (stringp v)) (= (length v) n)
                                      (every (lambda (x) (typep x '(signed-byte 32))) v))
                           (bad "tokenizer.ggml.token_type"
                                (format nil "an array of ~D integer token types" n) v))
                         (coerce v '(simple-array (signed-byte 32) (*))))))
           (normalizer (if (present "skycmd.tokenizer.normalizer")
                           (key "skycmd.tokenizer.normalizer")
                           "none")))
      (unless (member normalizer '("NFC" "none") :test #'equal)
        (bad "skycmd.tokenizer.normalizer" "\"NFC\" or \"none\"" normalizer))
      (make-tok-spec :tokens tokens :types types :merges merges
                     :unk (id "tokenizer.ggml.unknown_token_id" n)
                     :bos (id "tokenizer.ggml.bos_token_id" n)
                     :eos (id "tokenizer.ggml.eos_token_id" n)
                     :add-bos (flag "tokenizer.ggml.add_bos_token")
                     :add-eos (flag "tokenizer.ggml.add_eos_token")
                     :nfc (equal normalizer "NFC")
                     :ignore-merges (flag "skycmd.tokenizer.ignore_merges")
                     :lstrip (ids "skycmd.tokenizer.lstrip_ids" n)
                     :rstrip (ids "skycmd.tokenizer.rstrip_ids" n)))))

;;; Hugging Face tokenizer.json.

(defun json-type-of (value)
  "The \"type\" of a JSON object VALUE, or NIL."
  (and (hash-table-p value) (gethash "type" value)))

(defun json-tokenizer-spec (tok path)
  "The TOK-SPEC of TOK, the parsed tokenizer.json PATH: model BPE,
pre-tokenizer ByteLevel with use_regex (alone or the one member of a
Sequence), normalizer NFC or null, added_tokens, post-processor
TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel or null
(or a Sequence of those).  Anything else signals MODEL:TOKENIZER-ERROR
naming PATH, the key and what it found."
  (labels ((fail (control &rest args) (apply #'model:tokenizer-error path control args))
           (kind (what value)
             (fail "~A: expected ~A, found ~A" what
                   (cond ((string= what "model") "model type \"BPE\" (byte-level BPE)")
                         ((string= what "pre_tokenizer")
                          "a ByteLevel pre-tokenizer with use_regex (GPT-2's expression)")
                         ((string= what "normalizer") "normalizer NFC or null")
                         (t "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel or null"))
                   (let ((type (json-type-of value)))
                     (if (stringp type) (format nil "type ~S" type) (json-brief value)))))
           (member-of (table key what &key (type t) default)
             (multiple-value-bind (v found) (gethash key table)
               (cond ((or (not found) (eq v :null)) default)
                     ((json-type-mismatch v type) (fail "~A: ~A" what (json-type-mismatch v type)))
                     (t v)))))
    (unless (hash-table-p tok)
      (fail "expected a JSON object (a tokenizer.json), found ~A" (json-brief tok)))
    (let* ((model (let ((m (gethash "model" tok)))
                    (unless (hash-table-p m) (fail "model: expected a JSON object, found ~A"
                                                   (if m (json-brief m) "none")))
                    (unless (equal (gethash "type" m "BPE") "BPE") (kind "model" m))
                    m))
           (vocab (member-of model "vocab" "model.vocab" :type 'hash-table))
           (raw-merges (member-of model "merges" "model.merges" :type 'vector :default #()))
           (added (member-of tok "added_tokens" "added_tokens" :type 'vector :default #()))
           (ids (make-hash-table :test 'equal))
           (by-id (make-hash-table))
           (types (make-hash-table))
           (lstrip '()) (rstrip '()))
      (unless vocab (fail "model.vocab: expected a JSON object, found none"))
      ;; Options the C tokenizer does not implement.
      (loop for (key what) in '(("dropout" "a dropout") ("continuing_subword_prefix" "a prefix")
                                ("end_of_word_suffix" "a suffix"))
            for v = (gethash key model :null)
            unless (or (eq v :null) (equal v ""))
              do (fail "model.~A: expected null (byte-level BPE has no ~A), found ~A" key
                       (subseq what 2) (json-brief v)))
      (when (eq (gethash "byte_fallback" model) t)
        (fail "model.byte_fallback: expected false (byte-level BPE needs none), found true"))
      (when (> (hash-table-count vocab) (getf *tokenizer-limits* :tokens))
        (fail "model.vocab: expected at most ~D tokens, found ~D" (getf *tokenizer-limits* :tokens)
              (hash-table-count vocab)))
      (when (> (length raw-merges) (getf *tokenizer-limits* :merges))
        (fail "model.merges: expected at most ~D merges, found ~D" (getf *tokenizer-limits* :merges)
              (length raw-merges)))
      (flet ((place (text id what)
               (unless (and (stringp text) (plusp (length text)))
                 (fail "~A: expected a non-empty token string, found ~A" what (json-brief text)))
               (unless (and (integerp id) (< -1 id (getf *tokenizer-limits* :tokens)))
                 (fail "~A: expected an id from 0 below ~D, found ~A" what
                       (getf *tokenizer-limits* :tokens) (json-brief id)))
               (let ((old (gethash id by-id)) (old-id (gethash text ids)))
                 (when (and old (string/= old text))
                   (fail "~A: expected a free id, found ~D taken by ~S" what id old))
                 (when (and old-id (/= old-id id))
                   (fail "~A: expected ~S once, found it at ids ~D and ~D" what text old-id id)))
               (setf (gethash id by-id) text (gethash text ids) id)))
        (maphash (lambda (text id) (place text id (format nil "model.vocab ~S" text))) vocab)
        (loop for a across added
              for i from 0
              for what = (format nil "added_tokens[~D]" i)
              do (unless (hash-table-p a)
                   (fail "~A: expected a JSON object, found ~A" what (json-brief a)))
                 (let ((id (gethash "id" a)))
                   (place (gethash "content" a) id what)
                   (flet ((flag (key) (member-of a key (format nil "~A.~A" what key) :type 'boolean)))
                     (when (flag "single_word")
                       (fail "~A.single_word: expected false (not supported), found true" what))
                     (flag "normalized")
                     (setf (gethash id types) (if (flag "special") 3 4))
                     (when (flag "lstrip") (push id lstrip))
                     (when (flag "rstrip") (push id rstrip))))))
      (when (zerop (hash-table-count by-id))
        (fail "model.vocab: expected at least one token, found none"))
      (let* ((n (1+ (loop for id being the hash-keys of by-id maximize id)))
             (tokens (progn
                       ;; Ids without a token become unused [PADn] tokens, as
                       ;; the converter writes them; so many that the array
                       ;; would be mostly gaps is refused before it is made.
                       (when (> (- n (hash-table-count by-id)) *max-id-gaps*)
                         (fail "model.vocab: expected ids 0 to ~D with at most ~D without a token, ~
found ~D without one (the first: ~D)" (1- n) *max-id-gaps* (- n (hash-table-count by-id))
                               (loop for id from 0 unless (gethash id by-id) return id)))
                       (make-array n)))
             (type-vector (make-array n :element-type '(signed-byte 32) :initial-element 1)))
        (dotimes (id n)
          (setf (aref tokens id)
                (or (gethash id by-id)
                    (progn (setf (aref type-vector id) 5) (format nil "[PAD~D]" id)))))
        (maphash (lambda (id type) (setf (aref type-vector id) type)) types)
        (let ((merges (map 'simple-vector
                           (let ((i -1))
                             (lambda (m)
                               (incf i)
                               (handler-case (merge-string m i path)
                                 (convert-error (c)
                                   (error 'model:tokenizer-error
                                          :path path :message (rontolisp-error-message c))))))
                           raw-merges))
              (unk (let ((name (member-of model "unk_token" "model.unk_token" :type 'string)))
                     (cond ((null name) -1)
                           ((gethash name ids))
                           (t (fail "model.unk_token: expected a token of the vocabulary, found ~S"
                                    name)))))
              (normalizer (gethash "normalizer" tok :null))
              (pre (gethash "pre_tokenizer" tok :null)))
          ;; normalizer
          (unless (or (eq normalizer :null) (equal (json-type-of normalizer) "NFC"))
            (kind "normalizer" normalizer))
          ;; pre-tokenizer: ByteLevel, alone or the one member of a Sequence
          (when (and (equal (json-type-of pre) "Sequence")
                     (json-array-p (gethash "pretokenizers" pre))
                     (= 1 (length (gethash "pretokenizers" pre))))
            (setf pre (aref (gethash "pretokenizers" pre) 0)))
          (unless (equal (json-type-of pre) "ByteLevel")
            (kind "pre_tokenizer" pre))
          (unless (member (gethash "use_regex" pre t) '(t))
            (fail "pre_tokenizer.use_regex: expected true (GPT-2's expression), found ~A"
                  (json-brief (gethash "use_regex" pre))))
          (when (eq (gethash "add_prefix_space" pre) t)
            (fail "pre_tokenizer.add_prefix_space: expected false, found true"))
          (multiple-value-bind (bos eos) (post-processor-ids (gethash "post_processor" tok :null)
                                                             ids #'kind #'fail)
            (make-tok-spec :tokens tokens :types type-vector :merges merges :unk unk
                           :bos (or bos -1) :eos (or eos -1) :add-bos (and bos t) :add-eos (and eos t)
                           :nfc (not (eq normalizer :null))
                           :ignore-merges (member-of model "ignore_merges" "model.ignore_merges"
                                                     :type 'boolean)
                           :lstrip (sort lstrip #'<) :rstrip (sort rstrip #'<))))))))

(defun post-processor-ids (post ids kind fail)
  "The bos and eos ids (or NIL) that the post_processor POST adds around a
single text; IDS maps token strings to ids; KIND and FAIL signal."
  (flet ((token-id (name what)
           (or (and (stringp name) (gethash name ids))
               (funcall fail "~A: expected a token of the vocabulary, found ~A" what
                        (json-brief name)))))
    (let ((type (json-type-of post)))
      (cond ((eq post :null) (values nil nil))
            ((equal type "ByteLevel") (values nil nil))
            ((equal type "Sequence")
             (let ((bos nil) (eos nil))
               (loop for p across (let ((v (gethash "processors" post)))
                                    (if (json-array-p v) v (funcall kind "post_processor" post)))
                     do (multiple-value-bind (b e) (post-processor-ids p ids kind fail)
                          (setf bos (or b bos) eos (or e eos))))
               (values bos eos)))
            ((member type '("BertProcessing" "RobertaProcessing") :test #'equal)
             (flet ((pair (key)
                      (let ((v (gethash key post)))
                        (if (and (json-array-p v) (= 2 (length v)))
                            (token-id (aref v 0) (format nil "post_processor.~A" key))
                            (funcall fail "post_processor.~A: expected [token, id], found ~A" key
                                     (json-brief v))))))
               (values (pair "cls") (pair "sep"))))
            ((equal type "TemplateProcessing")
             (let ((single (gethash "single" post)) (bos nil) (eos nil) (seen nil))
               (when (json-type-mismatch single 'vector)
                 (funcall fail "post_processor.single: ~A" (json-type-mismatch single 'vector)))
               (loop for item across single
                     for i from 0
                     for what = (format nil "post_processor.single[~D]" i)
                     do (cond ((and (hash-table-p item) (hash-table-p (gethash "Sequence" item)))
                               (when seen (funcall fail "~A: expected one sequence, found a second" what))
                               (setf seen t))
                              ((and (hash-table-p item) (hash-table-p (gethash "SpecialToken" item)))
                               (let* ((name (gethash "id" (gethash "SpecialToken" item)))
                                      (special (let ((s (gethash "special_tokens" post)))
                                                 (and (hash-table-p s) (gethash name s))))
                                      (listed (and (hash-table-p special) (gethash "ids" special)))
                                      (id (if (and (json-array-p listed) (= 1 (length listed))
                                                   (integerp (aref listed 0)))
                                              (aref listed 0)
                                              (token-id name what))))
                                 (if seen
                                     (if eos
                                         (funcall fail "~A: expected at most one token after the text, found ~A"
                                                  what (json-brief name))
                                         (setf eos id))
                                     (if bos
                                         (funcall fail "~A: expected at most one token before the text, found ~A"
                                                  what (json-brief name))
                                         (setf bos id)))))
                              (t (funcall fail "~A: expected a SpecialToken or the Sequence, found ~A"
                                          what (json-brief item)))))
               (unless seen
                 (funcall fail "post_processor.single: expected the sequence $A, found none"))
               (values bos eos)))
            (t (funcall kind "post_processor" post))))))

(defun tokenizer-file-kind (path)
  "What the file PATH holds: :GGUF when it starts with GGUF's magic, else
:JSON; a tokenizer.json larger than *TOKENIZER-LIMITS* allows is refused
(MODEL:TOKENIZER-ERROR) before it is read, a file that cannot be opened
signals FILE-IO-ERROR."
  (multiple-value-bind (stream size) (open-input-octets path :what "a GGUF file or a tokenizer.json")
    (with-open-stream (s stream)
      (let ((head (make-array 4 :element-type '(unsigned-byte 8)))
            (limit (getf *tokenizer-limits* :json-bytes)))
        (cond ((and (= 4 (read-sequence head s)) (equalp head #(71 71 85 70))) :gguf)
              ((> size limit)
               (model:tokenizer-error path "expected a tokenizer.json of at most ~D bytes, found ~D"
                                      limit size))
              (t :json))))))

(defun gguf-file-tokenizer (f path)
  "The tokenizer of the GGUF file object F (read from PATH)."
  (build-tokenizer (gguf-tokenizer-spec f path) path))

(defun load-tokenizer (path)
  "The tokenizer of PATH: a GGUF file (its tokenizer.ggml.* keys, model
\"gpt2\" with a pre-tokenizer of GPT-2's expression) or a Hugging Face
tokenizer.json (model BPE, pre-tokenizer ByteLevel, normalizer NFC or
null).  A tokenizer of another kind (SentencePiece, WordPiece, another
pre-tokenizer), a malformed or oversized file or a merge naming an unknown
token signals MODEL:TOKENIZER-ERROR naming PATH and what is wrong; a file
that is not valid GGUF or JSON signals GGUF:GGUF-ERROR or JSON-ERROR."
  (let ((name (absolute-namestring path)))
    (if (eq :gguf (tokenizer-file-kind name))
        (let ((f (gguf:read name)))
          (unwind-protect (gguf-file-tokenizer f name)
            (gguf:close f)))
        (build-tokenizer (json-tokenizer-spec (read-json-file name) name) name))))

(defvar *tokenizer-first-use-lock* (mp:make-lock :name "an encoder's tokenizer, first use")
  "Held while an encoder's tokenizer is read from its file: two threads
asking at once get the same tokenizer, built once.  (A second one, built
and dropped, would be freed by the collector while its thread still ran
it.)")

(defun tokenizer-of (source where)
  "SOURCE's tokenizer: SOURCE itself, or the tokenizer of an encoder from
MODEL:LOAD, read from its file on first use, once whatever the threads (a
refusal is kept and signalled again)."
  (cond ((model:tokenizer-p source) source)
        ((model:encoder-p source)
         (flet ((known ()
                  (let ((tok (encoder-tokenizer source)))
                    (cond ((model:tokenizer-p tok) tok)
                          ((typep tok 'model:tokenizer-error) (error tok))))))
           (or (known)
               (mp:with-lock (*tokenizer-first-use-lock*)
                 (or (known)
                     (handler-case
                         (setf (encoder-tokenizer source)
                               (gguf-file-tokenizer (encoder-file source) (encoder-path source)))
                       (model:tokenizer-error (c)
                         (setf (encoder-tokenizer source) c)
                         (error c))))))))
        (t (element-type-error where source "expected a tokenizer (model:load-tokenizer) or an ~
encoder (model:load), found ~S" source))))

(defun check-text (text tok where)
  "TEXT's UTF-8 bytes; TEXT must be a string whose characters are all
Unicode scalar values (U+DC80..U+DCFF, a byte that was not UTF-8, is
refused by the encoder with its offset)."
  (check-text-characters text tok where)
  (%utf8-octets text))

(defun check-text-characters (text tok where)
  "CHECK-TEXT's checks of TEXT, without making its bytes."
  (unless (stringp text)
    (element-type-error where text "expected a string, found ~S" text))
  ;; A loop, not POSITION-IF: a question's text is checked without consing.
  (let ((bad (dotimes (i (length text) nil)
               (let ((code (char-code (char text i))))
                 (when (and (<= #xd800 code #xdfff) (not (<= #xdc80 code #xdcff)))
                   (return i))))))
    (when bad
      (model:tokenizer-error (tokenizer-path tok)
                             "expected text of Unicode scalar values, found the lone surrogate U+~4,'0X at byte offset ~D"
                             (char-code (char text bad))
                             (length (%utf8-octets (subseq text 0 bad))))))
  text)

(defun tokenize-octets (tok octets add-special parse-special &optional text offsets)
  "The ids of the UTF-8 bytes OCTETS (a fixnum vector), or
MODEL:TOKENIZER-ERROR with the message of the C tokenizer (bytes that are
not UTF-8 named by their offset).  TEXT, when given, names the text for
the message (\"text 2\", \"F line 3\", or a function answering the name,
called only on failure: a file of lines makes no name per line); bytes
that are not UTF-8 are the text's fault and the message names the text
alone; any other failure names the tokenizer's file, then the text.  With OFFSETS, a second value:
per id the bytes of OCTETS it stands for, two fixnums an id (start, end;
see doc/tokenizer.md, \"Offsets\")."
  (multiple-value-bind (ids status message)
      (if offsets
          (%tok-encode-offsets (tokenizer-handle tok) octets add-special parse-special)
          (%tok-encode (tokenizer-handle tok) octets add-special parse-special))
    (if ids
        (values ids status)
        (model:tokenizer-error (and (not (and text (eq status :bad-utf-8))) (tokenizer-path tok))
                               "~@[~A: ~]~A" (if (functionp text) (funcall text) text) message))))

(defun tokenize (tokenizer text &key (add-special t) (parse-special t))
  "The token ids of TEXT (a string) as a vector of fixnums, by TOKENIZER (from
MODEL:LOAD-TOKENIZER, or an encoder from MODEL:LOAD, whose file's tokenizer
is read on first use).  ADD-SPECIAL adds the bos and eos tokens the
tokenizer names; PARSE-SPECIAL finds special and added tokens in the text
(else they are plain text).  A text that is not valid Unicode (a lone
surrogate, a byte that was not UTF-8) signals MODEL:TOKENIZER-ERROR with its
byte offset; so does a model whose file has no usable tokenizer, saying
why."
  (let ((tok (tokenizer-of tokenizer 'model:tokenize)))
    (tokenize-octets tok (check-text text tok 'model:tokenize) add-special parse-special)))

(defun tokenize-into (tokenizer text out)
  "The token ids of TEXT (special tokens parsed, none added) by TOKENIZER
(as MODEL:TOKENIZE takes it) in OUT, an adjustable fixnum vector whose
fill pointer is set to their count; OUT grown only for a longer text, so
that tokenizing into a kept vector conses nothing.  Answers OUT; the
conditions are MODEL:TOKENIZE's."
  (let ((tok (tokenizer-of tokenizer 'model:tokenize)))
    (check-text-characters text tok 'model:tokenize)
    (loop
      (multiple-value-bind (count status message)
          (%tok-encode-into (tokenizer-handle tok) text out nil t)
        (unless count
          (model:tokenizer-error (and (not (eq status :bad-utf-8)) (tokenizer-path tok))
                                 "~A" message))
        (when (<= count (array-dimension out 0))
          (setf (fill-pointer out) count)
          (return out))
        (adjust-array out count)))))

(defun checked-decode (decode tokenizer ids where)
  "DECODE (%TOK-DECODE or %TOK-DECODE-OCTETS) of the token ids IDS by
TOKENIZER, for the function WHERE: its answer, or MODEL:TOKENIZER-ERROR
naming an id outside the vocabulary."
  (let ((tok (tokenizer-of tokenizer where)))
    (unless (and (typep ids 'sequence) (not (stringp ids))
                 (every (lambda (id) (typep id '(signed-byte 32))) ids))
      (element-type-error where ids "expected a sequence of token ids, found ~S" ids))
    (multiple-value-bind (answer status message)
        (funcall decode (tokenizer-handle tok) (coerce ids '(simple-array (signed-byte 32) (*))))
      (declare (ignore status))
      (or answer (model:tokenizer-error (tokenizer-path tok) "~A" message)))))

(defun detokenize (tokenizer ids)
  "The text of the token ids IDS (a sequence of integers) by TOKENIZER (a
tokenizer or an encoder, as MODEL:TOKENIZE takes): each token's bytes back
through GPT-2's byte table, special tokens as their text; each maximal
run of bytes that is not UTF-8 becomes U+FFFD, as Hugging Face's decoder has
it.  An id outside the vocabulary signals
MODEL:TOKENIZER-ERROR naming it."
  (checked-decode #'%tok-decode tokenizer ids 'model:detokenize))

(defun detokenize-octets (tokenizer ids)
  "The bytes of the token ids IDS by TOKENIZER, as MODEL:DETOKENIZE has
them before U+FFFD replaces what is not UTF-8: an (unsigned-byte 8)
vector, for a caller that must tell a token holding part of a character
from one holding U+FFFD."
  (checked-decode #'%tok-decode-octets tokenizer ids 'model:detokenize-octets))

(defun token-piece (tokenizer id)
  "The text of token ID as the vocabulary stores it (GPT-2's byte-to-unicode
form, \"Ġworld\" for \" world\"), or NIL for an id outside the vocabulary."
  (let ((tok (tokenizer-of tokenizer 'model:token-piece)))
    (and (typep id '(integer 0 #.(1- (expt 2 31))))
         (%tok-piece (tokenizer-handle tok) id))))

(defun vocabulary-size (tokenizer)
  "The number of tokens of TOKENIZER (a tokenizer or an encoder)."
  (%tok-vocab-size (tokenizer-handle (tokenizer-of tokenizer 'model:vocabulary-size))))

(defun merge-string (m i path)
  "The I-th BPE merge M of the tokenizer file PATH as GGUF keeps it, \"a
b\": M is that string or the pair [\"a\", \"b\"], either form refused
unless both tokens are non-empty."
  (let* ((what (format nil "model.merges[~D]" i))
         (pair (cond ((stringp m)
                      (let ((space (position #\Space m)))
                        (unless (= 1 (count #\Space m))
                          (convert-error path "~A: expected two tokens separated by one space, ~
found ~S" what m))
                        (list (subseq m 0 space) (subseq m (1+ space)))))
                     ((and (vectorp m) (= 2 (length m)) (every #'stringp m))
                      (coerce m 'list))
                     (t (convert-error path "~A: expected \"a b\" or a pair of strings, found ~A"
                                       what (json-brief m))))))
    (when (some (lambda (token) (zerop (length token))) pair)
      (convert-error path "~A: expected two non-empty tokens, found ~A" what (json-brief m)))
    (format nil "~A ~A" (first pair) (second pair))))
