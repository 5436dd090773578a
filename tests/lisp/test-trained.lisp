;;;; test-trained.lisp - a trained model against its PyTorch reference, per
;;;; format: the table of how far each way of running the model moves its
;;;; probabilities.  tests/models/pico-tasks/ is s1-pico trained by
;;;; tools/train/train.py on three question types with an answer, in the Laya
;;;; layout, with 200 held-out questions (questions.jsonl, each with its
;;;; "answer") and tools/train/reference.py's answers on them (golden.json).
;;;; The model is converted here with the product's own commands (convert;
;;;; the quantize files as `eval --quants' makes them, CALL-WITH-QUANTIZED-FILE
;;;; on the F32 file); no PyTorch runs.  For each way: the ids and markers equal the
;;;; golden's, the largest |dp| over every option of every question within the
;;;; way's bound, and the share of questions whose winning option is not
;;;; PyTorch's is printed beside it (README, "A trained model").

(in-package "RONTOLISP-TESTS")

(def-suite trained :in all
  :description "A trained decision model against its PyTorch goldens, per format.")
(in-suite trained)

(defparameter *trained-ways*
  ;; (name file activations quantize-at-load bound); FILE is a key of
  ;; *TRAINED-FILES*, or a file type of quantize's, quantized from :f32.
  '(("F32 (from safetensors)" :f32 :q8 nil 1d-3)
    ("F16 file" :f16 :q8 nil 1d-3)
    ("F16 file, head F16 too" :f16-head :q8 nil 2d-3)
    ("F32, Q8_0 at load, q8x2" :f32 :q8x2 :q8_0 2d-2)
    ("F16 file, Q8_0 at load, q8x2" :f16 :q8x2 :q8_0 2d-2)
    ("Q8_0 file, q8x2" :q8_0 :q8x2 nil 3d-2)
    ("Q8_0 file, single-pass q8" :q8_0 :q8 nil 4d-2)
    ("outlier-aware Q8_0 file, q8x2" :q8_0-outlier :q8x2 nil 2d-2)
    ("outlier-aware Q8_0 file, q8" :q8_0-outlier :q8 nil 5d-2)
    ("Q2_K (quantize)" :q2_k :q8x2 nil 3d-1)
    ("Q3_K_S (quantize)" :q3_k_s :q8x2 nil 3d-1)
    ("Q3_K_M (quantize)" :q3_k_m :q8x2 nil 1d-1)
    ("Q3_K_L (quantize)" :q3_k_l :q8x2 nil 2d-1)
    ("Q4_K_S (quantize)" :q4_k_s :q8x2 nil 1.5d-1)
    ("Q4_K_M (quantize)" :q4_k_m :q8x2 nil 4d-1)
    ("Q5_K_S (quantize)" :q5_k_s :q8x2 nil 2d-1)
    ("Q5_K_M (quantize)" :q5_k_m :q8x2 nil 1.5d-1)
    ("Q6_K (quantize)" :q6_k :q8x2 nil 2d-2))
  "Each way of running the trained model: its name in the table, the file,
the activations of Q8_0 products, whether MODEL:LOAD quantizes the encoder,
and the bound on max |dp| against PyTorch.  The seed's bounds where it has
one (F32 and F16 1e-3, quantize at load with q8x2 2e-2, the Q8_0 file 3e-2,
single-pass q8 activations 4e-2); the others what they measured (README)
with margin.  The K-quant files are what `quantize' writes for s1-pico,
whose 64-wide rows do not split into 256-value K blocks: mostly the
fall-back types, the head's matrices quantized too.")

(defparameter *trained-files*
  ;; (key recipe): the executable's arguments, {dir} the scratch directory,
  ;; {laya} the model's directory.
  '((:f32 ("convert" "{laya}" "{dir}/f32.gguf" "--type" "f32"))
    (:f16 ("convert" "{laya}" "{dir}/f16.gguf" "--type" "f16"))
    (:f16-head ("convert" "{laya}" "{dir}/f16-head.gguf" "--type" "f16" "--head-type" "f16"))
    (:q8_0 ("convert" "{laya}" "{dir}/q8_0.gguf" "--type" "q8_0"))
    (:q8_0-outlier ("convert" "{laya}" "{dir}/q8_0-outlier.gguf" "--type" "q8_0" "--outlier-aware")))
  "How each file of the table is made from the Laya directory, in an order
