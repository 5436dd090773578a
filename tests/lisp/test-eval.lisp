;;;; test-eval.lisp - `rontolisp eval': every way of running the encoder gets
;;;; a row, and each row's figures are those of the model run the way it
;;;; names, recomputed here from files `rontolisp convert' writes.

(in-package "RONTOLISP-TESTS")

(def-suite eval :in all :description "rontolisp eval.")
(in-suite eval)

(defun pico-massive-file (&rest args)
  "`convert --random s1-pico --encoder-only --massive 4' with ARGS, written
to a fresh temporary file."
  (let ((path (tmp-path (format nil "pico-massive~{~A~}.gguf" args))))
    (assert (eql 0 (run-exe (append (list "convert" "--random" "s1-pico" path "--encoder-only"
                                          "--massive" "4")
                                    args))))
    path))

(defun eval-json (&rest args)
  (multiple-value-bind (code out err) (run-exe (append (list "eval") args (list "--json")))
    (unless (eql code 0) (error "eval ~{~A~^ ~} failed (~A): ~A" args code err))
    (let ((*read-default-float-format* 'double-float)) ; JSON numbers are doubles
      (yason:parse out))))

(defun close-to (a b)
  (<= (abs (- a b)) (* 1d-9 (max 1d0 (abs a) (abs b)))))

(test eval-rows-are-the-figures-of-each-way
  (let* ((json (eval-json "--random" "s1-pico" "--massive" "4" "--sequences" "3" "--reps" "1"))
         (rows (gethash "rows" json))
         (f32 (pico-massive-file "--type" "f32"))
         (files (list (cons "Q8_0 file" (pico-massive-file "--type" "q8_0"))
                      (cons "outlier-aware Q8_0 file"
                            (pico-massive-file "--type" "q8_0" "--outlier-aware"))
                      (cons "F16 file" (pico-massive-file "--type" "f16")))))
    (unwind-protect
         (let* ((reference (model:load f32))
                (sequences (subseq (model::calibration-sequences
                                    (model:hyperparameters reference))
                                   0 3))
                (refs (mapcar (lambda (ids) (model:encode reference ids)) sequences)))
           (is (equal "random s1-pico --massive 4 --seed 1" (gethash "source" json)))
           (is (= 3 (gethash "sequences" json)))
           (is (equal '(("F32" nil) ("F16 file" nil) ("Q8_0 file" "q8") ("Q8_0 file" "q8x2")
                        ("outlier-aware Q8_0 file" "q8") ("outlier-aware Q8_0 file" "q8x2")
                        ("quantize at load" "q8") ("quantize at load" "q8x2")
                        ("F16 quantized at load" "q8") ("F16 quantized at load" "q8x2"))
                      (mapcar (lambda (r) (list (gethash "way" r) (gethash "activations" r)))
                           rows)))
           (loop for r in rows
                 do (is (plusp (gethash "us_per_sequence" r)))
                    (is (< 0.99 (gethash "token_cosine" r) 1.0000001))
                    (is (< 0.99 (gethash "pooled_cosine" r) 1.0000001)))
           (is (zerop (gethash "token_max_abs_error" (first rows))))
           ;; Each row again, from the files the converter writes and from
           ;; model:load :quantize.
           (loop for r in (rest rows)
                 for way = (gethash "way" r)
                 for act = (if (equal (gethash "activations" r) "q8x2") :q8x2 :q8)
                 for encoder = (cond ((equal way "quantize at load")
                                      (model:load f32 :quantize :q8_0))
                                     ((equal way "F16 quantized at load")
                                      (model:load (cdr (assoc "F16 file" files :test #'equal))
                                                  :quantize :q8_0))
                                     (t (model:load (cdr (assoc way files :test #'equal)))))
                 do (let ((token 0d0) (pooled 0d0))
                      (loop for ids in sequences for ref in refs
                            do (let ((h (model:encode encoder ids :activations act)))
                                 (setf token (max token (command-line::hidden-state-error h ref))
                                       pooled (max pooled (command-line::hidden-state-error
                                                           (model::pool h :mean)
                                                           (model::pool ref :mean))))))
                      (is (close-to token (gethash "token_max_abs_error" r))
                          "~A ~A: token error ~A, eval says ~A" way act token
                          (gethash "token_max_abs_error" r))
                      (is (close-to pooled (gethash "pooled_max_abs_error" r))
                          "~A ~A: pooled error ~A, eval says ~A" way act pooled
                          (gethash "pooled_max_abs_error" r)))))
      (ignore-errors (delete-file f32))
      (dolist (f files) (ignore-errors (delete-file (cdr f)))))))

(test eval-table-and-usage
  (multiple-value-bind (code out) (run-exe (list "eval" "--random" "s1-pico" "--sequences" "2"
                                                 "--reps" "1"))
    (is (= 0 code))
    (is (contains out "eval: random s1-pico --seed 1, 2 calibration sequences"))
    (is (= 2 (count-if (lambda (l) (search "quantize at load" l)) (split-lines out))))
    (is (= 2 (count-if (lambda (l) (search "F16 quantized at load" l)) (split-lines out))))
    (is (= 13 (count-if (lambda (l) (plusp (length l))) (split-lines out))))
    ;; without a decision head, no column of the decisions
    (is (not (contains out "other")) "~A" out)
    (is (not (contains out "right")) "~A" out))
  (dolist (args '(() ("--random" "s1-pico" "x.gguf") ("--random" "s1-pico" "--massive-ratio" "3")
                  ("x.gguf" "--massive" "2") ("x.gguf" "--seed" "2")
                  ("--random" "s1-pico" "--massive" "65") ("--random" "s9")))
    (is (= 2 (run-exe (cons "eval" args))) "eval ~{~A~^ ~} should be a usage error" args))
  (let ((bad (tmp-path "not.gguf")))
    (write-file-string bad "not a GGUF file")
    (unwind-protect
         (multiple-value-bind (code out err) (run-exe (list "eval" bad))
           (declare (ignore out))
           (is (= 1 code))
           (is (contains err bad)))
      (ignore-errors (delete-file bad)))))

(test eval-help-summary-names-every-way
  "The summary of eval (its --help and rontolisp --help) names every kind
of row it can give: quantize's file types come with --quants."
  (multiple-value-bind (code out) (run-exe '("eval" "--help"))
    (is (= 0 code))
    ;; usage, a blank line, then the summary
    (let ((summary (third (split-lines out))))
      (is (contains summary "outlier-aware Q8_0") "~A" summary)
      (is (contains summary "--quants") "~A" summary)))
  (multiple-value-bind (code out) (run-exe '("--help"))
    (is (= 0 code))
    (let* ((lines (split-lines out))
           (usage (position-if (lambda (l) (search "rontolisp eval FILE.gguf" l)) lines)))
      (is (and usage (contains (nth (1+ usage) lines) "--quants")) "~A" out))))

(test eval-questions-probability-error
  "With a decision head (--random --questions, or a file that has one) each
way gets max |dp| over the built-in questions: 0 for F32, finite and small
elsewhere, and for the F16 file the difference between the models the
converter writes as F32 and as F16; without a head the column is absent
(null in the JSON)."
  (let ((f32 (tmp-path "eval-head-f32.gguf")) (f16 (tmp-path "eval-head-f16.gguf")))
    (unwind-protect
         (let* ((json (eval-json "--random" "s1-pico" "--questions" "--sequences" "1" "--reps" "1"))
                (rows (gethash "rows" json)))
           (is (equal "random s1-pico --seed 1 --questions" (gethash "source" json)))
           (is (= 8 (gethash "questions" json)))
           (is (zerop (gethash "max_abs_dp" (first rows))))
           (dolist (r (rest rows))
             (is (realp (gethash "max_abs_dp" r)))
             (is (< 0 (gethash "max_abs_dp" r) 0.01) "~A ~A: ~A" (gethash "way" r)
                 (gethash "activations" r) (gethash "max_abs_dp" r)))
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" f32 "--type" "f32"))))
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" f16 "--type" "f16"))))
           (flet ((decisions (path)
                    (let ((m (model:load path)))
                      (mapcar (lambda (q) (model:decide m q)) model:*questions*))))
             (is (= (command-line::max-probability-error (decisions f16) (decisions f32))
                    (gethash "max_abs_dp" (second rows)))))
           ;; A file with a head gets the column without --questions.
           (let ((file-rows (gethash "rows" (eval-json f32 "--sequences" "1" "--reps" "1"))))
             (is (equal (mapcar (lambda (r) (gethash "max_abs_dp" r)) rows)
                        (mapcar (lambda (r) (gethash "max_abs_dp" r)) file-rows))))
           (multiple-value-bind (code out) (run-exe (list "eval" "--random" "s1-pico" "--questions"
                                                          "--sequences" "1" "--reps" "1"))
             (is (= 0 code))
             (is (contains out "max |Δp|"))))
      (ignore-errors (delete-file f32))
      (ignore-errors (delete-file f16))))
  (let ((rows (gethash "rows" (eval-json "--random" "s1-pico" "--sequences" "1" "--reps" "1"))))
    (is (every (lambda (r) (multiple-value-bind (v found) (gethash "max_abs_dp" r)
                             (and found (null v))))
               rows))))

(test eval-reference-measures-the-stored-file
  "With --reference ORIG.gguf the file as stored gets the first row,
measured against ORIG.gguf: an F16 file against the F32 file of the same
model shows a non-zero error (the same as the F16 way made from the
reference), the F32 file against itself none, a Q8_0 file its q8 error and a
K-quant file a row of its own; the ways are made from the reference.  A
reference that is not the same model is refused naming the first
difference, and --reference without FILE.gguf is a usage error."
  (let* ((f32 (pico-massive-file "--type" "f32"))
         (f16 (pico-massive-file "--type" "f16"))
         (q8 (pico-massive-file "--type" "q8_0"))
         (q4k (tmp-path "pico-massive-q4_k_m.gguf"))
         (other (tmp-path "eval-reference-other.gguf")))
    (unwind-protect
         (flet ((rows (file)
                  (let ((json (eval-json file "--reference" f32 "--sequences" "2" "--reps" "1")))
                    (is (equal f32 (gethash "reference" json)))
                    (gethash "rows" json)))
                (way (rows name &optional act)
                  (find-if (lambda (r) (and (equal name (gethash "way" r))
                                            (equal act (gethash "activations" r))))
                           rows)))
           (assert (eql 0 (run-exe (list "quantize" f32 q4k "q4_k_m"))))
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-nano" other "--encoder-only"
                                         "--type" "f32"))))
           (let ((rows (rows f16)))
             (is (equal "file as stored" (gethash "way" (first rows))))
             (is (null (gethash "activations" (first rows))))
             (is (plusp (gethash "token_max_abs_error" (first rows))))
             (is (plusp (gethash "pooled_max_abs_error" (first rows))))
             (is (close-to (gethash "token_max_abs_error" (first rows))
                           (gethash "token_max_abs_error" (way rows "F16 file"))))
             (is (zerop (gethash "token_max_abs_error" (way rows "F32"))))
             (is (= 11 (length rows))))
           (let ((stored (first (rows f32))))
             (is (zerop (gethash "token_max_abs_error" stored)))
             (is (zerop (gethash "pooled_max_abs_error" stored))))
           (let ((rows (rows q8)))
             (is (equal "q8" (gethash "activations" (first rows))))
             (is (close-to (gethash "token_max_abs_error" (first rows))
                           (gethash "token_max_abs_error" (way rows "Q8_0 file" "q8")))))
           ;; The model directory the F32 file was converted from is the
           ;; same reference.
           (let ((dir (tmp-path "eval-reference-laya")) (out (tmp-path "eval-reference-laya.gguf")))
             (unwind-protect
                  (progn
                    (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" out "--encoder-only"
                                                  "--massive" "4" "--type" "f32" "--write-laya" dir))))
                    (let ((by-dir (first (gethash "rows" (eval-json f16 "--reference" dir
                                                                     "--sequences" "2" "--reps" "1"))))
                          (by-file (first (rows f16))))
                      (is (equal "file as stored" (gethash "way" by-dir)))
                      (is (= (gethash "token_max_abs_error" by-file)
                             (gethash "token_max_abs_error" by-dir)))))
               (ignore-errors (delete-file out))
               (sh "rm -rf \"$1\"" dir)))
           (let ((stored (first (rows q4k))))
             (is (equal "file as stored" (gethash "way" stored)))
             (is (plusp (gethash "token_max_abs_error" stored))))
           ;; Without --reference the file is its own reference: no stored row.
           (let ((json (eval-json f16 "--sequences" "1" "--reps" "1")))
             (is (multiple-value-bind (v found) (gethash "reference" json) (and found (null v))))
             (is (equal "F32" (gethash "way" (first (gethash "rows" json))))))
           (multiple-value-bind (code out err) (run-exe (list "eval" f16 "--reference" other
                                                              "--sequences" "1" "--reps" "1"))
             (declare (ignore out))
             (is (= 1 code))
             (is (contains err "expected the same model as the reference") "~A" err)
             (is (contains err "token_embd.weight") "~A" err))
           (is (= 2 (run-exe (list "eval" "--random" "s1-pico" "--reference" f32))))
           (multiple-value-bind (code out) (run-exe (list "eval" f16 "--reference" f32
                                                          "--sequences" "1" "--reps" "1"))
             (is (= 0 code))
             (is (contains out (format nil "error against the F32 model of the reference ~A" f32)))
             (is (contains out "file as stored"))))
      (dolist (f (list f32 f16 q8 q4k other)) (ignore-errors (delete-file f))))))

;;; eval --svg FILE: each way's error after each layer.

(test eval-layer-errors-are-zero-for-the-reference-itself
  "LAYER-ERRORS (eval --svg's figures): one per encoder layer, 0 for the F32
encoder against itself, above 0 and finite for the F16 file."
  (let* ((source (command-line::random-model "s1-pico" :type :f32 :encoder-only t))
         (f32 (model:load (command-line::file-in-format source :f32)))
         (f16 (model:load (command-line::file-in-format source :f16)))
         (layers (getf (model:hyperparameters f32) :layers))
         (sequences (subseq (model::calibration-sequences (model:hyperparameters f32)) 0 3))
         (errors (command-line::layer-errors f32 (list (list "F32" f32 nil) (list "F16" f16 nil)) sequences)))
    (is (= 2 (length errors)))
    (is (every (lambda (e) (= layers (length e))) errors) "~S: ~D layers" errors layers)
    (is (every #'zerop (first errors)) "~S" (first errors))
    (is (every (lambda (e) (< 0 e 1)) (second errors)) "~S" (second errors))))

(test eval-svg-draws-every-way-per-layer
  (let ((svg (tmp-path "eval.svg")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (run-exe (list "eval" "--random" "s1-pico" "--sequences" "2" "--reps" "1" "--svg" svg))
           (is (= 0 code) "~A" err)
           (is (contains out "quantize at load") "~A" out)
           (let* ((names '("F32" "F16 file" "Q8_0 file :q8" "Q8_0 file :q8x2"
                           "outlier-aware Q8_0 file :q8" "outlier-aware Q8_0 file :q8x2"
                           "quantize at load :q8" "quantize at load :q8x2"))
                  (report (check-svg-picture svg :series names
                                                 :panels '("error after each layer against F32")
                                                 :texts '("encoder layer" "max |error| of the hidden states"))))
             (when report
               (let ((marks (mapcar (lambda (n) (gethash "marks" (gethash n (gethash "series" report))))
                                    names)))
                 (is (and (< 1 (first marks)) (every (lambda (m) (eql m (first marks))) marks))
                     "a mark per layer for every way: ~S" marks)))))
      (ignore-errors (delete-file svg))))
  (multiple-value-bind (code out err)
      (run-exe (list "eval" "--random" "s1-pico" "--svg"
                    (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp"))))
    (is (= 1 code) "~A~A" out err)
    (is (contains err "expected a regular file or no file for the SVG, found a directory") "~A" err)))

(test eval-svg-with-reference-draws-the-file-as-stored
  "eval FILE --reference ORIG --svg: the file as stored is a series of its
own (with its activations), a mark per layer, beside the JSON."
  (let ((f32 (pico-massive-file "--type" "f32"))
        (q8 (pico-massive-file "--type" "q8_0"))
        (svg (tmp-path "eval-reference.svg")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (run-exe (list "eval" q8 "--reference" f32 "--sequences" "2" "--reps" "1" "--json"
                            "--svg" svg))
           (is (= 0 code) "~A" err)
           (is (contains out "\"file as stored\"") "~A" out)
           (let ((report (svg-report svg)))
             (when report
               (let ((stored (gethash "file as stored :q8" (gethash "series" report))))
                 (is (and stored (< 1 (gethash "marks" stored)))
                     "no file-as-stored series among ~S"
                     (loop for k being the hash-keys of (gethash "series" report) collect k))))))
      (dolist (f (list f32 q8 svg)) (ignore-errors (delete-file f))))))
(defun winner (probabilities)
  "The index of the largest of PROBABILITIES (the first on ties)."
  (position (reduce #'max probabilities) probabilities))

(test eval-question-file-per-way
  "eval FILE --questions QUESTIONS.jsonl (the trained model's 200 held-out
questions): per way max |dp| against the F32 model over the file's
questions, the share of questions whose winning option is not the F32
model's, and the share answered right (their \"answer\"): the figures
recomputed here from convert's F32 and Q8_0 files.  A question file without
answers gets no accuracy; a line that is not a question, or an answer that
is not an option's index, is an error naming the line."
  (let ((f32 (tmp-path "eval-trained-f32.gguf")) (q8 (tmp-path "eval-trained-q8.gguf"))
        (bare (tmp-path "eval-bare.jsonl")) (bad (tmp-path "eval-bad.jsonl"))
        (questions (trained-path "questions.jsonl")))
    (unwind-protect
         (progn
           (assert (eql 0 (run-exe (list "convert" (trained-path "") f32 "--type" "f32"))))
           (assert (eql 0 (run-exe (list "convert" (trained-path "") q8 "--type" "q8_0"))))
           (let* ((json (eval-json f32 "--questions" questions "--sequences" "1" "--reps" "1"))
                  (rows (gethash "rows" json))
                  (qs (trained-questions))
                  (reference (let ((m (model:load f32)))
                               (mapcar (lambda (q) (model:decide m q)) qs)))
                  (q8x2 (let ((m (model:load q8)))
                          (mapcar (lambda (q) (model:decide m q :activations :q8x2)) qs)))
                  (row (find-if (lambda (r) (and (equal "Q8_0 file" (gethash "way" r))
                                                 (equal "q8x2" (gethash "activations" r))))
                                rows)))
             (flet ((right (decisions)
                      (/ (loop for p in decisions for q in qs
                               count (= (winner p) (gethash "answer" q)))
                         (float (length qs) 1d0))))
               (is (= 200 (gethash "questions" json)))
               (is (equal questions (gethash "question_file" json)))
               (is (zerop (gethash "max_abs_dp" (first rows))))
               (is (zerop (gethash "other_winners" (first rows))))
               (is (= (right reference) (gethash "accuracy" (first rows))))
               (is (<= 0.95 (gethash "accuracy" (first rows))))
               (is (= (command-line::max-probability-error q8x2 reference) (gethash "max_abs_dp" row)))
               (is (= (/ (loop for p in q8x2 for r in reference
                                count (/= (winner p) (winner r)))
                         (float (length qs) 1d0))
                      (gethash "other_winners" row)))
               (is (= (right q8x2) (gethash "accuracy" row)))
               (dolist (r rows)
                 (is (< 0 (gethash "accuracy" r) 1.0000001) "~A: ~A" (gethash "way" r)
                     (gethash "accuracy" r)))))
           (multiple-value-bind (code out err) (run-exe (list "eval" f32 "--questions" questions
                                                              "--sequences" "1" "--reps" "1"))
             (is (= 0 code) "~A" err)
             (is (contains out (format nil "the 200 questions of ~A" questions)) "~A" out)
             (is (contains out " other ") "~A" out)
             (is (contains out " right") "~A" out))
           ;; Without "answer": no accuracy.
           (write-file-string bare (format nil "~A~%~A~%"
                                           "{\"type\": \"pick\", \"instructions\": \"Use cloud next.\", \"options\": [\"cloud\", \"vase\", \"moon\"], \"state\": \"ready\"}"
                                           "{\"type\": \"count\", \"instructions\": \"How many items are in the state?\", \"options\": [\"1\", \"2\", \"3\"], \"state\": \"files: a b\"}"))
           (let ((rows (gethash "rows" (eval-json f32 "--questions" bare "--sequences" "1"
                                                  "--reps" "1"))))
             (is (every (lambda (r) (multiple-value-bind (v found) (gethash "accuracy" r)
                                      (and found (null v))))
                        rows))
             (is (zerop (gethash "max_abs_dp" (first rows)))))
           (flet ((refused (line what)
                    (write-file-string bad (format nil "~A~%~A~%"
                                                   (first (split-lines (read-file-string questions)))
                                                   line))
                    (multiple-value-bind (code out err)
                        (run-exe (list "eval" f32 "--questions" bad "--sequences" "1" "--reps" "1"))
                      (declare (ignore out))
                      (is (= 1 code) "~A: exit ~A" what code)
                      (is (contains err (format nil "~A line 2" bad)) "~A: ~A" what err))))
             (refused "not json" "not JSON")
             (refused "{\"type\": \"pick\", \"instructions\": \"Use moon.\", \"options\": [\"cloud\", \"moon\"], \"state\": \"ready\", \"answer\": 2}"
                      "an answer past the options")
             (refused "{\"type\": \"pick\", \"instructions\": \"Use moon.\", \"options\": [\"cloud\", \"moon\"], \"state\": \"ready\", \"answer\": \"moon\"}"
                      "an answer that is not an index")
             (refused "{\"type\": \"nope\", \"instructions\": \"Use moon.\", \"options\": [\"cloud\", \"moon\"], \"state\": \"ready\"}"
                      "an unknown type")))
      (dolist (f (list f32 q8 bare bad)) (ignore-errors (delete-file f))))))

(test eval-quants-rows-are-quantize-files
  "eval FILE --questions QUESTIONS.jsonl --quants Q4_K_M on the trained
model: a row for the file quantize writes of that type from the F32 file,
and, the model having a decision head, one for the F16 file whose head is
F16 too; their max |dp|, other winners and accuracy are those recomputed
here from the files `quantize' and `convert --head-type f16' write.  A
type quantize does not write is a usage error naming --quants."
  (let ((f32 (tmp-path "eval-quants-f32.gguf")) (q4 (tmp-path "eval-quants-q4_k_m.gguf"))
        (f16-head (tmp-path "eval-quants-f16-head.gguf"))
        (questions (trained-path "questions.jsonl")))
    (unwind-protect
         (progn
           (assert (eql 0 (run-exe (list "convert" (trained-path "") f32 "--type" "f32"))))
           (assert (eql 0 (run-exe (list "quantize" f32 q4 "q4_k_m"))))
           (assert (eql 0 (run-exe (list "convert" (trained-path "") f16-head "--type" "f16"
                                         "--head-type" "f16"))))
           (let* ((json (eval-json f32 "--questions" questions "--quants" "q4_k_m"
                                   "--sequences" "1" "--reps" "1"))
                  (rows (gethash "rows" json))
                  (qs (trained-questions))
                  (reference (let ((m (model:load f32)))
                               (mapcar (lambda (q) (model:decide m q)) qs))))
             (is (equal '("F32" "F16 file" "F16 file, head F16")
                        (mapcar (lambda (r) (gethash "way" r)) (subseq rows 0 3))))
             (is (equal '("Q4_K_M file (quantize)" "q8x2")
                        (let ((r (car (last rows))))
                          (list (gethash "way" r) (gethash "activations" r)))))
             (loop for (way path activations) in (list (list "Q4_K_M file (quantize)" q4 :q8x2)
                                                       (list "F16 file, head F16" f16-head :q8))
                   for row = (find way rows :key (lambda (r) (gethash "way" r)) :test #'equal)
                   for decisions = (let ((m (model:load path)))
                                     (mapcar (lambda (q) (model:decide m q :activations activations))
                                             qs))
                   do (is-true row "no row ~A" way)
                      (when row
                        (is (plusp (gethash "max_abs_dp" row)) "~A: max |dp| 0" way)
                        (is (= (command-line::max-probability-error decisions reference)
                               (gethash "max_abs_dp" row))
                            "~A: max |dp| ~A, recomputed ~A" way (gethash "max_abs_dp" row)
                            (command-line::max-probability-error decisions reference))
                        (is (= (/ (loop for p in decisions for r in reference
                                        count (/= (winner p) (winner r)))
                                  (float (length qs) 1d0))
                               (gethash "other_winners" row))
                            "~A: other winners" way)
                        (is (= (/ (loop for p in decisions for q in qs
                                        count (= (winner p) (gethash "answer" q)))
                                  (float (length qs) 1d0))
                               (gethash "accuracy" row))
                            "~A: accuracy" way)))))
      (dolist (f (list f32 q4 f16-head)) (ignore-errors (delete-file f)))))
  (multiple-value-bind (code out err)
      (run-exe (list "eval" "--random" "s1-pico" "--quants" "q9"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "--quants: expected a file type") "~A" err))
  ;; all: every quantized type quantize writes but Q8_0, each once
  (is (equal '("Q4_0" "Q4_1" "Q5_0" "Q5_1" "Q2_K" "Q3_K_S" "Q3_K_M" "Q3_K_L" "Q4_K_S" "Q4_K_M"
               "Q5_K_S" "Q5_K_M" "Q6_K" "IQ4_NL" "IQ4_XS")
             (command-line::eval-quant-types "all")))
  (is (equal '("Q4_K_M" "IQ4_XS") (command-line::eval-quant-types "q4_k_m, iq4_xs"))))

(test eval-quantized-file-is-removed
  "CALL-WITH-QUANTIZED-FILE (eval --quants, the trained table) hands over a
file quantize wrote, and removes it on return and on a non-local exit."
  (let ((f32 (tmp-path "eval-quantized-f32.gguf")) (seen nil))
    (unwind-protect
         (progn
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" f32 "--type" "f32"))))
           (is (equal "Q4_0"
                      (command-line::call-with-quantized-file
                       f32 "q4_0" (lambda (path)
                                    (setf seen path)
                                    (gguf:with-file (f path)
                                      (gguf:tensor-info-type
                                       (gguf:tensor-info f "blk.0.attn_qkv.weight")))))))
           (is (not (probe-file seen)) "~A left behind" seen)
           (setf seen nil)
           (catch 'out
             (command-line::call-with-quantized-file
              f32 :q4_k_m (lambda (path) (setf seen path) (throw 'out nil))))
           (is (stringp seen))
           (is (not (probe-file seen)) "~A left behind after a non-local exit" seen))
      (ignore-errors (delete-file f32)))))
