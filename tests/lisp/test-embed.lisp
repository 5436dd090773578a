;;;; test-embed.lisp - `rontolisp embed' as llama-embedding runs it: the
;;;; pooling the file names, the normalization of llama.cpp's
;;;; common_embd_normalize (held bit for bit to llama.cpp's own function,
;;;; run in a child process), and a llama-gguf-split set opened by its first
;;;; shard (embed, model:load, bench --model).

(in-package "RONTOLISP-TESTS")

(def-suite embed :in all :description "embed's pooling, normalization and shard sets.")
(in-suite embed)

(defun llama-common-in-child (symbol per-case cases)
  "Call SYMBOL (a mangled C++ name) of llama.cpp's libllama-common (of
build/cache/llama/) in a child rontolisp on each of CASES, a list of
readable data: PER-CASE is the source of a form run per case with FN the
function's address and C the case, which prints one line of integers
((FLOATS BITS) there is a fresh C float array of the single-floats BITS).
Answers the lines as lists of integers, or NIL when the library is
missing."
  (let ((dir (command-line::llama-library-directory)))
    (when (and dir (probe-file (merge-pathnames "libllama-common.so" dir)))
      (let ((script (write-file-string
                     (tmp-path "llama-common.lisp")
                     (format nil "(si:load-foreign-module ~S)
(defun floats (bits)
  (let ((p (ffi:allocate-foreign-object :float (length bits))))
    (loop for b in bits for i from 0 do (setf (ffi:deref-array p '(:array :uint32-t) i) b))
    p))
(let ((fn (si:find-foreign-symbol ~S :default :pointer-void 0)))
  (dolist (c '~S)
    ~A))~%"
                             (namestring (merge-pathnames "libllama-common.so" dir))
                             symbol cases per-case))))
        (unwind-protect
             (multiple-value-bind (code out err) (run-exe (list "script" script))
               (assert (eql 0 code) () "the child calling ~A failed: ~A" symbol err)
               (mapcar (lambda (line)
                         (with-input-from-string (s line)
                           (loop for n = (read s nil) while n collect n)))
                       (split-lines out)))
          (delete-file script))))))

(defun llama-normalize-in-child (cases)
  "llama.cpp's common_embd_normalize on each of CASES, a list of (norm
single-float-vector), run in a child (LLAMA-COMMON-IN-CHILD): a list of the
output vectors' bits, or NIL when the library is missing."
  (llama-common-in-child
   "_Z21common_embd_normalizePKfPfii"
   "(destructuring-bind (norm bits) c
      (let ((out (floats bits)))
        (si:call-cfun fn :void '(:pointer-void :pointer-void :int :int)
                      (list (floats bits) out (length bits) norm))
        (format t \"~{~D~^ ~}~%\" (loop for i below (length bits)
                                       collect (ffi:deref-array out '(:array :uint32-t) i)))))"
   (loop for (norm v) in cases collect (list norm (map 'list #'single-bits v)))))

(defun llama-similarity-in-child (pairs)
  "llama.cpp's common_embd_similarity_cos on each of PAIRS, a list of two
single-float vectors of one length, run in a child: a list of the answers'
bits, or NIL when the library is missing."
  (mapcar #'first
          (llama-common-in-child
           "_Z26common_embd_similarity_cosPKfS0_i"
           "(destructuring-bind (a b) c
      (format t \"~D~%\" (command-line::%single-bits
                           (si:call-cfun fn :float '(:pointer-void :pointer-void :int)
                                         (list (floats a) (floats b) (length a))))))"
           (loop for (a b) in pairs
                 collect (list (map 'list #'single-bits a) (map 'list #'single-bits b))))))

(test embed-normalize-matches-llama-cpp-bit-for-bit
  "NORMALIZE-EMBEDDING is llama.cpp's common_embd_normalize: none, max-abs,
taxicab, Euclidean and p-norms, on random vectors and on zeros."
  (let* ((state (make-random-state 20261202)) ; ECL seeds a state from an integer
         (vectors (list* (make-array 64 :element-type 'single-float :initial-element 0.0)
                         (loop for scale in '(1.0 0.01 30.0)
                               collect (vec-random-vector 64 scale state))))
         (cases (loop for norm in '(-1 0 1 2 3 7)
                      append (loop for v in vectors collect (list norm v))))
         (reference (llama-normalize-in-child cases)))
    (if (null reference)
        (skip-reference "llama.cpp's libllama-common is missing (run sh tests/fetch-llama-lib.sh)")
        (loop for (norm v) in cases
              for ref in reference
              do (is (equal ref (map 'list #'single-bits (model::normalize-embedding v norm)))
                     "norm ~D differs from common_embd_normalize" norm)))))

(test embed-pools-as-the-file-says-and-normalizes-as-llama
  "Without --pooling, embed pools as modern-bert.pooling_type says (none
without the key; rank refused by name); every line is scaled to unit
length unless --normalize says otherwise."
  (let* ((file (encoder-file "s1-pico" :f32))
         (encoder (model:load file))
         (ids '(2 17 9 3))
         (tokens "2,17,9,3"))
    ;; encoder-file's files name CLS pooling (2), as convert writes them.
    (is (eql 2 (gguf:value (model::encoder-file encoder) "modern-bert.pooling_type")))
    (let ((j (first (embed-json (list file "--tokens" tokens)))))
      (is (string= "cls" (gethash "pooling" j)))
      (is (eql 2 (gethash "normalize" j)))
      (is (equalp (model::normalize-embedding (model:encode encoder ids :pooling :cls) 2)
                  (json-floats (elt (gethash "embeddings" j) 0))))
      (let ((row (json-floats (elt (gethash "embeddings" j) 0))))
        (is (< (abs (- 1d0 (sqrt (loop for x across row sum (* (float x 1d0) x))))) 1d-6))))
    ;; --pooling and --normalize override: the raw hidden states.
    (let ((j (first (embed-json (list file "--tokens" tokens "--pooling" "none" "--normalize" "none")))))
      (is (equalp (model::embedding-rows (model:encode encoder ids))
                  (map 'vector #'json-floats (gethash "embeddings" j)))))
    ;; last: the last token's row.
    (let ((j (first (embed-json (list file "--tokens" tokens "--pooling" "last" "--normalize" "-1"))))
          (all (model:encode encoder ids)))
      (is (equalp (model::matrix-row all 3) (json-floats (elt (gethash "embeddings" j) 0)))))
    ;; Without the key: none (llama.cpp's default); rank: refused, naming the key.
    (let ((bare (tmp-path "bare.gguf")) (rank (tmp-path "rank.gguf")))
      (unwind-protect
           (progn
             (is (eql 0 (run-exe (list "edit" file bare "--remove" "modern-bert.pooling_type"))))
             (let ((j (first (embed-json (list bare "--tokens" tokens)))))
               (is (string= "none" (gethash "pooling" j)))
               (is (= 4 (length (gethash "embeddings" j)))))
             (is (eql 0 (run-exe (list "edit" file rank "--set" "modern-bert.pooling_type=4"))))
             (multiple-value-bind (code out err) (run-exe (list "embed" rank "--tokens" tokens))
               (is (eql 1 code))
               (is (string= "" out))
               (is (contains err "modern-bert.pooling_type") "~A" err)
               (is (= 1 (count #\Newline err)) "~A" err))
             (is (eql 0 (run-exe (list "embed" rank "--tokens" tokens "--pooling" "mean")))))
        (ignore-errors (delete-file bare))
        (ignore-errors (delete-file rank))))
    ;; Bad values are bad usage.
    (dolist (bad '("-2" "x" "1001"))
      (is (eql 2 (run-exe (list "embed" file "--tokens" tokens "--normalize" bad))) "~A" bad))))

(test embed-load-and-bench-open-a-shard-set-by-its-first-shard
  "embed, model:load and bench --model given the first shard of a
llama-gguf-split set read every shard: the same numbers as the whole file."
  (let* ((whole (encoder-file "s1-pico" :f32))
         (prefix (tmp-path "pico-set"))
         (names nil))
    (unwind-protect
         (progn
           (is (eql 0 (run-exe (list "split" whole prefix "--max-tensors" "8"))))
           (setf names (directory (concatenate 'string prefix "-*-of-*.gguf")))
           (is (< 1 (length names)))
           (let ((first (namestring (first (sort (mapcar #'namestring names) #'string<))))
                 (ids '(5 9 200 17)))
             (is (equalp (model:encode (model:load whole) ids)
                         (model:encode (model:load first) ids)))
             (multiple-value-bind (code a err) (run-exe (list "embed" whole "--tokens" "5,9,200,17"))
               (is (eql 0 code) "~A" err)
               (multiple-value-bind (code b err) (run-exe (list "embed" first "--tokens" "5,9,200,17"))
                 (is (eql 0 code) "~A" err)
                 (is (string= a b))))
             (multiple-value-bind (code out err)
                 (run-exe (list "bench" "--model" first "--tokens" "4"))
               (is (eql 0 code) "~A" err)
               (is (contains out "F32") "~A" out))))
      (dolist (n names) (ignore-errors (delete-file n))))))

(test embed-cosine-similarity-matches-llama-cpp-bit-for-bit
  "COSINE-SIMILARITY (json+'s matrix) is llama.cpp's
common_embd_similarity_cos: random vectors, a vector with itself, zeros."
  (let* ((state (make-random-state 20261206))
         (zero (make-array 64 :element-type 'single-float :initial-element 0.0))
         (vectors (loop for scale in '(1.0 0.01 30.0) collect (vec-random-vector 64 scale state)))
         (pairs (list* (list zero zero) (list zero (first vectors))
                       (loop for a in vectors append (loop for b in vectors collect (list a b)))))
         (reference (llama-similarity-in-child pairs)))
    (if (null reference)
        (skip-reference "llama.cpp's libllama-common is missing (run sh tests/fetch-llama-lib.sh)")
        (loop for (a b) in pairs
              for ref in reference
              do (is (eql ref (single-bits (command-line::cosine-similarity a b)))
                     "~A against common_embd_similarity_cos's ~A"
                     (command-line::cosine-similarity a b) ref)))))

;;; llama-embedding's output formats: --embd-output-format, --embd-separator,
;;; --npy, and the JSON lines' index and text.

(defun embed-output (args)
  "The standard output of `rontolisp embed ARGS' (exit 0 checked)."
  (multiple-value-bind (code out err) (run-exe (list* "embed" args))
    (is (eql 0 code) "embed ~{~A~^ ~}: ~A" args err)
    out))

