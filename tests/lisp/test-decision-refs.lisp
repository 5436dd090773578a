;;;; test-decision-refs.lisp - the decision head (MODEL:RENDER, MODEL:DECIDE
;;;; and `rontolisp decide --json') against its reference: the goldens of
;;;; tests/golden/decision/, made by tools/gen_decision_goldens.py with Jinja2
;;;; (the rendered text), Hugging Face tokenizers (the ids) and PyTorch's
;;;; nn.TransformerEncoderLayer (the logits and probabilities) on the hidden
;;;; states of our encoder.  The model files are rebuilt here from each
;;;; golden's recipe (the commands of the executable under test) and must be
;;;; the bytes the goldens were made from.  The goldens are committed: a
;;;; missing one fails.

(in-package "RONTOLISP-TESTS")

(def-suite decision-refs :in all
  :description "The decision head against the PyTorch goldens.")
(in-suite decision-refs)

(defparameter *decision-variants*
  '("f32-post-relu" "f32-post-gelu" "f32-pre-relu" "f32-pre-gelu" "f16-post-relu" "f16-pre-gelu")
  "The golden variants, tests/golden/decision/NAME.json: the model's
tensor type, post-norm or norm-first head blocks, relu or gelu.")

(defparameter *decision-p-tolerance* 1d-5
  "How far a probability of MODEL:DECIDE may be from PyTorch's.")

(defparameter *decision-logit-tolerance* 1d-4
  "How far a logit of MODEL:DECIDE may be from PyTorch's.  The random
head's logits reach about 12, where a single-float step is 1e-6; PyTorch's
float32 logits are within 1e-5 of a float64 computation.")

(defun decision-golden (variant)
  "The parsed golden of VARIANT (a hash table), or NIL after failing the
test when the file is missing."
  (let ((path (golden (format nil "decision/~A.json" variant))))
    (if (probe-file path)
        (rontolisp::read-json-file path)
        (progn (fail "the golden ~A is missing (it is committed; tools/gen_decision_goldens.py ~
makes it)" path)
               nil))))

(defun adler32 (octets)
  "The Adler-32 checksum of OCTETS (as zlib computes it)."
  (let ((a 1) (b 0))
    (declare (fixnum a b))
    (loop for start from 0 below (length octets) by 4096
          do (loop for i from start below (min (length octets) (+ start 4096))
                   do (setf a (+ a (aref octets i)) b (+ b a)))
             (setf a (mod a 65521) b (mod b 65521)))
    (+ (* b 65536) a)))

(defun rebuild-decision-model (golden dir done)
  "Run GOLDEN's recipe in DIR (steps already in the list DONE are not run
again) and answer (values model-path done), or NIL after failing the test
when a step fails or the model is not the file the golden was made from."
  (let ((recipe (gethash "recipe" golden)))
    (loop for step across (gethash "steps" recipe)
          for args = (map 'list (lambda (a) (recipe-path a dir)) step)
          unless (member args done :test #'equal)
            do (multiple-value-bind (code out err) (run-exe args)
                 (declare (ignore out))
                 (unless (eql 0 code)
                   (fail "recipe step ~{~A~^ ~}: exit ~A: ~A" args code err)
                   (return-from rebuild-decision-model nil))
                 (push args done)))
    (let* ((model (recipe-path (gethash "model" recipe) dir))
           (octets (file-octets model)))
      (unless (and (= (length octets) (gethash "model_bytes" golden))
                   (= (adler32 octets) (gethash "model_adler32" golden)))
        (fail "~A: the rebuilt model (~D bytes, Adler-32 ~D) is not the file the golden was ~
made from (~D bytes, Adler-32 ~D): the converter or edit changed, so run ~
tools/gen_decision_goldens.py again" (gethash "variant" golden) (length octets) (adler32 octets)
              (gethash "model_bytes" golden) (gethash "model_adler32" golden))
        (return-from rebuild-decision-model (values nil done)))
      (values model done))))

(defun questions-jsonl ()
  "The questions of tests/golden/decision/questions.jsonl, parsed."
  (mapcar #'rontolisp::parse-json
          (remove "" (split-lines (read-file-string (golden "decision/questions.jsonl")))
                  :test #'string=)))

(defun check-decide-command (variant golden model)
  "`rontolisp decide MODEL questions.jsonl --json' answers GOLDEN's ids and
markers exactly and its probabilities within *DECISION-P-TOLERANCE*."
  (multiple-value-bind (code out err)
      (run-exe (list "decide" model (golden "decision/questions.jsonl") "--json"))
    (is (eql 0 code) "~A: decide --json: exit ~A: ~A" variant code err)
    (let ((lines (split-lines out)) (entries (gethash "questions" golden)))
      (is (= (length entries) (length lines)) "~A: decide --json: ~D lines for ~D questions"
          variant (length lines) (length entries))
      (loop for line in lines for e across entries for i from 0
            for answer = (rontolisp::parse-json line)
            do (is (eql (1+ i) (gethash "question" answer)))
               (is (json-same (gethash "ids" e) (gethash "ids" answer))
                   "~A: decide --json question ~D: other ids" variant i)
               (is (json-same (gethash "markers" e) (gethash "markers" answer))
                   "~A: decide --json question ~D: other markers" variant i)
               (is (and (= (length (gethash "probabilities" e))
                           (length (gethash "probabilities" answer)))
                        (every (lambda (p gp) (<= (abs (- p gp)) *decision-p-tolerance*))
                               (gethash "probabilities" answer) (gethash "probabilities" e)))
                   "~A: decide --json question ~D: probabilities ~A, PyTorch ~A" variant i
                   (gethash "probabilities" answer) (gethash "probabilities" e))))))

