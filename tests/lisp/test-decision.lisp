;;;; test-decision.lisp - the decision head (lisp/model/decision.lisp and lisp/model/question.lisp): its keys
;;;; and tensors read and checked at load, MODEL:DECIDE against a plain
;;;; double-float reference of doc/decision.md written here (post-norm and
;;;; norm-first, relu and gelu), the spread of the --random heads' logits,
;;;; Q8_0 and F16 heads, the same bits on every SIMD setting and thread
;;;; count, every refusal at the API and at `rontolisp decide'; the last
;;;; block's marker rows against the whole block's, a forward pass that
;;;; conses nothing, decisions in several threads at once.

(in-package "RONTOLISP-TESTS")

(def-suite decision :in all :description "The decision head and `decide'.")
(in-suite decision)

(defun systemone-text (q)
  "The text the converter's chat template renders for the plist question Q:
[CLS]type question: instructions[SEP]([MASK]option)*[SEP]state[SEP]."
  (format nil "[CLS]~A question: ~A[SEP]~{[MASK]~A~}[SEP]~A[SEP]" (getf q :type)
          (getf q :instructions)
          (mapcar (lambda (o) (if (consp o) (getf o :text) o)) (getf q :options))
          (getf q :state)))

(defun question-ids (model q)
  "The ids and markers of the plist question Q, rendered as SYSTEMONE-TEXT."
  (let ((ids (coerce (model:tokenize model (systemone-text q) :add-special nil :parse-special t)
                     'list)))
    (values ids (loop for id in ids for p from 0 when (= id 4) collect p))))

(defun decide-plist (model q &rest keys)
  "RONTOLISP::DECIDE-IDS on the plist question Q: (values probabilities logits)."
  (multiple-value-bind (ids markers) (question-ids model q)
    (apply #'model::decide-ids model ids markers (getf q :type) keys)))

;;; The reference: doc/decision.md in double-float, straightforward loops
;;; over the file's weights (dequantized), on the encoder's hidden states.
;;; The test files load as source, so these run in ECL's bytecode
;;; interpreter unless NATIVE-REFERENCE compiles them (a reference run took
;;; 6 s of CPU interpreted); the declarations let the compiler open the
;;; double arithmetic: the same operations in the same order.

(deftype ref-vector () '(simple-array double-float (*)))
(deftype ref-rows () '(simple-array double-float (* *)))

(defun ref-matrix (f name)
  "F's tensor NAME as a double-float array of its dimensions."
  (let* ((a (model::simple-single (gguf:tensor f name)))
         (r (make-array (array-dimensions a) :element-type 'double-float)))
    (dotimes (i (array-total-size a) r)
      (setf (row-major-aref r i) (float (row-major-aref a i) 1d0)))))

(defun ref-linear (w b x)
  "Rows of X times W transposed plus B: n x out."
  (declare (type ref-rows w x) (type ref-vector b))
  (let* ((n (array-dimension x 0)) (in (array-dimension x 1)) (out (array-dimension w 0))
         (y (make-array (list n out) :element-type 'double-float)))
    (dotimes (i n y)
      (dotimes (o out)
        (setf (aref y i o) (+ (aref b o) (loop for j below in
                                               sum (* (aref w o j) (aref x i j))
                                                 of-type double-float)))))))

(defun ref-layer-norm (x g b eps)
  (declare (type ref-rows x) (type ref-vector g b) (double-float eps))
  (let* ((n (array-dimension x 0)) (d (array-dimension x 1))
         (y (make-array (list n d) :element-type 'double-float)))
    (dotimes (i n y)
      (let* ((mean (/ (loop for j below d sum (aref x i j) of-type double-float) d))
             (var (/ (loop for j below d sum (expt (- (aref x i j) mean) 2) of-type double-float)
                     d)))
        (dotimes (j d)
          (setf (aref y i j) (+ (* (/ (- (aref x i j) mean) (sqrt (+ var eps))) (aref g j))
                                (aref b j))))))))

(defun ref-erf (x)
  "erf by its Taylor series (|x| <= 6; +-1 beyond), to double precision."
  (if (> (abs x) 6)
      (float-sign x 1d0)
      (let ((sum 0d0) (term (abs x)))
        (loop for k from 0
              for add = (/ term (+ (* 2 k) 1))
              do (incf sum add)
                 (setf term (/ (* (- term) x x) (1+ k)))
              until (< (abs add) (* 1d-17 (abs sum))))
        (float-sign x (* sum (/ 2 (sqrt pi)))))))

(defun ref-gelu (x) (* 0.5d0 x (+ 1 (ref-erf (/ x (sqrt 2d0))))))

(defun ref-map (fn x)
  (let ((y (make-array (array-dimensions x) :element-type 'double-float)))
    (dotimes (i (array-total-size x) y)
      (setf (row-major-aref y i) (funcall fn (row-major-aref x i))))))

(defun ref-add (a b)
  (let ((y (make-array (array-dimensions a) :element-type 'double-float)))
    (dotimes (i (array-total-size a) y)
      (setf (row-major-aref y i) (+ (row-major-aref a i) (row-major-aref b i))))))

(defun ref-attention (x w b wo bo heads)
  "PyTorch's MultiheadAttention on the rows of X: in_proj W, B (q, k, v),
softmax of q.k / sqrt(head size) over all rows, out_proj WO, BO."
  (declare (type ref-rows x))
  (let* ((n (array-dimension x 0)) (d (array-dimension x 1)) (hd (floor d heads))
         (qkv (ref-linear w b x))
         (att (make-array (list n d) :element-type 'double-float)))
    (declare (type ref-rows qkv att))
    (dotimes (h heads)
      (dotimes (i n)
        (let* ((scores (loop for j below n
                             collect (/ (loop for c below hd
                                              sum (* (aref qkv i (+ (* h hd) c))
                                                     (aref qkv j (+ d (* h hd) c)))
                                                of-type double-float)
                                        (sqrt (float hd 1d0)))))
               (top (reduce #'max scores))
               (e (mapcar (lambda (s) (exp (- s top))) scores))
               (z (reduce #'+ e)))
          (dotimes (c hd)
            (setf (aref att i (+ (* h hd) c))
                  (loop for j below n for p in e
                        sum (* (/ p z) (aref qkv j (+ (* 2 d) (* h hd) c)))))))))
    (ref-linear wo bo att)))

(defun reference-logits (path ids markers type)
  "The logits of doc/decision.md for the file PATH's head on IDS, MARKERS
and TYPE, in double-float from the encoder's hidden states, the head's
keys read with GGUF:VALUE."
  (let* ((f (gguf:read path))
         (model (model:load path))
         (hidden (model:encode model ids))
         (v (lambda (k &optional default)
              (multiple-value-bind (x type found)
                  (gguf:value f (concatenate 'string "modern-bert.decision." k))
                (declare (ignore type))
                (if found x default))))
         (blocks (funcall v "block_count"))
         (first (- (gguf:value f "modern-bert.block_count") blocks))
         (heads (funcall v "head_count"))
         (act (if (equal (funcall v "activation" "relu") "gelu") #'ref-gelu (lambda (x) (max x 0d0))))
         (eps (float (funcall v "layer_norm_epsilon" 1d-5) 1d0))
         (m (min (length ids) (funcall v "max_head_tokens")))
         (d (array-dimension hidden 1))
         (tt (ref-matrix f "token_types.weight"))
         (ti (position type (funcall v "question_types") :test #'string=))
         (x (make-array (list m d) :element-type 'double-float)))
    (dotimes (i m)
      (dotimes (j d)
        (setf (aref x i j) (+ (aref hidden i j) (aref tt ti j)))))
    (dotimes (l blocks)
      (flet ((g (s) (ref-matrix f (format nil "blk.~D.~A" (+ first l) s))))
        (flet ((attn (y) (ref-attention y (g "attn_qkv.weight") (g "attn_qkv.bias")
                                        (g "attn_output.weight") (g "attn_output.bias") heads))
               (ff (y) (ref-linear (g "ffn_down.weight") (g "ffn_down.bias")
                                   (ref-map act (ref-linear (g "ffn_up.weight") (g "ffn_up.bias") y))))
               (norm1 (y) (ref-layer-norm y (g "attn_norm.weight") (g "attn_norm.bias") eps))
               (norm2 (y) (ref-layer-norm y (g "ffn_norm.weight") (g "ffn_norm.bias") eps)))
          (if (funcall v "norm_first")
              (progn (setf x (ref-add x (attn (norm1 x))))
                     (setf x (ref-add x (ff (norm2 x)))))
              (progn (setf x (norm1 (ref-add x (attn x))))
                     (setf x (norm2 (ref-add x (ff x)))))))))
    (let* ((rows (make-array (list (length markers) d) :element-type 'double-float)))
      (loop for p in markers for r from 0
            do (dotimes (j d) (setf (aref rows r j) (aref x p j))))
      (let* ((z (ref-layer-norm (ref-map #'ref-gelu (ref-linear (ref-matrix f "cls.weight")
                                                                (ref-matrix f "cls.bias") rows))
                                (ref-matrix f "cls.norm.weight") (ref-matrix f "cls.norm.bias")
                                (float (gguf:value f "modern-bert.attention.layer_norm_epsilon")
                                       1d0)))
             (out (ref-linear (ref-matrix f "cls.output.weight") (ref-matrix f "cls.output.bias")
                              z)))
        (gguf:close f)
        (loop for r below (length markers) collect (aref out r 0))))))

(defun edited-file (path &rest sets)
  "A copy of the GGUF file PATH with SETS (KEY=VALUE:TYPE strings) set by
`rontolisp edit'; its path."
  (let ((out (tmp-path "edited.gguf")))
    (multiple-value-bind (code o err)
        (run-exe (list* "edit" path out (loop for s in sets append (list "--set" s))))
      (declare (ignore o))
      (assert (= 0 code) () "edit failed: ~A" err))
    out))

(defun native-reference ()
  "The reference's functions natively compiled, once a process."
  (unless (get 'native-reference 'done)
    (let ((*error-output* (make-broadcast-stream))
          (*standard-output* (make-broadcast-stream)))
      (dolist (f '(ref-matrix ref-linear ref-layer-norm ref-erf ref-gelu ref-map ref-add
                   ref-attention reference-logits))
        (compile f)))
    (setf (get 'native-reference 'done) t)))

(defun check-against-reference (path &key (tolerance 2d-5))
  "MODEL:DECIDE's logits and probabilities of the head of PATH on built-in
questions of each type (the reference is slow) agree with the reference's
to TOLERANCE (relative to 1 + |logit|)."
  (native-reference)
  (let ((model (model:load path)))
    (dolist (q (mapcar (lambda (i) (nth i model:*questions*)) '(2 4 5)))
      (multiple-value-bind (ids markers) (question-ids model q)
        (multiple-value-bind (probs logits) (decide-plist model q)
          (let* ((ref (reference-logits path ids markers (getf q :type)))
                 (temp (model::temperature (model::encoder-decision model) (getf q :type)
                                               (length markers)))
                 (top (reduce #'max ref))
                 (e (mapcar (lambda (l) (exp (/ (- l top) temp))) ref))
                 (z (reduce #'+ e)))
            (loop for l across logits for r in ref for p across probs for ep in e
                  do (is (<= (abs (- l r)) (* tolerance (+ 1 (abs r))))
                         "~A: logit ~A, reference ~A" path l r)
                     (is (<= (abs (- p (/ ep z))) (* 10 tolerance))
                         "~A: probability ~A, reference ~A" path p (/ ep z)))))))))

(test decision-agrees-with-the-double-reference
  "An F32 head: post-norm with relu (the defaults), norm-first, gelu, and
norm-first with gelu and another epsilon, against the reference."
  (let ((file (decision-file "s1-pico" :f32)))
    (check-against-reference file)
    (dolist (sets '(("modern-bert.decision.norm_first=true:bool")
                    ("modern-bert.decision.activation=gelu:string")
                    ("modern-bert.decision.norm_first=true:bool"
                     "modern-bert.decision.activation=gelu:string"
                     "modern-bert.decision.layer_norm_epsilon=0.01:f32"
                     "modern-bert.decision.head_count=2:u32")))
      (let ((path (apply #'edited-file file sets)))
        (unwind-protect (check-against-reference path)
          (delete-file path))))))

(defun logit-spread (path)
  "(values pooled-std smallest-within-question-range) of the head of PATH's
logits over the built-in questions."
  (let ((model (model:load path)) (all '()) (ranges '()))
    (dolist (q model:*questions*)
      (let ((logits (coerce (nth-value 1 (decide-plist model q)) 'list)))
        (push (- (reduce #'max logits) (reduce #'min logits)) ranges)
        (setf all (append logits all))))
    (let ((mean (/ (reduce #'+ all) (length all))))
      (values (sqrt (/ (reduce #'+ (mapcar (lambda (x) (expt (- x mean) 2)) all)) (length all)))
              (reduce #'min ranges)))))

(test decision-random-heads-spread-their-logits
  "The --random heads' logits over the built-in questions spread as a
trained head's (a standard deviation of at least 1), and no question's
options all score the same (before: every option within 1e-4 of the
others, the standard deviation below 1)."
  (dolist (preset '("s1-pico" "s1-nano"))
    (multiple-value-bind (std smallest) (logit-spread (decision-file preset :f32))
      (is (>= std 1) "~A: pooled standard deviation ~A" preset std)
      (is (> smallest 2d-5) "~A: a question's options within ~A of each other" preset smallest))))

(test decision-q8-0-and-f16-heads-run-with-the-same-bits-everywhere
  "Q8_0 and F16 heads answer probabilities near the F32 head's; with a Q8_0
head the bits do not depend on SIMD or the thread count, for :q8 and :q8x2."
  (let* ((q (third model:*questions*))
         (f32 (nth-value 1 (decide-plist (model:load (decision-file "s1-pico" :f32)) q))))
    (dolist (type '(:f16 :q8_0))
      (let* ((model (model:load (decision-file "s1-pico" type)))
             (logits (nth-value 1 (decide-plist model q))))
        (is (every (lambda (a b) (< (abs (- a b)) (if (eq type :f16) 0.05 0.5))) logits f32)
            "~A: ~A against F32 ~A" type logits f32)
        (when (eq type :q8_0)
          (dolist (act '(:q8 :q8x2))
            (let ((first nil))
              (enc-with-knobs
               (lambda (on n)
                 (multiple-value-bind (p l) (decide-plist model q :activations act)
                   (if first
                       (is (and (same-bits-p l (second first)) (same-bits-p p (first first)))
                           "~A simd ~A threads ~D" act on n)
                       (setf first (list p l)))))))))))))

;;; Loading: keys, defaults, older files, hostile values.

(test decision-load-reads-the-head-keys
  (let* ((model (model:load (decision-file "s1-pico" :f32)))
         (head (model::encoder-decision model)))
    (is (equalp #("choice" "score" "noul") (model::decision-head-types head)))
    (is (= 4 (model::decision-head-heads head)))
    (is (eq :relu (model::decision-head-activation head)))
    (is (eq nil (model::decision-head-norm-first head)))
    (is (= 96 (model::decision-head-max-head-tokens head)))
    (is (= 1024 (model::decision-head-max-tokens head)))
    (is (= 4 (model::decision-head-mask-id head)))
    (is (= 1.1f0 (model::temperature head "choice" 4)))
    (is (= 1.0f0 (model::temperature head "choice" 2)))
    (is (= 0.9f0 (model::temperature head "score" 2)))
    (is (= 1f0 (model::temperature head "score" 3)))))

(test decision-load-falls-back-to-the-temperature-types
  "A file without decision.question_types (older converters) takes the
temperature keys' types in key order."
  (let ((model (model:load (file-without (decision-file "s1-pico" :f32)
                                         :key "modern-bert.decision.question_types"))))
    (is (equalp #("choice" "score" "noul")
                (model::decision-head-types (model::encoder-decision model))))))

(test decision-load-checks-every-head-key
  (let ((file (decision-file "s1-pico" :f32)))
    (loop for (key type value found) in
          '(("decision.head_count" :u32 0 "found 0")
            ("decision.head_count" :u32 3 "found 3")
            ("decision.activation" :string "swish" "found \"swish\"")
            ("decision.norm_first" :u32 1 "found 1")
            ("decision.layer_norm_epsilon" :f32 0.0 "found 0.0")
            ("decision.layer_norm_epsilon" :f32 2.0 "found 2.0")
            ("decision.max_head_tokens" :u32 0 "found 0")
            ("decision.max_tokens" :u32 0 "found 0")
            ("decision.question_types" :string "choice" "found \"choice\"")
            ("decision.temperature.choice.2" :f32 0.0 "found 0.0")
            ("decision.temperature.choice.2" :f32 -1.0 "found -1.0")
            ("decision.temperature.choice.5_3" :f32 1.0 "TYPE.LO_HI")
            ("decision.temperature.choice" :f32 1.0 "TYPE.N"))
          do (let* ((full (concatenate 'string "modern-bert." key))
                    (msg (model-error-message
                          (lambda () (model:load (file-with file :key full :type type
                                                                 :value value))))))
               (is-true msg "~A = ~S: no model-error" key value)
               (when msg
                 (is (contains msg (format nil "key ~S: expected " full)) "~A" msg)
                 (is (contains msg found) "~A" msg))))
    (let ((msg (model-error-message
                (lambda () (model:load (file-with file :key "tokenizer.ggml.mask_token_id"
                                                       :type :u32 :value 5000))))))
      (is (and msg (contains msg "mask_token_id") (contains msg "found 5000")) "~A" msg))
    (dolist (tensor '("cls.output.bias" "token_types.weight" "blk.2.attn_qkv.bias"
                      "blk.2.ffn_norm.bias" "cls.norm.weight"))
      (let ((msg (model-error-message (lambda () (model:load (file-without file :tensor tensor))))))
        (is (and msg (contains msg tensor)) "~A: ~A" tensor msg)))))

(test decision-names-the-step-of-a-non-finite-value
  "A NaN in a head weight is an error naming the head's step that made it
(not NaN probabilities)."
  (let ((file (decision-file "s1-pico" :f32))
        (model (model:load (decision-file "s1-pico" :f32))))
    (multiple-value-bind (ids markers) (question-ids model (first model:*questions*))
      (loop for (tensor nan-at needle)
              in '(("blk.2.ffn_up.weight" 70 "layer 2, the product by blk.2.ffn_up.weight, its bias and the activation")
                   ("blk.2.attn_norm.bias" 3 "layer 2, the LayerNorm by blk.2.attn_norm.weight")
                   ("token_types.weight" 5 "the hidden states plus the row of token_types.weight")
                   ("cls.weight" 9 "the product by cls.weight, its bias and the GELU")
                   ("cls.output.weight" 1 "the product by cls.output.weight plus its bias"))
            do (let* ((path (hostile-file file tensor :nan-at nan-at))
                      (msg (unwind-protect
                                (model-error-message
                                 (lambda () (model::decide-ids (model:load path) ids markers
                                                                   "choice")))
                             (ignore-errors (delete-file path)))))
                 (is (and msg (contains msg "expected finite") (contains msg needle))
                     "~A: ~A" tensor msg))))))

;;; Refusals at the API.

(defun question-error-message (thunk)
  "The message of the QUESTION-ERROR THUNK signals, or NIL."
  (handler-case (progn (funcall thunk) nil)
    (model:question-error (c) (rontolisp:rontolisp-error-message c))))

(test decision-refuses-bad-questions
  (let* ((model (model:load (decision-file "s1-pico" :f32)))
         (q (first model:*questions*)))
    (flet ((refused (thunk &rest needles)
             (let ((msg (question-error-message thunk)))
               (is-true msg "no question-error for ~S" needles)
               (when msg
                 (dolist (n needles)
                   (is (contains msg n) "~S not in ~A" n msg))))))
      (multiple-value-bind (ids markers) (question-ids model q)
        (refused (lambda () (model::decide-ids model ids markers "other"))
                 "\"choice\", \"score\", \"noul\"" "found \"other\"")
        (refused (lambda () (model::decide-ids model ids '() "choice")) "found none")
        (refused (lambda () (model::decide-ids model ids (list 10 200) "choice"))
                 "found 200")
        (refused (lambda () (model::decide-ids model (make-list 1025 :initial-element 5)
                                                   '(3) "choice"))
                 "at most 1024 tokens" "found 1025"))
      ;; a marker past the head's window of 96 tokens
      (let ((long (list* :instructions (make-string 300 :initial-element #\x) q)))
        (multiple-value-bind (ids markers) (question-ids model long)
          (refused (lambda () (model::decide-ids model ids markers "choice"))
                   "option 1" "first 96 tokens" (format nil "position ~D" (first markers)))))
      (refused (lambda () (model:render model (list :type "choice" :instructions "x" :state "y")))
               "\"options\"" "none")
      (refused (lambda () (model:render model (list :type "choice" :instructions "x" :state "y"
                                                    :options #())))
               "at least one option")
      (refused (lambda () (model:render model (list :type "choice" :instructions "x"
                                                    :options '("a"))))
               "\"state\"")
      (refused (lambda () (model:render model (list :type "nope" :instructions "x" :state "y"
                                                    :options '("a"))))
               "found \"nope\"")
      (refused (lambda () (model:render model (list :type "choice" :instructions "x" :state "y"
                                                    :options '(7))))
               "option 1" "found 7")
      (refused (lambda () (model:render model 42)) "expected a question"))
    (let ((msg (model-error-message
                (lambda () (model::decide-ids (model:load (encoder-file "s1-pico" :f32))
                                                  '(2 4 5 3) '(1) "choice")))))
      (is (and msg (contains msg "expected a decision head")) "~A" msg))))

;;; Rendering and MODEL:DECIDE from questions.

(test decision-render-and-decide-from-questions
  "MODEL:RENDER gives the converter's template's text; MODEL:DECIDE answers
DECIDE-IDS's bits on its ids and markers, for plists and for JSON objects
(options as strings and {\"text\": ...})."
  (let ((model (model:load (decision-file "s1-pico" :f32))))
    (dolist (q model:*questions*)
      (is (string= (systemone-text q) (model:render model q)))
      (multiple-value-bind (probs logits ids markers) (model:decide model q)
        (multiple-value-bind (ids2 markers2) (question-ids model q)
          (is (equal ids2 (coerce ids 'list)))
          (is (equal markers2 markers)))
        (multiple-value-bind (p2 l2) (decide-plist model q)
          (is (and (same-bits-p probs p2) (same-bits-p logits l2))))
        (is (< (abs (- 1 (reduce #'+ probs))) 1e-5))))
    (let* ((json (rontolisp:parse-json "{\"type\": \"choice\", \"instructions\": \"Build failed. Next?\",
 \"options\": [{\"text\": \"read it\"}, {\"text\": \"clean\"}, {\"text\": \"retry\"}, {\"text\": \"rm build\"},
 {\"text\": \"stop\"}], \"state\": \"Error 1\"}"))
           (plist (third model:*questions*)))
      (is (string= (model:render model plist) (model:render model json)))
      (is (same-bits-p (model:decide model plist) (model:decide model json))))))

(test decision-decide-refuses-what-rendering-shows
  (let ((model (model:load (decision-file "s1-pico" :f32))))
    (let ((msg (question-error-message
                (lambda () (model:decide model '(:type "choice" :instructions "x" :state "y"
                                                 :options ("a [MASK] b" "c")))))))
      (is (and msg (contains msg "expected 2 option markers") (contains msg "found 3")) "~A" msg))
    (let ((msg (question-error-message
                (lambda () (model:decide model (list :type "choice" :state "y" :options '("a")
                                                     :instructions (make-string 3000 :initial-element #\~)))))))
      (is (and msg (contains msg "at most 1024 tokens")) "~A" msg))
    (let ((msg (question-error-message
                (lambda () (model:decide model (list :type "choice" :state "y" :options '("a")
                                                     :instructions (make-string 200 :initial-element #\~)))))))
      (is (and msg (contains msg "first 96 tokens")) "~A" msg))
    (let ((msg (model-error-message
                (lambda () (model:decide (model:load (encoder-file "s1-pico" :f32))
                                         (first model:*questions*))))))
      (is (and msg (contains msg "expected a decision head")) "~A" msg))))

;;; `rontolisp decide'.

(test decide-command-answers-good-lines-and-names-bad-ones
  (let* ((file (decision-file "s1-pico" :f32))
         (model (model:load file))
         (lines (list "{\"type\": \"choice\", \"instructions\": \"List the files.\", \"options\": [\"ls -la\", {\"text\": \"rm -rf .\"}], \"state\": \"cwd ~/src\"}"
                      "not json"
                      "[1, 2]"
                      "{\"type\": \"other\", \"instructions\": \"x\", \"options\": [\"a\"], \"state\": \"s\"}"
                      "{\"type\": \"choice\", \"instructions\": \"x\", \"options\": [], \"state\": \"s\"}"
                      "{\"type\": \"choice\", \"options\": [\"a\"], \"state\": \"s\"}"
                      "{\"type\": \"choice\", \"instructions\": \"x\", \"options\": [\"a [MASK] b\"], \"state\": \"s\"}"
                      (format nil "{\"type\": \"choice\", \"instructions\": \"~A\", \"options\": [\"a\"], \"state\": \"s\"}"
                              (make-string 3000 :initial-element #\~))
                      (format nil "{\"type\": \"choice\", \"instructions\": \"~A\", \"options\": [\"a\"], \"state\": \"s\"}"
                              (make-string 200 :initial-element #\~))
                      "{\"type\": \"score\", \"instructions\": \"ok?\", \"options\": [\"yes\", \"no\"], \"state\": \"s\"}"))
         (input (format nil "~{~A~%~}" lines))
         (path (write-file-string (tmp-path "questions.jsonl") input)))
    (flet ((check-errors (err)
             (is (= 8 (count #\Newline err)) "~A" err)
             (loop for (line needle) in '((2 "invalid JSON") (3 "JSON object") (4 "found \"other\"")
                                          (5 "at least one option") (6 "\"instructions\"")
                                          (7 "found 2") (8 "at most 1024 tokens")
                                          (9 "first 96 tokens"))
                   do (is (contains err (format nil "line ~D: " line)) "line ~D: ~A" line err)
                      (is (contains err needle) "~S: ~A" needle err))))
      (multiple-value-bind (code out err) (run-exe (list "decide" file path))
        (is (= 1 code))
        (check-errors err)
        (let ((p1 (model:decide model (parse-json-line (first lines))))
              (p10 (model:decide model (parse-json-line (car (last lines))))))
          (is (string= (format nil "question 1 (choice, 2 options)~%  ~A ls -la~%  ~A rm -rf .~%~
question 10 (score, 2 options)~%  ~A yes~%  ~A no~%"
                               (text::float-text (aref p1 0)) (text::float-text (aref p1 1))
                               (text::float-text (aref p10 0)) (text::float-text (aref p10 1)))
                       out)
              "~A" out)))
      (multiple-value-bind (code out err) (run-exe (list "decide" file "-" "--json") :input input)
        (is (= 1 code))
        (check-errors err)
        (let ((objects (mapcar #'parse-json-line (split-lines-of out))))
          (is (= 2 (length objects)))
          (multiple-value-bind (probs logits ids markers)
              (model:decide model (parse-json-line (first lines)))
            (let ((o (first objects)))
              (is (= 1 (gethash "question" o)))
              (is (equalp (coerce ids 'list) (coerce (gethash "ids" o) 'list)))
              (is (equal markers (coerce (gethash "markers" o) 'list)))
              ;; the shortest digits of each single-float, read back as one
              (flet ((same (ours json) (every (lambda (a b) (= a (coerce b 'single-float)))
                                              ours json)))
                (is (same logits (gethash "logits" o)))
                (is (same probs (gethash "probabilities" o))))))
          (is (= 10 (gethash "question" (second objects))))))
      (multiple-value-bind (code out err) (run-exe (list "decide" file path "--activations" "q8x2"))
        (declare (ignore out))
        (is (= 1 code))
        (is (= 8 (count #\Newline err)))))
    (multiple-value-bind (code out err)
        (run-exe (list "decide" (encoder-file "s1-pico" :f32) path))
      (is (= 1 code))
      (is (string= "" out))
      (is (= 1 (count #\Newline err)))
      (is (contains err "expected a decision head") "~A" err))
    (is (= 2 (run-exe (list "decide" file))))
    (is (= 2 (run-exe (list "decide" file path "--activations" "q4"))))))

(defun parse-json-line (line)
  (rontolisp:parse-json line))

(defun split-lines-of (text)
  "The non-empty lines of TEXT."
  (loop with start = 0
        for nl = (position #\Newline text :start start)
        for line = (subseq text start (or nl (length text)))
        when (plusp (length line)) collect line
        while nl do (setf start (1+ nl))))

(test decision-reads-a-file-llama-quantize-shaped
  "quantize drops trailing 1 dims as llama-quantize does, so a quantized
file holds cls.output.weight as ggml dims [d], not [d, 1]: the same tensor
to ggml, loaded and run; and a file that differs from another only by that
tensor's dims gives the same bits."
  (let* ((f32 (decision-file "s1-pico" :f32))
         (q (tmp-path "quantized.gguf"))
         (flat (tmp-path "flat.gguf"))
         (question (first model:*questions*)))
    (unwind-protect
         (progn
           (rontolisp:quantize-file f32 q)
           (gguf:with-file (g q)
             (is (equal '(64) (gguf:tensor-info-shape (gguf:tensor-info g "cls.output.weight")))))
           (let ((probs (model:decide (model:load q) question)))
             (is (every (lambda (p) (< 0 p 1)) probs))
             (is (< (abs (- 1 (reduce #'+ probs))) 1e-5)))
           (gguf:with-file (g f32)
             (gguf:write flat (gguf:make-file
                               :metadata (gguf:metadata g)
                               :tensors (loop for name in (gguf:tensor-names g)
                                              collect (list name (gguf:tensor g name)
                                                            :dims (if (string= name "cls.output.weight")
                                                                      '(64)
                                                                      (gguf:tensor-info-dims
                                                                       (gguf:tensor-info g name))))))))
           (gguf:with-file (g flat)
             (is (equal '(64) (gguf:tensor-info-shape (gguf:tensor-info g "cls.output.weight")))))
           (multiple-value-bind (p1 l1) (model:decide (model:load f32) question)
             (multiple-value-bind (p2 l2) (model:decide (model:load flat) question)
               (is (same-bits-p p1 p2))
               (is (same-bits-p l1 l2)))))
      (ignore-errors (delete-file q))
      (ignore-errors (delete-file flat)))))

(test render-compiles-the-template-once
  "MODEL:RENDER parses the chat template on the first question only (a
question's whole path is timed by `bench --questions'): later questions
reuse the compiled template kept in the head and render the same text."
  (let* ((model (model:load (decision-file "s1-pico" :f32)))
         (head (model::encoder-decision model))
         (q (first model:*questions*)))
    (is (null (model::decision-head-template head)))
    (let* ((text (model:render model q))
           (compiled (model::decision-head-template head)))
      (is (rontolisp::compiled-template-p compiled))
      (is (string= (systemone-text q) text))
      (is (string= text (model:render model q)))
      (is (eq compiled (model::decision-head-template head))))))

;;; Hostile templates, long lines and the values errors report.

(defun decision-file-with-template (template)
  "A fresh copy of the s1-pico decision file whose chat template is TEMPLATE."
  (let ((path (tmp-path "template.gguf")))
    (gguf:write path (file-with (decision-file "s1-pico" :f32) :key "tokenizer.chat_template"
                                                            :type :string :value template))
    path))

(test decide-command-answers-each-line-of-a-pipe
  ;; Standard output was fully buffered and the input read in 64 KiB blocks:
  ;; a co-process waited for its first answer until it closed the pipe.
  (let ((file (decision-file "s1-pico" :f32)))
    (check-co-process (list "decide" file "-" "--json")
                      (list (question-json "choice" "pick one" '("ls -la" "rm -rf .") "s")
                            (question-json "score" "ok?" '("yes" "no") "t")))))

(test decide-command-answers-each-line-of-a-pipe-on-threads
  "With --threads 2 each line read from a pipe is still answered before the
next one is written (the answer does not wait for more lines)."
  (let ((file (decision-file "s1-pico" :f32)))
    (check-co-process (list "decide" file "-" "--json" "--threads" "2")
                      (list (question-json "choice" "pick one" '("ls -la" "rm -rf .") "s")
                            (question-json "score" "ok?" '("yes" "no") "t")
                            (question-json "choice" "next?" '("make" "make check" "stop") "u")))))

(test decide-command-gives-the-same-bytes-at-1-and-2-threads
  "The built-in questions, lines that are errors among them, answered at
--threads 1 and 2: the same exit status and the same bytes on standard
output and standard error, text and --json."
  (let* ((file (decision-file "s1-pico" :f32))
         (good (mapcar (lambda (q)
                         (question-json (getf q :type) (getf q :instructions)
                                        (mapcar (lambda (o) (if (consp o) (getf o :text) o))
                                                (coerce (getf q :options) 'list))
                                        (getf q :state)))
                       model:*questions*))
         (lines (loop for round below 6
                      append good
                      collect (nth round '("not json" "[1]" "{\"type\": \"other\"}"
                                           "{\"type\": \"choice\", \"options\": []}"
                                           "" "{}"))))
         (path (write-file-string (tmp-path "questions.jsonl") (format nil "~{~A~%~}" lines))))
    (unwind-protect
         (dolist (json '(() ("--json")))
           (multiple-value-bind (code1 out1 err1)
               (run-exe-octets (append (list "decide" file path "--threads" "1") json))
             (multiple-value-bind (code2 out2 err2)
                 (run-exe-octets (append (list "decide" file path "--threads" "2") json))
               (is (eql 1 code1) "~A" (octets-text err1))
               (is (eql code1 code2) "~A" (octets-text err2))
               (is (= (* 6 (length good))
                      (count-if (lambda (line) (string= (if json "{" "question ") line
                                                        :end2 (min (length line) (if json 1 9))))
                                (split-lines-of (octets-text out1))))
                   "~A" (octets-text out1))
               (is (= 6 (count 10 err1)) "~A" (octets-text err1))
               (is (equalp out1 out2) "~A~%~A" (octets-text out1) (octets-text out2))
               (is (equalp err1 err2) "~A~%~A" (octets-text err1) (octets-text err2)))))
      (ignore-errors (delete-file path)))))

(defun octets-text (octets)
  "OCTETS (UTF-8) as a string, for a message."
  (rontolisp::%utf8-string (coerce octets '(simple-array (unsigned-byte 8) (*)))))

(defun question-json (type instructions options state)
  "A question as one line of JSON."
  (with-output-to-string (s)
    (text::write-json (list :object (cons "type" type) (cons "instructions" instructions)
                                (cons "options" (coerce options 'vector)) (cons "state" state))
                          s)))

(defun longest-token-length (model)
  (loop for id below (model:vocabulary-size model)
        maximize (length (model:token-piece model id))))

(defparameter *multiplying-template*
  (concatenate 'string "[CLS]{{ type }} question: "
               "{% if state == 'spin' %}" (nested-loops 4 "") "{% endif %}"
               (nested-loops 6 "{{ instructions }}")
               "[SEP]{% for o in options %}[MASK]{{ o.text if o.text is defined else o }}~
{% endfor %}[SEP]{{ state }}[SEP]")
  "The converter's template with loops that multiply: six nested ones print
the instructions once per combination of options, and with the state
\"spin\" four more print nothing.")

(test decide-command-stops-a-multiplying-template-and-goes-on
  "A template whose loops multiply stops at the rendered-text limit
(decision.max_tokens times the longest token's bytes) or the loop limit,
as an error on its line naming the limit, and the next lines are answered."
  (let* ((file (decision-file-with-template *multiplying-template*))
         (model (model:load file))
         (limit (* 1024 (longest-token-length model)))
         (options (loop for i from 1 to 20 collect (format nil "o~D" i)))
         (path (write-file-string
                (tmp-path "questions.jsonl")
                (format nil "~A~%~A~%~A~%"
                        (question-json "choice" (make-string 300 :initial-element #\x)
                                       (subseq options 0 5) "s")
                        (question-json "choice" "x" options "spin")
                        (question-json "choice" "ok?" '("yes") "s")))))
    (unwind-protect
         (multiple-value-bind (code out err) (run-exe (list "decide" file path))
           (is (= 1 code))
           (is (= 2 (count #\Newline err)) "~A" err)
           (is (contains err (format nil "line 1: template offset ~D: expected a rendered text of ~
at most ~D characters" (search "instructions }}" *multiplying-template*) limit))
               "~A" err)
           (is (contains err (format nil "(decision.max_tokens 1024 times ~D, the longest token's bytes)"
                                     (longest-token-length model)))
               "~A" err)
           (is (contains err "line 2: template offset") "~A" err)
           (is (contains err "expected at most 65536 loop iterations") "~A" err)
           (is (contains out "question 3 (choice, 1 option)") "~A" out)
           (is (not (contains out "question 1")) "~A" out))
      (ignore-errors (delete-file file))
      (ignore-errors (delete-file path)))))

(test render-stops-six-loops-over-100-options
  "Six loops over 100 options printing 300 characters asked for 3e14
characters (memory grew until the process was killed): the rendering
stops at the limit with an error naming it."
  (let* ((file (decision-file-with-template *multiplying-template*))
         (model (model:load file))
         (question (list :type "choice" :instructions (make-string 300 :initial-element #\x)
                         :options (loop for i below 100 collect (format nil "o~D" i))
                         :state "s")))
    (unwind-protect
         (dolist (call (list #'model:render #'model:decide))
           (handler-case (progn (funcall call model question)
                                (fail "~A answered" call))
             (rontolisp:template-error (c)
               (is (contains (princ-to-string c) "decision.max_tokens 1024 times")
                   "~A" c))))
      (ignore-errors (delete-file file)))))

(test decide-refuses-a-long-literal-template-at-the-limit
  "A template of one long literal is refused at the rendered-text limit,
before the text is made and tokenized."
  (let* ((file (decision-file-with-template
                (concatenate 'string "[CLS]" (make-string 1000000 :initial-element #\z)
                             "{% for o in options %}[MASK]{% endfor %}")))
         (model (model:load file)))
    (unwind-protect
         (handler-case (progn (model:decide model (first model:*questions*))
                              (fail "answered"))
           (rontolisp:template-error (c)
             (is (= 0 (rontolisp:template-error-offset c)))
             (is (contains (princ-to-string c) "decision.max_tokens 1024 times") "~A" c)))
      (ignore-errors (delete-file file)))))

(test decide-command-answers-the-lines-after-an-over-long-one
  "A line over the longest a questions file may hold (64 MiB; lowered
here) is an error on that line, skipped without being kept, and the lines
after it are answered."
  (is (= (* 64 1024 1024) command-line::*max-line-bytes*))
  (let* ((file (decision-file "s1-pico" :f32))
         (good (question-json "choice" "ok?" '("yes" "no") "s"))
         (long (question-json "choice" (make-string 5000 :initial-element #\x) '("yes") "s"))
         (path (write-file-string (tmp-path "questions.jsonl")
                                  (format nil "~A~%~A~%~A~%~A" good long good long))))
    (unwind-protect
         (let* ((out (make-string-output-stream))
                (err (make-string-output-stream))
                (code (let ((*standard-output* out) (*error-output* err)
                            (command-line::*max-line-bytes* 1000))
                        (handler-case (command-line::command-decide (list file path))
                          (error (c) (format nil "~A" c)))))
                (out (get-output-stream-string out))
                (err (get-output-stream-string err)))
           (is (eql 1 code) "~A" code)
           (is (= 2 (count #\Newline err)) "~A" err)
           (dolist (line '(2 4))
             (is (contains err (format nil "line ~D: expected a line of at most 1000 bytes" line))
                 "~A" err))
           (is (contains out "question 1 (choice, 2 options)") "~A" out)
           (is (contains out "question 3 (choice, 2 options)") "~A" out))
      (ignore-errors (delete-file path)))))

(test decide-command-reports-found-values-as-json
  "A question's wrong value is reported as the JSON it was written in:
null, 1.5, [[...]], never Lisp's :NULL, 1.5d0 or #(#(."
  (let* ((file (decision-file "s1-pico" :f32))
         (lines '(("{\"type\": null, \"instructions\": \"x\", \"options\": [\"a\"], \"state\": \"s\"}"
                   "field \"type\": expected a string, found null")
                  ("{\"type\": 1.5, \"instructions\": \"x\", \"options\": [\"a\"], \"state\": \"s\"}"
                   "field \"type\": expected a string, found 1.5")
                  ("{\"type\": \"choice\", \"instructions\": [[1, 2], [3]], \"options\": [\"a\"], \"state\": \"s\"}"
                   "field \"instructions\": expected a string, found [[1, 2], [3]]")
                  ("{\"type\": \"choice\", \"instructions\": \"x\", \"options\": [[[\"a\"]]], \"state\": \"s\"}"
                   "option 1: expected a string or {\"text\": string}, found [[\"a\"]]")
                  ("{\"type\": \"choice\", \"instructions\": \"x\", \"options\": 2.5, \"state\": \"s\"}"
                   "field \"options\": expected an array of options, found 2.5")
                  ("{\"type\": \"choice\", \"instructions\": \"x\", \"options\": [{\"text\": null}], \"state\": \"s\"}"
                   "option 1: expected a string or an object with a string \"text\", found {\"text\": null}")
                  ("{\"type\": \"choice\", \"instructions\": \"x\", \"options\": [\"a\"], \"state\": false}"
                   "field \"state\": expected a string, found false")
                  ("[[1.5, null]]" "expected a question as a JSON object, found [[1.5, null]]")))
         (path (write-file-string (tmp-path "questions.jsonl")
                                  (format nil "~{~A~%~}" (mapcar #'first lines)))))
    (unwind-protect
         (multiple-value-bind (code out err) (run-exe (list "decide" file path))
           (is (= 1 code))
           (is (string= "" out))
           (is (= (length lines) (count #\Newline err)) "~A" err)
           (loop for (nil message) in lines for n from 1
                 do (is (contains err (format nil "line ~D: ~A" n message)) "~A~%~A" message err))
           (dolist (lisp '(":NULL" "d0" "#(" "NIL"))
             (is (not (contains err lisp)) "~A in ~A" lisp err)))
      (ignore-errors (delete-file path)))))

;;; The last block: only the marker rows go on after attention.

(defun copy-matrix-into (to from)
  "The elements of the single-float matrix FROM stored in TO (of at least
as many), answered."
  (dotimes (i (array-total-size from) to)
    (setf (row-major-aref to i) (row-major-aref from i))))

(test decision-last-block-answers-the-full-block-rows-at-the-markers
  "The head's last block makes keys and values for every row of the window
and the rest for the marker rows only: those rows have the bits the whole
block gives them, post-norm and norm-first, relu and gelu, F32, F16 and
Q8_0 weights (the queries of the marker rows alone, from a part of
attn_qkv's rows), markers in any order and repeated, every SIMD setting
and thread count."
  (let ((f32 (decision-file "s1-pico" :f32)) (edited '()))
    (unwind-protect
         (dolist (path (list f32
                             (first (push (edited-file f32 "modern-bert.decision.norm_first=true:bool"
                                                       "modern-bert.decision.activation=gelu:string")
                                          edited))
                             (decision-file "s1-pico" :f16)
                             (decision-file "s1-pico" :q8_0)))
           (let* ((model (model:load path))
                  (h (model:hyperparameters model))
                  (head (model::encoder-decision model))
                  (block (first (model::decision-head-blocks head)))
                  (d (getf h :embedding-length)) (m 40) (markers '(3 17 0 39 17))
                  (s (model::make-encode-scratch m d (getf h :feed-forward-length)))
                  (hs (model::head-scratch-of s head m (length markers) d))
                  (input (random-matrix m d :state (make-random-state 7))))
             (flet ((run (markers)
                      (copy-matrix-into (model::head-scratch-x hs) input)
                      (model::head-block head block 2 hs (svref (model::head-scratch-ups hs) 0)
                                         :q8 path markers)))
               (enc-with-knobs
                (lambda (on n)
                  (let* ((full (run nil))
                         (want (make-array (list (length markers) d) :element-type 'single-float)))
                    (loop for p in markers for r from 0
                          do (dotimes (j d) (setf (aref want r j) (aref full p j))))
                    (is (same-bits-p (flat want) (flat (run markers)))
                        "~A simd ~A threads ~D: the marker rows differ from the whole block's"
                        path on n)))))))
      (mapc #'delete-file edited))))

;;; The forward pass in the model's scratch (lisp/model/model-scratch.lisp).

(defun compiled-once (name form)
  "FORM, a lambda expression, natively compiled the first time NAME asks
for it and kept: compiled, since the tests load as source and the
interpreter conses on its own."
  (or (get name 'compiled-once)
      (setf (get name 'compiled-once)
            (let ((*error-output* (make-broadcast-stream))
                  (*standard-output* (make-broadcast-stream)))
              (compile nil form)))))

(defun decide-round-thunk ()
  "A compiled function of (model head inputs rounds) calling the decision
head's forward pass (ids to logits) on each input (ids markers type out)
ROUNDS times."
  (compiled-once 'decide-round-thunk
                 '(lambda (model head inputs rounds)
                   (dotimes (r rounds)
                     (loop for (ids markers type out) in inputs
                           do (model::decision-logits model head ids markers type :q8 out))))))

(defun decide-inputs (model)
  "(ids markers type out) for each built-in question of MODEL, OUT a fresh
vector for its logits."
  (loop for q in model:*questions*
        collect (multiple-value-bind (ids markers) (question-ids model q)
                  (list ids markers (getf q :type)
                        (make-array (length markers) :element-type 'single-float)))))

(test decision-forward-pass-conses-nothing-per-question
  ;; The forward pass of a question (ids to logits) works in its model's
  ;; scratch: once a round has grown it, further rounds cons nothing.  The
  ;; heap's count moves a free-list refill (some KB) at a time, so 400
  ;; questions show any consing of more than a few octets per question;
  ;; the least of three counts, so that another thread's allocation (the
  ;; runtime's, a child's exit) is not taken for the pass's.
  (let ((run (decide-round-thunk)))
    (dolist (spec '((:f32 nil) (:f16 nil) (:q8_0 nil) (:f32 :q8_0)))
      (destructuring-bind (head-type quantize) spec
        (let* ((model (model:load (decision-file "s1-pico" head-type) :quantize quantize))
               (head (model::encoder-decision model))
               (inputs (decide-inputs model)))
          (funcall run model head inputs 1)
          (let ((consed (command-line::least-consed run model head inputs 50)))
            (is (= 0 consed) "head ~A~@[, quantize ~A~]: ~D octets consed by 400 questions"
                head-type quantize consed)))))))

(defun whole-path-thunk ()
  "A compiled function of (model questions answer rounds) calling
MODEL:DECIDE :INTO ANSWER on each question ROUNDS times."
  (compiled-once 'whole-path-thunk
                 '(lambda (model questions answer rounds)
                   (dotimes (r rounds)
                     (dolist (q questions)
                       (model:decide model q :into answer))))))

(test decision-whole-question-conses-nothing-per-question
  ;; A question given as data (parsed once) goes from its template to its
  ;; probabilities in its model's scratch: the text rendered into a kept
  ;; string, tokenized into a kept id vector, its markers found in a kept
  ;; vector, the answers written into a kept MODEL:MAKE-ANSWER.  Once a
  ;; round has grown them, 400 questions cons nothing (the least of three
  ;; counts, as in the forward pass's test above).
  (let ((run (whole-path-thunk))
        (questions (mapcar #'model::parse-question model:*questions*)))
    (dolist (spec '((:f32 nil) (:q8_0 nil)))
      (destructuring-bind (head-type quantize) spec
        (let ((model (model:load (decision-file "s1-pico" head-type) :quantize quantize))
              (answer (model:make-answer)))
          (funcall run model questions answer 1)
          (let ((consed (command-line::least-consed run model questions answer 50)))
            (is (= 0 consed) "head ~A: ~D octets consed by 400 whole questions" head-type
                consed)))))))

(test decision-answer-into-has-the-fresh-answers
  ;; MODEL:DECIDE :INTO answers the same probabilities, logits, ids and
  ;; markers as MODEL:DECIDE's fresh values, question after question in one
  ;; MODEL:MAKE-ANSWER (longer ones after shorter ones and back).
  (let ((model (model:load (decision-file "s1-pico" :f32)))
        (answer (model:make-answer)))
    (dolist (q (append model:*questions* (reverse model:*questions*)))
      (let ((fresh (multiple-value-list (model:decide model q)))
            (into (multiple-value-list (model:decide model q :into answer))))
        (is (equalp (first fresh) (first into)) "~S: probabilities" (getf q :instructions))
        (is (equalp (second fresh) (second into)) "~S: logits" (getf q :instructions))
        (is (equalp (third fresh) (third into)) "~S: ids" (getf q :instructions))
        (is (equalp (coerce (fourth fresh) 'vector) (fourth into)) "~S: markers"
            (getf q :instructions))
        (is (eq (first into) (model::answer-probabilities answer)))))))

(test decision-question-bindings-cons-little
  ;; A question's template variables are a table of four keys and one
  ;; {"text": ...} table per such option, sized for them: at ECL's
  ;; default size (1024 entries) they were some 36 KB a question, the
  ;; most of what a question allocated and of the collector's work.
  (let ((run (let ((*error-output* (make-broadcast-stream))
                   (*standard-output* (make-broadcast-stream)))
               (compile nil '(lambda (questions rounds)
                              (dotimes (r rounds)
                                (dolist (q questions) (model::question-bindings q))))))))
    (funcall run model:*questions* 1)
    (let* ((rounds 50)
           (per-question (/ (command-line::least-consed run model:*questions* rounds)
                            (* rounds (length model:*questions*)))))
      (is (< per-question 4096) "~,1F octets consed per question's bindings, expected under 4096"
          per-question))))

(test decision-in-threads-has-the-bits-of-one-thread
  ;; Three threads deciding with one model at once each take a scratch of
  ;; their own from its pool: the same logits as one thread alone.
  (let* ((model (model:load (decision-file "s1-pico" :q8_0)))
         (want (mapcar (lambda (q) (nth-value 1 (decide-plist model q))) model:*questions*))
         (old-threads (rontolisp:threads))
         (bad (list 0)) (lock (mp:make-lock)))
    (unwind-protect
         (progn
           (setf (rontolisp:threads) 1)
           (mapc #'mp:process-join
                 (loop repeat 3
                       collect (mp:process-run-function
                                "decide"
                                (lambda ()
                                  (dotimes (r 10)
                                    (loop for q in model:*questions* for w in want
                                          unless (same-bits-p (nth-value 1 (decide-plist model q)) w)
                                            do (mp:with-lock (lock) (incf (first bad))))))))))
      (setf (rontolisp:threads) old-threads))
    (is (= 0 (first bad)) "~D of 240 concurrent decisions differ" (first bad))
    (is (<= (count-if #'identity (model::scratch-cache-free (model::encoder-scratch model)))
            model::+scratch-cache-entries+))))

;; Three threads (released together) ask a freshly loaded model, without
;; MODEL:PREPARE-DECIDE, the built-in questions as JSON objects: each
;; question's text, ids and logits are those of one thread alone.  Render
;; and tokenize run in parallel (no lock), the first uses of the tokenizer,
;; template and text limit race each other.
(test decide-in-threads-renders-and-tokenizes-as-one-thread
  (let* ((file (decision-file "s1-pico" :f32))
         (questions (mapcar (lambda (q)
                              (rontolisp:parse-json
                               (question-json (getf q :type) (getf q :instructions)
                                              (mapcar (lambda (o)
                                                        (if (consp o)
                                                            (list :object (cons "text" (getf o :text)))
                                                            o))
                                                      (getf q :options))
                                              (getf q :state))))
                            model:*questions*))
         (one (model:load file))
         (want (mapcar (lambda (q)
                         (multiple-value-bind (p logits ids) (model:decide one q)
                           (declare (ignore p))
                           (list (model:render one q) ids logits)))
                       questions))
         (old-threads (rontolisp:threads))
         (bad (list 0)) (first-bad (list nil)) (lock (mp:make-lock))
         (gate (mp:make-semaphore :count 0)))
    (unwind-protect
         (progn
           (setf (rontolisp:threads) 1)
           (dotimes (round 3)
             (let* ((model (model:load file))
                    (threads
                      (loop repeat 3
                            collect (mp:process-run-function
                                     "question"
                                     (lambda ()
                                       (mp:wait-on-semaphore gate)
                                       (dotimes (r 5)
                                         (loop for q in questions for w in want
                                               do (let ((got (handler-case
                                                                 (multiple-value-bind (p logits ids)
                                                                     (model:decide model q)
                                                                   (declare (ignore p))
                                                                   (list (model:render model q) ids logits))
                                                               (error (e) (princ-to-string e)))))
                                                    (unless (and (consp got)
                                                                 (string= (first got) (first w))
                                                                 (equalp (second got) (second w))
                                                                 (same-bits-p (third got) (third w)))
                                                      (mp:with-lock (lock)
                                                        (incf (first bad))
                                                        (unless (first first-bad)
                                                          (setf (first first-bad) got))))))))))))
               (mp:signal-semaphore gate 3)
               (mapc #'mp:process-join threads))))
      (setf (rontolisp:threads) old-threads))
    (is (= 0 (first bad)) "~D of ~D concurrent questions differ from one thread's; the first: ~S"
        (first bad) (* 3 3 5 (length questions)) (first first-bad))))

;;; The question path parses a question once.

(defun call-counts (names thunk)
  "Call THUNK with each of the functions NAMES counting its calls; the
counts, in the order of NAMES."
  (let ((counts (mapcar (lambda (name) (declare (ignore name)) 0) names))
        (saved (mapcar #'fdefinition names)))
    (unwind-protect
         (progn
           (loop for name in names for f in saved for i from 0
                 do (let ((f f) (i i))
                      (setf (fdefinition name)
                            (lambda (&rest args) (incf (nth i counts)) (apply f args)))))
           (funcall thunk))
      (loop for name in names for f in saved do (setf (fdefinition name) f)))
    counts))

(test decide-parses-a-question-and-finds-the-head-once
  "MODEL:DECIDE, and `decide' on a line, check the question's fields
(QUESTION-BINDINGS) and find the model's head (HEAD-OF) once per question,
and answer as before: the same bits for a parsed question as for the
plist."
  (let ((model (model:load (decision-file "s1-pico" :f32)))
        (q (third model:*questions*))
        (names '(model::question-bindings model::head-of)))
    (is (equal '(1 1) (call-counts names (lambda () (model:decide model q)))))
    (is (equal '(1 1) (call-counts names (lambda () (model:render model q)))))
    (let ((line (rontolisp::%utf8-octets
                 "{\"type\": \"choice\", \"instructions\": \"x\", \"options\": [\"a\", {\"text\": \"b\"}], \"state\": \"s\"}")))
      (is (equal '(1 1) (call-counts names (lambda ()
                                             (with-output-to-string (*standard-output*)
                                               (command-line::decide-line model line 1 :q8 nil
                                                                           *standard-output*)))))))
    (is (same-bits-p (model:decide model q) (model:decide model (model::parse-question q))))))

(test decision-positions-of-finds-the-markers-and-counts-past-out
  "%POSITIONS-OF, how a question's markers are found: every position of
the value in the ids up to their fill pointer, in order, stored as far
as OUT reaches, and the whole count answered, so that the caller grows
OUT and asks again; anything but fixnum vectors is a TYPE-ERROR."
  (let ((ids (make-array 6 :element-type 'fixnum :adjustable t :fill-pointer 5
                           :initial-contents '(4 1 4 4 2 4)))
        (out (make-array 2 :element-type 'fixnum :adjustable t :fill-pointer 0)))
    (is (= 3 (model::%positions-of ids 4 out)))
    (is (equal '(0 2) (list (aref out 0) (aref out 1))))
    (adjust-array out 3)
    (is (= 3 (model::%positions-of ids 4 out)))
    (is (equal '(0 2 3) (list (aref out 0) (aref out 1) (aref out 2))))
    (is (= 0 (model::%positions-of ids 7 out)))
    (signals type-error (model::%positions-of '(4 1) 4 out))
    (signals type-error (model::%positions-of ids 4 (make-array 2 :element-type 'single-float)))))
