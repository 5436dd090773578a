;;;; eval.lisp - `rontolisp eval': how far each way of running an encoder in
;;;; less than f32 lands from the F32 model (doc/outliers.md), the seed's accuracy
;;;; table measured on our own models.
;;;;
;;;; The ways: the F32 file itself, an F16 file (with a decision head, also
;;;; one whose head is F16, convert --head-type f16), a Q8_0 file, an
;;;; outlier-aware Q8_0 file (convert --outlier-aware's scales), the F32
;;;; file and the F16 file quantized at load (MODEL:LOAD :quantize :q8_0),
;;;; the Q8_0 ones with :q8 and :q8x2 activations.  The files are made in memory from the F32
;;;; weights as the converter's type policy stores them (FILE-IN-FORMAT), one
;;;; calibration (MODEL:CALIBRATE) serving the outlier-aware file and the
;;;; quantize-at-load; the errors are taken over the built-in calibration
;;;; sequences, against the F32 model's hidden states.  With a decision head
;;;; each way's decisions are measured too, over the built-in questions or a
;;;; question file (READ-QUESTION-FILE): QUESTION-FIGURES, which the trained
;;;; model's golden table uses as well.  With QUANTS, also the files
;;;; `quantize' writes of those file types from the F32 file
;;;; (QUANTIZED-ENCODERS), each made in a temporary file removed at once.

(in-package "COMMAND-LINE")

(defparameter *eval-ways*
  '(("F32" :f32 nil) ("F16 file" :f16 nil) ("F16 file, head F16" :f16-head nil)
    ("Q8_0 file" :q8_0 :q8) ("Q8_0 file" :q8_0 :q8x2)
    ("outlier-aware Q8_0 file" :outlier-aware :q8) ("outlier-aware Q8_0 file" :outlier-aware :q8x2)
    ("quantize at load" :load :q8) ("quantize at load" :load :q8x2)
    ("F16 quantized at load" :load-f16 :q8) ("F16 quantized at load" :load-f16 :q8x2))
  "The rows of `rontolisp eval': label, encoder, activations (NIL: the
weights are floats, and activations do not apply).  A row whose encoder
EVAL-ENCODERS does not make (the F16 head of a model without one) is left
out.")

(defun quant-way (type)
  "The row of `eval --quants' for quantize's file type TYPE (a name of
*QUANTIZE-FTYPES*): label, encoder key and activations (q8x2, as the Q8_0
file's row the seed bounds; most of a K-quant file is widened to F32 at
load, and its Q8_0 fall backs take them)."
  (list (format nil "~A file (quantize)" (string-upcase type))
        (intern (string-upcase type) "KEYWORD") :q8x2))

