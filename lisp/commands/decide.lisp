;;;; commands/decide.lisp - `rontolisp decide': its command line; the work
;;;; is in model/decision.lisp.

(in-package "COMMAND-LINE")

(define-command "decide" (file questions)
    (:usage "FILE.gguf (QUESTIONS.jsonl | -) [--activations q8|q8x2] [--json]"
     :summary "score the options of questions with a GGUF file's decision head"
     :details "One question per line of QUESTIONS.jsonl (- reads standard input), a
JSON object {\"type\", \"instructions\", \"options\", \"state\"}, each option a
string or {\"text\": string}.  Each is rendered with the file's chat template,
tokenized, encoded and scored by the decision head (doc/decision.md): the
probabilities of its options.  Text form: a line \"question N (TYPE, K
options)\", N the line number, then one line per option: its probability and
its text.  --json: one object per question and line, {\"question\": N, \"ids\",
\"markers\", \"logits\", \"probabilities\"}.  A line that cannot be answered (not
JSON, a line over 64 MiB, a missing field, an unknown type, no options, a
rendered text or loop count over the template's limits, a marker count other
than the option count, more tokens than decision.max_tokens, a marker beyond
the head's window) is one line on standard error naming its line number and why;
the other questions are still answered, and the exit status is 1.  A file
without a decision head is an error."
     :options ((activations "--activations A" :parse (choice-parser '("q8" "q8x2")
                                                                    :key #'option-keyword)
                            :default :q8 :help "how Q8_0 weights see the activations:
q8 (default) or q8x2 (two-pass, about 15 bits)")
               (json "--json" :help "one JSON object per question (bytes that are not UTF-8 as \\udcHH)")))
  (let ((model (model:load file))
        (failed nil))
    (head-of model 'model:decide)
    (flet ((answer (number fn)
             ;; FN answers line NUMBER; an error is that line's, on stderr
             (handler-case (funcall fn)
               (rontolisp-error (c)
                 (setf failed t)
                 (finish-output *standard-output*)
                 (report-error (format nil "rontolisp decide: ~A line ~D"
                                       (lines-name questions) number)
                               c)))))
      (map-file-lines (lambda (octets number)
                        (answer number
                                (lambda () (decide-line model octets number activations json))))
                      questions :dash-is-stdin t :flush *standard-output*
                      :too-long (lambda (number limit)
                                  (answer number
                                          (lambda ()
                                            (model:question-error "expected a line of at most ~D ~
bytes (the longest question line), found more" limit))))))
    (if failed 1 0)))
