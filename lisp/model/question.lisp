;;;; question.lisp - a question as the decision head takes it
;;;; (doc/decision.md §1, §4): checked and parsed once into its template
;;;; variables (PARSE-QUESTION), rendered with the file's chat template
;;;; (MODEL:RENDER), tokenized, its markers found and scored by the head of
;;;; decision.lisp (MODEL:DECIDE); MODEL:PREPARE-DECIDE builds what the first
;;;; question would.

(in-package "MODEL")

;; Not inlined, so that a test can count the parses of a question.
(declaim (notinline question-bindings))

;;; Questions.

(defparameter *questions*
  '((:type "choice" :instructions "List the files."
     :options ("ls -la" "rm -rf ." "cd .." "pwd") :state "cwd ~/src")
    (:type "choice" :instructions "Commit to?"
     :options ("main" "fix/head") :state "on main")
    (:type "choice" :instructions "Build failed. Next?"
     :options ((:text "read it") (:text "clean") (:text "retry") (:text "rm build") (:text "stop"))
     :state "Error 1")
    (:type "score" :instructions "2 + 2 = 4?"
     :options ("yes" "no") :state "quiz 3/10")
    (:type "score" :instructions "Safe to run?"
     :options ((:text "safe") (:text "unsafe")) :state "sudo rm -rf /")
    (:type "noul" :instructions "Ask the user?"
     :options ("go on" "ask") :state "two files match")
    (:type "noul" :instructions "Tests passed?"
     :options ((:text "no") (:text "yes")) :state "42 passed, 0 failed")
    (:type "choice" :instructions "Tokenizer file?"
     :options ("tokenizer.json" "config.json" "model.safetensors") :state "ls: 3 files"))
  "Built-in questions, as MODEL:DECIDE takes them: each question type of
