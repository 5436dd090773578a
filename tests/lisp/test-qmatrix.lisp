;;;; test-qmatrix.lisp - QUANTIZE is bit-exact with llama-quantize, and the
;;;; quantized matrix answers CL's array protocol interpreted and compiled.

(in-package "RONTOLISP-TESTS")

(def-suite qmatrix :in all :description "Q8_0 quantization and the quantized matrix.")
(in-suite qmatrix)

(defun signals-type-p (type thunk)
  (handler-case (progn (funcall thunk) nil)
    (condition (c) (typep c type))))

(defparameter *golden-pairs*
  '(("q8_main.f32.gguf" . "q8_main.q8_0.gguf")
    ("q8_f16src.f16.gguf" . "q8_f16src.q8_0.gguf")
    ("q8_bf16src.bf16.gguf" . "q8_bf16src.q8_0.gguf")
    ("q8_align64.f32.gguf" . "q8_align64.q8_0.gguf"))
  "Each golden input with llama-quantize's output for it.")

(test quantize-matches-llama-quantize
  "Every Q8_0 tensor llama-quantize wrote equals QUANTIZE of its source."
  (let ((checked 0))
    (loop for (in . out) in *golden-pairs*
          do (with-tracked-fixture ((golden out))
               (let ((in-json (golden-json in))
                     (out-json (golden-json out)))
                 (dolist (tq (json-tensors out-json))
                   (when (= 8 (gethash "type_id" tq))
                     (let* ((name (gethash "name" tq))
                            (src (golden-source-array in in-json (json-tensor in-json name)))
                            (m (rontolisp:quantize src 'q8-0)))
                       (is (equalp (golden-tensor-octets out out-json tq) (matrix-octets m))
                           "~A ~A: bytes differ from llama-quantize's" out name)
                       (incf checked)))))))
    ;; 10 in q8_main, 2 each in the f16/bf16 outputs, 3 in align64
    (is (= 17 checked))))

(test quantize-widened-halves-match
  "Quantizing F16/BF16 sources equals quantizing their exact widening."
  (dolist (in '("q8_f16src.f16.gguf" "q8_bf16src.bf16.gguf"))
    (with-tracked-fixture ((golden in))
      (let ((json (golden-json in)))
        (dolist (tensor (json-tensors json))
          (let ((src (golden-source-array in json tensor)))
            (when (zerop (mod (second (tensor-rows-cols tensor)) 32))
              (is (equalp (matrix-octets (rontolisp:quantize src 'q8-0))
                          (matrix-octets (rontolisp:quantize (rontolisp:half-array-to-single src)
                                                             'q8-0)))))))))))

(test quantize-refuses-golden-overflow
  (with-tracked-fixture ((golden "q8_overflow.f32.gguf"))
    (let* ((json (golden-json "q8_overflow.f32.gguf"))
           (src (golden-source-array "q8_overflow.f32.gguf" json (first (json-tensors json))))
           (c (handler-case (progn (rontolisp:quantize src 'q8-0) nil)
                (rontolisp:scale-overflow-error (c) c))))
      (is (typep c 'rontolisp:scale-overflow-error))
      (when c
        (is (= 1 (rontolisp:scale-overflow-error-row c)))
        (is (= 0 (rontolisp:scale-overflow-error-block c)))
        (is (search "row 1, block 0" (princ-to-string c)))))))

(test quantize-refuses-golden-nan
  (with-tracked-fixture ((golden "q8_nan.f32.gguf"))
    (let* ((json (golden-json "q8_nan.f32.gguf"))
           (src (golden-source-array "q8_nan.f32.gguf" json (first (json-tensors json))))
           (c (handler-case (progn (rontolisp:quantize src 'q8-0) nil)
                (rontolisp:non-finite-error (c) c))))
      (is (typep c 'rontolisp:non-finite-error))
      (when c
        (is (equal '(1 7) (rontolisp:non-finite-error-index c)))
        (is (search "NaN" (princ-to-string c)))))))

(test aref-equals-dequantized-everywhere
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let* ((json (golden-json "q8_main.f32.gguf"))
           (src (golden-source-array "q8_main.f32.gguf" json
                                     (json-tensor json "blk.0.gauss_64x1024.weight")))
           (m (rontolisp:quantize src 'q8-0))
           (d (rontolisp:dequantize m))
           (bad 0))
      (is (equal '(64 1024) (array-dimensions d)))
      (is (typep d '(simple-array single-float (64 1024))))
      (dotimes (i 64)
        (dotimes (j 1024)
          (unless (= (aref m i j) (aref d i j) (row-major-aref m (+ (* i 1024) j)))
            (incf bad))))
      (is (= 0 bad))
      ;; and within half a quant of the source
      (is (< (loop for i below (array-total-size src)
                   maximize (abs (- (row-major-aref src i) (row-major-aref d i))))
             (* 0.5 (/ (loop for i below (array-total-size src)
                             maximize (abs (row-major-aref src i)))
                       127)
                1.001))))))

;;; The protocol, interpreted (through EVAL, so the function cells answer).

(defparameter *m2* (rontolisp:quantize
                    (let ((a (make-array '(3 64) :element-type 'single-float)))
                      (dotimes (i 3 a)
                        (dotimes (j 64)
                          (setf (aref a i j) (float (* (1+ i) (- j 31)) 1.0)))))
                    'q8-0))

(defparameter *m1* (rontolisp:quantize (make-array 32 :element-type 'double-float
                                                      :initial-element 127d0)
                                       :q8-0))

(defun interpret (form) (eval form))

(test protocol-interpreted
  (let ((m *m2*) (v *m1*))
    (is (= 127d0 (interpret `(aref ,v 5))))
    (is (typep (interpret `(aref ,m 1 2)) 'double-float))
    (is (= (interpret `(aref ,m 2 40)) (interpret `(row-major-aref ,m ,(+ 128 40)))))
    (is (equal '(3 64) (interpret `(array-dimensions ,m))))
    (is (equal '(32) (interpret `(array-dimensions ,v))))
    (is (= 64 (interpret `(array-dimension ,m 1))))
    (is (= 2 (interpret `(array-rank ,m))))
    (is (= 1 (interpret `(array-rank ,v))))
    (is (= 192 (interpret `(array-total-size ,m))))
    (is (eq 'rontolisp:q8-0 (interpret `(array-element-type ,m))))
    (is (null (interpret `(arrayp ,m))))
    (is (interpret `(rontolisp:quantized-matrix-p ,m)))
    (is (interpret `(typep ,m 'rontolisp:quantized-matrix)))
    (is (null (interpret `(typep ,m 'array))))
    (is (interpret `(array-in-bounds-p ,m 2 63)))
    (is (null (interpret `(array-in-bounds-p ,m 3 0))))
    (is (= 130 (interpret `(array-row-major-index ,m 2 2))))
    (is (= (funcall #'aref m 1 1) (apply #'aref m '(1 1))))
    (signals rontolisp:immutable-error (interpret `(setf (aref ,m 0 0) 1.0)))
    (signals rontolisp:immutable-error (interpret `(setf (row-major-aref ,m 0) 1.0)))
    (signals rontolisp:index-error (interpret `(aref ,m 3 0)))
    (signals rontolisp:index-error (interpret `(aref ,m 0 64)))
    (signals rontolisp:index-error (interpret `(aref ,m -1 0)))
    (signals rontolisp:index-error (interpret `(aref ,m 0)))
    (signals rontolisp:index-error (interpret `(row-major-aref ,m 192)))
    (signals rontolisp:index-error (interpret `(array-dimension ,m 2)))))

(test protocol-ordinary-arrays-unchanged-interpreted
  (let ((a (make-array '(2 3) :initial-contents '((1 2 3) (4 5 6)))))
    (is (= 6 (interpret `(aref ,a 1 2))))
    (interpret `(setf (aref ,a 1 2) 60))
    (is (= 60 (aref a 1 2)))
    (is (equal '(2 3) (interpret `(array-dimensions ,a))))
    (is (eq t (interpret `(array-element-type ,a))))
    (signals type-error (interpret `(aref '(1 2) 0)))))

(test protocol-printer-and-reader
  (is (string= "#<quantized-matrix q8-0 (3 64)>" (prin1-to-string *m2*)))
  (is (string= "#<quantized-matrix q8-0 (32)>" (princ-to-string *m1*)))
  (signals reader-error (read-from-string (prin1-to-string *m2*)))
  (signals print-not-readable (let ((*print-readably* t)) (prin1-to-string *m2*))))

;;; The protocol, natively compiled.

(defun compiled-each (lambda-forms)
  "The LAMBDA-FORMS natively compiled, in order, by one COMPILE: ECL runs
the C compiler once for them all rather than once each (a third of a
second a run).  Each is compiled as the body of its own function, with
its own declarations, as COMPILE would compile it alone."
  (let ((*error-output* (make-broadcast-stream)))
    (funcall (compile nil `(lambda () (list ,@(loop for f in lambda-forms
                                                    collect `(function ,f))))))))

(defvar *compiled-ahead* '()
  "(LAMBDA-FORM . FUNCTION) pairs COMPILING-AHEAD compiled.")

(defun compiled (lambda-form)
  "LAMBDA-FORM natively compiled (by COMPILING-AHEAD when it was seen there)."
  (or (cdr (assoc lambda-form *compiled-ahead* :test #'equal))
      (first (compiled-each (list lambda-form)))))

(defun quoted-compiled-forms (tree)
  "The FORM of each (COMPILED 'FORM) in TREE."
  (cond ((atom tree) '())
        ((and (eq 'compiled (first tree)) (consp (second tree))
              (eq 'quote (first (second tree))))
         (list (second (second tree))))
        (t (loop for x on tree
                 append (quoted-compiled-forms (car x))
                 while (consp (cdr x))))))

(defmacro compiling-ahead (&body body)
  "BODY, each (COMPILED 'FORM) in it compiled beforehand by one call of
COMPILED-EACH."
  (let ((forms (remove-duplicates (quoted-compiled-forms body) :test #'equal)))
    `(let ((*compiled-ahead* (mapcar #'cons ',forms (compiled-each ',forms))))
       ,@body)))

(test protocol-compiled
  (compiling-ahead
    (let ((m *m2*) (v *m1*))
      (is (= (aref m 1 2) (funcall (compiled '(lambda (x) (aref x 1 2))) m)))
      (is (= 127d0 (funcall (compiled '(lambda (x i) (aref x i))) v 31)))
      (is (= (aref m 2 5) (funcall (compiled '(lambda (x) (row-major-aref x 133))) m)))
      (is (equal '((3 64) 2 192 rontolisp:q8-0 64)
                 (funcall (compiled '(lambda (x) (list (array-dimensions x) (array-rank x)
                                                       (array-total-size x) (array-element-type x)
                                                       (array-dimension x 1))))
                          m)))
      (is (null (funcall (compiled '(lambda (x) (arrayp x))) m)))
      (is (eq t (funcall (compiled '(lambda (x) (typep x 'rontolisp:quantized-matrix))) m)))
      (is (funcall (compiled '(lambda (x) (array-in-bounds-p x 2 63))) m))
      (signals rontolisp:immutable-error
        (funcall (compiled '(lambda (x) (setf (aref x 0 0) 1d0))) m))
      (signals rontolisp:immutable-error
        (funcall (compiled '(lambda (x) (setf (row-major-aref x 0) 1d0))) m))
      (signals rontolisp:index-error (funcall (compiled '(lambda (x) (aref x 3 0))) m))
      (signals rontolisp:index-error (funcall (compiled '(lambda (x) (aref x 0 64))) m))
      (signals rontolisp:index-error (funcall (compiled '(lambda (x) (aref x 5))) m))
      (signals rontolisp:index-error (funcall (compiled '(lambda (x) (row-major-aref x 999))) m))
      ;; a non-array, non-matrix argument is a type error, never a crash
      (signals type-error (funcall (compiled '(lambda (x) (aref x 0))) '(1 2)))
      (signals type-error (funcall (compiled '(lambda (x) (aref x 0 0))) 42))
      ;; an argument form is evaluated once
      (let ((n 0))
        (is (= (aref m 0 0)
               (funcall (compiled '(lambda (f) (aref (funcall f) 0 0)))
                        (lambda () (incf n) m))))
        (is (= 1 n)))
      ;; declared matrix: the unboxed path
      (is (= (loop for j below 64 sum (aref m 2 j))
             (funcall (compiled '(lambda (x)
                                  (declare (type rontolisp:quantized-matrix x)
                                           (optimize (speed 3)))
                                  (let ((s 0d0))
                                    (declare (double-float s))
                                    (dotimes (j 64 s) (incf s (aref x 2 j))))))
                      m))))))

;;; CL functions that take arrays or sequences, handed a quantized matrix,
;;; answer a TYPE-ERROR or one of ours, interpreted and compiled: never a
;;; crash.  :DISPLACED-TO once crashed (ECL read the matrix as an array).

(defparameter *odd-uses*
  '((aref (make-array 4 :displaced-to m) 0)
    (make-array '(2 2) :displaced-to m :displaced-index-offset 0)
    (make-array 4 :element-type 'single-float :displaced-to m)
    (make-array 4 :displaced-to (list 1 2 3 4 5))
    (adjust-array (make-array 4 :adjustable t) 4 :displaced-to m)
    (adjust-array (make-array 4) 4 :displaced-to m)
    (adjust-array m '(2 32))
    (replace (make-array 4) m) (subseq m 0 2) (coerce m 'vector) (copy-seq m)
    (length m) (elt m 0) (map 'list #'identity m) (fill m 0) (sort m #'<)
    (reverse m) (find 1 m) (array-displacement m) (vector-push 1 m) (vector-pop m)
    (fill-pointer m) (adjustable-array-p m) (svref m 0) (char m 0) (bit m 0)
    (setf (row-major-aref m 0) 1.0) (aref m 0 0 0) (array-dimension m 5)
    (write-sequence m (make-string-output-stream)))
  "Forms of M, a quantized matrix, that must signal.")

(test odd-uses-signal-interpreted-and-compiled
  ;; ECL's own COERCE says "Cannot coerce" with a SIMPLE-ERROR: an error,
  ;; not a crash, is what this asks of every form.
  (loop for form in *odd-uses*
        for compiled in (compiled-each (loop for form in *odd-uses*
                                             collect `(lambda (m) ,form)))
        do (let ((lambda-form `(lambda (m) ,form)))
             (is (signals-type-p 'error (lambda () (funcall (coerce lambda-form 'function) *m2*)))
                 "interpreted ~S did not signal" form)
             (is (signals-type-p 'error (lambda () (funcall compiled *m2*)))
                 "compiled ~S did not signal" form))))

(test displaced-to-refuses-matrix
  (signals rontolisp:element-type-error (make-array 4 :displaced-to *m2*))
  (let ((make (compiled '(lambda (m) (make-array 4 :displaced-to m)))))
    (signals rontolisp:element-type-error (funcall make *m2*)))
  (is (search "expected an array (or NIL) for :displaced-to"
              (error-message (lambda () (make-array 4 :displaced-to *m2*)))))
  ;; real displacement still works, interpreted and compiled
  (let ((a (make-array 6 :initial-contents '(0 1 2 3 4 5))))
    (is (= 4 (aref (make-array 2 :displaced-to a :displaced-index-offset 3) 1)))
    (is (= 4 (aref (funcall (compiled '(lambda (a) (make-array 2 :displaced-to a
                                                               :displaced-index-offset 3)))
                            a)
                   1)))
    (is (= 2 (aref (adjust-array (make-array 2 :adjustable t) 3 :displaced-to a) 2)))))

(test aref-wrong-subscript-count-says-how-many
  (dolist (f (let ((read (compiled '(lambda (m) (aref m 0 0 0)))))
               (list (lambda () (eval `(aref ,*m2* 0 0 0)))
                     (lambda () (funcall read *m2*)))))
    (let ((msg (error-message f)))
      (is (search "a rank-2 quantized matrix takes 2 subscripts, given 3" msg) "~A" msg)))
  (is (search "takes 1 subscript, given 2"
              (error-message (lambda () (eval `(aref ,*m1* 0 0)))))))

(test write-sequence-refuses-non-octet-streams
  (let ((path (tmp-path "ub16.bin")))
    (unwind-protect
         (dolist (type '((unsigned-byte 16) (signed-byte 8)))
           (with-open-file (s path :direction :output :if-exists :supersede
                                   :element-type type)
             (signals rontolisp:element-type-error (write-sequence *m2* s))
             (let ((write (compiled '(lambda (m s) (write-sequence m s)))))
               (signals rontolisp:element-type-error (funcall write *m2* s))))
           (is (zerop (with-open-file (in path :element-type '(unsigned-byte 8))
                        (file-length in)))))
      (ignore-errors (delete-file path))))
  (let ((msg (error-message (lambda () (write-sequence *m2* (make-string-output-stream))))))
    (is (search "expected an (unsigned-byte 8) output stream" msg))
    (is (search "element type CHARACTER" msg))))

(test protocol-ordinary-arrays-unchanged-compiled
  (compiling-ahead
    (let ((a (make-array 64 :element-type 'single-float :initial-element 1.5))
          (g (make-array '(2 2) :initial-contents '((a b) (c d)))))
      (is (= 96.0 (funcall (compiled '(lambda (v)
                                       (declare (type (simple-array single-float (*)) v))
                                       (let ((s 0.0))
                                         (declare (single-float s))
                                         (dotimes (i 64 s) (incf s (aref v i))))))
                           a)))
      (is (eq 'd (funcall (compiled '(lambda (x) (aref x 1 1))) g)))
      (funcall (compiled '(lambda (x) (setf (aref x 0 1) 'z))) g)
      (is (eq 'z (aref g 0 1)))
      (is (equal '(2 2) (funcall (compiled '(lambda (x) (array-dimensions x))) g)))
      (is (eq 'single-float (funcall (compiled '(lambda (x) (array-element-type x))) a))))))

(test protocol-compile-file
  (let ((src (tmp-path "cf.lisp")))
    (write-file-string src "(defun rl-cf-probe (m) (list (aref m 1 1) (array-dimensions m) (row-major-aref m 0)))")
    (let ((fasl (let ((*error-output* (make-broadcast-stream))
                      (*standard-output* (make-broadcast-stream)))
                  (compile-file src :output-file (tmp-path "cf.fas")))))
      (is (not (null fasl)))
      (when fasl
        (load fasl)
        (is (equal (list (aref *m2* 1 1) '(3 64) (aref *m2* 0 0))
                   (funcall 'rl-cf-probe *m2*)))
        (delete-file fasl)))
    (delete-file src)))

(test protocol-before-and-after-compiler-loads
  "In a fresh process: interpreted use, then the first COMPILE (which loads
ECL's compiler and its own AREF macro), an explicit REQUIRE of the
compiler, and COMPILE-FILE all see the matrix."
  (let ((script (tmp-path "fresh.lisp"))
        (cf (tmp-path "fresh-cf.lisp")))
    (write-file-string cf "(defun cf-probe (m) (aref m 0 1))")
    (write-file-string
     script
     (format nil "(defvar *m* (rontolisp:quantize (make-array '(2 32) :element-type 'single-float :initial-element 127.0) 'q8-0))
(defun probe (m) (aref m 1 1))
(format t \"[I ~~A ~~A]\" (aref *m* 0 0) (probe *m*))
(compile 'probe)
(format t \"[C ~~A]\" (probe *m*))
(require 'cmp)
(format t \"[R ~~A]\" (funcall (compile nil '(lambda (m) (aref m 0 31))) *m*))
(load (compile-file ~S :output-file ~S))
(format t \"[F ~~A]\" (cf-probe *m*))
" cf (concatenate 'string cf ".fas")))
    (multiple-value-bind (code out err) (run-exe (list "script" script))
      (is (= 0 code) "stderr: ~A" err)
      (let ((pos 0))
        (dolist (marker '("[I 127.0d0 127.0d0]" "[C 127.0d0]" "[R 127.0d0]" "[F 127.0d0]"))
          (let ((at (search marker out :start2 pos)))
            (is (not (null at)) "~A missing from output ~S" marker out)
            (setf pos (or at pos))))))
    (ignore-errors (delete-file (concatenate 'string cf ".fas")))
    (delete-file cf)
    (delete-file script)))

;;; Every wrong input signals our own condition.

(test quantize-error-paths
  (let ((ok (make-array '(2 32) :element-type 'single-float)))
    (signals rontolisp:unknown-format-error (rontolisp:quantize ok 'q7-k)) ; q4-0 is one (test-qtypes)
    (signals rontolisp:unknown-format-error (rontolisp:quantize ok 42))
    (signals rontolisp:element-type-error
      (rontolisp:quantize (make-array 32 :initial-element 1) 'q8-0))
    (signals rontolisp:element-type-error
      (rontolisp:quantize (make-array 32 :element-type 'single-float :adjustable t) 'q8-0))
    (signals rontolisp:element-type-error (rontolisp:quantize '(1.0 2.0) 'q8-0))
    (signals rontolisp:shape-error
      (rontolisp:quantize (make-array '(2 2 32) :element-type 'single-float) 'q8-0))
    (signals rontolisp:shape-error
      (rontolisp:quantize (make-array '() :element-type 'single-float) 'q8-0))
    (signals rontolisp:shape-error
      (rontolisp:quantize (make-array '(2 48) :element-type 'single-float) 'q8-0))
    (signals rontolisp:shape-error
      (rontolisp:quantize (make-array 31 :element-type 'double-float) 'q8-0))
    (is (search "multiple of 32" (error-message
                                  (lambda () (rontolisp:quantize
                                              (make-array 40 :element-type 'single-float)
                                              'q8-0)))))
    (is (search "rank 3" (error-message
                          (lambda () (rontolisp:quantize
                                      (make-array '(1 1 32) :element-type 'single-float)
                                      'q8-0)))))
    (is (subtypep 'rontolisp:non-finite-error 'rontolisp:rontolisp-error))
    (is (subtypep 'rontolisp:scale-overflow-error 'rontolisp:rontolisp-error))))

(test quantize-non-finite-index
  (let ((a (make-array '(3 64) :element-type 'single-float :initial-element 1.0)))
    (setf (aref a 2 33) (rontolisp::%bits-single #x7f800000))
    (setf (aref a 2 40) (rontolisp::%bits-single #x7fc00000))
    (let ((c (handler-case (rontolisp:quantize a 'q8-0) (rontolisp:non-finite-error (c) c))))
      (is (equal '(2 33) (rontolisp:non-finite-error-index c)))
      (is (search "infinity" (princ-to-string c)))))
  (let ((v (make-array 64 :element-type 'double-float :initial-element 0d0)))
    (setf (aref v 63) 1d300)             ; a double beyond single range: infinity
    (let ((c (handler-case (rontolisp:quantize v 'q8-0) (rontolisp:non-finite-error (c) c))))
      (is (equal '(63) (rontolisp:non-finite-error-index c))))))

(test quantize-scale-overflow-row-and-block
  (let ((a (make-array '(2 96) :element-type 'single-float :initial-element 0.5)))
    (setf (aref a 1 70) 9e6)
    (let ((c (handler-case (rontolisp:quantize a 'q8-0)
               (rontolisp:scale-overflow-error (c) c))))
      (is (= 1 (rontolisp:scale-overflow-error-row c)))
      (is (= 2 (rontolisp:scale-overflow-error-block c)))))
  ;; just below the limit is fine: d rounds to 65504
  (let ((a (make-array 32 :element-type 'single-float :initial-element 0.0)))
    (setf (aref a 0) 8321039.0)
    (is (rontolisp:quantized-matrix-p (rontolisp:quantize a 'q8-0)))))

(test quantize-element-types-agree
  (let* ((s (random-matrix 4 64 :scale 3.0))
         (d (make-array '(4 64) :element-type 'double-float)))
    (dotimes (i 256) (setf (row-major-aref d i) (float (row-major-aref s i) 1d0)))
    (is (equalp (matrix-octets (rontolisp:quantize s 'q8-0))
                (matrix-octets (rontolisp:quantize d 'q8-0))))
    (let ((h (rontolisp:make-float16-array s)))
      (is (equalp (matrix-octets (rontolisp:quantize h 'q8-0))
                  (matrix-octets (rontolisp:quantize (rontolisp:half-array-to-single h) 'q8-0)))))
    (let ((b (rontolisp:make-bfloat16-array d)))
      (is (equalp (matrix-octets (rontolisp:quantize b 'q8-0))
                  (matrix-octets (rontolisp:quantize (rontolisp:half-array-to-single b) 'q8-0)))))))

(test quantize-simd-equals-scalar
  (let ((state (make-random-state t)))
    (dolist (scale '(1e-30 1e-6 1.0 1e3 8e6))
      (let ((a (random-matrix 16 256 :scale scale :state state))
            (simd (rontolisp:simd)))
        (unwind-protect
             (let ((fast (progn (setf (rontolisp:simd) t)
                                (matrix-octets (rontolisp:quantize a 'q8-0))))
                   (slow (progn (setf (rontolisp:simd) nil)
                                (matrix-octets (rontolisp:quantize a 'q8-0)))))
               (is (equalp fast slow) "scale ~A" scale))
          (setf (rontolisp:simd) simd))))))

(test dequantize-refuses-non-matrix
  (signals rontolisp:element-type-error (rontolisp:dequantize #(1.0 2.0))))

(test quantize-memory-is-reclaimed
  "A loop of quantizes (about 1.1 GB in all) must not keep its garbage.
The collector is conservative and its heap grows with what else the run
holds (up to about 200 MB was seen in a full test run), so the limit sits
well below the total rather than near what one quiet run needs."
  (let ((a (make-array '(1024 1024) :element-type 'single-float :initial-element 0.25)))
    (flet ((rss-mb ()
             (with-open-file (s "/proc/self/statm")
               (read s)
               (floor (* 4096 (read s)) (* 1024 1024)))))
      (rontolisp:quantize a 'q8-0)
      (let ((before (rss-mb)))
        (dotimes (i 1000) (rontolisp:quantize a 'q8-0))
        (is (< (- (rss-mb) before) 400) "RSS grew from ~D MB to ~D MB" before (rss-mb))))))

(test tampered-matrix-slots-signal-not-read-beyond
  "Slots changed behind the read-only accessors (SLOT-VALUE) cannot make
the kernels read beyond the matrix's memory."
  (dolist (change '((rontolisp::offset . 100000) (rontolisp::rows . 1000)
                    (rontolisp::cols . 33) (rontolisp::offset . :x)))
    (let ((m (copy-structure *m2*)))
      (setf (slot-value m (car change)) (cdr change))
      (is (signals-type-p 'error (lambda () (rontolisp:dequantize m)))
          "~S" change)
      (is (signals-type-p 'error (lambda () (row-major-aref m 0))) "~S" change))))