(defun eval-quant-types (string)
  "The file types of `eval --quants STRING': \"all\" for every quantized
type quantize writes but Q8_0 (a row already), each once (Q4_0 ... IQ4_XS),
else STRING's comma-separated names, each one of *QUANTIZE-FTYPES* in any
case (FIND-FTYPE: anything else is a USAGE-ERROR naming it).  Answers the
canonical names, in order."
  (if (string-equal string "all")
      (loop for (name ftype) in (remove-duplicates *quantize-ftypes* :key #'second :from-end t)
            unless (member ftype '(0 1 7 32))
              collect name)
      (loop for part in (split-at-separator string ",")
            for name = (string-trim " " part)
            if (string= name "")
              do (usage-error "--quants: expected file types separated by commas, found ~S" string)
            else collect (first (handler-case (find-ftype name)
                                  (usage-error (c)
                                    (usage-error "--quants: ~A" (condition-line c))))))))

(defun call-with-quantized-file (in type function)
  "Quantize the GGUF file IN as `quantize IN OUT TYPE' does (QUANTIZE-FILE,
its defaults) into a temporary file (TEMPORARY-PATH), call FUNCTION with
its path, and remove the file however FUNCTION is left (an interrupt
included, WITH-TEMPORARY-FILE).  Answers FUNCTION's values."
  (let ((name (string-downcase (if (symbolp type) (symbol-name type) type))))
    (with-temporary-file (out (temporary-path (format nil "quant-~A.gguf" name)) "quant")
      (let ((*standard-output* *error-output*))
        (quantize-file in out :type type))
      (funcall function out))))

(defun quantized-encoders (f32 types)
  "An alist from the key of QUANT-WAY of each of TYPES to the encoder of
the file quantize writes of that type from F32 (a GGUF file object, written
to a temporary file first; CALL-WITH-QUANTIZED-FILE).  No file is left."
  (and types
       (with-temporary-file (in (temporary-path "quant-f32.gguf") "f32")
         (gguf:write in f32)
         (loop for type in types
               collect (cons (second (quant-way type))
                             (call-with-quantized-file in type #'model:load))))))

(defun eval-encoders (source &key f16-head)
  "The encoders `eval' compares, from the GGUF file object SOURCE: an alist
from :f32, :f16, :q8_0, :outlier-aware, :load and :load-f16 (the F16 file
quantized at load), and with F16-HEAD and a decision head :f16-head (the
F16 file with the head's matrices F16 too), to encoders, the
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
     (remove nil
      (list (cons :f32 reference)
            (cons :f16 (model:load f16))
            (and f16-head (decision-head-p source)
                 (cons :f16-head (model:load (file-in-format source :f16 nil :f16))))
            (cons :q8_0 (model:load q8))
            (cons :outlier-aware (model:load outlier-aware))
            (cons :load (model:load f32 :quantize :q8_0 :calibration calibration))
            (cons :load-f16 (model:load f16 :quantize :q8_0 :calibration calibration))))
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

(defun question-probabilities (model activations &optional (questions model:*questions*))
  "MODEL:DECIDE's probabilities of MODEL with ACTIVATIONS for each of
QUESTIONS (by default MODEL:*QUESTIONS*), in order."
  (mapcar (lambda (q) (model:decide model q :activations activations)) questions))

(defun max-probability-error (probabilities references)
  "The largest |p - r|, a double-float, over the probability vectors of the
list PROBABILITIES against those of REFERENCES (the same questions)."
  (let ((worst 0d0))
    (loop for p in probabilities for r in references
          do (loop for a across p for b across r
                   do (setf worst (max worst (abs (- (float a 1d0) (float b 1d0)))))))
    worst))

;;; Questions from a file (eval --questions FILE, export): decide's form,
;;; and an "answer" for the accuracy.

(defun winning-option (probabilities)
  "The index of the largest of the vector PROBABILITIES, the first on ties."
  (let ((best 0))
    (dotimes (i (length probabilities) best)
      (when (> (aref probabilities i) (aref probabilities best)) (setf best i)))))

(defun question-answer (question)
  "The \"answer\" of QUESTION (the right option's index), or NIL when it
carries none (the built-in questions carry none)."
  (and (hash-table-p question) (gethash "answer" question)))

(defun read-question-file (path)
  "The questions of the JSONL file PATH, one per line in `decide''s form (a
JSON object; \"answer\", when there, the index of the right option), in
order.  Signals MODEL:QUESTION-ERROR naming PATH and the line for a line
that is not a JSON object or whose \"answer\" is not the index of one of
its options, and for a file without questions."
  (let ((questions '()))
    (map-file-lines
     (lambda (octets number)
       (flet ((bad (control &rest args)
                (model:question-error "~A line ~D: ~?" (lines-name path) number control args)))
         (let ((q (handler-case (question-line-object octets)
                    (model:question-error (c) (bad "~A" (rontolisp-error-message c))))))
           (multiple-value-bind (answer found) (gethash "answer" q)
             (let ((options (gethash "options" q)))
               (when (and found (not (and (integerp answer) (vectorp options)
                                          (< -1 answer (length options)))))
                 (bad "expected \"answer\" to be the index of an option, 0 to ~D, found ~A"
                      (if (vectorp options) (1- (length options)) "?") (json-brief answer)))))
           (push q questions))))
     path)
    (unless questions
      (model:question-error "~A: expected questions, one per line, found none" (lines-name path)))
    (nreverse questions)))

(defun reference-decisions (model questions path)
  "QUESTION-PROBABILITIES of MODEL (:q8) on QUESTIONS; when they come from
the file PATH, a question MODEL cannot answer signals MODEL:QUESTION-ERROR
naming PATH and its line."
  (if (null path)
      (question-probabilities model :q8 questions)
      (loop for q in questions for number from 1
            collect (handler-case (model:decide model q :activations :q8)
                      (rontolisp-error (c)
                        (model:question-error "~A line ~D: ~A" (lines-name path) number
                                              (rontolisp-error-message c)))))))

(defun decision-accuracy (probabilities questions)
  "The share of QUESTIONS that carry an \"answer\" whose winning option in
PROBABILITIES (one vector per question) is that answer, a double-float; NIL
when none carries one."
  (let ((right 0) (answered 0))
    (loop for p in probabilities for q in questions
          for answer = (question-answer q)
          when answer
            do (incf answered)
               (when (= answer (winning-option p)) (incf right)))
    (and (plusp answered) (/ right (float answered 1d0)))))

(defun question-figures (model questions activations references)
  "MODEL's decisions with ACTIVATIONS on QUESTIONS against REFERENCES (the
reference's probability vectors, one per question): a plist of :max-abs-dp
(the largest |dp| over every option of every question), :other-winners (the
share of questions whose winning option is not the reference's) and
:accuracy (DECISION-ACCURACY).  The second value is a list of (ids markers)
per question, as MODEL:DECIDE answers them."
  (let ((probabilities '()) (tokens '()))
    (dolist (q questions)
      (multiple-value-bind (p logits ids markers) (model:decide model q :activations activations)
        (declare (ignore logits))
        (push p probabilities)
        (push (list ids markers) tokens)))
    (setf probabilities (nreverse probabilities))
    (values (list :max-abs-dp (max-probability-error probabilities references)
                  :other-winners (/ (loop for p in probabilities for r in references
                                          count (/= (winning-option p) (winning-option r)))
                                    (float (max 1 (length questions)) 1d0))
                  :accuracy (decision-accuracy probabilities questions))
            (nreverse tokens))))

(defun eval-row (encoder activations sequences references reps &optional questions probabilities)
  "The figures of ENCODER with ACTIVATIONS (NIL: :q8, which float weights
ignore) over SEQUENCES, against REFERENCES (the F32 model's hidden states of
each): a plist of the worst max |error| and the least cosine of the mean
pooled and of the per-token hidden states, and the microseconds per
sequence (the median of REPS timings of the whole set, over its length).
With QUESTIONS and PROBABILITIES (the F32 model's on them) also
QUESTION-FIGURES' :max-abs-dp, :other-winners and :accuracy of its decisions
on them."
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
    (append (and probabilities (question-figures encoder questions act probabilities))
            (list :pooled-max-abs-error pooled-error :pooled-cosine pooled-cosine
                  :token-max-abs-error token-error :token-cosine token-cosine
                  :us-per-sequence (/ (median-microseconds
                                       (lambda () (dolist (ids sequences)
                                                    (model:encode encoder ids :activations act)))
                                       reps)
                                      (length sequences))))))

(defun stored-file-activations (f)
  "The activations the row of the GGUF file object F as stored runs with:
:q8 when it holds a Q8_0 tensor (the int8 product), else NIL (float weights,
and the K-quants and the like are widened to F32 at load)."
  (and (find "Q8_0" (gguf:tensor-infos f) :key #'gguf:tensor-info-type :test #'string=) :q8))

(defun run-eval (&key file reference random (massive 0) (massive-ratio 20) (seed 1) sequences
                   (reps 3) questions quants (stream *standard-output*) json svg)
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
signals RONTOLISP-ERROR) each way also gets QUESTION-FIGURES against the
F32 model (the head as the file holds it): :max-abs-dp, :other-winners and
:accuracy over the questions of the file QUESTIONS when it is a path
(READ-QUESTION-FILE), else over MODEL:*QUESTIONS*.  QUANTS, a list of
quantize's file types (EVAL-QUANT-TYPES), adds a row for each, the file
`quantize' writes of that type from the F32 file (QUANTIZED-ENCODERS).  Prints the table on STREAM, or one JSON
object with JSON.  With SVG (a path) also the picture of each way's error
after each layer (EVAL-SVG).  Answers the rows as a list of plists."
  (let* ((question-file (and (stringp questions) questions))
         ;; read before any file is opened: a bad line leaves nothing open
         (question-list (if question-file (read-question-file question-file) model:*questions*))
         (stored (and reference (gguf:read file :shards t)))
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
         (multiple-value-bind (built all files)
             (progn (when reference (check-same-model source stored reference file))
                    (when questions (require-decision-head source label))
                    (eval-encoders source :f16-head t))
           (let* ((encoders (append built (quantized-encoders (cdr (assoc :f32 files)) quants)))
                  (ways (append (remove-if-not (lambda (way) (assoc (second way) encoders))
                                               *eval-ways*)
                                (mapcar #'quant-way quants)))
                  (sequences (if sequences (subseq all 0 (min sequences (length all))) all))
                  (f32 (cdr (assoc :f32 encoders)))
                  (references (mapcar (lambda (ids) (model:encode f32 ids)) sequences))
                  (probabilities (and (decision-head-p source)
                                      (reference-decisions f32 question-list question-file)))
                  (report (progress-reporter (+ (length ways) (if stored 1 0))))
                  (stored-encoder (and stored (model:load stored)))
                  (stored-row (and stored
                                   (let ((act (stored-file-activations stored)))
                                     (prog1 (list* :way "file as stored" :activations act
                                                   (eval-row stored-encoder act sequences
                                                             references reps question-list
                                                             probabilities))
                                       (funcall report 1 "file as stored")))))
                  (rows (append
                         (and stored-row (list stored-row))
                         (loop for (name key activations) in ways
                               for i from (if stored 2 1)
                               collect (list* :way name :activations activations
                                              (eval-row (cdr (assoc key encoders)) activations
                                                        sequences references reps question-list
                                                        probabilities))
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
                                     (cons "question_file" (or (and probabilities question-file) :null))
                                     (cons "rows" (map 'vector #'eval-row-json rows)))
                               stream :indent 2)
                   (terpri stream))
                 (print-eval-table stream label reference lengths rows
                                   (and probabilities (length probabilities)) question-file))
             (when svg
               (eval-svg svg (format nil "eval: ~A" label) f32 sequences
                         (append (and stored (list (list "file as stored" stored-encoder
                                                         (getf stored-row :activations))))
                                 (loop for (name key activations) in ways
                                       collect (list name (cdr (assoc key encoders)) activations)))))
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
        (cons "max_abs_dp" (or (getf row :max-abs-dp) :null))
        (cons "other_winners" (or (getf row :other-winners) :null))
        (cons "accuracy" (or (getf row :accuracy) :null))))

(defun print-eval-table (stream label reference lengths rows questions question-file)
  "The table of RUN-EVAL's ROWS on STREAM; QUESTIONS the number of questions
the decisions were measured on (NIL: none), QUESTION-FILE their file (NIL:
the built-in ones)."
  (format stream "~&eval: ~A, ~D calibration sequence~:P (~D to ~D tokens), ~D thread~:P~%~
error against the F32 model~@[ of the reference ~A~]: worst max |error|, least cosine; ~
mean pooling and per token~%"
          label (length lengths) (reduce #'min lengths) (reduce #'max lengths) (threads)
          reference)
  (let ((dp-p (and questions t))
        (right-p (getf (first rows) :accuracy)))
    (when dp-p
      (format stream "over the ~D ~:[built-in questions (model:*questions*)~;~:*questions of ~A~]: ~
max |Δp| the largest probability difference from the F32 model's, other the share of ~
questions whose winning option is not its~:[~;, right the share won by their \"answer\"~]~%"
              questions question-file right-p))
    (format stream "~24A ~5A ~11@A ~12@A ~11@A ~12@A ~10@A~:[~2*~; ~11@A ~6@A~]~:[~*~; ~6@A~]~%"
            "way" "act" "pooled err" "pooled cos" "token err" "token cos" "µs/seq"
            dp-p "max |Δp|" "other" right-p "right")
    (dolist (row rows)
      (format stream "~24A ~5A ~11,3,2,,,,'eE ~12,8F ~11,3,2,,,,'eE ~12,8F ~10,1F"
              (getf row :way) (if (getf row :activations)
                                  (string-downcase (symbol-name (getf row :activations)))
                                  "-")
              (getf row :pooled-max-abs-error) (getf row :pooled-cosine)
              (getf row :token-max-abs-error) (getf row :token-cosine)
              (getf row :us-per-sequence))
      (when dp-p
        (format stream " ~11,3,2,,,,'eE ~6,3F" (getf row :max-abs-dp) (getf row :other-winners)))
      (when right-p
        (format stream " ~6,3F" (getf row :accuracy)))
      (terpri stream))))

;;; `eval --svg': the error after each layer.

(defun layer-states (encoder ids activations)
  "The hidden states of ENCODER with ACTIVATIONS (NIL: :q8) on the token
IDS after each encoder layer (before the output norm), a list of n x d
single-float matrices, one per layer (MODEL:*LAYER-HOOK*)."
  (let ((states '()))
    (let ((model:*layer-hook* (lambda (i x n)
                          (declare (ignore i))
                          (let ((copy (make-array (list n (array-dimension x 1))
                                                  :element-type 'single-float)))
                            (replace (make-array (array-total-size copy) :element-type 'single-float
                                                                         :displaced-to copy)
                                     (make-array (array-total-size x) :element-type 'single-float
                                                                      :displaced-to x))
                            (push copy states)))))
      (model:encode encoder ids :activations (or activations :q8)))
    (nreverse states)))

(defun layer-errors (reference ways sequences)
  "Per way of WAYS ((name encoder activations) ...), the largest max |error|
of its hidden states after each layer against those of the encoder
REFERENCE over SEQUENCES: a list of lists of double-floats, one per layer.
One sequence's states are held at a time."
  (let ((worst (mapcar (lambda (w) (declare (ignore w)) nil) ways)))
    (dolist (ids sequences worst)
      (let ((ref (layer-states reference ids nil)))
        (setf worst
              (loop for (nil encoder activations) in ways
                    for old in worst
                    collect (loop for a in (layer-states encoder ids activations)
                                  for b in ref
                                  for i from 0
                                  collect (max (hidden-state-error a b) (or (nth i old) 0d0)))))))))

(defun eval-svg (path title reference sequences ways)
  "The picture of `eval': each way of WAYS ((name encoder activations) ...)
as a line of its largest max |error| after each layer against the encoder
REFERENCE's, over SEQUENCES, on a logarithmic axis (an error of 0, the
F32 way's, on the axis's floor)."
  (let ((errors (layer-errors reference ways sequences)))
    (write-svg-figure
     path title
     (list (list :title "error after each layer against F32"
                 :x-label "encoder layer" :y-label "max |error| of the hidden states" :y-log t
                 :series (loop for (name nil activations) in ways
                               for e in errors
                               collect (list :name (format nil "~A~@[ :~(~A~)~]" name activations)
                                             :dashed (eq activations :q8x2)
                                             :points (loop for x in e for i from 0
                                                           collect (cons i x))))))
     :columns 1 :panel-size '(640 380)
     :notes (list (format nil "~D calibration sequence~:P; the hidden states before the output norm; ~
a way at 0 lies on the lowest tick" (length sequences)))
     :what "layer errors")))
