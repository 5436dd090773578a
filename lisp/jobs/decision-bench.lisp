;;;; decision-bench.lisp - `rontolisp bench --model FILE --questions' and
;;;; `bench --random NAME --questions' (run-question-bench): a question's
;;;; whole path (render, tokenize, encode, head: MODEL:DECIDE) timed per
;;;; weight format of the encoder and thread count, beside llama.cpp's
;;;; encoder alone on the same token ids and threads, and each format's
;;;; largest probability difference from the F32 model's (doc/decision.md).
;;;;
;;;; The formats are eval's (lisp/jobs/eval.lisp, EVAL-ENCODERS): the encoder's
;;;; matrices as F32, F16, Q8_0 (:q8 and :q8x2 activations), quantized at
;;;; load and outlier-aware Q8_0; the head stays as the file holds it.
;;;; llama.cpp refuses the head's tensors, so it runs an encoder-only copy
;;;; of each file (ENCODER-ONLY-FILE).

(in-package "COMMAND-LINE")

(defparameter *question-bench-rows*
  '(("F32" :f32 :q8 :f32) ("F16" :f16 :q8 :f16)
    ("Q8_0 :q8" :q8_0 :q8 :q8_0) ("Q8_0 :q8x2" :q8_0 :q8x2 :q8_0)
    ("quantize at load" :load :q8 :q8_0) ("outlier-aware Q8_0" :outlier-aware :q8 :outlier-aware))
  "The rows of the questions benchmark: label, encoder (a key of
EVAL-ENCODERS' alist), activations, and the file llama.cpp runs for the row
(quantize at load keeps outlier columns in f32, which no file holds: its
llama.cpp figure is the plain Q8_0 file's).")

(defparameter *breakdown-labels*
  '(("F32" . "F32") ("F16" . "F16") ("Q8_0 :q8" . "Q8_0 q8") ("Q8_0 :q8x2" . "Q8_0 q8x2")
    ("quantize at load" . "at load") ("outlier-aware Q8_0" . "outlier"))
  "The breakdown's column heading for each row of *QUESTION-BENCH-ROWS*.")

(defun question-bench-path (key)
  "A fresh temporary path for the encoder-only copy of the format KEY."
  (scratch-file-path (format nil "qbench-~(~A~).gguf" key)))

(defun question-bench-json (label reps llama-p rows throughput)
  (flet ((row-object (r &rest fields)
           ;; a row's format, activations and threads, then FIELDS
           (list* :object (cons "format" (getf r :format))
                  (cons "activations" (string-downcase (symbol-name (getf r :activations))))
                  (cons "threads" (getf r :threads))
                  fields)))
    (list :object (cons "source" label) (cons "questions" (length model:*questions*))
          (cons "reps" reps) (cons "llama" (if llama-p :true :false))
          (cons "rows" (map 'vector
                            (lambda (r)
                              (row-object r
                                          (cons "us_per_question" (getf r :us))
                                          (cons "llama_us_per_question"
                                                (bench-number (getf r :llama-us)))
                                          (cons "ratio" (bench-number (getf r :ratio)))
                                          (cons "max_abs_dp" (getf r :max-abs-dp))))
                            rows))
          (cons "throughput" (map 'vector
                                  (lambda (r)
                                    (row-object r (cons "questions_per_second"
                                                        (getf r :per-second))))
                                  throughput)))))

;;; Questions per second: one question per Lisp thread.

