;;;; commands/calibrate.lisp - `rontolisp calibrate': its command line; the work
;;;; is in model/model.lisp.

(in-package "RONTOLISP")

(define-command "calibrate" (file out)
    (:usage "FILE.gguf OUT.gguf"
     :summary "record max |x| per input channel of every encoder matrix"
     :details "Runs the encoder of FILE, its weights as f32, over built-in token
sequences covering the vocabulary and lengths up to context_length, and
writes OUT: a GGUF file of one F32 vector per encoder matrix, named after
the matrix's tensor, as quantize --calibration reads it.  On a terminal
each sequence is shown as it is run.")
  (gguf:write out (gguf:make-file :tensors (loop for (name . v) in (model:calibrate file :progress t)
                                                 collect (list name v))))
  0)
