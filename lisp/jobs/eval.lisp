;;;; eval.lisp - `rontolisp eval': how far each way of running an encoder in
;;;; less than f32 lands from the F32 model (doc/outliers.md), the seed's accuracy
;;;; table measured on our own models.
;;;;
;;;; The ways: the F32 file itself, an F16 file, a Q8_0 file, an
;;;; outlier-aware Q8_0 file (convert --outlier-aware's scales) and the F32
;;;; file quantized at load (MODEL:LOAD :quantize :q8_0), the Q8_0 ones with
;;;; :q8 and :q8x2 activations.  The files are made in memory from the F32
;;;; weights as the converter's type policy stores them (FILE-IN-FORMAT), one
;;;; calibration (MODEL:CALIBRATE) serving the outlier-aware file and the
;;;; quantize-at-load; the errors are taken over the built-in calibration
;;;; sequences, against the F32 model's hidden states.

(in-package "COMMAND-LINE")

(defparameter *eval-ways*
  '(("F32" :f32 nil) ("F16 file" :f16 nil)
    ("Q8_0 file" :q8_0 :q8) ("Q8_0 file" :q8_0 :q8x2)
    ("outlier-aware Q8_0 file" :outlier-aware :q8) ("outlier-aware Q8_0 file" :outlier-aware :q8x2)
    ("quantize at load" :load :q8) ("quantize at load" :load :q8x2))
  "The rows of `rontolisp eval': label, encoder, activations (NIL: the
weights are floats, and activations do not apply).")

(defun eval-encoders (source)
  "The encoders `eval' compares, from the GGUF file object SOURCE: an alist
from :f32, :f16, :q8_0, :outlier-aware and :load to encoders, the
calibration sequences, and an alist from :f32, :f16, :q8_0 and
:outlier-aware to the in-memory files they were loaded from (FILE-IN-FORMAT;
a decision head keeps its types)."
  (let* ((f32 (file-in-format source :f32))
         (f16 (file-in-format source :f16))
         (q8 (file-in-format source :q8_0))
         (calibration (model:calibrate f32))
         (outlier-aware (file-in-format source :q8_0 (calibration-outlier-table calibration)))
         (reference (model:load f32)))
    (values
     (list (cons :f32 reference)
           (cons :f16 (model:load f16))
           (cons :q8_0 (model:load q8))
           (cons :outlier-aware (model:load outlier-aware))
           (cons :load (model:load f32 :quantize :q8_0 :calibration calibration)))
     (calibration-sequences (model:hyperparameters reference))
     (list (cons :f32 f32) (cons :f16 f16) (cons :q8_0 q8) (cons :outlier-aware outlier-aware)))))

(defun decision-head-p (f)
  "True when the GGUF file object F holds a decision head
(modern-bert.decision.block_count above 0)."
  (let ((blocks (gguf:value f "modern-bert.decision.block_count")))
    (and (integerp blocks) (plusp blocks))))

