;;;; commands/calibrate.lisp - `rontolisp calibrate': its command line; the work
;;;; is in model/model.lisp.

(in-package "COMMAND-LINE")

(define-command "calibrate" (file out)
    (:usage "FILE.gguf OUT.gguf [--show] [--svg FILE]"
     :summary "record max |x| per input channel of every encoder matrix"
     :details "Runs the encoder of FILE, its weights as f32, over built-in token
sequences covering the vocabulary and lengths up to context_length, and
writes OUT: a GGUF file of one F32 vector per encoder matrix, named after
the matrix's tensor, as quantize --calibration reads it, then prints a line of what it wrote.
On a terminal each sequence is shown as it is run; otherwise a line at
most every few seconds (RL_PROGRESS_SECONDS, 5 by default).  With --show
each matrix gets a line of its largest channel magnitude, how many times
the median channel's it is (massive channels are tens of times), and the
outlier columns its magnitudes give (the columns quantize --calibration
scales apart, largest first).  With --svg FILE the magnitudes are drawn
too: a panel per matrix, max |x| against the input channel, the outlier
columns marked (a self-contained SVG)."
     :options ((show "--show" :help "print each matrix's largest channel over the median and its outlier
columns, largest first")
               (svg "--svg FILE" :help "also draw max |x| per input channel of each matrix, its outlier
columns marked, as an SVG picture in FILE")))
  (when svg (check-svg-target svg))
  (let* ((start (get-internal-real-time))
         (calibration (model:calibrate file :progress t)))
    (gguf:write out (gguf:make-file :tensors (loop for (name . v) in calibration
                                                   collect (list name v))))
    (when show
      (loop for (name . magnitudes) in calibration
            for columns = (outlier-columns magnitudes)
            do (multiple-value-bind (largest median) (channel-spread magnitudes)
                 (format t "~A: largest channel ~,2F, ~:[median~;~:*~,1F times the median~] ~,2F; ~
~:[no outlier columns~;~:*~D outlier column~:P:~{ ~D~}~]~%"
                         name largest (and (plusp median) (/ largest median)) median
                         (and columns (length columns)) columns))))
    (when svg
      (calibration-svg svg (format nil "calibrate: ~A" file) calibration))
    (format t "~A: ~D ~:*~[matrices~;matrix~:;matrices~], ~,2F s~%" out (length calibration)
            (/ (- (get-internal-real-time) start) (float internal-time-units-per-second 1d0))))
  0)