(defun float-rows (rows)
  "JSON rows (lists of numbers) as single-float vectors."
  (map 'list #'json-floats rows))

(test embed-writes-llama-embedding-output-formats
  "--embd-separator splits --text into inputs; array, json and json+ hold
the rows of --json (the same floats), laid out as llama-embedding lays
them out; json+ adds the cosine similarity of every pair of rows when
there is more than one input; each JSON line names its input's index and
text (null for token ids)."
  (let* ((file (encoder-file "s1-pico" :f32))
         (args (list file "--text" "a b<#>c d<#>a b" "--embd-separator" "<#>" "--pooling" "mean"))
         (lines (embed-json args))
         (rows (mapcar (lambda (j) (json-floats (elt (gethash "embeddings" j) 0))) lines)))
    (is (equal '(0 1 2) (mapcar (lambda (j) (gethash "index" j)) lines)))
    (is (equal '("a b" "c d" "a b") (mapcar (lambda (j) (gethash "text" j)) lines)))
    (is (same-bits-p (first rows) (third rows)))
    (let ((array (yason:parse (embed-output (append args '("--embd-output-format" "array"))))))
      (is (= 3 (length array)))
      (is (every #'same-bits-p rows (float-rows array))))
    (let ((text (embed-output (append args '("--embd-output-format" "json")))))
      (is (eql 0 (search (format nil "{~%  \"object\": \"list\",~%  \"data\": [~%    {~%      ~
\"object\": \"embedding\",~%      \"index\": 0,~%      \"embedding\": [")
                         text))
          "~A" text)
      (is (contains text (format nil "]~%    },~%    {~%      \"object\": \"embedding\",~%      ~
\"index\": 1,~%")) "~A" text)
      (let ((end (format nil "]~%    }~%  ]~%}~%")))
        (is (string= end (subseq text (- (length text) (length end)))) "~A" text))
      (let ((j (yason:parse text)))
        (is (equal "list" (gethash "object" j)))
        (is (null (gethash "cosineSimilarity" j)))
        (is (equal '(0 1 2) (mapcar (lambda (d) (gethash "index" d)) (gethash "data" j))))
        (is (every #'same-bits-p rows
                   (float-rows (mapcar (lambda (d) (gethash "embedding" d)) (gethash "data" j)))))))
    (let* ((text (embed-output (append args '("--embd-output-format" "json+"))))
           (matrix (gethash "cosineSimilarity" (yason:parse text))))
      (is (contains text (format nil "}~%  ],~%  \"cosineSimilarity\": [~%    [")) "~A" text)
      (is (= 3 (length matrix)))
      (loop for a in rows for mrow in matrix
            do (loop for b in rows for m in mrow
                     do (let ((cos (/ (loop for x across a for y across b sum (* (float x 1d0) y))
                                      (sqrt (loop for x across a sum (* (float x 1d0) x)))
                                      (sqrt (loop for y across b sum (* (float y 1d0) y))))))
                          (is (< (abs (- cos m)) 1d-6) "~A against ~A" m cos))))
      (is (= 1 (first (first matrix)) (third (first matrix)))))
    ;; One input: json+ has no matrix (llama-embedding prints none).
    (is (null (gethash "cosineSimilarity"
                       (yason:parse (embed-output (list file "--text" "a b" "--pooling" "mean"
                                                        "--embd-output-format" "json+"))))))
    ;; Token ids have no text; raw is the default's lines.
    (let ((j (first (embed-json (list file "--tokens" "2,17,9,3")))))
      (is (eql 0 (gethash "index" j)))
      (multiple-value-bind (text present) (gethash "text" j)
        (is (and present (null text)) "~S" text)))
    (is (string= (embed-output (list file "--tokens" "2,17,9,3"))
                 (embed-output (list file "--tokens" "2,17,9,3" "--embd-output-format" "raw"))))
    (dolist (bad (list (list "--json" "--embd-output-format" "json")
                       (list "--tokens" "2,3" "--embd-separator" ",")
                       (list "--text" "a" "--embd-separator" "")
                       (list "--text" "a" "--embd-output-format" "yaml")))
      (is (eql 2 (run-exe (list* "embed" file (if (member "--tokens" bad :test #'string=)
                                                   bad
                                                   (append bad (unless (member "--text" bad :test #'string=)
                                                                 (list "--text" "a")))))))
          "~{~A~^ ~}" bad))))

(test embed-npy-loads-in-numpy
  "--npy FILE writes every row (per token with pooling none, across inputs)
as a float32 array of shape (rows, d) that numpy.load reads back bit for
bit."
  (let* ((file (encoder-file "s1-pico" :f32))
         (npy (tmp-path "rows.npy"))
         (args (list file "--text" "a b|c" "--embd-separator" "|" "--pooling" "none"))
         (rows (loop for j in (embed-json args)
                     append (float-rows (coerce (gethash "embeddings" j) 'list))))
         (python (gguf-py-python)))
    (unwind-protect
         (progn
           (embed-output (append args (list "--npy" npy)))
           (if (null python)
               (skip-reference "no python3 with numpy (tests/ensure-deps.sh installs python3-numpy)")
               (multiple-value-bind (code out)
                   (sh "\"$1\" -c 'import sys, numpy
a = numpy.load(sys.argv[1])
print(a.dtype, *a.shape)
print(*a.view(\"<u4\").ravel())' \"$2\"" python npy)
                 (is (eql 0 code) "~A" out)
                 (let ((lines (split-lines out)))
                   (is (equal (format nil "float32 ~D 64" (length rows)) (first lines)))
                   (is (equal (format nil "~{~D~^ ~}"
                                      (loop for r in rows append (map 'list #'single-bits r)))
                              (second lines)))))))
      (ignore-errors (delete-file npy)))))