where a file is made before a recipe that reads it.")

(defparameter *trained-min-accuracy* 0.95d0
  "The held-out accuracy the trained model reaches in PyTorch and in F32.")

(defun trained-golden ()
  "golden.json of the trained model, parsed, or NIL after failing the test
when a committed file of the model is missing."
  (let ((missing (remove-if #'probe-file
                            (mapcar #'trained-path
                                    '("config.json" "encoder/config.json" "rl_agent_config.json"
                                      "model.safetensors" "tokenizer/tokenizer.json"
                                      "questions.jsonl" "golden.json")))))
    (if missing
        (progn (fail "the trained model's files ~{~A~^, ~} are missing (they are committed; ~
tools/train/train.py makes them)" missing)
               nil)
        (rontolisp::read-json-file (trained-path "golden.json")))))

(defun make-trained-files (dir)
  "Run *TRAINED-FILES*' recipes in DIR; answer an alist key -> path, or NIL
after failing the test when a command fails."
  (loop for (key args) in *trained-files*
        for argv = (mapcar (lambda (a)
                             (if (string= a "{laya}")
                                 (trained-path "")
                                 (recipe-path a (string-right-trim "/" dir))))
                           args)
        do (multiple-value-bind (code out err) (run-exe argv)
             (declare (ignore out))
             (unless (eql 0 code)
               (fail "~{~A~^ ~}: exit ~A: ~A" argv code err)
               (return nil)))
        collect (cons key (find-if (lambda (a) (search ".gguf" a)) argv :from-end t))))

