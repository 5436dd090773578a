;;;; test-quant-goldens.lisp - GGUF:TENSOR on every tensor of the golden
;;;; files llama-quantize wrote for every quant type (tests/golden/quants/,
;;;; tools/make_quant_goldens.sh), against gguf-py's numpy dequantizers
;;;; (gguf.quants.dequantize, from the source bundle
;;;; tests/fetch-tokenizer-refs.sh unpacks into build/cache/gguf-py/):
;;;; tests/ref/gguf-dequantize.py writes each file's tensors dequantized by
;;;; gguf-py as F32, and every value we answer must have the same bits.
;;;; The goldens are tracked (a missing one fails); without gguf-py or a
;;;; python3 with numpy the comparison skips (fails under CI=true).  And
;;;; build/tools/llama_quantize (tools/llama_quantize.c) must write those
;;;; goldens again byte for byte over the fetched libllama.

(in-package "RONTOLISP-TESTS")

(def-suite quant-goldens :in all
  :description "gguf:tensor on llama-quantize's files of every type against gguf-py's dequantizers.")
(in-suite quant-goldens)

(defparameter *quant-golden-types*
  '("Q4_0" "Q4_1" "Q5_0" "Q5_1" "Q2_K" "Q3_K" "Q4_K" "Q5_K" "Q6_K" "IQ4_NL" "IQ4_XS"
    "Q8_0" "F16" "F32")
  "The tensor types the goldens must hold between them, so the comparison
cannot pass by finding none of a type.")