the --random models (choice, score, noul), two to five options, options as
strings and as (:text string) objects.  Short, so that every option's
marker falls within the first 96 tokens (the --random head's window) with
the --random tokenizer.  The random head's scale is measured on them, and
`bench --questions' times them.")

(defun question-field (question name)
  "The field NAME (a JSON name) of QUESTION, a plist (:type :instructions
:options :state) or an EQUAL hash table; (values value found-p)."
  (if (hash-table-p question)
      (gethash name question)
      ;; The keys compared by name, none interned: a question's fields are
      ;; read several times a question.
      (loop for (key value) on question by #'cddr
            when (and (symbolp key) (string-equal (symbol-name key) name))
              return (values value t)
            finally (return (values nil nil)))))

(defun option-binding (option k)
  "OPTION K (from 1) as the template sees it: a string, or a hash table
{\"text\": string} for a {\"text\": ...} object (an EQUAL hash table or a
plist (:text string))."
  (cond ((stringp option) option)
        ((or (hash-table-p option) (and (consp option) (keywordp (first option))))
         (multiple-value-bind (text found) (question-field option "text")
           (unless (and found (stringp text))
             (question-error "option ~D: expected a string or an object with a string \"text\", ~
found ~A" k (json-brief option)))
           ;; Sized for its one key: ECL's default size is 1024 entries,
           ;; some 16 KB a table and most of what a question allocated.
           (let ((table (make-hash-table :test 'equal :size 1)))
             (setf (gethash "text" table) text)
             table)))
        (t (question-error "option ~D: expected a string or {\"text\": string}, found ~A"
                           k (json-brief option)))))

(defun option-text (option)
  "The text of an option as OPTION-BINDING answers it."
  (if (stringp option) option (gethash "text" option)))

(defun question-bindings (question)
  "QUESTION's template variables as an EQUAL hash table (type,
instructions, options, state); QUESTION-ERROR for a question that is not a
plist or object, a missing or mistyped field, or no options."
  (unless (or (hash-table-p question)
              (and (listp question) (evenp (length question)) (every #'keywordp
                                                                     (loop for k in question by #'cddr
                                                                           collect k))))
    (question-error "expected a question (a plist or a JSON object with type, instructions, ~
options, state), found ~A" (json-brief question)))
  (let ((b (make-hash-table :test 'equal :size 4)))
    (dolist (name '("type" "instructions" "state"))
      (multiple-value-bind (value found) (question-field question name)
        (unless found
          (question-error "expected the field ~S, found none" name))
        (unless (stringp value)
          (question-error "field ~S: expected a string, found ~A" name (json-brief value)))
        (setf (gethash name b) value)))
    (multiple-value-bind (options found) (question-field question "options")
      (unless found
        (question-error "expected the field \"options\", found none"))
      (unless (and (typep options 'sequence) (not (stringp options)))
        (question-error "field \"options\": expected an array of options, found ~A"
                        (json-brief options)))
      (when (zerop (length options))
        (question-error "field \"options\": expected at least one option, found none"))
      (setf (gethash "options" b)
            (coerce (loop for o in (coerce options 'list) for k from 1
                          collect (option-binding o k))
                    'simple-vector)))
    b))

(defstruct (parsed-question (:constructor %make-parsed-question (type options bindings)))
  "A question checked and turned into the template's variables once, so
that rendering, counting its options and naming its type read the same
fields without parsing it again: TYPE (a string), OPTIONS (a simple vector
of OPTION-BINDING's values) and BINDINGS (QUESTION-BINDINGS' table)."
  (type "" :type string :read-only t)
  (options #() :type simple-vector :read-only t)
  (bindings nil :type hash-table :read-only t))

(document-functions
  model:parsed-question-type "A parsed question's type: the string of its \"type\" field."
  model:parsed-question-options "A parsed question's options: a simple vector, in the question's order.")

(defun parse-question (question)
  "QUESTION (as MODEL:RENDER takes it, or a PARSED-QUESTION) as a
PARSED-QUESTION; QUESTION-ERROR as QUESTION-BINDINGS signals it."
  (if (parsed-question-p question)
      question
      (let ((b (question-bindings question)))
        (%make-parsed-question (gethash "type" b) (gethash "options" b) b))))

(defun chat-template (model head)
  "MODEL's tokenizer.chat_template compiled (COMPILE-TEMPLATE), once: kept
in its decision HEAD, so that rendering a question does not parse the
template again; MODEL-ERROR when its file has none."
  (or (decision-head-template head)
      (let ((template (gguf:value (encoder-file model) "tokenizer.chat_template")))
        (unless (stringp template)
          (model-error (encoder-path model) "expected the key \"tokenizer.chat_template\" ~
(a string), found ~:[none~;~:*~A~]" (and template (json-brief template))))
        ;; Two threads rendering at once may both compile it: the same result.
        (setf (decision-head-template head) (compile-template template)))))

(defun rendered-text-limit (model head)
  "The longest text a question may render to, as (CHARACTERS . NAME), NAME
the limit in words: decision.max_tokens times the length of the
vocabulary's longest token (in bytes, its characters as the vocabulary
stores it).  A token stands for at most that many bytes of text, and a
character for at least one, so a longer text is more tokens than the head
takes (doc/decision.md).  Found once and kept in HEAD."
  (or (decision-head-text-limit head)
      (let ((longest (loop for id below (model:vocabulary-size model)
                           maximize (length (model:token-piece model id))))
            (tokens (decision-head-max-tokens head)))
        ;; Two threads may both find it: the same result.
        (setf (decision-head-text-limit head)
              (cons (* tokens (max longest 1))
                    (format nil "decision.max_tokens ~D times ~D, the longest token's bytes"
                            tokens longest))))))

(defun render (model question)
  "The text of QUESTION for MODEL (from MODEL:LOAD, with a decision head):
its file's tokenizer.chat_template rendered with the variables type,
instructions, options and state (doc/template.md), stopping at the
longest text that can be decision.max_tokens tokens (RENDERED-TEXT-LIMIT)
with a TEMPLATE-ERROR naming the limit.  QUESTION is a plist
(:type :instructions :options :state) or an EQUAL hash table with those
JSON names (as PARSE-JSON gives an object); each option is a string or a
{\"text\": string} object (a hash table or a plist (:text string)).
Signals MODEL:QUESTION-ERROR for a malformed question or one of a type the
head does not know, MODEL:MODEL-ERROR for a model without a decision head
or template."
  (render-question model (head-of model 'model:render) (parse-question question)))

(defun render-question (model head question &optional scratch)
  "MODEL:RENDER of the PARSED-QUESTION QUESTION with MODEL's decision HEAD:
a fresh string, or with SCRATCH (a QUESTION-SCRATCH) SCRATCH's text,
rendered into it."
  (type-index head (parsed-question-type question))
  (destructuring-bind (limit . name) (rendered-text-limit model head)
    (if scratch
        (render-template-into (chat-template model head) (parsed-question-bindings question)
                              (question-scratch-text scratch)
                              :max-length limit :max-length-name name
                              :scratch (question-scratch-render scratch))
        (render-template (chat-template model head) (parsed-question-bindings question)
                         :max-length limit :max-length-name name))))

(defun question-markers (head ids options out)
  "The positions of the head's mask token in IDS, one per option, in OUT
(an adjustable fixnum vector, its fill pointer set to their count);
QUESTION-ERROR when the count differs from OPTIONS."
  ;; In C (%POSITIONS-OF): an AREF of an adjustable vector is a call per
  ;; token here; counted and stored at once, OUT grown and filled again
  ;; only when it is too short (VECTOR-PUSH-EXTEND conses).
  (let* ((mask (decision-head-mask-id head))
         (count (%positions-of ids mask out)))
    (when (> count (array-dimension out 0))
      (adjust-array out count)
      (%positions-of ids mask out))
    (setf (fill-pointer out) count))
  (unless (= (length out) options)
    (question-error "expected ~D option marker~:P (token ~D) in the rendered question, found ~D"
                    options (decision-head-mask-id head) (length out)))
  out)

(defun prepare-decide (model)
  "Build now what MODEL:DECIDE and MODEL:RENDER otherwise build on their
first call: MODEL's tokenizer, its compiled chat template and the longest
text a question may render to.  Call it once before several threads ask
MODEL questions, so that none of them builds these while another is
using them (decide --threads and serve do).  Answers MODEL; MODEL-ERROR for
a model without a decision head or template."
  (let ((head (head-of model 'model:prepare-decide)))
    (tokenizer-of model 'model:prepare-decide)
    (chat-template model head)
    (rendered-text-limit model head)
    model))

(defun question-ids (model head question scratch)
  "The token ids of the PARSED-QUESTION QUESTION rendered for MODEL and
its decision HEAD, in the QUESTION-SCRATCH SCRATCH (its text, then its
ids, answered)."
  (let ((text (prog1 (render-question model head question scratch) (stage-mark :render))))
    (tokenize-into model text (question-scratch-ids scratch))))

(defstruct (answer (:constructor model:make-answer ()))
  "Where MODEL:DECIDE :INTO puts a question's answer, so that a caller
asking many questions conses nothing for them: PROBABILITIES and LOGITS
(single-float vectors), IDS and MARKERS (fixnum vectors), each with a fill
pointer set to the question's length and grown only for a longer one.
Each question overwrites the last: a caller copies what it keeps."
  (probabilities (answer-vector 'single-float 8))
  (logits (answer-vector 'single-float 8))
  (ids (answer-vector 'fixnum 64))
  (markers (answer-vector 'fixnum 8)))

(document-functions
  model:make-answer "A fresh, empty answer for MODEL:DECIDE's :INTO argument (one per thread):
MODEL:DECIDE then answers a question's values in its vectors, overwriting
the last question's, and conses nothing.")

(defun answer-vector (type n)
  (make-array n :element-type type :adjustable t :fill-pointer 0))

(defun answer-length (vector n)
  "VECTOR (an ANSWER's) set to N elements, grown first when shorter."
  (when (> n (array-dimension vector 0))
    (adjust-array vector n))
  (setf (fill-pointer vector) n)
  vector)

(defun answer-fixnums (vector from)
  "VECTOR (an ANSWER's) set to the fixnums of FROM (a fixnum vector)."
  (let ((n (length from)))
    (answer-length vector n)
    ;; Element by element: REPLACE conses between these vectors.
    (dotimes (i n vector)
      (setf (aref vector i) (aref from i)))))

(defun decide (model question &key (activations :q8) into)
  "The decision head of MODEL (from MODEL:LOAD) on QUESTION (as
MODEL:RENDER takes it): the question is rendered, tokenized by the file's
tokenizer (special tokens parsed, no bos or eos added), its markers are the
positions of the mask token, one per option in order; the head of
doc/decision.md scores each marker and the scores, divided by the type's
temperature, are softmax'd in double-float.  Answers the probabilities (a
single-float vector, one per option) and as further values the logits (a
single-float vector), the token ids (a vector) and the markers (a list of
positions).  ACTIVATIONS (:q8 or :q8x2) is how Q8_0 weights see the
activations (doc/products.md).  INTO, an ANSWER (MODEL:MAKE-ANSWER),
receives the four answers in its vectors, the markers a vector rather than
a list, and they are the values.  Signals MODEL:QUESTION-ERROR for an
unknown type, no options, a marker count other than the option count, more
tokens than decision.max_tokens, a marker at or past the head's window
(min(tokens, decision.max_head_tokens)); MODEL:MODEL-ERROR for a model
without a decision head or when a step's output is not finite.

A question's text, ids and markers are made in a scratch of MODEL's pool
(model-scratch.lisp), as its forward pass is: given a PARSED-QUESTION,
once the scratch has grown a question conses its four answers alone, and
with INTO nothing (doc/decision.md, \"What a question allocates\")."
  (stage-start)
  (let* ((head (head-of model 'model:decide))
         (question (parse-question question))
         (options (length (parsed-question-options question)))
         (type (parsed-question-type question)))
    (check-activations activations)
    (with-encoder-scratch (s model (scratch-capacity model))
      (let* ((qs (question-scratch-of s))
             (ids (question-ids model head question qs))
             (n (length ids)))
        (stage-mark :tokenize)
        (check-token-count head n)
        (let* ((markers (question-markers head ids options (question-scratch-markers qs)))
               (logits (if into
                           (answer-length (answer-logits into) options)
                           (make-array options :element-type 'single-float)))
               (probabilities (if into
                                  (answer-length (answer-probabilities into) options)
                                  (make-array options :element-type 'single-float)))
               (scores (if (<= n (encode-scratch-capacity s))
                           (scratch-logits model head (set-scratch-rows s n) ids markers type
                                           activations)
                           ;; Longer than the model's context: the forward
                           ;; pass says so.
                           (decision-logits model head (coerce ids 'list) (coerce markers 'list)
                                            type activations
                                            (make-array options :element-type 'single-float)))))
          (%softmax-into scores (temperature head type options) probabilities logits)
          (stage-mark :softmax)
          (if into
              (values probabilities logits (answer-fixnums (answer-ids into) ids)
                      (answer-fixnums (answer-markers into) markers))
              (values probabilities logits (subseq ids 0) (coerce markers 'list))))))))