(defun measure-way (model entries questions activations)
  "Run MODEL on QUESTIONS with ACTIVATIONS against the golden ENTRIES
(QUESTION-FIGURES, as `eval --questions' measures a way): answer (values
max-|dp| share-of-other-winners accuracy ids-and-markers-equal)."
  (multiple-value-bind (figures tokens)
      (command-line::question-figures model questions activations
                                   (map 'list (lambda (e) (gethash "probabilities" e)) entries))
    (values (getf figures :max-abs-dp) (getf figures :other-winners) (getf figures :accuracy)
            (loop for (ids markers) in tokens for e across entries
                  always (and (equalp (coerce (gethash "ids" e) 'list) (coerce ids 'list))
                              (equalp (coerce (gethash "markers" e) 'list) (coerce markers 'list)))))))

(test trained-golden-holds-the-questions
  ;; golden.json was made from questions.jsonl as it is now, and the trained
  ;; model knows its task: held-out accuracy and mean winning probability.
  (let ((golden (trained-golden)))
    (when golden
      (let ((questions (trained-questions)) (entries (gethash "questions" golden)))
        (is (= 200 (length questions) (length entries)))
        (loop for q in questions for e across entries for i from 1
              do (is (= (gethash "answer" q) (gethash "answer" e)) "question ~D: other answer" i)
                 (is (= (length (gethash "options" q)) (length (gethash "probabilities" e))
                        (length (gethash "markers" e)))
                     "question ~D: ~D options, the golden ~D probabilities" i
                     (length (gethash "options" q)) (length (gethash "probabilities" e))))
        (is (<= 3 (length (remove-duplicates (mapcar (lambda (q) (gethash "type" q)) questions)
                                             :test #'string=))))
        (is (>= (gethash "accuracy" golden) *trained-min-accuracy*)
            "PyTorch's held-out accuracy ~,3f, expected at least ~,2f" (gethash "accuracy" golden)
            *trained-min-accuracy*)
        (is (>= (gethash "mean_winning_p" golden) 0.9d0)
            "PyTorch's mean winning probability ~,3f, expected at least 0.9"
            (gethash "mean_winning_p" golden))))))

(test trained-formats-within-bounds
  ;; Each way of *TRAINED-WAYS*: the ids and markers are the golden's, max
  ;; |dp| against PyTorch within the way's bound; F32 answers the questions
  ;; as well as PyTorch.  The table (bound, measured, share of other
  ;; winners, accuracy) is printed.
  (let ((golden (trained-golden))
        (dir (format nil "~A/" (tmp-path "trained"))))
    (when golden
      (ensure-directories-exist dir)
      (unwind-protect
           (let ((files (make-trained-files dir))
                 (questions (trained-questions))
                 (entries (gethash "questions" golden)))
             (when files
               (format t "~&  ~32A ~8A ~9A ~7A ~7A~%" "way" "bound" "max |dp|" "other" "right")
               (loop for (name file activations quantize bound) in *trained-ways*
                     for model = (if (assoc file files)
                                     (model:load (cdr (assoc file files)) :quantize quantize)
                                     (command-line::call-with-quantized-file
                                      (cdr (assoc :f32 files)) file #'model:load))
                     do (multiple-value-bind (max-dp other accuracy same)
                            (measure-way model entries questions activations)
                          (format t "~&  ~32A ~8,1e ~9,2e ~7,3f ~7,3f~%"
                                  name (float bound 1.0) (float max-dp 1.0) other accuracy)
                          (is-true same "~A: ids or markers other than the golden's" name)
                          (is (<= max-dp bound) "~A: max |dp| ~,3e against PyTorch, bound ~,1e"
                              name (float max-dp 1.0) (float bound 1.0))
                          (when (and (eq file :f32) (null quantize))
                            (is (>= accuracy *trained-min-accuracy*)
                                "~A: held-out accuracy ~,3f, expected at least ~,2f" name accuracy
                                *trained-min-accuracy*))))))
        (delete-tree dir)))))

(test trained-decide-command-answers-the-golden
  ;; `rontolisp decide --json' on the F32 file: the golden's ids and
  ;; markers, probabilities within the F32 bound.
  (let ((golden (trained-golden))
        (gguf (tmp-path "trained-f32.gguf")))
    (when golden
      (unwind-protect
           (multiple-value-bind (code out err)
               (run-exe (list "convert" (trained-path "") gguf "--type" "f32"))
             (declare (ignore out))
             (is (eql 0 code) "convert: exit ~A: ~A" code err)
             (multiple-value-bind (code out err)
                 (run-exe (list "decide" gguf (trained-path "questions.jsonl") "--json"))
               (is (eql 0 code) "decide: exit ~A: ~A" code err)
               (let ((lines (split-lines out)) (entries (gethash "questions" golden)))
                 (is (= (length entries) (length lines)))
                 (loop for line in lines for e across entries for i from 1
                       for a = (rontolisp::parse-json line)
                       do (is (json-same (gethash "ids" e) (gethash "ids" a)) "question ~D: other ids" i)
                          (is (json-same (gethash "markers" e) (gethash "markers" a))
                              "question ~D: other markers" i)
                          (is (every (lambda (p gp) (<= (abs (- p gp)) 1d-3))
                                     (gethash "probabilities" a) (gethash "probabilities" e))
                              "question ~D: probabilities ~{~,6f~^ ~}, PyTorch ~{~,6f~^ ~}" i
                              (coerce (gethash "probabilities" a) 'list)
                              (coerce (gethash "probabilities" e) 'list))))))
        (ignore-errors (delete-file gguf))))))

(test trained-calibration-has-no-massive-channels
  ;; doc/trained-model.md §5: calibrating the trained model finds no massive
  ;; channel (doc/outliers.md's are tens of times the median; a random
  ;; model with --massive, hundreds): every matrix input's largest channel is
  ;; under 5 times the median channel's, and the only outlier columns (over
  ;; 3 times) are inputs of ffn_down, the GeGLU's output.
  (let ((golden (trained-golden))
        (gguf (tmp-path "trained-calibrate.gguf")))
    (when golden
      (unwind-protect
           (progn
             (is (eql 0 (run-exe (list "convert" (trained-path "") gguf "--type" "f32"))))
             (let ((calibration (model:calibrate gguf)))
               (is (= 8 (length calibration)))
               (loop for (name . magnitudes) in calibration
                     do (multiple-value-bind (largest median) (rontolisp:channel-spread magnitudes)
                          (is (< largest (* 5 median)) "~A: largest channel ~,2F, median ~,2F"
                              name largest median))
                        (unless (search "ffn_down" name)
                          (is (null (rontolisp::outlier-columns magnitudes))
                              "~A: outlier columns ~A" name
                              (rontolisp::outlier-columns magnitudes))))
               (is (some (lambda (entry) (rontolisp::outlier-columns (cdr entry))) calibration)
                   "expected the ffn_down inputs' outlier columns the README names")))
        (ignore-errors (delete-file gguf))))))
