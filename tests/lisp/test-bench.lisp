;;;; test-bench.lisp - `rontolisp bench' runs and its output (the table and
;;;; the JSON) has the documented shape; speed is never checked.

(in-package "RONTOLISP-TESTS")

(def-suite bench :in all :description "The bench command.")
(in-suite bench)

(defun vec-json-file (path)
  (with-open-file (s path) (yason:parse s)))

(test bench-command-smoke
  (let ((json (tmp-path "bench.json")))
    (multiple-value-bind (code out err)
        (run-exe (list "bench" "--shape" "64x192" "--shape" "5x40" "--iters" "2"
                       "--threads" "2" "--json" json))
      (is (= 0 code) "stderr: ~A" err)
      (dolist (s '("64x192" "5x40" "f32" "q8_0" "scalar" "GB/s" "probe%" "read bandwidth"
                   "quantize"))
        (is (contains out s) "~S missing from ~A" s out))
      (is (contains err "bench:") "no progress on stderr")
      ;; no JSON file is a failure of its own, not the JSON's checks dropped
      (is (probe-file json) "bench --json ~A wrote no file" json)
      (when (probe-file json)
        (let ((j (vec-json-file json)))
          (dolist (k '("machine" "read_bandwidth" "quantize" "matrices" "threads" "iters"
                       "matmul"))
            (is-true (nth-value 1 (gethash k j)) "key ~S missing" k))
          (is (= 2 (gethash "threads" j)))
          (is (zerop (length (gethash "matmul" j))) "matmul rows only in the standard run")
          (let ((ms (gethash "matrices" j)))
            (is (= 2 (length ms)))
            (let ((big (first ms)) (odd (second ms)))
              (is (string= "64x192" (gethash "name" big)))
              (is (= 13056 (gethash "q8_0_bytes" big)))
              (is (= 5 (length (gethash "runs" big))))
              (dolist (run (gethash "runs" big))
                (is (realp (gethash "us_per_call" run)))
                (is (realp (gethash "weight_gbps" run)))
                (is (member (gethash "format" run) '("f32" "q8_0") :test #'string=)))
              ;; a row of 40 has no Q8_0 form: measured as null
              (is (null (gethash "q8_0_bytes" odd)))
              (dolist (run (gethash "runs" odd))
                (if (string= "f32" (gethash "format" run))
                    (is (realp (gethash "us_per_call" run)))
                    (progn (is (null (gethash "us_per_call" run)))
                           (is-true (nth-value 1 (gethash "us_per_call" run))))))))
          (delete-file json))))))

(defun bench-at (cache args)
  "Run `rontolisp bench ARGS' with XDG_CACHE_HOME set to CACHE; answer
