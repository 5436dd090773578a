;;;; decision-bench.lisp - `rontolisp bench --model FILE --questions' and
;;;; `bench --random NAME --questions' (run-question-bench): a question's
;;;; whole path (render, tokenize, encode, head: MODEL:DECIDE) timed per
;;;; weight format of the encoder and thread count, beside llama.cpp's
;;;; encoder alone on the same token ids and threads, and each format's
;;;; largest probability difference from the F32 model's (doc/decision.md).
;;;;
;;;; The formats are eval's (lisp/tools/eval.lisp, EVAL-ENCODERS): the encoder's
;;;; matrices as F32, F16, Q8_0 (:q8 and :q8x2 activations), quantized at
;;;; load and outlier-aware Q8_0; the head stays as the file holds it.
;;;; llama.cpp refuses the head's tensors, so it runs an encoder-only copy
;;;; of each file (ENCODER-ONLY-FILE).

(in-package "RONTOLISP")

(defparameter *question-bench-rows*
  '(("F32" :f32 :q8 :f32) ("F16" :f16 :q8 :f16)
    ("Q8_0 :q8" :q8_0 :q8 :q8_0) ("Q8_0 :q8x2" :q8_0 :q8x2 :q8_0)
    ("quantize at load" :load :q8 :q8_0) ("outlier-aware Q8_0" :outlier-aware :q8 :outlier-aware))
  "The rows of the questions benchmark: label, encoder (a key of
EVAL-ENCODERS' alist), activations, and the file llama.cpp runs for the row
(quantize at load keeps outlier columns in f32, which no file holds: its
llama.cpp figure is the plain Q8_0 file's).")

(defun question-bench-path (key)
  "A fresh temporary path for the encoder-only copy of the format KEY."
  (format nil "~A/rl-qbench-~D-~(~A~).gguf"
          (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp")) (ext:getpid) key))

(defun question-bench-json (label reps llama-p rows)
  (list :object (cons "source" label) (cons "questions" (length model:*questions*))
        (cons "reps" reps) (cons "llama" (if llama-p :true :false))
        (cons "rows" (map 'vector
                          (lambda (r)
                            (list :object (cons "format" (getf r :format))
                                  (cons "activations" (string-downcase
                                                       (symbol-name (getf r :activations))))
                                  (cons "threads" (getf r :threads))
                                  (cons "us_per_question" (getf r :us))
                                  (cons "llama_us_per_question" (bench-number (getf r :llama-us)))
                                  (cons "ratio" (bench-number (getf r :ratio)))
                                  (cons "max_abs_dp" (getf r :max-abs-dp))))
                          rows))))

(defun run-question-bench (&key file random (thread-counts '(1 2)) (reps 3)
                             (stream *standard-output*) json)
  "Time MODEL:DECIDE over MODEL:*QUESTIONS* (render, tokenize, encode,
head) on the model of FILE (with its decision head; RONTOLISP-ERROR when it
has none) or on a random model of the preset RANDOM with its head, for each
row of *QUESTION-BENCH-ROWS* and thread count of THREAD-COUNTS: the
microseconds per question (the median of REPS rounds of the whole set, over
its size), llama.cpp's encoder alone on the same ids and threads (an
encoder-only copy of the row's file; when its libraries are present) and
the ratio, and the row's max |dp| against the F32 row's probabilities.
Prints the table on STREAM; JSON T or \"-\" writes the JSON on
*STANDARD-OUTPUT* and the table on *ERROR-OUTPUT*, another JSON a file of
that path.  Answers the rows as a list of plists."
  (let* ((source (if file (gguf:read file :shards t) (random-model random :type :f32)))
         (label (or file (format nil "random ~A" random)))
         (to-stdout (member json '(t "-") :test #'equal))
         (out (if to-stdout *error-output* stream))
         (paths '())
         (old-threads (threads))
         (rows '()))
    (unwind-protect
         (progn
           (require-decision-head source label)
           (multiple-value-bind (encoders sequences files) (eval-encoders source)
             (declare (ignore sequences))
             (let* ((llama-p (and (llama-library-directory) (llama-embed-program) t))
                    (f32 (cdr (assoc :f32 encoders)))
                    (decisions (mapcar (lambda (q) (multiple-value-list (model:decide f32 q)))
                                       model:*questions*))
                    (references (mapcar #'first decisions))
                    (ids (mapcar (lambda (d) (coerce (third d) 'list)) decisions))
                    (n (length model:*questions*))
                    (llama-files '())
                    (llama-times (make-hash-table :test 'equal)))
               (when llama-p
                 (dolist (key '(:f32 :f16 :q8_0 :outlier-aware))
                   (let ((path (question-bench-path key)))
                     (push path paths)
                     (gguf:write path (encoder-only-file (cdr (assoc key files))))
                     (push (cons key path) llama-files))))
               (format out "~&questions benchmark: ~A, ~D built-in questions (~D to ~D tokens), ~
µs per question: render, tokenize, encode, head (median of ~D round~:P); llama.cpp ~A~%"
                       (escape-control label) n (reduce #'min ids :key #'length) (reduce #'max ids :key #'length)
                       reps (if llama-p
                                "the encoder alone on the same ids and threads (an encoder-only copy)"
                                "not run (its libraries or tools/llama_embed are missing)"))
               (format out "~20A ~7@A ~12@A ~12@A ~9@A ~11@A~%"
                       "format" "threads" "µs/question" "llama.cpp µs" "ratio" "max |Δp|")
               (dolist (row *question-bench-rows*)
                 (destructuring-bind (name key activations llama-key) row
                   (let* ((e (cdr (assoc key encoders)))
                          (dp (max-probability-error (question-probabilities e activations)
                                                     references)))
                     (dolist (th thread-counts)
                       (setf (threads) th)
                       (let* ((us (/ (median-microseconds
                                      (lambda () (dolist (q model:*questions*)
                                                   (model:decide e q :activations activations)))
                                      reps)
                                     n))
                              (llama (and llama-p
                                          (let ((k (list llama-key th)))
                                            (or (gethash k llama-times)
                                                (setf (gethash k llama-times)
                                                      (/ (reduce #'+ (llama-encode
                                                                      (cdr (assoc llama-key llama-files))
                                                                      ids :threads th :repeat reps)
                                                                 :key #'car)
                                                         n))))))
                              (ratio (and llama (/ us llama))))
                         (format out "~20A ~7D ~12,1F ~12@A ~9@A ~11,3,2,,,,'eE~%"
                                 name th us (if llama (format nil "~,1F" llama) "-")
                                 (if ratio (format nil "~,2Fx" ratio) "-") dp)
                         (finish-output out)
                         (push (list :format name :activations activations :threads th :us us
                                     :llama-us llama :ratio ratio :max-abs-dp dp)
                               rows))))))
               (format out "ratio: our whole path over llama.cpp's encoder alone (below 1: faster); ~
max |Δp|: against the F32 row's probabilities; the head as the file holds it~%")
               (setf rows (nreverse rows))
               (when json
                 (let ((j (question-bench-json label reps llama-p rows)))
                   (if to-stdout
                       (progn (write-json j *standard-output* :indent 1) (terpri *standard-output*))
                       (with-output-to-file (s json)
                         (write-json j s :indent 1)
                         (terpri s)))))
               rows)))
      (setf (threads) old-threads)
      (dolist (p paths) (ignore-errors (delete-file p)))
      (when file (gguf:close source)))))