(defun require-decision-head (f label)
  "Signal RONTOLISP-ERROR naming LABEL unless the GGUF file object F holds
a decision head: --questions needs one."
  (unless (decision-head-p f)
    (rontolisp-error 'questions "~A: expected a decision head for --questions ~
(modern-bert.decision.block_count above 0), found none" label)))

(defun question-probabilities (model activations)
  "MODEL:DECIDE's probabilities of MODEL with ACTIVATIONS for each question
of MODEL:*QUESTIONS*, in order."
  (mapcar (lambda (q) (model:decide model q :activations activations)) model:*questions*))

(defun max-probability-error (probabilities references)
  "The largest |p - r|, a double-float, over the probability vectors of the
list PROBABILITIES against those of REFERENCES (the same questions)."
  (let ((worst 0d0))
    (loop for p in probabilities for r in references
          do (loop for a across p for b across r
                   do (setf worst (max worst (abs (- (float a 1d0) (float b 1d0)))))))
    worst))

(defun eval-row (encoder activations sequences references reps &optional probabilities)
  "The figures of ENCODER with ACTIVATIONS (NIL: :q8, which float weights
ignore) over SEQUENCES, against REFERENCES (the F32 model's hidden states of
each): a plist of the worst max |error| and the least cosine of the mean
pooled and of the per-token hidden states, and the microseconds per
sequence (the median of REPS timings of the whole set, over its length).
With PROBABILITIES (the F32 model's on MODEL:*QUESTIONS*) also :max-abs-dp,
the largest probability difference of its decisions on them."
  (let ((act (or activations :q8))
        (pooled-error 0d0) (pooled-cosine 1d0) (token-error 0d0) (token-cosine 1d0))
    (loop for ids in sequences for ref in references
          do (let ((hidden (model:encode encoder ids :activations act)))
               (multiple-value-bind (err big cos) (hidden-state-error hidden ref)
                 (declare (ignore big))
                 (setf token-error (max token-error err) token-cosine (min token-cosine cos)))
               (multiple-value-bind (err big cos)
                   (hidden-state-error (pool hidden :mean) (pool ref :mean))
                 (declare (ignore big))
                 (setf pooled-error (max pooled-error err) pooled-cosine (min pooled-cosine cos)))))
    (list :max-abs-dp (and probabilities
                           (max-probability-error (question-probabilities encoder act)
                                                  probabilities))
          :pooled-max-abs-error pooled-error :pooled-cosine pooled-cosine
          :token-max-abs-error token-error :token-cosine token-cosine
          :us-per-sequence (/ (median-microseconds
                               (lambda () (dolist (ids sequences)
                                            (model:encode encoder ids :activations act)))
                               reps)
                              (length sequences)))))

(defun stored-file-activations (f)
  "The activations the row of the GGUF file object F as stored runs with:
:q8 when it holds a Q8_0 tensor (the int8 product), else NIL (float weights,
and the K-quants and the like are widened to F32 at load)."
  (and (find "Q8_0" (gguf:tensor-infos f) :key #'gguf:tensor-info-type :test #'string=) :q8))

(defun run-eval (&key file reference random (massive 0) (massive-ratio 20) (seed 1) sequences
                   (reps 3) questions (stream *standard-output*) json)
  "Measure every way of *EVAL-WAYS* of running the encoder of FILE (a GGUF
path; its matrices are first widened to F32, the reference) or of a random
model of the preset RANDOM (encoder only unless QUESTIONS, F32, MASSIVE
channels MASSIVE-RATIO times larger, weights from SEED) against the F32
model over the built-in calibration sequences (only the first SEQUENCES of
them when given), timing each REPS times.  With REFERENCE (the model FILE
was made from: a GGUF path or a model directory, READ-REFERENCE) the ways are made from REFERENCE's weights
instead, every way is measured against REFERENCE widened to F32, and FILE
as stored gets the first row, \"file as stored\"; REFERENCE must hold the
same model as FILE (CHECK-SAME-MODEL).  When the model has a decision
head (FILE's, or RANDOM's with QUESTIONS; QUESTIONS on a FILE without one
signals RONTOLISP-ERROR) each way also gets :max-abs-dp, its largest
probability difference from the F32 model's over MODEL:*QUESTIONS* (the
head as the file holds it).  Prints the table on STREAM, or one JSON
object with JSON.  Answers the rows as a list of plists."
  (let* ((stored (and reference (gguf:read file :shards t)))
         (temporary nil)
         (source (cond (reference
                        (multiple-value-bind (f tmp)
                            (read-reference reference :encoder-only (not (decision-head-p stored)))
                          (setf temporary tmp)
                          f))
                       (file (gguf:read file))
                       (t (random-model random :type :f32 :encoder-only (not questions)
                                               :massive massive
                                               :massive-ratio massive-ratio :seed seed))))
         (label (if file
                    file
                    (format nil "random ~A~[~:;~:* --massive ~D~] --seed ~D~:[~; --questions~]"
                            random massive seed questions))))
    (unwind-protect
         (multiple-value-bind (encoders all)
             (progn (when reference (check-same-model source stored reference file))
                    (when questions (require-decision-head source label))
                    (eval-encoders source))
           (let* ((sequences (if sequences (subseq all 0 (min sequences (length all))) all))
                  (f32 (cdr (assoc :f32 encoders)))
                  (references (mapcar (lambda (ids) (model:encode f32 ids)) sequences))
                  (probabilities (and (decision-head-p source) (question-probabilities f32 :q8)))
                  (report (progress-reporter (+ (length *eval-ways*) (if stored 1 0))))
                  (stored-row (and stored
                                   (let ((act (stored-file-activations stored)))
                                     (prog1 (list* :way "file as stored" :activations act
                                                   (eval-row (model:load stored) act sequences
                                                             references reps probabilities))
                                       (funcall report 1 "file as stored")))))
                  (rows (append
                         (and stored-row (list stored-row))
                         (loop for (name key activations) in *eval-ways*
                               for i from (if stored 2 1)
                               collect (list* :way name :activations activations
                                              (eval-row (cdr (assoc key encoders)) activations
                                                        sequences references reps probabilities))
                               do (funcall report i name))))
                  (lengths (mapcar #'length sequences)))
             (if json
                 (progn
                   (write-json (list :object (cons "source" label)
                                     (cons "reference" (or reference :null))
                                     (cons "sequences" (length sequences))
                                     (cons "tokens" (reduce #'+ lengths))
                                     (cons "threads" (threads))
                                     (cons "questions" (if probabilities (length probabilities) 0))
                                     (cons "rows" (map 'vector #'eval-row-json rows)))
                               stream :indent 2)
                   (terpri stream))
                 (print-eval-table stream label reference lengths rows))
             rows))
      (when stored (gguf:close stored))
      (cond (reference (close-reference source temporary))
            (file (gguf:close source))))))

(defun eval-row-json (row)
  (list :object (cons "way" (getf row :way))
        (cons "activations" (if (getf row :activations)
                                (string-downcase (symbol-name (getf row :activations)))
                                :null))
        (cons "pooled_max_abs_error" (getf row :pooled-max-abs-error))
        (cons "pooled_cosine" (getf row :pooled-cosine))
        (cons "token_max_abs_error" (getf row :token-max-abs-error))
        (cons "token_cosine" (getf row :token-cosine))
        (cons "us_per_sequence" (getf row :us-per-sequence))
        (cons "max_abs_dp" (or (getf row :max-abs-dp) :null))))

(defun print-eval-table (stream label reference lengths rows)
  (format stream "~&eval: ~A, ~D calibration sequence~:P (~D to ~D tokens), ~D thread~:P~%~
error against the F32 model~@[ of the reference ~A~]: worst max |error|, least cosine; ~
mean pooling and per token~%"
          label (length lengths) (reduce #'min lengths) (reduce #'max lengths) (threads)
          reference)
  (let ((dp-p (getf (first rows) :max-abs-dp)))
    (when dp-p
      (format stream "max |Δp|: the largest probability difference from the F32 model's over ~
the ~D built-in questions (model:*questions*)~%" (length model:*questions*)))
    (format stream "~24A ~5A ~11@A ~12@A ~11@A ~12@A ~10@A~:[~; ~11@A~]~%"
            "way" "act" "pooled err" "pooled cos" "token err" "token cos" "µs/seq"
            dp-p "max |Δp|")
    (dolist (row rows)
      (format stream "~24A ~5A ~11,3,2,,,,'eE ~12,8F ~11,3,2,,,,'eE ~12,8F ~10,1F~@[ ~11,3,2,,,,'eE~]~%"
              (getf row :way) (if (getf row :activations)
                                  (string-downcase (symbol-name (getf row :activations)))
                                  "-")
              (getf row :pooled-max-abs-error) (getf row :pooled-cosine)
              (getf row :token-max-abs-error) (getf row :token-cosine)
              (getf row :us-per-sequence) (getf row :max-abs-dp)))))