(values exit-status stdout stderr)."
  (apply #'sh "c=$1; shift; XDG_CACHE_HOME=\"$c\" exec \"$0\" bench \"$@\"" cache args))

(defun bench-bandwidth-line (text)
  "The read bandwidth line of a bench table TEXT, or NIL."
  (find-if (lambda (l) (eql 0 (search "read bandwidth" l))) (split-lines text)))

(test bench-no-probe-reports-the-cached-figure
  "A probe caches its figure under $XDG_CACHE_HOME/rontolisp/; --no-probe
skips the probe and reports that figure as cached (n/a before any probe,
or when the cache is another machine's)."
  (let* ((cache (format nil "~A/" (tmp-path "xdg")))
         (file (concatenate 'string cache "rontolisp/read-bandwidth.json"))
         (cheap '("--shape" "64x192" "--iters" "1" "--threads" "1")))
    (unwind-protect
         (progn
           (multiple-value-bind (code out err) (bench-at cache (append cheap '("--no-probe")))
             (is (= 0 code) "~A" err)
             (is (not (contains err "probing")) "~A" err)
             (is (contains (bench-bandwidth-line out) "not measured (--no-probe") "~A" out)
             (is (not (probe-file file))))
           (let ((measured
                   (multiple-value-bind (code out err) (bench-at cache cheap)
                     (is (= 0 code) "~A" err)
                     (is (contains err "probing read bandwidth"))
                     (is (contains (bench-bandwidth-line out) "(probe, ") "~A" out)
                     (bench-bandwidth-line out))))
             (is (probe-file file) "the probe cached nothing")
             (multiple-value-bind (code out err) (bench-at cache (append cheap '("--no-probe")))
               (is (= 0 code) "~A" err)
               (is (not (contains err "probing")) "~A" err)
               (let ((line (bench-bandwidth-line out)))
                 (is (contains line "(cached, measured ") "~A" line)
                 ;; the same figure as the probe's
                 (is (string= (subseq measured (search "):" measured))
                              (subseq line (search "):" line)))
                     "~A vs ~A" measured line))))
           ;; Another machine's figures are not this one's.
           (write-file-string file (rontolisp::replace-all (read-file-string file) "\"cores\": "
                                                      "\"cores\": 1000"))
           (multiple-value-bind (code out err) (bench-at cache (append cheap '("--no-probe")))
             (is (= 0 code) "~A" err)
             (is (contains (bench-bandwidth-line out) "not measured") "~A" out)))
      (sh "rm -rf \"$1\"" cache))))

(test bench-json-without-a-file-writes-stdout
  "--json with no FILE (or -) puts the JSON alone on stdout, as every
other --json does, and the table on stderr; --json FILE still writes FILE."
  (let ((cache (format nil "~A/" (tmp-path "xdg"))))
    (unwind-protect
         (dolist (json '(("--json") ("--json" "-") ("--json=-")))
           ;; --json last, then first (the next argument an option, not its FILE)
           (dolist (args (list (append '("--shape" "5x64" "--iters" "1" "--no-probe") json)
                               (append json '("--shape" "5x64" "--iters" "1" "--no-probe"))))
             (multiple-value-bind (code out err) (bench-at cache args)
               (is (= 0 code) "~S: ~A" args err)
               (let ((j (ignore-errors (yason:parse out))))
                 (is (hash-table-p j) "~S: stdout is not one JSON value: ~A" args out)
                 (when (hash-table-p j)
                   (is (string= "5x64" (gethash "name" (first (gethash "matrices" j)))))
                   (is (null (gethash "source" (gethash "read_bandwidth" j))))))
               (is (contains err "matrix (rows x cols)") "~S: no table on stderr: ~A" args err))))
      (sh "rm -rf \"$1\"" cache))))

(test bench-command-on-a-gguf-file
  (let ((path (tmp-path "bench.gguf"))
        (state (make-random-state t)))
    (gguf:write path (gguf:make-file
                      :tensors (list (list "a.weight" (vec-random-matrix 8 64 1.0 state))
                                     (list "b.weight" (rontolisp:quantize
                                                       (vec-random-matrix 4 96 1.0 state) 'q8-0))
                                     (list "c.weight" (rontolisp:make-float16-array
                                                       (vec-random-matrix 3 48 1.0 state)))
                                     (list "norm" (vec-random-vector 64 1.0 state)))))
    (unwind-protect
         (multiple-value-bind (code out err) (run-exe (list "bench" path "--iters" "1"))
           (is (= 0 code) "stderr: ~A" err)
           (dolist (s '("a.weight" "b.weight" "c.weight"))
             (is (contains out s)))
           (is (not (contains out "norm")) "a 1-D tensor was benchmarked"))
      (ignore-errors (delete-file path)))))

;;; The products in the file's own types (jobs/bench-products.lisp).

(defparameter *bench-product-types*
  '("Q4_0" "Q4_1" "Q5_0" "Q5_1" "Q8_0" "Q2_K" "Q3_K" "Q4_K" "Q5_K" "Q6_K" "IQ4_NL" "IQ4_XS")
  "Every quantized type `bench FILE' times in its own type, in id order (the
order of its Products rows).")

(test bench-file-times-every-type-in-its-own-type
  "`bench FILE' on a file of every quantized type and an f32 matrix: one
Products row per type and shape (two Q4_K tensors of one shape share a row,
counted 2; the f32 matrix has none), ours and f32 measured, ggml's too when
llama.cpp's library loads (else a line saying it was not found); the JSON's
products hold the same rows."
  (let ((path (tmp-path "bench-types.gguf"))
        (json (tmp-path "bench-types.json"))
        (state (make-random-state t)))
    (flet ((q (type) (rontolisp:quantize (vec-random-matrix 4 256 1.0 state) (string-downcase type))))
      (gguf:write path (gguf:make-file
                        :tensors (append (loop for type in *bench-product-types*
                                               collect (list (format nil "~(~A~).weight" type) (q type)))
                                         (list (list "again.weight" (q "Q4_K"))
                                               (list "plain.weight" (vec-random-matrix 3 64 1.0 state)))))))
    (unwind-protect
         (multiple-value-bind (code out err)
             (run-exe (list "bench" path "--iters" "2" "--no-probe" "--json" json))
           (is (= 0 code) "stderr: ~A" err)
           (let* ((at (search "Products in the file's own types" out))
                  (lines (and at (split-lines (subseq out at)))))
             (is-true at "no Products table: ~A" out)
             (is (or (find-if (lambda (l) (eql 0 (search "ggml: libggml-cpu-" l))) lines)
                     (find-if (lambda (l) (eql 0 (search "ggml: not found (" l))) lines))
                 "no ggml line: ~A" out)
             (dolist (type *bench-product-types*)
               (let ((rows (remove-if-not (lambda (l) (eql 0 (search (format nil "~A " type) l)))
                                          lines)))
                 (is (= 1 (length rows)) "~A: ~D rows in ~A" type (length rows) out)
                 (is (every (lambda (l) (search "4x256" l)) rows) "~A: ~A" type rows))))
           (is (contains err "bench: Q4_K 4x256: ours") "no progress: ~A" err)
           (is (probe-file json) "no JSON written")
           (when (probe-file json)
             (let* ((products (gethash "products" (vec-json-file json)))
                    (ggml (gethash "variant" (gethash "ggml" products)))
                    (rows (gethash "rows" products)))
               (is (equal *bench-product-types* (mapcar (lambda (r) (gethash "type" r)) rows))
                   "~S" (mapcar (lambda (r) (gethash "type" r)) rows))
               (dolist (r rows)
                 (let ((type (gethash "type" r)))
                   (is (= (if (string= type "Q4_K") 2 1) (gethash "tensors" r)) "~A" type)
                   (is (realp (gethash "ours_us" r)) "~A: ours not measured: ~A" type
                       (gethash "note" r))
                   (is (realp (gethash "f32_us" r)) "~A: f32 not measured" type)
                   (is (= (* 4 256 (rontolisp::ggml-type-bits type) 1/8) (gethash "weight_bytes" r))
                       "~A" type)
                   (when ggml
                     (is (realp (gethash "ggml_us" r)) "~A: ggml not measured: ~A" type
                         (gethash "note" r))
                     ;; ggml's product of the same bytes is ours within its bound
                     (is (null (gethash "note" r)) "~A: ~A" type (gethash "note" r)))))
               (is (equal '("q4_k.weight" "again.weight")
                          (gethash "names" (find "Q4_K" rows :key (lambda (r) (gethash "type" r))
                                                             :test #'string=))))))
           ;; the per-tensor table sends these types to the Products table
           (is (contains out "type Q4_K: timed in its own type under Products") "~A" out))
      (ignore-errors (delete-file path))
      (ignore-errors (delete-file json)))))

(test bench-file-without-ggml-says-not-found
  "Without llama.cpp's library (RL_LLAMA_LIB naming a directory that has
none) `bench FILE' still times ours and f32, says `ggml: not found' with
the directory it looked in, and leaves ggml's figures out (- and null)."
  (let ((path (tmp-path "bench-no-ggml.gguf"))
        (json (tmp-path "bench-no-ggml.json"))
        (state (make-random-state t)))
    (gguf:write path (gguf:make-file
                      :tensors (list (list "w" (rontolisp:quantize (vec-random-matrix 2 256 1.0 state)
                                                                   "q4_k")))))
    (unwind-protect
         (multiple-value-bind (code out err)
             (sh "f=$1; j=$2; RL_LLAMA_LIB=/nonexistent-llama/libllama.v0.5.0.so exec \"$0\" bench \"$f\" --iters 1 --no-probe --json \"$j\""
                 path json)
           (is (= 0 code) "stderr: ~A" err)
           (is (contains out "ggml: not found (no libggml-base.so in /nonexistent-llama/") "~A" out)
           (let ((row (find-if (lambda (l) (eql 0 (search "Q4_K " l))) (split-lines out))))
             (is-true row "no Q4_K row: ~A" out)
             (when row
               (is (contains row " - ") "ggml's column is not -: ~A" row)))
           (is (probe-file json) "no JSON written")
           (when (probe-file json)
             (let* ((products (gethash "products" (vec-json-file json)))
                    (r (first (gethash "rows" products))))
               (is (null (gethash "variant" (gethash "ggml" products))))
               (is (contains (gethash "note" (gethash "ggml" products)) "nonexistent-llama"))
               (is (realp (gethash "ours_us" r)))
               (is (null (gethash "ggml_us" r)))
               (is (null (gethash "ours_over_ggml" r))))))
      (ignore-errors (delete-file path))
      (ignore-errors (delete-file json)))))

(test bench-escapes-file-and-tensor-names
  ;; a newline in a name once broke the table's lines: names are escaped as
  ;; inspect prints them
  (let ((path (tmp-path (format nil "bench~%name.gguf")))
        (name (format nil "odd~%weight~C[2J" (code-char 27)))
        (state (make-random-state t)))
    (gguf:write path (gguf:make-file :tensors (list (list name (vec-random-matrix 4 64 1.0 state)))))
    (unwind-protect
         (multiple-value-bind (code out err) (run-exe (list "bench" path "--iters" "1" "--no-probe"))
           (is (= 0 code) "stderr: ~A" err)
           (is (contains out "odd\\nweight\\u001b[2J") "~A" out)
           (is (contains out "bench\\nname.gguf") "~A" out)
           (is (not (contains out name)) "~A" out)
           (is (not (contains err name)) "~A" err)
           (is (not (find (code-char 27) out)))
           ;; every table line starts with the escaped name or is a header
           (is (not (find-if (lambda (line) (and (plusp (length line)) (search "weight" line)
                                                 (not (search "odd" line))))
                             (split-lines out)))
               "~A" out))
      (ignore-errors (delete-file path)))))

(test bench-command-random-preset
  (if (find "convert" command-line::*commands* :key #'command-line::command-name :test #'string=)
      (multiple-value-bind (code out err) (run-exe '("bench" "--random" "s1-pico" "--iters" "1"))
        (is (= 0 code) "stderr: ~A" err)
        (is (contains out "random s1-pico model"))
        (is (contains out "blk.0.ffn_up.weight")))
      (skip "this build has no convert command")))

(test bench-command-usage-errors
  (dolist (args '(("bench" "--iters" "0") ("bench" "--iters") ("bench" "--bogus")
                  ("bench" "--random" "nothing") ("bench" "--shape" "12") ("bench" "a.gguf" "b.gguf")
                  ("bench" "a.gguf" "--shape" "4x32") ("bench" "--random" "s1-pico" "--breakdown")))
    (multiple-value-bind (code out err) (run-exe args)
      (declare (ignore out))
      (is (= 2 code) "~S exited ~D" args code)
      (is (contains err "usage:") "~S: no usage string" args)))
  (multiple-value-bind (code out) (run-exe '("bench" "--help"))
    (is (= 0 code))
    (is (contains out "--random"))))

(test bench-threads-limit-is-the-kernels
  "bench --threads takes what the kernels take, 1 to their limit, and
refuses more naming that limit."
  (let* ((limit (rontolisp::max-threads))
         (option (find "--threads" (command-line::command-options (command-line::find-command "bench"))
                       :key #'command-line::command-option-name :test #'string=))
         (parse (command-line::command-option-parser option)))
    (is (= limit (funcall parse "--threads" (princ-to-string limit))))
    (let ((e (handler-case (funcall parse "--threads" (princ-to-string (1+ limit)))
               (rontolisp:usage-error (e) e))))
      (is (typep e 'rontolisp:usage-error))
      (is (contains (princ-to-string e) (format nil "from 1 to ~D" limit))))
    (multiple-value-bind (code out err) (run-exe (list "bench" "--threads" "1024"))
      (declare (ignore out))
      (is (= 2 code))
      (is (contains err (format nil "from 1 to ~D" limit)) "~A" err))))

(test bench-matmul-rows-shape
  "The matmul rows: one plist per shape and thread count, positive times,
the ratio of the matvec loop to the matmul, and a table that names them."
  (let ((rows (command-line::bench-matmul-rows '((8 64) (5 96)) 6 2 2)))
    (is (= 4 (length rows)))
    (dolist (r rows)
      (is (= 6 (getf r :tokens)))
      (is (member (getf r :threads) '(1 2)))
      (dolist (k '(:matmul-us :q8x2-us :matvecs-us))
        (is (plusp (getf r k)) "~S in ~S" k r))
      (is (= (getf r :ratio) (/ (getf r :matvecs-us) (getf r :matmul-us)))))
    (let ((table (with-output-to-string (s) (command-line::print-bench-matmul s rows))))
      (dolist (str '("6 tokens" "8x64" "5x96" "matvecs" "ratio"))
        (is (contains table str) "~S missing from ~A" str table)))
    (is (string= "" (with-output-to-string (s) (command-line::print-bench-matmul s nil))))))

(test bench-json-refuses-to-overwrite-a-gguf-file
  "`bench --json model.gguf' names the JSON's path, not the model: a GGUF
file there is refused (exit 2, one line) and left as it was."
  (let ((copy (tmp-path "model.gguf")))
    (unwind-protect
         (let ((before (file-octets (golden "q8_main.q8_0.gguf"))))
           (write-octets-file copy before)
           (multiple-value-bind (code out err) (run-exe (list "bench" "--json" copy))
             (is (eql 2 code) "exit ~A; stdout ~S" code out)
             (is (contains err "found a GGUF file") "~A" err)
             (is (equalp before (file-octets copy)))))
      (ignore-errors (delete-file copy)))))

;;; `bench --questions': the decision head's whole path per encoder format.

(defparameter *question-bench-formats*
  '("F32" "F16" "Q8_0 :q8" "Q8_0 :q8x2" "quantize at load" "outlier-aware Q8_0")
  "The rows of `bench --questions', in order.")

(defun question-decisions (path)
  "MODEL:DECIDE's probabilities on the built-in questions for the model file PATH."
  (let ((model (model:load path)))
    (mapcar (lambda (q) (model:decide model q)) model:*questions*)))

(test bench-interrupt-removes-its-copies-of-the-model
  "SIGINT or SIGTERM while `bench --questions' holds its copies of the model
in the temporary directory ends the run with 128 + the signal and leaves
nothing there (the copies used to stay)."
  (dolist (signal '(2 15))
    (let ((dir (tmp-path "bench-tmp")))
      (unwind-protect
           (progn
             (rontolisp:ensure-directories (format nil "~A/" dir))
             (let ((p (run-child "env" (list (format nil "TMPDIR=~A" dir) *exe* "bench"
                                             "--random" "s1-pico" "--questions" "--iters" "50")
                                 :input nil :output nil :error nil :wait nil)))
               (unwind-protect
                    (when (interrupt-once-entry-appears
                           p dir (lambda (n) (search "qbench" n)) signal "bench")
                      (is (equal '() (entry-names dir))))
                 (end-child p))))
        (sh "rm -rf \"$1\"" dir)))))

(test bench-questions-table-and-json
  "`bench --random s1-pico --questions --breakdown': every format row at 1
and 2 threads with a time, llama.cpp's column when its libraries are
there, questions per second at 1 and 2 Lisp threads, and max |dp| 0 for F32 and for Q8_0 :q8 the difference between the
models the converter writes as F32 and as Q8_0 (head F32 in both); the
breakdown of each format: every stage timed, the floor below the total,
and no octet consed by the whole path (a parsed question, :into a kept
answer) or by the forward pass of a question."
  (let ((f32 (tmp-path "qbench-f32.gguf")) (q8 (tmp-path "qbench-q8.gguf")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (run-exe '("bench" "--random" "s1-pico" "--questions" "--iters" "1" "--json"
                        "--breakdown"))
           (is (= 0 code) "stderr: ~A" err)
           (let* ((j (yason:parse out))
                  (rows (gethash "rows" j))
                  (llama-p (and (command-line::llama-library-directory)
                                (command-line::llama-embed-program))))
             (is (equal "random s1-pico" (gethash "source" j)))
             (is (= 8 (gethash "questions" j)))
             (is (equal (loop for f in *question-bench-formats* append (list (list f 1) (list f 2)))
                        (mapcar (lambda (r) (list (gethash "format" r) (gethash "threads" r))) rows)))
             (dolist (r rows)
               (is (plusp (gethash "us_per_question" r)) "~A" (gethash "format" r))
               (is (<= 0 (gethash "max_abs_dp" r) 0.01) "~A: ~A" (gethash "format" r)
                   (gethash "max_abs_dp" r))
               (if llama-p
                   (is (and (plusp (gethash "llama_us_per_question" r)) (plusp (gethash "ratio" r))))
                   (is (null (gethash "llama_us_per_question" r)))))
             (when (and (not llama-p) (ci-p))
               (skip-reference "llama.cpp's libraries or build/tools/llama_embed are missing: ~
no llama.cpp column"))
             (is (zerop (gethash "max_abs_dp" (first rows))))
             ;; Questions per second at 1 and 2 Lisp threads, per format.
             (let ((throughput (gethash "throughput" j)))
               (is (equal (loop for f in *question-bench-formats* append (list (list f 1) (list f 2)))
                          (mapcar (lambda (r) (list (gethash "format" r) (gethash "threads" r)))
                                  throughput)))
               (dolist (r throughput)
                 (is (plusp (gethash "questions_per_second" r)) "~A" (gethash "format" r))))
             (is (contains err "questions per second, one question per Lisp thread") "~A" err)
             (let ((b (gethash "breakdown" j)))
               (is (and (plusp (gethash "f32" (gethash "peak_gmacs" b)))
                        (plusp (gethash "int8" (gethash "peak_gmacs" b)))))
               (is (= (length *question-bench-formats*) (length (gethash "rows" b))))
               (loop for r in (gethash "rows" b)
                     for stages = (gethash "stages_us" r)
                     do (is (= 11 (hash-table-count stages)) "~A: ~D stages"
                            (gethash "format" r) (hash-table-count stages))
                        (dolist (stage '("render" "tokenize" "embeddings" "encoder layer 0"
                                         "encoder layer 1" "output norm" "head input"
                                         "head attention" "head FFN" "cls" "softmax"))
                          (is (plusp (gethash stage stages 0)) "~A: no time for ~A"
                              (gethash "format" r) stage))
                        (is (< 0 (gethash "floor_us" r) (gethash "total_us" r)))
                        (is (zerop (gethash "bytes_per_question" r))
                            "~A: the whole path consed ~A octets a question" (gethash "format" r)
                            (gethash "bytes_per_question" r))
                        (is (zerop (gethash "forward_bytes_per_question" r))
                            "~A: the forward pass consed ~A octets a question" (gethash "format" r)
                            (gethash "forward_bytes_per_question" r)))
               (is (contains err "bytes, forward")))
             ;; The table went to stderr: a line per row with its numbers.
             (dolist (f *question-bench-formats*)
               (is (= 2 (count-if (lambda (l) (and (eql 0 (search f l))
                                                   (let ((fields (remove "" (rontolisp::split-on
                                                                             #\Space (subseq l (length f)))
                                                                         :test #'string=)))
                                                     (and (member (first fields) '("1" "2") :test #'string=)
                                                          (plusp (length (second fields)))
                                                          (every (lambda (c) (or (digit-char-p c) (char= c #\.)))
                                                                 (second fields))))))
                                  (split-lines err)))
                   "~S: two rows in ~A" f err))
             ;; Q8_0 :q8 again, from the converter's files.
             (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" f32 "--type" "f32"))))
             (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" q8 "--type" "q8_0"))))
             (let ((dp (command-line::max-probability-error (question-decisions q8)
                                                         (question-decisions f32)))
                   (row (find "Q8_0 :q8" rows :key (lambda (r) (gethash "format" r)) :test #'equal)))
               (is (plusp dp))
               (is (= dp (gethash "max_abs_dp" row)) "Q8_0 :q8: ~A, bench says ~A" dp
                   (gethash "max_abs_dp" row)))))
      (ignore-errors (delete-file f32))
      (ignore-errors (delete-file q8)))))

(test bench-questions-needs-a-head
  "--questions on a file without a decision head: one line naming it, exit
1; --questions without a model: a usage error."
  (let ((bare (tmp-path "qbench-bare.gguf")))
    (unwind-protect
         (progn
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" bare "--encoder-only"))))
           (multiple-value-bind (code out err) (run-exe (list "bench" "--model" bare "--questions"))
             (is (= 1 code))
             (is (string= "" out))
             (is (= 1 (count #\Newline err)) "~A" err)
             (is (contains err bare))
             (is (contains err "expected a decision head") "~A" err))
           (multiple-value-bind (code out err) (run-exe (list "eval" bare "--questions"))
             (declare (ignore out))
             (is (= 1 code))
             (is (= 1 (count #\Newline err)) "~A" err)
             (is (contains err "expected a decision head") "~A" err)))
      (ignore-errors (delete-file bare))))
  (dolist (args '(("bench" "--questions") ("bench" "--random" "shapes" "--questions")
                  ("bench" "--random" "s1-pico" "--questions" "--tokens" "8")
                  ("bench" "x.gguf" "--questions")))
    (is (= 2 (run-exe args)) "~S" args)))

(test file-in-format-keeps-the-head
  "The in-memory copies of the benchmarks quantize the encoder's matrices
only: the decision head keeps the types the file holds it in."
  (dolist (head-type '(:f32 :f16))
    (let* ((source (command-line::random-model "s1-pico" :type :f32 :head-type head-type))
           (layers (- (gguf:value source "modern-bert.block_count")
                      (gguf:value source "modern-bert.decision.block_count")))
           (copy (command-line::file-in-format source :q8_0)))
      (flet ((type-of-tensor (f name)
               (gguf:tensor-info-type (find name (gguf:tensor-infos f)
                                            :key #'gguf:tensor-info-name :test #'string=))))
        (dolist (name (list "cls.weight" "token_types.weight"
                            (format nil "blk.~D.attn_qkv.weight" layers)
                            (format nil "blk.~D.ffn_up.weight" layers)))
          (is (equal (type-of-tensor source name) (type-of-tensor copy name))
              "~A (~A head): ~A in the copy" name head-type (type-of-tensor copy name)))
        (is (equal "Q8_0" (type-of-tensor copy (format nil "blk.~D.attn_qkv.weight" (1- layers))))))
      )))

(test encoder-only-file-is-what-convert-writes
  "ENCODER-ONLY-FILE drops the head as `convert --encoder-only' does: the
same keys with the same values, the same tensors."
  (let* ((whole (command-line::encoder-only-file (command-line::random-model "s1-pico" :type :f32)))
         (bare (command-line::random-model "s1-pico" :type :f32 :encoder-only t)))
    (flet ((sorted (entries) (sort (copy-list entries) #'string< :key #'first)))
      (is (equalp (sorted (gguf:metadata bare)) (sorted (gguf:metadata whole)))))
    (is (equal (mapcar #'gguf:tensor-info-name (gguf:tensor-infos bare))
               (mapcar #'gguf:tensor-info-name (gguf:tensor-infos whole))))))

(test bench-model-with-a-head-runs-llama
  "`bench --model FILE' on a file with a decision head: llama.cpp, which
refuses the head, times the encoder-only copy (it was left out before)."
  (let ((file (tmp-path "mbench-head.gguf")))
    (unwind-protect
         (progn
           (gguf:write file (command-line::random-model "s1-pico" :type :f32))
           (let ((rows (command-line::run-model-bench :file file :token-counts '(4) :thread-counts '(1)
                                                   :reps 1 :stream (make-broadcast-stream))))
             (is (= 4 (length rows)))
             (if (and (command-line::llama-library-directory) (command-line::llama-embed-program))
                 (is (every (lambda (r) (plusp (getf r :llama-us))) rows))
                 (when (ci-p)
                   (skip-reference "llama.cpp's libraries or build/tools/llama_embed are missing")))))
      (ignore-errors (delete-file file)))))

(test bench-model-leaves-no-copy-when-it-fails
  "`bench --model' leaves none of its copies of the model in the temporary
directory when it fails part way: a write of its third copy that fails
(the first two stayed), and a directory reference that is not the same
model (its F32 conversion stayed)."
  (let ((dir (tmp-path "mbench-tmp")) (old (ext:getenv "TMPDIR"))
        (original (fdefinition 'gguf:write)) (writes 0))
    (unwind-protect
         (progn
           (rontolisp:ensure-directories (format nil "~A/" dir))
           (ext:setenv "TMPDIR" dir)
           (setf (fdefinition 'gguf:write)
                 (lambda (&rest args)
                   (if (= 3 (incf writes))
                       (error "a write that fails")
                       (apply original args))))
           (signals error
             (command-line::run-model-bench :random "s1-pico" :token-counts '(4)
                                            :thread-counts '(1) :reps 1
                                            :stream (make-broadcast-stream)))
           (setf (fdefinition 'gguf:write) original)
           (is (= 3 writes))
           (is (equal '() (entry-names dir)) "left after a failed write: ~S" (entry-names dir))
           (let ((pico (format nil "~A/pico.gguf" dir)) (laya (format nil "~A/nano-laya" dir)))
             (ext:setenv "TMPDIR" old)
             (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" pico "--type" "f32"))))
             (assert (eql 0 (run-exe (list "convert" "--random" "s1-nano"
                                           (format nil "~A/nano.gguf" dir) "--write-laya" laya))))
             (let ((before (entry-names dir))
                   (code (run-child "env" (list (format nil "TMPDIR=~A" dir) *exe* "bench"
                                                "--model" pico "--reference" laya "--tokens" "4")
                                    :input nil :output nil :error nil)))
               (is (eql 1 code))
               (is (equal before (entry-names dir)) "left by a reference of another model: ~S"
                   (set-difference (entry-names dir) before :test #'string=)))))
      (setf (fdefinition 'gguf:write) original)
      (ext:setenv "TMPDIR" old)
      (sh "rm -rf \"$1\"" dir))))

(test bench-model-reference-measures-the-stored-file
  "`bench --model FILE --reference ORIG': the formats are made from ORIG and
measured against it, and FILE as stored gets a row: an F16 file against the
F32 file of the same model shows the F16 error (none without the
reference, where the file is its own F32), the F32 file against itself none.
A reference that is not the same model is refused naming the first
difference; --reference without --model is a usage error."
  (let ((f32 (tmp-path "bench-reference-f32.gguf")) (f16 (tmp-path "bench-reference-f16.gguf"))
        (other (tmp-path "bench-reference-other.gguf")))
    (unwind-protect
         (flet ((rows (file &optional reference)
                  (command-line::run-model-bench :file file :reference reference :token-counts '(4)
                                              :thread-counts '(1) :reps 1
                                              :stream (make-broadcast-stream)))
                (error-of (rows name)
                  (getf (find name rows :key (lambda (r) (getf r :format)) :test #'string=)
                        :max-abs-error)))
           (dolist (args `(("s1-pico" ,f32 "f32") ("s1-pico" ,f16 "f16") ("s1-nano" ,other "f32")))
             (assert (eql 0 (run-exe (list "convert" "--random" (first args) (second args)
                                           "--encoder-only" "--type" (third args))))))
           (let ((rows (rows f16 f32)))
             (is (= 5 (length rows)) "~S" (mapcar (lambda (r) (getf r :format)) rows))
             (is (plusp (error-of rows "file as stored")))
             (is (= (error-of rows "file as stored") (error-of rows "F16 (f32 compute)")))
             (is (zerop (error-of rows "F32"))))
           (let ((rows (rows f16)))
             (is (= 4 (length rows)))
             (is (zerop (error-of rows "F16 (f32 compute)"))))
           (is (zerop (error-of (rows f32 f32) "file as stored")))
           (multiple-value-bind (code out err)
               (run-exe (list "bench" "--model" f16 "--reference" other "--tokens" "4"))
             (declare (ignore out))
             (is (= 1 code))
             (is (contains err "expected the same model as the reference") "~A" err)
             (is (contains err "token_embd.weight") "~A" err))
           (is (= 2 (run-exe (list "bench" "--random" "s1-pico" "--reference" f32))))
           (is (= 2 (run-exe (list "bench" "--model" f16 "--reference" f32 "--questions")))))
      (dolist (f (list f32 f16 other))
        (ignore-errors (delete-file f))))))

(test bench-model-names-rl-llama-lib-outside-the-source-tree
  "Away from a source tree (no build/cache/llama/) and without RL_LLAMA_LIB,
the table says llama.cpp was not run and names the variable that finds it."
  (multiple-value-bind (code out err)
      (sh "cd / && env -u RL_LLAMA_LIB \"$0\" bench --random s1-pico --tokens 4 --iters 1")
    (is (= 0 code) "~A" err)
    (is (contains out "llama.cpp not run: its libraries were not found (set RL_LLAMA_LIB")
        "~A" out)))

(test ratio-text-marks-noise
  "A ratio whose llama.cpp time on more threads is slower than its own
1-thread time is marked as noise; any other ratio is plain."
  (is (string= "1.50x*" (command-line::ratio-text 1.5 200.0 100.0)))
  (is (string= "1.50x" (command-line::ratio-text 1.5 80.0 100.0)))
  (is (string= "1.50x" (command-line::ratio-text 1.5 80.0 nil)))
  (is (string= "-" (command-line::ratio-text nil nil nil)))
  (is (contains command-line::*ratio-noise-note* "*: noise")))

;;; --svg FILE: the pictures of the encoder and questions benchmarks.

(test bench-model-svg-draws-each-format-and-llama-beside
  "bench --tokens N --svg FILE: a panel per thread count, a series of marks
per format, and llama.cpp's per file when its libraries are there."
  (let ((svg (tmp-path "model-bench.svg")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (run-exe (list "bench" "--random" "s1-pico" "--tokens" "8" "--svg" svg))
           (is (= 0 code) "~A" err)
           (is (contains out "encoder benchmark") "~A" out)
           (check-svg-picture svg :series (append '("F16 (f32 compute)" "Q8_0 :q8" "Q8_0 :q8x2" "F32")
                                                  (and (null (command-line::llama-reference-missing))
                                                       '("llama.cpp, F16" "llama.cpp, Q8_0" "llama.cpp, F32")))
                                  :panels '("1 thread" "2 threads")
                                  :texts '("tokens per sequence" "µs per sequence"
                                           "encoder benchmark: random s1-pico")))
      (ignore-errors (delete-file svg)))))

(test bench-questions-svg-draws-formats-and-stages
  "bench --questions --breakdown --svg FILE: µs per question per format by
thread count (and llama.cpp's when there), and each format's stages."
  (let ((svg (tmp-path "questions.svg")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (run-exe (list "bench" "--random" "s1-pico" "--questions" "--breakdown" "--iters" "1"
                            "--svg" svg))
           (is (= 0 code) "~A" err)
           (is (contains out "questions benchmark") "~A" out)
           (let ((report (check-svg-picture
                          svg :series (append '("1 thread" "2 threads" "render" "tokenize" "embeddings"
                                                "encoder layers" "head")
                                              (and (null (command-line::llama-reference-missing))
                                                   '("llama.cpp encoder, 1 thread")))
                              :panels '("µs per question, the whole path" "by stage, 1 thread")
                              :texts '("F32" "F16" "Q8_0 :q8" "outlier-aware Q8_0" "µs per question"))))
             (when report
               (let ((series (gethash "series" report)))
                 (is (= 6 (gethash "bars" (gethash "1 thread" series))) "a bar per format")
                 (unless (command-line::llama-reference-missing)
                   ;; llama.cpp's 2-thread time is a bar of its own series,
                   ;; or of the noise's when slower than on 1 thread
                   (is (= 6 (+ (let ((s (gethash "llama.cpp encoder, 2 threads" series)))
                                 (if s (gethash "bars" s) 0))
                               (let ((s (gethash "llama.cpp noise (*)" series)))
                                 (if s (gethash "bars" s) 0))))
                       "llama.cpp's 2-thread bars: ~S" series))))))
      (ignore-errors (delete-file svg)))))

(test bench-svg-refusals
  "--svg goes with the encoder or questions benchmark; a target that cannot
be written is refused before anything is measured, naming it."
  (multiple-value-bind (code out err) (run-exe (list "bench" "--shape" "64x64" "--svg" (tmp-path "x.svg")))
    (is (= 2 code) "~A~A" out err)
    (is (contains err "--svg goes with the encoder benchmark") "~A" err))
  (let ((bad (format nil "~A/x.svg" (tmp-path "no-such-dir"))))
    (multiple-value-bind (code out err)
        (run-exe (list "bench" "--random" "s1-pico" "--tokens" "4" "--svg" bad))
      (is (= 1 code) "~A" err)
      (is (contains err bad) "~A" err)
      (is (not (contains out "encoder benchmark")) "measured before refusing: ~A" out)))
  (multiple-value-bind (code out err) (run-exe (list "bench" "--random" "s1-pico" "--tokens" "4" "--svg" "-"))
    (is (= 2 code) "~A~A" out err)
    (is (contains err "--svg -: expected a file name for the picture") "~A" err)))

(test bench-model-svg-draws-llama-noise-apart
  "A llama.cpp time slower than its own 1-thread time for the same format
and tokens (the table's *) is a mark of the noise series, not a point of
llama.cpp's line; a format's own times are all drawn."
  (let ((svg (tmp-path "noise.svg")))
    (unwind-protect
         (progn
           (command-line::model-bench-svg
            svg "noise"
            (loop for (tokens threads us llama) in '((16 1 100 90) (16 2 80 50) (128 1 900 800) (128 2 700 5000))
                  collect (list :format "F16 (f32 compute)" :weights :f16 :tokens tokens :threads threads
                                :us us :llama-us llama)))
           (let ((report (svg-report svg)))
             (when report
               (let ((series (gethash "series" report)))
                 (is (= 4 (gethash "marks" (gethash "F16 (f32 compute)" series))))
                 (is (= 3 (gethash "marks" (gethash "llama.cpp, F16" series))))
                 (is (= 1 (gethash "marks" (gethash "llama.cpp noise (*)" series))))))))
      (ignore-errors (delete-file svg)))))
