;;;; test-tokenizer.lisp - text to token ids (lisp/model/tokenizer.lisp): the GGUF
;;;; and tokenizer.json readers on the converter's own output, GPT-2's real
;;;; vocabulary, the refusals, `rontolisp tokenize' and `embed --text'.

(in-package "RONTOLISP-TESTS")

(def-suite tokenizer :in all :description "Tokenizers, `tokenize' and `embed --text'.")
(in-suite tokenizer)

(defvar *tok-converted* nil
  "(gguf-path . tokenizer.json-path) of `convert --random s1-pico' with
--write-laya, made once per run.")

(defun converted ()
  "The converter's GGUF file and the tokenizer.json it wrote beside it."
  (or *tok-converted*
      (let ((gguf (tmp-path "pico.gguf")) (dir (tmp-path "laya")))
        (multiple-value-bind (code out err)
            (run-exe (list "convert" "--random" "s1-pico" gguf "--write-laya" dir "--type" "f32"))
          (declare (ignore out))
          (assert (eql 0 code) () "convert --random failed: ~A" err))
        (setf *tok-converted* (cons gguf (format nil "~A/tokenizer/tokenizer.json" dir))))))

(defparameter *tok-texts*
  (list "Hello world" "" "  two  spaces, and a tab	here" "[CLS] special [MASK] tokens [SEP]"
        "don't we'll it's" "numbers 12345 and 3.14" "café naïve Ωμέγα 日本語 🙂"
        (format nil "line one~%line two~%") "e\u0301 (a decomposed é)" "[MASK]x  [MASK]")
  "Texts both readers must give the same ids for.")

(defun gpt2-file () (golden "vocab/ggml-vocab-gpt-2.gguf"))

(test gpt-2-vocabulary-known-ids
  ;; Ids that Hugging Face's GPT-2 tokenizer gives (and llama.cpp's
  ;; test-tokenizer-0 lists for this file).
  (let ((tok (model:load-tokenizer (gpt2-file))))
    (is (= 50257 (model:vocabulary-size tok)))
    (is (equalp #(15496 995) (model:tokenize tok "Hello world")))
    (is (equalp #(18435 995) (model:tokenize tok " Hello world")))
    (is (equalp #(1212 318 257 1332) (model:tokenize tok "This is a test")))
    (is (string= "Hello world" (model:detokenize tok #(15496 995))))
    (is (equalp (map 'vector #'char-code "Hello world")
                (model:detokenize-octets tok #(15496 995))))
    ;; 127 is the byte C3, half of "é": U+FFFD, as Hugging Face decodes it,
    ;; or as octets that byte, as llama.cpp's token_to_piece gives it
    (is (string= (string (code-char #xfffd)) (model:detokenize tok #(127))))
    (is (equalp #(195) (model:detokenize-octets tok #(127))))
    (is (string= "Ġworld" (model:token-piece tok 995)))
    ;; no add_bos_token key: nothing is added
    (is (equalp (model:tokenize tok "Hello world" :add-special nil)
                (model:tokenize tok "Hello world")))))

(test tokenize-into-a-kept-vector-gives-tokenize-ids
  ;; TOKENIZE-INTO (a question's tokens, into its scratch) gives MODEL:TOKENIZE's
  ;; ids, special tokens parsed and none added, whatever the kept vector held
  ;; before: grown for a longer text, its fill pointer set for a shorter
  ;; one; a string with a fill pointer is read to it; a lone surrogate is
  ;; refused as MODEL:TOKENIZE refuses it.
  (let ((tok (model:load-tokenizer (gpt2-file)))
        (out (make-array 2 :element-type 'fixnum :adjustable t :fill-pointer 0))
        (text (make-array 40 :element-type 'character :adjustable t :fill-pointer 11)))
    (dolist (s (list "Hello world" "This is a test of a somewhat longer text, é and 漢字."
                     "" "Hi"))
      (is (equalp (model:tokenize tok s :add-special nil :parse-special t)
                  (model::tokenize-into tok s out))
          "~S" s))
    (replace text "Hello world, and more")
    (is (equalp #(15496 995) (model::tokenize-into tok text out)))
    (signals model:tokenizer-error
      (model::tokenize-into tok (coerce (list #\a (code-char #xd800)) 'string) out))))

(test readers-agree-on-converted-tokenizer
  (let* ((files (converted))
         (from-gguf (model:load-tokenizer (car files)))
         (from-json (model:load-tokenizer (cdr files))))
    (is (= (model:vocabulary-size from-gguf) (model:vocabulary-size from-json)))
    (dolist (text *tok-texts*)
      (dolist (parse '(t nil))
        (let ((a (model:tokenize from-gguf text :add-special nil :parse-special parse))
              (b (model:tokenize from-json text :add-special nil :parse-special parse)))
          (is (equalp a b) "~S (parse-special ~A): GGUF ~A, tokenizer.json ~A" text parse a b)
          (is (string= (model:detokenize from-gguf a) (model:detokenize from-json b))))))
    ;; Special tokens are found in the text and decode as their text.
    (let ((ids (model:tokenize from-gguf "[CLS]" :add-special nil)))
      (is (equalp #(2) ids))
      (is (string= "[CLS]" (model:detokenize from-gguf ids))))
    (is (< 1 (length (model:tokenize from-gguf "[CLS]" :add-special nil :parse-special nil))))
    ;; The GGUF file adds [CLS] and [SEP] (its add_bos/add_eos keys).
    (let ((ids (model:tokenize from-gguf "ab")))
      (is (= 2 (aref ids 0)))
      (is (= 3 (aref ids (1- (length ids))))))
    ;; Plain text round-trips.
    (dolist (text *tok-texts*)
      (is (string= text (model:detokenize from-json (model:tokenize from-json text :add-special nil
                                                                                    :parse-special nil)))
          "~S" text))))

(test model-load-gives-the-tokenizer
  (let* ((file (car (converted)))
         (encoder (model:load file)))
    (is (equalp (model:tokenize (model:load-tokenizer file) "Hello world")
                (model:tokenize encoder "Hello world")))
    (let ((ids (model:tokenize encoder "x")))
      (is (and (vectorp ids) (every (lambda (id) (typep id 'fixnum)) ids))))
    (is (string= "x" (model:detokenize encoder (model:tokenize encoder "x" :add-special nil))))))

(test model-tokenizer-first-use-from-two-threads-is-one-tokenizer
  "Two threads tokenizing with a freshly loaded encoder at once read its
tokenizer once: both use the same one (a second, built and dropped, was
freed by the collector while its thread still ran it: a question lost its
markers at decide --threads 2)."
  (let ((file (car (converted))))
    (dotimes (round 20)
      (let* ((encoder (model:load file))
             (go nil)
             (lock (mp:make-lock))
             (seen '())
             (threads (loop repeat 2
                            collect (mp:process-run-function
                                     "first use"
                                     (lambda ()
                                       (loop until go)
                                       ;; the tokenizer this thread gets on first use
                                       (let* ((tok (model::tokenizer-of encoder 'test))
                                              (ids (model:tokenize tok "Hello world")))
                                         (mp:with-lock (lock)
                                           (push (cons tok ids) seen))))))))
        (setf go t)
        (mapc #'mp:process-join threads)
        (is (= 2 (length seen)))
        (is (eq (car (first seen)) (car (second seen))) "round ~D: two tokenizers" round)
        (is (equalp (cdr (first seen)) (cdr (second seen))))))))

(defun tokenizer-error-message (thunk)
  "The message of the MODEL:TOKENIZER-ERROR THUNK signals, or NIL."
  (handler-case (progn (funcall thunk) nil)
    (model:tokenizer-error (c) (rontolisp:rontolisp-error-message c))))

(test refuses-other-kinds-by-name
  (let ((m (tokenizer-error-message
            (lambda () (model:load-tokenizer (golden "vocab/ggml-vocab-llama-spm.gguf"))))))
    (is (and m (contains m "\"llama\"") (contains m "SentencePiece")) "~A" m))
  (let ((m (tokenizer-error-message
            (lambda () (model:load-tokenizer (golden "vocab/ggml-vocab-bert-bge.gguf"))))))
    (is (and m (contains m "\"bert\"") (contains m "WordPiece")) "~A" m)))

(defun gguf-with (changes)
  "A copy of the converter's GGUF file with the metadata CHANGES, a list of
(key type value) (type NIL: the key removed), as a file object."
  (let* ((f (gguf:read (car (converted))))
         (meta (loop for k in (gguf:keys f)
                     unless (assoc k changes :test #'string=)
                       collect (multiple-value-bind (v type) (gguf:value f k) (list k type v)))))
    (gguf:make-file :metadata (append meta (loop for (k type v) in changes
                                                 when type collect (list k type v))))))

(test gguf-reader-refusals
  (flet ((message (changes)
           (tokenizer-error-message
            (lambda () (model::gguf-file-tokenizer (gguf-with changes) "x.gguf")))))
    (let ((m (message '(("tokenizer.ggml.pre" :string "llama-bpe")))))
      (is (and m (contains m "tokenizer.ggml.pre") (contains m "\"llama-bpe\"")) "~A" m))
    (let ((m (message '(("tokenizer.ggml.pre" nil nil)))))
      (is (and m (contains m "tokenizer.ggml.pre") (contains m "found none")) "~A" m))
    (let ((m (message '(("tokenizer.ggml.model" nil nil)))))
      (is (and m (contains m "tokenizer.ggml.model") (contains m "found none")) "~A" m))
    (let ((m (message '(("tokenizer.ggml.merges" (:array :string) #("! zz"))))))
      (is (and m (contains m "x.gguf") (contains m "zz")) "~A" m))
    (let ((m (message '(("skycmd.tokenizer.normalizer" :string "NFKC")))))
      (is (and m (contains m "NFKC")) "~A" m))
    ;; every name of GPT-2's expression is accepted
    (is (null (message '(("tokenizer.ggml.pre" :string "gpt-2")))))))

(test gguf-reader-takes-an-absent-array-key-as-empty
  ;; The converter leaves out an array key that would be empty (gguf-py
  ;; cannot write one): the reader gives the same tokenizer either way.
  (let* ((keys '("tokenizer.ggml.merges" "skycmd.tokenizer.lstrip_ids" "skycmd.tokenizer.rstrip_ids"))
         (absent (model::gguf-file-tokenizer
                  (gguf-with (mapcar (lambda (k) (list k nil nil)) keys)) "absent.gguf"))
         (empty (model::gguf-file-tokenizer
                 (gguf-with (mapcar (lambda (k) (list k (if (search "merges" k) '(:array :string) '(:array :i32))
                                                      #()))
                                    keys))
                 "empty.gguf")))
    (dolist (text *tok-texts*)
      (is (equalp (model:tokenize empty text) (model:tokenize absent text)) "~S" text))
    ;; no merges: one token per byte-level character
    (is (= 4 (length (model:tokenize absent "abcd" :add-special nil))))))

(defun json-file (value)
  "A temporary file holding the text VALUE (a string) or the JSON VALUE (as
WRITE-JSON takes it; JSON-DATA of test-convert.lisp makes it of parsed JSON)."
  (let ((path (tmp-path "tokenizer.json")))
    (if (stringp value)
        (write-file-string path value)
        (with-open-file (s path :direction :output :if-exists :supersede :external-format :utf-8)
          (text::write-json value s)))
    path))

(defun converted-json ()
  "The converter's tokenizer.json, parsed."
  (rontolisp:read-json-file (cdr (converted))))

(defun json-refusal (mutate)
  "The message refusing the converter's tokenizer.json after MUTATE (a
function of the parsed data that changes it) was applied, or NIL."
  (let ((data (converted-json)))
    (funcall mutate data)
    (let ((path (json-file (json-data data))))
      (unwind-protect (tokenizer-error-message (lambda () (model:load-tokenizer path)))
        (ignore-errors (delete-file path))))))

(test json-reader-refusals
  (flet ((check (mutate &rest needles)
           (let ((m (json-refusal mutate)))
             (is (and m (contains m "tokenizer.json") (every (lambda (n) (contains m n)) needles))
                 "expected ~S in ~A" needles m))))
    (check (lambda (d) (setf (gethash "type" (gethash "model" d)) "WordPiece")) "model" "WordPiece")
    (check (lambda (d) (setf (gethash "pre_tokenizer" d) (obj "type" "Metaspace"))) "pre_tokenizer" "Metaspace")
    (check (lambda (d) (setf (gethash "use_regex" (gethash "pre_tokenizer" d)) nil)) "use_regex")
    (check (lambda (d) (setf (gethash "normalizer" d) (obj "type" "Lowercase"))) "normalizer" "Lowercase")
    (check (lambda (d) (setf (gethash "dropout" (gethash "model" d)) 0.1d0)) "dropout")
    (check (lambda (d) (setf (gethash "continuing_subword_prefix" (gethash "model" d)) "##"))
           "continuing_subword_prefix")
    (check (lambda (d) (setf (gethash "post_processor" d) (obj "type" "Foo"))) "post_processor" "Foo")
    (check (lambda (d) (setf (gethash "merges" (gethash "model" d)) (vector "! nosuchtoken")))
           "nosuchtoken")
    (check (lambda (d) (setf (gethash "merges" (gethash "model" d)) (vector "a b c"))) "merges[0]")
    ;; no tokens at all, and a gap in the ids (found before an array of
    ;; the largest id is made)
    (check (lambda (d) (setf (gethash "vocab" (gethash "model" d)) (obj)
                             (gethash "added_tokens" d) (vector)))
           "model.vocab" "at least one token")
    (check (lambda (d) (setf (gethash "far" (gethash "vocab" (gethash "model" d))) 16000000))
           "without a token" "16000000")))

(test json-reader-refuses-a-string-where-an-array-belongs
  ;; A string is a vector to Lisp: "merges": "" was read as no merges (other
  ;; ids, no error), "a b" as three merges named by their characters.
  (flet ((check (mutate key)
           (let ((m (json-refusal mutate)))
             (is (and m (contains m "tokenizer.json") (contains m key)
                      (contains m "expected an array") (contains m "found the string"))
                 "~A: ~A" key m))))
    (check (lambda (d) (setf (gethash "merges" (gethash "model" d)) "")) "model.merges")
    (check (lambda (d) (setf (gethash "merges" (gethash "model" d)) "a b")) "model.merges")
    (check (lambda (d) (setf (gethash "added_tokens" d) "")) "added_tokens")
    (check (lambda (d) (setf (gethash "added_tokens" d) "[CLS]")) "added_tokens")
    (check (lambda (d) (setf (gethash "post_processor" d)
                             (obj "type" "TemplateProcessing" "single" "$A")))
           "post_processor.single"))
  ;; a one-character string is no one-member Sequence of pre-tokenizers
  (let ((m (json-refusal (lambda (d) (setf (gethash "pre_tokenizer" d)
                                           (obj "type" "Sequence" "pretokenizers" "x"))))))
    (is (and m (contains m "pre_tokenizer") (contains m "\"Sequence\"")) "~A" m)))

(test gguf-reader-refuses-unknown-token-types
  ;; llama.cpp's types are 1 (normal) to 6 (byte); another was taken as
  ;; none at all.
  (multiple-value-bind (types type)
      (let ((f (gguf:read (car (converted)))))
        (unwind-protect (gguf:value f "tokenizer.ggml.token_type")
          (gguf:close f)))
    (dolist (bad '(99 -1 0 7))
      (let ((v (copy-seq types)))
        (setf (aref v 5) bad)
        (let ((m (tokenizer-error-message
                  (lambda ()
                    (model::gguf-file-tokenizer
                     (gguf-with (list (list "tokenizer.ggml.token_type" type v))) "x.gguf")))))
          (is (and m (contains m "x.gguf") (contains m "token 5")
                   (contains m (format nil "found ~D" bad)))
              "type ~D: ~A" bad m))))))

(test json-reader-fills-a-few-gaps
  ;; Ids without a token become unused [PADn] tokens, as the converter
  ;; writes them into the GGUF file; the other ids are unchanged.
  (let ((data (converted-json)) (plain (model:load-tokenizer (cdr (converted)))))
    (setf (gethash "far" (gethash "vocab" (gethash "model" data))) (+ 10 (model:vocabulary-size plain)))
    (let ((path (json-file (json-data data))))
      (unwind-protect
           (let ((tok (model:load-tokenizer path)))
             (is (= (+ 11 (model:vocabulary-size plain)) (model:vocabulary-size tok)))
             (is (string= (format nil "[PAD~D]" (model:vocabulary-size plain))
                          (model:token-piece tok (model:vocabulary-size plain))))
             (is (equalp (model:tokenize plain "Hello far [PAD7]") (model:tokenize tok "Hello far [PAD7]"))))
        (ignore-errors (delete-file path))))))

(defun obj (&rest kvs)
  (let ((h (make-hash-table :test 'equal)))
    (loop for (k v) on kvs by #'cddr do (setf (gethash k h) v))
    h))

(test json-reader-template-post-processor
  (let* ((data (converted-json)))
    (setf (gethash "post_processor" data)
          (obj "type" "TemplateProcessing"
               "single" (vector (obj "SpecialToken" (obj "id" "[CLS]" "type_id" 0))
                                (obj "Sequence" (obj "id" "A" "type_id" 0))
                                (obj "SpecialToken" (obj "id" "[SEP]" "type_id" 0)))
               "special_tokens" (obj "[CLS]" (obj "id" "[CLS]" "ids" (vector 2) "tokens" (vector "[CLS]"))
                                     "[SEP]" (obj "id" "[SEP]" "ids" (vector 3) "tokens" (vector "[SEP]")))))
    (let ((path (json-file (json-data data))))
      (unwind-protect
           ;; with bos/eos from the template, the GGUF file and the JSON agree
           ;; with add-special too
           (let ((json (model:load-tokenizer path))
                 (gguf (model:load-tokenizer (car (converted)))))
             (dolist (text *tok-texts*)
               (is (equalp (model:tokenize gguf text) (model:tokenize json text)) "~S" text)))
        (ignore-errors (delete-file path))))))

(test json-reader-malformed-deep-huge
  ;; malformed
  (let ((path (json-file "{\"model\": ")))
    (handler-case (progn (model:load-tokenizer path) (fail "no error"))
      (rontolisp:json-error (c) (is (contains (rontolisp:rontolisp-error-message c) path))))
    (delete-file path))
  ;; deeper than jansson's limit: refused, no crash
  (let ((path (json-file (concatenate 'string (make-string 5000 :initial-element #\[)
                                      (make-string 5000 :initial-element #\])))))
    (handler-case (progn (model:load-tokenizer path) (fail "no error"))
      (rontolisp:json-error (c) (is (contains (rontolisp:rontolisp-error-message c) "depth"))))
    (delete-file path))
  ;; not an object
  (let* ((path (json-file "[1, 2]"))
         (m (tokenizer-error-message (lambda () (model:load-tokenizer path)))))
    (is (and m (contains m path)) "~A" m)
    (delete-file path))
  ;; huge: a sparse file past the cap is refused before it is read
  (let ((path (tmp-path "huge.json")))
    (with-open-file (s path :direction :output :element-type '(unsigned-byte 8) :if-exists :supersede)
      (file-position s (1+ (getf model::*tokenizer-limits* :json-bytes)))
      (write-byte 32 s))
    (let ((m (tokenizer-error-message (lambda () (model:load-tokenizer path)))))
      (is (and m (contains m "at most")) "~A" m))
    (delete-file path)))

(test tokenize-refuses-bad-text
  (let ((tok (model:load-tokenizer (gpt2-file))))
    (let ((m (tokenizer-error-message
              (lambda () (model:tokenize tok (concatenate 'string "ab" (string (code-char #xd800))))))))
      (is (and m (contains m "offset 2")) "~A" m))
    ;; a byte that was not UTF-8 (U+DC80..U+DCFF) is refused at its offset
    (let ((m (tokenizer-error-message
              (lambda () (model:tokenize tok (concatenate 'string "é" (string (code-char #xdcff))))))))
      (is (and m (contains m "2")) "~A" m))
    (signals model:tokenizer-error (model:detokenize tok #(50257)))
    (signals rontolisp:element-type-error (model:tokenize tok 42))))

(test tokenize-refused-when-model-has-no-tokenizer
  ;; An encoder file without tokenizer keys still loads and encodes.
  (let* ((path (tmp-path "no-tok.gguf")))
    (gguf:write path (command-line::random-model "s1-pico" :type :f32 :encoder-only t))
    (let* ((f (gguf:read path))
           (bare (gguf:make-file
                  :metadata (loop for k in (gguf:keys f)
                                  unless (search "tokenizer." k)
                                    collect (multiple-value-bind (v type) (gguf:value f k) (list k type v)))
                  :tensors (loop for name in (gguf:tensor-names f) collect (list name (gguf:tensor f name)))))
           (encoder (model:load bare)))
      (is (arrayp (model:encode encoder '(2 3))))
      (let ((m (tokenizer-error-message (lambda () (model:tokenize encoder "hi")))))
        (is (and m (contains m "tokenizer.ggml.model")) "~A" m))
      (gguf:close f))
    (delete-file path)))

;;; The command line.

(test tokenize-command-text-and-json
  (let ((file (gpt2-file)))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file "Hello world" "--" "-x"))
      (is (= 0 code) "~A" err)
      (is (equal (list "15496 995" "12 87") (split-lines out)) "~A" out))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--json" "Hello world"))
      (is (= 0 code) "~A" err)
      (let ((j (yason:parse out)))
        (is (string= "Hello world" (gethash "text" j)))
        (is (equal '(15496 995) (coerce (gethash "ids" j) 'list)))
        (is (equal '("Hello" "Ġworld") (coerce (gethash "pieces" j) 'list)))))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file))
      (declare (ignore out))
      (is (= 2 code) "~A" err))))

(test tokenize-command-speaks-like-llama-tokenize
  ;; llama-tokenize's --ids ([1, 2, 3]) and --show-count, byte offsets in
  ;; --json, and detokenize taking the ids back in either form; before,
  ;; each option was a usage error and there was no detokenize.
  (let ((file (gpt2-file)))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--ids" "--show-count"
                                                       "Hello world" "x"))
      (is (= 0 code) "~A" err)
      (is (equal (list "[15496, 995]" "Total number of tokens: 2" "[87]" "Total number of tokens: 1")
                 (split-lines out))
          "~A" out))
    (let ((texts (tmp-path "texts")))
      (with-open-file (s texts :direction :output :external-format :utf-8)
        (write-line (format nil "~C world" (code-char #xe9)) s))
      (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--json" "--show-count"
                                                         "--file" texts))
      (delete-file texts)
      (is (= 0 code) "~A" err)
      (let ((j (yason:parse out)))
        ;; é is two bytes: the token(s) of "é" end at byte 2, " world" is bytes 2..8
        (is (equal '((2 8)) (last (map 'list (lambda (p) (coerce p 'list)) (gethash "offsets" j))))
            "~A" out)
        (is (eql (length (gethash "ids" j)) (gethash "count" j)) "~A" out))))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--ids" "--json" "x"))
      (declare (ignore out))
      (is (= 2 code) "~A" err))
    (dolist (ids '(("15496" "995") ("[15496, 995]") ("15496,995")))
      (multiple-value-bind (code out err) (run-exe (list* "detokenize" file ids))
        (is (= 0 code) "~A: ~A" ids err)
        (is (equal (list "Hello world") (split-lines out)) "~A: ~A" ids out)))
    (multiple-value-bind (code out err) (run-exe (list "detokenize" file "15496" "world"))
      (declare (ignore out))
      (is (= 2 code))
      (is (contains err "\"world\"") "~A" err))
    (multiple-value-bind (code out err) (run-exe (list "detokenize" file "99999999"))
      (declare (ignore out))
      (is (= 1 code))
      (is (contains err "99999999") "~A" err))))

(test tokenize-and-embed-blame-the-text-not-the-tokenizer
  ;; Bytes that are not UTF-8 are the text's fault: the message names the
  ;; text (its number, --text, or the file and line), not the tokenizer's
  ;; file, which it used to name for every text given as an argument.
  (flet ((refused (args &rest needles)
           (multiple-value-bind (code out err) (run-exe-octets args)
             (let ((err (rontolisp::%utf8-string err)))
               (is (= 1 code) "~A: exit ~D" err code)
               (is (= 1 (count #\Newline err)) "~A" err)
               (is (not (search ".gguf" err)) "~A" err)
               (dolist (n needles) (is (contains err n) "~S does not say ~S" err n))
               out))))
    (let ((out (refused (list "tokenize" (gpt2-file) "Hello" (octets "ab" #xff "cd"))
                        "text 2: expected UTF-8 text" "offset 2")))
      (is (= 1 (count 10 out)) "the first text's ids come first"))
    (let ((texts (tmp-path "bad-texts.txt")))
      (write-octets-file texts (octets "Hello" 10 "ab" #xff 10))
      (refused (list "tokenize" (gpt2-file) "--file" texts)
               (format nil "~A line 2: expected UTF-8 text" texts))
      (refused (list "embed" (car (converted)) "--text-file" texts)
               (format nil "~A line 2: expected UTF-8 text" texts))
      (delete-file texts))
    (refused (list "embed" (car (converted)) "--text" (octets "ab" #xff))
             "--text: expected UTF-8 text" "offset 2")))

(test tokenize-command-answers-each-line-of-a-pipe
  ;; --file - was refused; a pipe's lines were answered at its end.
  (let ((file (encoder-file "s1-pico" :f32)))
    (check-co-process (list "tokenize" file "--file" "-") '("Hello world" "" "a third line"))
    (check-co-process (list "tokenize" file "--file" "-" "--json") '("Hello world" "again"))))

;;; `tokenize --json' writes each line from C (WRITE-TOKENS-JSON); the
;;; bytes must stay those of WRITE-JSON on the same values.

(defun tokens-json-reference (tok octets ids offsets count stream)
  "The line of `tokenize --json' as WRITE-JSON writes it: the reference
WRITE-TOKENS-JSON is held to."
  (text::write-json
   (list* :object (cons "text" (rontolisp::%utf8-string octets))
          (cons "ids" ids)
          (cons "pieces" (map 'vector (lambda (id) (model:token-piece tok id)) ids))
          (cons "offsets" (coerce (loop for i from 0 below (length offsets) by 2
                                        collect (vector (aref offsets i) (aref offsets (1+ i))))
                                  'vector))
          (and count (list (cons "count" count))))
   stream)
  (text::write-newline stream))

(defun hostile-token-lines (tok)
  "(octets ids offsets [count]) lists: texts the tokenizer encodes (controls,
quotes, backslashes, U+2028, bidirectional controls, C1, special tokens,
empty, very long, every character up to U+FFFF and some above), and,
with made-up ids and offsets, every piece of the vocabulary and bytes
that are not UTF-8 (which the writer takes though the tokenizer
refuses them)."
  (let* ((codes (append (loop for c from 0 below #x10000
                              unless (<= #xd800 c #xdfff) collect c)
                        '(#x10000 #x1f642 #x10ffff)))
         (texts (list "" "\"" "\\" "a\"b\\c\"\\\"" (format nil "tab	nl~%cr~C" #\Return)
                      (map 'string #'code-char (loop for c from 0 below 32 collect c))
                      (map 'string #'code-char '(127 #x80 #x85 #x9b #x9f #xa0 #x2028 #x2029
                                                 #x061c #x200e #x200f #x202a #x202e #x2066
                                                 #x2069 #xfeff #xfffd))
                      "[CLS] special [MASK] <|endoftext|> [SEP]" "<|endoftext|>"
                      "café naïve Ωμέγα 日本語 🙂"
                      (make-string 100000 :initial-element #\")
                      (map 'string #'code-char codes)))
         (lines (loop for text in texts
                      for octets = (rontolisp::%utf8-octets text)
                      collect (multiple-value-bind (ids offsets)
                                  (model:tokenize-octets tok octets t t nil t)
                                (list octets ids offsets))))
         (n (model:vocabulary-size tok))
         (every-id (make-array n :element-type 'fixnum))
         (their-offsets (make-array (* 2 n) :element-type 'fixnum)))
    (dotimes (i n) (setf (aref every-id i) i
                         (aref their-offsets (* 2 i)) i
                         (aref their-offsets (1+ (* 2 i))) (- (expt 2 40) i)))
    (flet ((none () (make-array 0 :element-type 'fixnum)))
      (append lines
              (list (list (octets "pieces") every-id their-offsets)
                    (list (octets "bad " #xff " " #xc3 " " #xc0 #xaf " " #xed #xa0 #x80 " "
                                  #xf4 #x90 #x80 #x80 " " #x80 "é" #xc3)
                          (none) (none))
                    ;; the shortest line and the longest count
                    (list (octets) (none) (none) most-positive-fixnum))))))

(test tokenize-json-line-equals-write-json
  ;; The C writer against the Lisp one, to a file (bytes written at once)
  ;; and to a string stream (the string of those bytes), with and without
  ;; "count"; after text before it, a line still ends where FRESH-LINE
  ;; knows it does (the stream's column follows the bytes).
  (let* ((tok (model:load-tokenizer (gpt2-file)))
         (lines (hostile-token-lines tok))
         (ours (tmp-path "tokens-c.jsonl"))
         (theirs (tmp-path "tokens-lisp.jsonl")))
    (with-open-file (s ours :direction :output :if-exists :supersede :external-format :utf-8)
      (loop for (octets ids offsets count) in lines for i from 0
            do (write-string "> " s)
               (command-line::write-tokens-json tok octets ids offsets
                                                (or count (and (oddp i) i)) s)
               (fresh-line s)))
    (with-open-file (s theirs :direction :output :if-exists :supersede :external-format :utf-8)
      (loop for (octets ids offsets count) in lines for i from 0
            do (write-string "> " s)
               (tokens-json-reference tok octets ids offsets (or count (and (oddp i) i)) s)))
    (let ((a (file-octets ours)) (b (file-octets theirs)))
      (is (plusp (length a)))
      (is (equalp a b) "the C line differs from WRITE-JSON's at byte ~A"
          (mismatch a b)))
    (loop for (octets ids offsets count) in lines for i from 0
          do (is (string= (with-output-to-string (s)
                            (tokens-json-reference tok octets ids offsets (or count i) s))
                          (with-output-to-string (s)
                            (command-line::write-tokens-json tok octets ids offsets
                                                             (or count i) s)))
                 "line ~D to a string stream" i))
    (delete-file ours)
    (delete-file theirs)))

(test tokenize-json-line-refuses-ids-it-cannot-write
  (let ((tok (model:load-tokenizer (gpt2-file)))
        (octets (octets "x")))
    (flet ((fixnums (&rest xs) (make-array (length xs) :element-type 'fixnum :initial-contents xs)))
      (signals rontolisp:index-error
        (command-line::write-tokens-json tok octets (fixnums 87) (fixnums 0) nil
                                         (make-broadcast-stream)))
      (signals rontolisp:index-error
        (command-line::write-tokens-json tok octets (fixnums (model:vocabulary-size tok))
                                         (fixnums 0 1) nil (make-broadcast-stream)))
      (signals rontolisp:index-error
        (command-line::write-tokens-json tok octets (fixnums -1) (fixnums 0 1) nil
                                         (make-broadcast-stream))))))

(test tokenize-command-file-streams
  (let ((file (gpt2-file))
        (texts (tmp-path "texts.txt"))
        (empty (write-file-string (tmp-path "empty.txt") "")))
    (write-file-string texts (format nil "Hello world~%~%This is a test"))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--file" texts))
      (is (= 0 code) "~A" err)
      (is (equal (list "15496 995" "" "1212 318 257 1332") (split-lines out)) "~S" out))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--file" empty))
      (is (= 0 code) "~A" err)
      (is (string= "" out)))
    ;; a line that is not UTF-8: its line and byte offset, after the lines before it
    (write-octets-file texts (octets "ok" 10 "ab" #xff "c" 10))
    (multiple-value-bind (code out err) (run-exe-octets (list "tokenize" file "--file" texts))
      (is (= 1 code))
      (let ((err (map 'string #'code-char err)))
        (is (contains err "line 2") "~A" err)
        (is (contains err "offset 2") "~A" err))
      (is (= 1 (count 10 out))))
    ;; not UTF-8 in an argument
    (multiple-value-bind (code out err) (run-exe-octets (list "tokenize" file (octets "abc" #xc3)))
      (declare (ignore out))
      (is (= 1 code))
      (is (contains (map 'string #'code-char err) "offset 3")))
    ;; many lines stream through (the line buffer is bounded by the longest line)
    (with-open-file (s texts :direction :output :if-exists :supersede)
      (dotimes (i 20000) (format s "Hello world ~D~%" i)))
    (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--file" texts))
      (is (= 0 code) "~A" err)
      (is (= 20000 (count #\Newline out))))
    (delete-file texts)
    (delete-file empty)))

(test tokenize-command-file-prints-megabytes-as-the-per-line-reference
  ;; The ids of a file of lines are printed from C, newlines unflushed and
  ;; the lines' names made only on failure: over megabytes of mixed lines
  ;; (scripts, tabs, blank lines, special tokens, a long line) every form
  ;; is byte for byte what FORMAT per id prints for each line.
  (let* ((file (gpt2-file))
         (tok (model:load-tokenizer file))
         (texts (tmp-path "megabytes.txt"))
         (samples (list "Hello world" "" (format nil "tab~Cand  spaces  " #\Tab)
                        (format nil "caf~C na~Cve ~C~C~C" (code-char #xe9) (code-char #xef)
                                (code-char #x65e5) (code-char #x672c) (code-char #x8a9e))
                        "<|endoftext|> after a special token" "(defun f (x) (* x 2))"
                        (format nil "emoji ~C and digits 1234567890" (code-char #x1f600))))
         (lines (loop for i from 0 below 100000
                      collect (if (= i 777)
                                  (make-string 70000 :initial-element #\z)
                                  (format nil "~A ~D" (nth (mod i (length samples)) samples) i)))))
    (with-open-file (s texts :direction :output :if-exists :supersede :external-format :utf-8)
      (dolist (l lines) (write-line l s)))
    (is (< 2000000 (with-open-file (s texts :element-type '(unsigned-byte 8)) (file-length s))))
    (let ((ids (mapcar (lambda (l) (coerce (model:tokenize tok l) 'list)) lines)))
      (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--file" texts))
        (is (= 0 code) "~A" err)
        (is (string= (format nil "~:{~{~D~^ ~}~%~}" (mapcar #'list ids)) out)))
      (multiple-value-bind (code out err)
          (run-exe (list "tokenize" file "--ids" "--show-count" "--file" texts))
        (is (= 0 code) "~A" err)
        (is (string= (format nil "~:{[~{~D~^, ~}]~%Total number of tokens: ~D~%~}"
                             (mapcar (lambda (l) (list l (length l))) ids))
                     out)))
      (multiple-value-bind (code out err) (run-exe (list "tokenize" file "--json" "--file" texts))
        (is (= 0 code) "~A" err)
        (let ((objects (mapcar #'yason:parse (split-lines out))))
          (is (= (length lines) (length objects)))
          (is (every (lambda (o l i) (and (string= l (gethash "text" o))
                                          (equal i (coerce (gethash "ids" o) 'list))))
                     objects lines ids)))))
    (delete-file texts)))

(test embed-text-equals-embed-tokens
  (let* ((file (car (converted)))
         (ids (model:tokenize (model:load-tokenizer file) "Hello world"))
         (list (format nil "~{~D~^,~}" (coerce ids 'list))))
    (multiple-value-bind (code a err) (run-exe (list "embed" file "--text" "Hello world" "--pooling" "mean"))
      (is (= 0 code) "~A" err)
      (multiple-value-bind (code b err) (run-exe (list "embed" file "--tokens" list "--pooling" "mean"))
        (is (= 0 code) "~A" err)
        (is (string= a b))
        (is (plusp (length a)))))
    (let ((texts (write-file-string (tmp-path "texts.txt") (format nil "Hello world~%ab~%"))))
      (multiple-value-bind (code out err)
          (run-exe (list "embed" file "--text-file" texts "--pooling" "cls" "--json"))
        (is (= 0 code) "~A" err)
        (let ((lines (split-lines out)))
          (is (= 2 (length lines)))
          (is (equalp ids (coerce (gethash "tokens" (yason:parse (first lines))) 'vector)))))
      (write-file-string texts "")
      (multiple-value-bind (code out err) (run-exe (list "embed" file "--text-file" texts))
        (declare (ignore out))
        (is (= 1 code))
        (is (contains err "empty")))
      (delete-file texts))))

(test convert-refuses-a-tokenizer-of-another-kind
  ;; The converter reads tokenizer.json with the same reader: a GGUF file
  ;; that claims GPT-2's tokenizer for another kind is never written.
  (let ((base (tmp-path "laya-base")))
    (rontolisp:write-random-laya base "s1-pico")
    (loop for (edit . needles)
            in (list (list (lambda (d) (setf (gethash "pre_tokenizer" d) (obj "type" "Metaspace")) d)
                           "tokenizer.json" "pre_tokenizer" "Metaspace")
                     (list (lambda (d) (setf (aref (gethash "merges" (gethash "model" d)) 0) "! zz") d)
                           "tokenizer.json" "zz"))
          do (let ((dir (tmp-path "laya")) (out (tmp-path "kind.gguf")))
               (sh "cp -r \"$1\" \"$2\"" base dir)
               (edit-json (concatenate 'string dir "/tokenizer/tokenizer.json") edit)
               (multiple-value-bind (code out-text err) (run-exe (list "convert" dir out))
                 (declare (ignore out-text))
                 (is (= 1 code) "exit ~A: ~A" code err)
                 (is (every (lambda (n) (contains err n)) needles) "~S in ~A" needles err)
                 (is (not (probe-file out))))
               (sh "rm -rf \"$1\"" dir)))
    (sh "rm -rf \"$1\"" base)))

(test tokenize-from-several-threads
  ;; One tokenizer shared by threads (its piece cache too) answers each
  ;; the same ids as one thread alone.
  (let* ((tok (model:load-tokenizer (gpt2-file)))
         (texts (loop for i below 200
                      collect (format nil "thread text ~D: ~A" i (nth (mod i (length *tok-texts*))
                                                                        *tok-texts*))))
         (expected (mapcar (lambda (text) (model:tokenize tok text)) texts))
         (threads (loop repeat 4
                        collect (mp:process-run-function
                                 "tokenize"
                                 (lambda ()
                                   (loop repeat 5
                                         always (every (lambda (text ids)
                                                         (equalp ids (model:tokenize tok text)))
                                                       texts expected)))))))
    (is (every #'identity (mapcar #'mp:process-join threads)))))

(test tokenizer-files-with-wildcard-characters-in-their-names
  ;; OPEN would take "*" and "[" for wildcards: the files are opened by
  ;; their bytes, as the C readers open theirs.
  (let* ((texts (tmp-path "we*ird[1].txt"))
         (json (tmp-path "tok*[2].json")))
    (sh "printf 'Hello world\\n' > \"$1\" && cp \"$2\" \"$3\"" texts (cdr (converted)) json)
    (multiple-value-bind (code out err) (run-exe (list "tokenize" (gpt2-file) "--file" texts))
      (is (= 0 code) "~A" err)
      (is (string= (format nil "15496 995~%") out)))
    (is (equalp (model:tokenize (model:load-tokenizer (cdr (converted))) "ab")
                (model:tokenize (model:load-tokenizer json) "ab")))
    (sh "rm -f \"$1\" \"$2\"" texts json)))

(test bench-tokenizer-reports-its-throughput
  ;; `bench --tokenizer FILE --text-file F': the table counts the lines'
  ;; bytes and tokens (the ids TOKENIZE gives them, without bos/eos) and
  ;; has a cold and a warm row; the two options go together and alone.
  (let* ((texts (list "Hello world" (format nil "  spaces   and tabs~Chere" #\Tab)
                      (format nil "caf~C ~C~C 123" (code-char #xe9) (code-char #x65e5) (code-char #x672c))
                      "don't STOP"))
         (file (write-file-string (tmp-path "bench-texts.txt") (format nil "~{~A~%~}" texts)))
         (tok (model:load-tokenizer (gpt2-file)))
         (bytes (reduce #'+ texts :key (lambda (s) (length (rontolisp::%utf8-octets s)))))
         (tokens (reduce #'+ texts :key (lambda (s) (length (model:tokenize tok s :add-special nil))))))
    (multiple-value-bind (code out err)
        (run-exe (list "bench" "--tokenizer" (gpt2-file) "--text-file" file "--iters" "2"))
      (is (eql 0 code) "~A" err)
      (is (contains out (format nil "4 lines, ~D bytes, ~D tokens" bytes tokens)) "~A" out)
      (is (contains out "cold "))
      (is (contains out "warm (2)"))
      (is (contains out "MB/s")))
    (dolist (args (list (list "bench" "--tokenizer" (gpt2-file))
                        (list "bench" "--text-file" file)
                        (list "bench" "--tokenizer" (gpt2-file) "--text-file" file "--model" (gpt2-file))))
      (is (eql 2 (run-exe args)) "~S" args))
    (let ((empty (write-file-string (tmp-path "bench-empty.txt") "")))
      (multiple-value-bind (code out err)
          (run-exe (list "bench" "--tokenizer" (gpt2-file) "--text-file" empty))
        (declare (ignore out))
        (is (eql 1 code))
        (is (contains err "empty file") "~A" err))
      (delete-file empty))
    (delete-file file)))