(test decision-goldens-hold-the-questions
  ;; Every golden exists and was made from the questions of questions.jsonl
  ;; as they are now, in order, with the recipe of its variant.
  (let ((questions (questions-jsonl)))
    (is (<= 12 (length questions)))
    (dolist (variant *decision-variants*)
      (let ((golden (decision-golden variant)))
        (when golden
          (is (string= variant (gethash "variant" golden)))
          (let ((entries (gethash "questions" golden)))
            (is (= (length questions) (length entries)) "~A: ~D questions, questions.jsonl ~D"
                variant (length entries) (length questions))
            (loop for q in questions for e across entries for i from 0
                  do (is (json-same q (gethash "question" e))
                         "~A: question ~D is not line ~D of questions.jsonl" variant i (1+ i)))))))))

(test decide-agrees-with-pytorch
  ;; Per variant and question: the rendered text (Jinja2), the ids and
  ;; markers (Hugging Face tokenizers) exactly; the probabilities within
  ;; *DECISION-P-TOLERANCE*, the logits within *DECISION-LOGIT-TOLERANCE*
  ;; (PyTorch); `rontolisp decide --json' on questions.jsonl the same ids,
  ;; markers and probabilities.  The largest differences are printed.
  (let ((dir (format nil "~A/" (tmp-path "decision"))) (done '()))
    (ensure-directories-exist dir)
    (unwind-protect
         (dolist (variant *decision-variants*)
           (let ((golden (decision-golden variant)) (model-path nil))
             (when golden
               (multiple-value-setq (model-path done) (rebuild-decision-model golden dir done)))
             (when model-path
               (let ((model (model:load model-path)) (max-dp 0d0) (max-dlogit 0d0))
                 (loop for e across (gethash "questions" golden) for i from 0
                       for q = (gethash "question" e)
                       do (handler-case
                              (let ((text (model:render model q)))
                                (is (string= (gethash "text" e) text)
                                    "~A question ~D: rendered ~S, Jinja2 ~S" variant i text
                                    (gethash "text" e)))
                            (error (c) (fail "~A question ~D: render: ~A" variant i c)))
                          (multiple-value-bind (probs logits ids markers)
                              (handler-case (model:decide model q)
                                (error (c) (fail "~A question ~D: decide: ~A" variant i c)
                                  (values #() #() #() #())))
                            (is (equal (coerce (gethash "ids" e) 'list) (coerce ids 'list))
                                "~A question ~D: ids ~{~D~^,~}, Hugging Face ~{~D~^,~}" variant i
                                (coerce ids 'list) (coerce (gethash "ids" e) 'list))
                            (is (equal (coerce (gethash "markers" e) 'list) (coerce markers 'list))
                                "~A question ~D: markers ~{~D~^,~}, golden ~{~D~^,~}" variant i
                                (coerce markers 'list) (coerce (gethash "markers" e) 'list))
                            (is (typep probs '(vector single-float)))
                            (is (= (length (gethash "probabilities" e)) (length probs) (length logits)))
                            (loop for p across probs for gp across (gethash "probabilities" e)
                                  for l across logits for gl across (gethash "logits" e)
                                  for k from 0
                                  for dp = (abs (- p gp)) for dl = (abs (- l gl))
                                  do (setf max-dp (max max-dp dp) max-dlogit (max max-dlogit dl))
                                     (is (<= dp *decision-p-tolerance*)
                                         "~A question ~D option ~D: probability ~A, PyTorch ~A"
                                         variant i k p gp)
                                     (is (<= dl *decision-logit-tolerance*)
                                         "~A question ~D option ~D: logit ~A, PyTorch ~A"
                                         variant i k l gl))))
                 (check-decide-command variant golden model-path)
                 (format t "~&  ~A: ~D questions, max |dp| ~,2e, max |dlogit| ~,2e~%"
                         variant (length (gethash "questions" golden)) (float max-dp 1.0) (float max-dlogit 1.0))))))
      (delete-tree dir))))