(defparameter *throughput-copies* 32
  "How many times a round of the throughput table repeats the built-in
questions, so that a round's first and last questions, when fewer threads
than its count have one, are a small part of it (its threads are kept
from the round before: MAP-IN-ORDER).")

(defun questions-per-second (encoder activations thread-counts reps)
  "Questions per second of MODEL:DECIDE on ENCODER with ACTIVATIONS at each
of THREAD-COUNTS Lisp threads: the built-in questions repeated
*THROUGHPUT-COPIES* times answered by MAP-IN-ORDER (one question per
thread, as `decide --threads' answers them), the kernels on one thread
each; the median of REPS rounds, the thread counts taking turns within a
round so that a change in the machine's load falls on all of them."
  (let* ((questions (loop repeat *throughput-copies* append model:*questions*))
         (rounds (with-kernel-threads (1)
                   (loop repeat reps
                         collect (mapcar (lambda (threads)
                                           (median-microseconds
                                            (lambda ()
                                              (map-in-order threads
                                                            (lambda (submit) (mapc submit questions))
                                                            (lambda (q)
                                                              (model:decide encoder q
                                                                            :activations activations))
                                                            (lambda (q result)
                                                              (declare (ignore q result)))))
                                            1))
                                         thread-counts)))))
    (loop for i from 0 below (length thread-counts)
          collect (/ (length questions) (/ (median (mapcar (lambda (r) (nth i r)) rounds)) 1d6)))))

(defun run-throughput-table (out encoders thread-counts reps)
  "Print the throughput table on OUT: per row of *QUESTION-BENCH-ROWS*,
questions per second at each of THREAD-COUNTS Lisp threads and the last
count's speed-up over the first.  Answers the figures as a list of plists
(:format :activations :threads :per-second)."
  (format out "~&questions per second, one question per Lisp thread (as decide --threads N; ~
the kernels on 1 thread each), the built-in questions x~D per round, median of ~D round~:P~%"
          *throughput-copies* reps)
  (format out "~20A~{ ~12@A~} ~9@A~%" "format"
          (mapcar (lambda (th) (format nil "~D thread~:P" th)) thread-counts) "speed-up")
  (loop for (name key activations) in *question-bench-rows*
        for e = (cdr (assoc key encoders))
        for figures = (questions-per-second e activations thread-counts reps)
        do (format out "~20A~{ ~12,1F~} ~8,2Fx~%" name figures
                   (/ (car (last figures)) (first figures)))
           (finish-output out)
        append (loop for th in thread-counts for qps in figures
                     collect (list :format name :activations activations :threads th
                                   :per-second qps))))

(defun run-question-bench (&key file random (thread-counts '(1 2)) (reps 3)
                             (stream *standard-output*) json breakdown svg)
  "Time MODEL:DECIDE over MODEL:*QUESTIONS* (render, tokenize, encode,
head) on the model of FILE (with its decision head; RONTOLISP-ERROR when it
has none) or on a random model of the preset RANDOM with its head, for each
row of *QUESTION-BENCH-ROWS* and thread count of THREAD-COUNTS: the
microseconds per question (the median of REPS rounds of the whole set, over
its size), llama.cpp's encoder alone on the same ids and threads (an
encoder-only copy of the row's file; when its libraries are present) and
the ratio, and the row's max |dp| against the F32 row's probabilities;
then each row's questions per second at each of THREAD-COUNTS Lisp
threads, one question per thread (RUN-THROUGHPUT-TABLE).
Prints the table on STREAM; JSON T or \"-\" writes the JSON on
*STANDARD-OUTPUT* and the table on *ERROR-OUTPUT*, another JSON a file of
that path.  BREAKDOWN adds, per row at 1 thread, the time by stage, the
floor and the octets consed per question (QUESTION-BREAKDOWN), after the
table and under \"breakdown\" in the JSON.  SVG, a path, is where the
picture goes (QUESTION-BENCH-SVG).  Answers the rows as a list of plists."
  (let* ((source (if file (gguf:read file :shards t) (random-model random :type :f32)))
         (label (or file (format nil "random ~A" random)))
         (to-stdout (member json '(t "-") :test #'equal))
         (out (if to-stdout *error-output* stream))
         (paths '())
         (breakdown-rows nil)
         (old-threads (threads))
         (rows '())
         (throughput '()))
    (unwind-protect
         (progn
           (require-decision-head source label)
           (multiple-value-bind (encoders sequences files) (eval-encoders source)
             (declare (ignore sequences))
             (let* ((missing (llama-reference-missing))
                    (llama-p (not missing))
                    (noise nil)
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
                       reps (or missing
                                "the encoder alone on the same ids and threads (an encoder-only copy)"))
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
                              (ratio (and llama (/ us llama)))
                              (one (and llama (/= th 1) (gethash (list llama-key 1) llama-times))))
                         (when (and one (> llama one)) (setf noise t))
                         (format out "~20A ~7D ~12,1F ~12@A ~9@A ~11,3,2,,,,'eE~%"
                                 name th us (if llama (format nil "~,1F" llama) "-")
                                 (ratio-text ratio llama one) dp)
                         (finish-output out)
                         (push (list :format name :activations activations :threads th :us us
                                     :llama-us llama :ratio ratio :max-abs-dp dp)
                               rows))))))
               (format out "ratio: our whole path over llama.cpp's encoder alone (below 1: faster); ~
max |Δp|: against the F32 row's probabilities; the head as the file holds it~%~@[~A~%~]"
                       (and noise *ratio-noise-note*))
               (setf rows (nreverse rows))
               (setf throughput (run-throughput-table out encoders thread-counts (max reps 5)))
               (when breakdown
                 (setf (threads) 1)
                 (let* ((rounds (max reps 10))
                        (peaks (cons (%bench-peak nil 5) (%bench-peak t 5)))
                        (stages (breakdown-stages
                                 (getf (model:hyperparameters f32) :layers))))
                   (setf breakdown
                         (loop for (name key activations) in *question-bench-rows*
                               collect (cons (cdr (assoc name *breakdown-labels* :test #'string=))
                                             (question-breakdown
                                              (cdr (assoc key encoders)) activations rounds
                                              (member key '(:q8_0 :load :outlier-aware)) peaks))))
                   (print-breakdown out stages breakdown rounds peaks)
                   (setf breakdown-rows breakdown
                         breakdown (breakdown-json stages breakdown peaks))))
               (when svg
                 (question-bench-svg svg (format nil "questions benchmark: ~A" label)
                                     rows breakdown-rows))
               (when json
                 (let ((j (append (question-bench-json label reps llama-p rows throughput)
                                  (and breakdown (list (cons "breakdown" breakdown))))))
                   (if to-stdout
                       (progn (write-json j *standard-output* :indent 1) (terpri *standard-output*))
                       (with-output-to-file (s json)
                         (write-json j s :indent 1)
                         (terpri s)))))
               rows)))
      (setf (threads) old-threads)
      (mapc #'remove-scratch-file paths)
      (when file (gguf:close source)))))

(defparameter *breakdown-stage-groups*
  '(("render" :render) ("tokenize" :tokenize) ("embeddings" :embed) ("encoder layers" integer)
    ("head" :output-norm :head-input :head-attention :head-ffn :cls :softmax))
  "The stages of the breakdown as the picture stacks them: a name and the
stage keys it sums (INTEGER: every encoder layer).")

(defun question-bench-svg (path title rows breakdown)
  "The picture of the questions benchmark's ROWS (RUN-QUESTION-BENCH's) at
PATH: µs per question per format, a bar per thread count and one per
llama.cpp thread count (a time that is noise, LLAMA-NOISE-P, a grey bar of
its own); with BREAKDOWN ((label . breakdown-plist) ...,
QUESTION-BREAKDOWN's) a second panel of each format's stages stacked."
  (let ((formats (remove-duplicates (mapcar (lambda (r) (getf r :format)) rows)
                                    :test #'string= :from-end t))
        (thread-counts (remove-duplicates (mapcar (lambda (r) (getf r :threads)) rows) :from-end t)))
    (write-svg-figure
     path title
     (list* (list :kind :bars :title "µs per question, the whole path" :x-label "µs per question"
                  :x-log :auto
                  :categories formats
                  :series (append
                           (loop for (key who) in '((:us "") (:llama-us "llama.cpp encoder, "))
                                 append (loop for th in thread-counts
                                              collect (list :name (format nil "~A~D thread~:P" who th)
                                                            :points (loop for r in rows
                                                                          when (= th (getf r :threads))
                                                                            collect (cons (getf r :format)
                                                                                          (and (or (eq key :us)
                                                                                                   (not (llama-noise-p r rows)))
                                                                                               (getf r key)))))))
                           (list (list :name "llama.cpp noise (*)" :colour "#999999"
                                       :points (loop for r in rows
                                                     when (llama-noise-p r rows)
                                                       collect (cons (getf r :format) (getf r :llama-us)))))))
            (and breakdown
                 (list (list :kind :bars :stacked t :title "by stage, 1 thread"
                             :x-label "µs per question" :categories (mapcar #'car breakdown)
                             :series (loop for (name . keys) in *breakdown-stage-groups*
                                           collect (list :name name
                                                         :points (loop for (label . b) in breakdown
                                                                       collect (cons label
                                                                                     (loop for (stage . us) in (getf b :stages)
                                                                                           when (if (equal keys '(integer))
                                                                                                    (integerp stage)
                                                                                                    (member stage keys))
                                                                                             sum us)))))))))
     :what "question timings")))

;;; `bench --questions --breakdown': where a question's time goes.

(defun bytes-consed ()
  "The octets the Lisp heap has handed out since start (Boehm's count as
ECL's GC statistics keep it).  Threads allocate from free lists they
refill a few KB at a time, and the count moves at a refill: exact over
hundreds of calls, not over one."
  (values (si::gc-stats t)))

(defun least-consed (function &rest arguments)
  "The fewest octets consed by one of three calls of FUNCTION on
ARGUMENTS.  What it conses, it conses every time; a thread of the runtime
that allocates now and then (the one that takes signals, a child's exit)
lands in one call's count, not in all three."
  (loop repeat 3
        minimize (let ((b0 (bytes-consed)))
                   (apply function arguments)
                   (- (bytes-consed) b0))))

(defun breakdown-stages (layers)
  "The stages of the breakdown in the order a question runs them, as
(stage . label): the stage keys MODEL:DECIDE charges (model/stage-clock.lisp)."
  (append '((:render . "render") (:tokenize . "tokenize") (:embed . "embeddings"))
          (loop for i below layers collect (cons i (format nil "encoder layer ~D" i)))
          '((:output-norm . "output norm") (:head-input . "head input")
            (:head-attention . "head attention") (:head-ffn . "head FFN") (:cls . "cls")
            (:softmax . "softmax"))))

(defun question-breakdown (encoder activations rounds int8-p peaks)
  "MODEL:DECIDE of ENCODER with ACTIVATIONS over MODEL:*QUESTIONS*, parsed
beforehand (a question as data, as a caller keeps it) and answered into
one kept MODEL:MAKE-ANSWER, one round first (the scratch grown to its
size), then ROUNDS rounds timed by stage on the monotonic clock, then
ROUNDS rounds counting the octets consed (LEAST-CONSED), by the whole path
(render, tokenize, markers, forward pass, softmax) and by the forward pass
alone (ids to logits).
A plist: :stages, an alist (stage . µs per question), each stage's median
over the rounds (a busy machine's pauses land in one round's stage, not in
the figure); :total-us, the median round's wall time per question;
:floor-us, the forward pass's multiply-adds over PEAKS (f32 . int8), in G
per second, the encoder's matrices at the int8 peak when INT8-P; :bytes
and :forward-bytes per question."
  (let* ((questions (mapcar #'parse-question model:*questions*))
         (answer (model:make-answer))
         (n (length questions))
         (inputs (mapcar (lambda (q)
                           (multiple-value-bind (p logits ids markers)
                               (model:decide encoder q :activations activations)
                             (declare (ignore p))
                             (list (coerce ids 'list) markers (parsed-question-type q)
                                   (make-array (length logits) :element-type 'single-float))))
                         questions)))
    (flet ((run () (dolist (q questions) (model:decide encoder q :activations activations
                                                                 :into answer)))
           (per-question (x) (/ x (float (* rounds n) 1d0))))
      (let* ((timed (loop repeat rounds
                          collect (let ((clock (make-stage-clock)) (t0 (%bench-now-ns)))
                                    (let ((*stage-clock* clock))
                                      (run))
                                    (cons (- (%bench-now-ns) t0) (stage-clock-totals clock)))))
             (bytes (least-consed (lambda () (dotimes (r rounds) (run)))))
             (forward (let ((head (head-of encoder 'model:decide)))
                        (least-consed
                         (lambda ()
                           (dotimes (r rounds)
                             (loop for (ids markers type out) in inputs
                                   do (decision-logits encoder head ids markers type activations
                                                       out)))))))
             (floor (loop for (ids markers) in inputs
                          sum (multiple-value-bind (w o)
                                  (question-macs encoder (length ids) (length markers))
                                (/ (+ (/ w (if int8-p (cdr peaks) (car peaks))) (/ o (car peaks)))
                                   1d3)))))
        (flet ((us (ns) (/ ns (* 1d3 n))))
          (list :stages (loop for stage being the hash-keys of (cdr (first timed))
                              collect (cons stage
                                            (us (median (mapcar (lambda (r) (gethash stage (cdr r) 0))
                                                                timed)))))
                :total-us (us (median (mapcar #'car timed)))
                :floor-us (/ floor n)
                :bytes (per-question bytes) :forward-bytes (per-question forward)))))))

(defun print-breakdown (out stages rows rounds peaks)
  "The breakdown table of ROWS ((label . breakdown-plist) ...) on OUT."
  (format out "~&breakdown: µs per question by stage, 1 thread, the median of ~D round~:P (monotonic ~
nanosecond clock; the sum of the stages' medians need not be the median total); floor: the forward pass's multiply-adds over one core's peak measured now, ~
f32 FMA ~,1F G/s, int8 ~,1F G/s (~A); octets consed per question, the whole path (the question parsed ~
beforehand, answered into a kept model:make-answer) and ids to logits~%"
          rounds (car peaks) (cdr peaks) (getf (%cpu-info) :best))
  (format out "~18A~{ ~10@A~}~%" "stage" (mapcar #'car rows))
  (flet ((line (label fn fmt)
           (format out "~18A~{ ~10@A~}~%" label
                   (mapcar (lambda (r) (let ((v (funcall fn (cdr r))))
                                         (if v (format nil fmt v) "-")))
                           rows))))
    (loop for (stage . label) in stages
          do (let ((stage stage))
               (line label (lambda (b) (cdr (assoc stage (getf b :stages)))) "~,1F")))
    (line "sum of stages" (lambda (b) (reduce #'+ (getf b :stages) :key #'cdr)) "~,1F")
    (line "total" (lambda (b) (getf b :total-us)) "~,1F")
    (line "floor" (lambda (b) (getf b :floor-us)) "~,1F")
    (line "bytes/question" (lambda (b) (round (getf b :bytes))) "~D")
    (line "bytes, forward" (lambda (b) (round (getf b :forward-bytes))) "~D")))

(defun breakdown-json (stages rows peaks)
  (list :object
        (cons "peak_gmacs" (list :object (cons "f32" (car peaks)) (cons "int8" (cdr peaks))))
        (cons "rows"
              (map 'vector
                   (lambda (r)
                     (let ((b (cdr r)))
                       (list :object (cons "format" (car r))
                             (cons "stages_us"
                                   (cons :object
                                         (loop for (stage . label) in stages
                                               collect (cons label (or (cdr (assoc stage (getf b :stages)))
                                                                       0d0)))))
                             (cons "total_us" (getf b :total-us))
                             (cons "floor_us" (getf b :floor-us))
                             (cons "bytes_per_question" (getf b :bytes))
                             (cons "forward_bytes_per_question" (getf b :forward-bytes)))))
                   rows))))
