;;;; commands/calibrate.lisp - `rontolisp calibrate': its command line; the work
;;;; is in model/model.lisp.

(in-package "COMMAND-LINE")

(define-command "calibrate" (file out)
    (:usage "FILE.gguf OUT.gguf [--show]"
     :summary "record max |x| per input channel of every encoder matrix"
     :details "Runs the encoder of FILE, its weights as f32, over built-in token
sequences covering the vocabulary and lengths up to context_length, and
writes OUT: a GGUF file of one F32 vector per encoder matrix, named after
the matrix's tensor, as quantize --calibration reads it, then prints a line of what it wrote.
On a terminal each sequence is shown as it is run; otherwise a line at
most every few seconds (RL_PROGRESS_SECONDS, 5 by default).  With --show
each matrix gets a line of the outlier columns its magnitudes give (the
columns quantize --calibration scales apart, largest first)."
     :options ((show "--show" :help "print each matrix's outlier columns, largest first")))
  (let* ((start (get-internal-real-time))
         (calibration (model:calibrate file :progress t)))
    (gguf:write out (gguf:make-file :tensors (loop for (name . v) in calibration
                                                   collect (list name v))))
    (when show
      (loop for (name . magnitudes) in calibration
            for columns = (outlier-columns magnitudes)
            do (format t "~A: ~:[no outlier columns~;~:*~D outlier column~:P:~{ ~D~}~]~%"
                       name (and columns (length columns)) columns)))
    (format t "~A: ~D ~:*~[matrices~;matrix~:;matrices~], ~,2F s~%" out (length calibration)
            (/ (- (get-internal-real-time) start) (float internal-time-units-per-second 1d0))))
  0)
