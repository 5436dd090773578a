;;;; stage-clock.lisp - where a question's time goes, for `bench --questions
;;;; --breakdown': while *STAGE-CLOCK* holds a STAGE-CLOCK, the steps of
;;;; MODEL:DECIDE (render, tokenize, each encoder layer, the head's
;;;; attention and feed-forward, cls, softmax) each add the monotonic
;;;; nanoseconds since the previous mark to their stage.  Unbound (NIL, as
;;;; everywhere but the benchmark), a mark is one test of a special
;;;; variable and conses nothing.

(in-package "MODEL")

(defvar *stage-clock* nil
  "NIL, or the STAGE-CLOCK that the steps of MODEL:DECIDE charge their time to.")

(defstruct (stage-clock (:constructor make-stage-clock ()))
  "Nanoseconds per stage (TOTALS, an EQL table from a stage, a keyword or
an encoder layer's index, to its sum) and the time of the last mark."
  (last 0 :type fixnum)
  (totals (make-hash-table :test 'eql)))

(document-functions
  make-stage-clock "A fresh STAGE-CLOCK, every stage at zero: bind *STAGE-CLOCK* to it."
  stage-clock-totals "The nanoseconds charged so far, an EQL table from each stage to its sum.")

(defun stage-start ()
  "Start the clock: the next mark charges the time from now."
  (let ((c *stage-clock*))
    (when c
      (setf (stage-clock-last c) (%bench-now-ns))))
  nil)

(defun stage-mark (stage)
  "Charge the time since the last mark (or STAGE-START) to STAGE."
  (let ((c *stage-clock*))
    (when c
      (let ((now (%bench-now-ns)))
        (incf (gethash stage (stage-clock-totals c) 0) (- now (stage-clock-last c)))
        (setf (stage-clock-last c) now))))
  nil)
