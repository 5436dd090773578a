;;;; aref-cost.lisp - what one AREF of a quantized matrix costs, interpreted
;;;; and compiled, next to an ordinary single-float array:
;;;;   build/rontolisp script tools/bench/aref-cost.lisp
;;;; A benchmark, not a test: it prints nanoseconds per element.

(defvar *a* (make-array '(1024 1024) :element-type 'single-float :initial-element 0.5))
(defvar *m* (rontolisp:quantize *a* 'q8-0))

(defun sum-untyped (m)
  (let ((s 0d0)) (dotimes (i 1024 s) (dotimes (j 1024) (incf s (aref m i j))))))

(defun sum-declared-matrix (m)
  (declare (type rontolisp:quantized-matrix m) (optimize (speed 3) (safety 0)))
  (let ((s 0d0))
    (declare (double-float s))
    (dotimes (i 1024 s) (dotimes (j 1024) (incf s (aref m i j))))))

(defun sum-declared-array (a)
  (declare (type (simple-array single-float (1024 1024)) a) (optimize (speed 3) (safety 0)))
  (let ((s 0d0))
    (declare (double-float s))
    (dotimes (i 1024 s) (dotimes (j 1024) (incf s (aref a i j))))))

(defun ns-per-element (fn arg)
  (let ((t0 (get-internal-real-time)))
    (funcall fn arg)
    (/ (* 1e9 (/ (- (get-internal-real-time) t0) internal-time-units-per-second))
       (* 1024 1024))))

(format t "interpreted, quantized matrix:       ~7,1F ns~%" (ns-per-element 'sum-untyped *m*))
(let ((*standard-output* (make-broadcast-stream)) (*error-output* (make-broadcast-stream)))
  (compile 'sum-untyped) (compile 'sum-declared-matrix) (compile 'sum-declared-array))
(format t "compiled, undeclared, quantized:     ~7,1F ns~%" (ns-per-element 'sum-untyped *m*))
(format t "compiled, undeclared, float array:   ~7,1F ns~%" (ns-per-element 'sum-untyped *a*))
(format t "compiled, declared quantized matrix: ~7,1F ns~%" (ns-per-element 'sum-declared-matrix *m*))
(format t "compiled, declared float array:      ~7,1F ns~%" (ns-per-element 'sum-declared-array *a*))
