;;;; commands/decide.lisp - `rontolisp decide': its command line; the work
;;;; is in model/decision.lisp.

(in-package "COMMAND-LINE")

(define-command "decide" (file questions)
    (:usage "FILE.gguf (QUESTIONS.jsonl | -) [--activations q8|q8x2] [--threads N] [--json]"
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
the other questions are still answered, and the exit status is 1.  With
--threads N, N questions are answered at once, one per Lisp thread: the
same bytes on both outputs as one thread, in input order.  A file without a
decision head is an error."
     :options ((activations "--activations A" :parse (choice-parser '("q8" "q8x2")
                                                                    :key #'option-keyword)
                            :default :q8 :help "how Q8_0 weights see the activations:
q8 (default) or q8x2 (two-pass, about 15 bits)")
               (threads "--threads N" :parse #'thread-count-parser :default (or (threads-given) 1)
                        :help "answer N questions at once, one per Lisp thread,
each question's kernels on its own thread (default: one at a time, its
kernels on every core): the same output, in input order, each answer
written once it and those before it are done")
               (json "--json" :help "one JSON object per question (bytes that are not UTF-8 as \\udcHH)")))
  (let ((model (model:load file))
        (out *standard-output*)
        (err *error-output*)
        (failed nil))
    (model:prepare-decide model)
    (flet ((work (job)
             ;; JOB is (number octets limit): a line's answer as a string,
             ;; or the error that is the line's, on stderr
             (destructuring-bind (number octets limit) job
               (handler-case
                   (with-output-to-string (s)
                     (if octets
                         (decide-line model octets number activations json s)
                         (model:question-error "expected a line of at most ~D bytes (the ~
longest question line), found more" limit)))
                 (rontolisp-error (c) c))))
           (emit (job answer)
             (if (stringp answer)
                 (progn (write-string answer out)
                        (when (> threads 1) (finish-output out)))
                 (let ((*error-output* err))
                   (setf failed t)
                   (finish-output out)
                   (report-error (format nil "rontolisp decide: ~A line ~D"
                                         (lines-name questions) (first job))
                                 answer)))))
      ;; one question per thread: its kernels stay on that thread
      (with-kernel-threads ((and (> threads 1) 1))
        (map-in-order threads
                      (lambda (submit)
                        (map-file-lines (lambda (octets number)
                                          (funcall submit (list number octets nil)))
                                        questions :dash-is-stdin t
                                                  :flush (and (= threads 1) out)
                                        :too-long (lambda (number limit)
                                                    (funcall submit (list number nil limit)))))
                      #'work #'emit
                      ;; the lines held at once: 32 a thread, but never
                      ;; more bytes than a longest line a thread
                      :weight (lambda (job) (length (second job)))
                      :budget (* threads *max-line-bytes*))))
    (if failed 1 0)))
