;;;; numbers.lisp - the number-format part of `make demo': a script run by
;;;; `rontolisp script', converting a few values to binary16 and bfloat16.

(format t "~&~A, kernels: ~A with ~D thread~:P~%"
        (rontolisp:version) (rontolisp:simd-path) (rontolisp:threads))
(format t "~%~12A ~8A ~14A ~8A ~14A~%" "value" "f16" "back" "bf16" "back")
(dolist (x (list 1.0 0.1 -2.5 65504.0 65520.0 1e-7 3.14159265d0 1d300))
  (let ((h (rontolisp:f16-bits x))
        (b (rontolisp:bf16-bits x)))
    (format t "~12A #x~4,'0X  ~14A #x~4,'0X  ~14A~%"
            x h (rontolisp:f16-value h) b (rontolisp:bf16-value b))))