(defun tensor-single-floats (value)
  "The values of VALUE, what GGUF:TENSOR answered, as a single-float array:
itself, a quantized matrix dequantized, or a half-float array widened."
  (cond ((typep value '(array single-float)) value)
        ((rontolisp:quantized-matrix-p value) (rontolisp:dequantize value))
        ((or (rontolisp:float16-array-p value) (rontolisp:bfloat16-array-p value))
         (rontolisp:half-array-to-single value))
        (t (error "gguf:tensor answered a ~S" (type-of value)))))

(defun same-single-bits-p (a b)
  "True when the single-floats A and B have the same bits (no NaN here)."
  (and (= a b) (= (float-sign a) (float-sign b))))

(defun first-differing-index (ours reference)
  "The first row-major index where the single-float arrays OURS and
REFERENCE differ in bits, or NIL."
  (loop for i below (array-total-size reference)
        unless (same-single-bits-p (row-major-aref ours i) (row-major-aref reference i))
          return i))

(defun gguf-dequantize-reference (python dir files)
  "Run tests/ref/gguf-dequantize.py with PYTHON on FILES (paths), writing
into DIR; answer (values exit-status output)."
  (apply #'run-gguf-py python (namestring (merge-pathnames "tests/ref/gguf-dequantize.py" *root*))
         dir files))

(defun compare-with-reference (file reference seen)
  "Compare GGUF:TENSOR on every tensor of the golden FILE with the same
tensor of REFERENCE (gguf-py's values as F32); count each type in the hash
table SEEN."
  (gguf:with-file (f (golden file))
    (gguf:with-file (r reference)
      (dolist (info (gguf:tensor-infos f))
        (let* ((name (gguf:tensor-info-name info))
               (type (gguf:tensor-info-type info))
               (value (gguf:tensor f name))
               (ours (tensor-single-floats value))
               (want (gguf:tensor r name)))
          (incf (gethash type seen 0))
          (if (not (equal (array-dimensions ours) (array-dimensions want)))
              (fail "~A ~A (~A): shape ~A, gguf-py's ~A" file name type
                    (array-dimensions ours) (array-dimensions want))
              (let ((i (first-differing-index ours want)))
                (is (null i) "~A ~A (~A): value ~D is ~A, gguf-py's ~A" file name type i
                    (and i (row-major-aref ours i)) (and i (row-major-aref want i)))
                ;; AREF on a quantized matrix gguf:tensor answered: a
                ;; sample of each row
                (when (and (null i) (rontolisp:quantized-matrix-p value)
                           (= 2 (length (array-dimensions want))))
                  (destructuring-bind (rows cols) (array-dimensions want)
                    (dotimes (row rows)
                      (dolist (col (list 0 (mod (* 37 row) cols) (1- cols)))
                        (unless (same-single-bits-p (aref value row col) (aref want row col))
                          (fail "~A ~A (~A): aref ~D ~D is ~A, gguf-py's ~A" file name type row
                                col (aref value row col) (aref want row col))))))))))))))

(test quant-goldens-dequantize-as-gguf-py
  "Every value of every tensor of every file in tests/golden/quants/, as
GGUF:TENSOR answers it, has the bits gguf-py's numpy dequantizer gives."
  (let ((files (quant-golden-files))
        (python (gguf-py-python)))
    (dolist (file files)
      (with-tracked-fixture ((golden file))))
    (cond
      ((notevery (lambda (file) (probe-file (golden file))) files))
      ((not (probe-file (merge-pathnames "build/cache/gguf-py/gguf/quants.py" *root*)))
       (skip-reference "gguf-py is missing (run sh tests/fetch-tokenizer-refs.sh)"))
      ((not python)
       (skip-reference "no python3 imports numpy, tqdm and yaml (install python3-numpy, python3-tqdm and python3-yaml)"))
      (t
       (let ((dir (format nil "~A/" (tmp-path "quant-goldens"))))
         (unwind-protect
              (multiple-value-bind (code out)
                  (gguf-dequantize-reference python dir (mapcar (lambda (f) (namestring (golden f)))
                                                                files))
                (is (eql 0 code) "tests/ref/gguf-dequantize.py: exit ~A~%~A" code out)
                (when (eql 0 code)
                  (let ((seen (make-hash-table :test 'equal)))
                    (dolist (file files)
                      (compare-with-reference
                       file (format nil "~A~A.deq.gguf" dir (file-namestring (golden file))) seen))
                    (dolist (type *quant-golden-types*)
                      (is (plusp (gethash type seen 0))
                          "no ~A tensor among the goldens: nothing of that type was compared"
                          type)))))
           (sh "rm -rf \"$1\"" dir)))))))

;;; tools/llama_quantize, the command line the goldens were made with.

(test llama-quantize-tool-remakes-the-goldens
  "build/tools/llama_quantize over the fetched libllama writes every golden
of quant_odd.f32.gguf and two of quant_main.f32.gguf again byte for byte,
with 1 thread and the ftype by name in any case or by number, and refuses
bad arguments as llama-quantize does."
  (let ((input (golden "quants/quant_odd.f32.gguf"))
        (out (format nil "~A.gguf" (tmp-path "llama-quantize"))))
    (with-tracked-fixture (input)
      (multiple-value-bind (code text) (run-llama-quantize input out "q9")
        (cond
          ((null code) (skip-reference "build/tools/llama_quantize is not built (make tools)"))
          ((eql code 3)
           (skip-reference "llama.cpp's libraries are missing (run sh tests/fetch-llama-lib.sh, ~
or set RL_LLAMA_LIB): ~A" (string-trim '(#\Newline) text)))
          (t
           (is (eql 1 code) "an unknown ftype: exit ~A" code)
           (is (contains text "llama_quantize: invalid ftype 'q9'") "~A" text)
           (multiple-value-bind (code text) (run-llama-quantize input out "q4_0" "x")
             (is (eql 1 code) "a bad thread count: exit ~A" code)
             (is (contains text "invalid nthread 'x'") "~A" text))
           (multiple-value-bind (code text) (run-llama-quantize input input "q4_0")
             (is (eql 1 code) "the input as output: exit ~A" code)
             (is (contains text "input and output files are the same") "~A" text))
           (multiple-value-bind (code text) (run-llama-quantize "--no-such-option" input out "q4_0")
             (is (eql 1 code) "an unknown option: exit ~A" code)
             (is (contains text "usage:") "~A" text))
           (unwind-protect
                (loop for (name ftype) in (append (mapcar (lambda (f) (list "quant_odd" f))
                                                          *quant-golden-ftypes*)
                                                  '(("quant_main" "Q4_K_M") ("quant_main" "30")))
                      for golden = (golden (format nil "quants/~A.~(~A~).gguf" name
                                                   (if (equal ftype "30") "iq4_xs" ftype)))
                      do (with-tracked-fixture (golden)
                           (multiple-value-bind (code text)
                               (run-llama-quantize (golden (format nil "quants/~A.f32.gguf" name))
                                                   out ftype "1")
                             (is (eql 0 code) "~A to ~A: exit ~A~%~A" name ftype code text)
                             (when (eql 0 code)
                               (is (equalp (file-octets golden) (file-octets out))
                                   "~A to ~A: not the bytes of ~A" name ftype golden)))))
             (ignore-errors (delete-file out)))))))))
