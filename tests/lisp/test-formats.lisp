;;;; test-formats.lisp - lisp/quant/formats.lisp: the tensor-type table built from
;;;; C's, the GGUF value types and the array kind codes.

(in-package "RONTOLISP-TESTS")

(def-suite formats :in all :description "The format tables shared with C.")
(in-suite formats)

(test formats-tensor-types-come-from-c
  (let ((q8 (rontolisp::find-tensor-type :q8_0)))
    (is (string= "Q8_0" (rontolisp::tensor-type-name q8)))
    (is (= 8 (rontolisp::tensor-type-id q8)))
    (is (= 32 (rontolisp::tensor-type-block-size q8)))
    (is (= 34 (rontolisp::tensor-type-block-bytes q8)))
    (is (eq q8 (rontolisp::find-tensor-type "q8_0")))
    (is (eq q8 (rontolisp::find-tensor-type 8))))
  (loop for (keyword id bytes) in '((:f32 0 4) (:f16 1 2) (:bf16 30 2))
        for tt = (rontolisp::find-tensor-type keyword)
        do (is (= id (rontolisp::tensor-type-id tt)))
           (is (= 1 (rontolisp::tensor-type-block-size tt)))
           (is (= bytes (rontolisp::tensor-type-block-bytes tt)))
           (is (string-equal (symbol-name keyword) (rontolisp::tensor-type-name tt))))
  (is (null (rontolisp::find-tensor-type "Q4_K")))
  (is (null (rontolisp::find-tensor-type 12))))

(test formats-tensor-type-of-data
  (flet ((kw (x) (let ((tt (rontolisp::tensor-type-of x)))
                   (and tt (rontolisp::tensor-type-keyword tt)))))
    (let ((a (make-array '(2 32) :element-type 'single-float :initial-element 1.0)))
      (is (eq :f32 (kw a)))
      (is (eq :f16 (kw (rontolisp:make-float16-array a))))
      (is (eq :bf16 (kw (rontolisp:make-bfloat16-array a))))
      (is (eq :q8_0 (kw (rontolisp:quantize a 'rontolisp:q8-0))))
      (is (null (kw (make-array 3 :element-type 'double-float :initial-element 0d0)))))))

(test formats-value-types-and-kinds
  (let ((types (rontolisp::gguf-value-types)))
    (is (eq :u8 (first types)))
    (is (= 8 (position :string types)))
    (is (= 12 (position :f64 types))))
  (is (equal '(0 1 2 3) (mapcar #'rontolisp::number-kind '(:f32 :f64 :f16 :bf16))))
  (signals rontolisp:rontolisp-error (rontolisp::number-kind :q8_0)))

;;; Numbers no double-float can hold are refused with our condition and the
;;; value; everything a double can hold takes the double road, so an integer
;;; beyond binary16 range rounds to infinity as the same double does.

(test formats-half-bits-refuse-numbers-beyond-double-range
  (dolist (fn (list #'rontolisp:f16-bits #'rontolisp:bf16-bits))
    (dolist (x (list (expt 10 400) (- (expt 10 400)) (/ (expt 10 400) 3)))
      (let ((c (handler-case (progn (funcall fn x) nil)
                 (error (c) c))))
        (is (typep c 'rontolisp:out-of-range-error) "~S on a huge number: ~S" fn c)
        (when (typep c 'rontolisp:out-of-range-error)
          (is (eql x (rontolisp:out-of-range-error-value c)))
          (is (search "expected a real number within double-float range"
                      (princ-to-string c)))
          (is (< (length (princ-to-string c)) 200))))))
  (is (search "about 1e400" (princ-to-string
                             (nth-value 1 (ignore-errors (rontolisp:f16-bits (expt 10 400)))))))
  (is (= (rontolisp:f16-bits 1d39) (rontolisp:f16-bits (expt 10 39))))
  (is (= #x7c00 (rontolisp:f16-bits (expt 10 39))))
  (is (= (rontolisp:bf16-bits 1d39) (rontolisp:bf16-bits (expt 10 39))))
  (is (= 0 (rontolisp:f16-bits (/ 1 (expt 10 400)))))
  (is (= (rontolisp:f16-bits 1.5) (rontolisp:f16-bits 3/2))))

(test formats-f32-metadata-refuses-double-beyond-single-range
  (signals gguf:gguf-error (gguf:make-file :metadata '(("a" :f32 1d300))))
  (signals gguf:gguf-error (gguf:make-file :metadata (list (list "a" '(:array :f32)
                                                                  (vector 1d0 -1d40)))))
  (finishes (gguf:make-file :metadata '(("a" :f32 1d30) ("b" :f64 1d300)))))

(test formats-ggml-types-are-c-table
  "Every ggml type Lisp knows is a row of C's table (%TYPE-TABLE): the
names and geometry %GGML-TYPE answers for each id, the families C's rows
give, and the lists quantize builds from them, none typed in Lisp."
  (let ((types (rontolisp::ggml-types)))
    (is (= 43 (length types)))
    (dolist (g types)
      (multiple-value-bind (name block bytes) (rontolisp::%ggml-type (rontolisp::ggml-type-id g))
        (is (equal (list name block bytes)
                   (list (rontolisp::ggml-type-name g) (rontolisp::ggml-type-block-size g)
                         (rontolisp::ggml-type-block-bytes g))))))
    (is (equal '("F32" "F16" "BF16" "Q8_0" "Q4_0" "Q4_1" "Q5_0" "Q5_1" "Q2_K" "Q3_K" "Q4_K"
                 "Q5_K" "Q6_K" "IQ4_NL" "IQ4_XS")
               (mapcar #'rontolisp::ggml-type-name (rontolisp::computed-types))))
    (is (equal (mapcar #'rontolisp::ggml-type-id (rontolisp::computed-types))
               (command-line::quantize-write-types)))
    (is (equal '(:float :float :float :q8_0 :quant)
               (mapcar (lambda (n) (rontolisp::ggml-type-family (rontolisp::find-ggml-type n)))
                       '("F32" "f16" :bf16 "Q8_0" "IQ4_XS"))))
    (is (null (rontolisp::ggml-type-family (rontolisp::find-ggml-type "IQ2_XXS"))))
    (is (eq (rontolisp::find-ggml-type 12) (rontolisp::find-ggml-type "q4_k")))
    (is (= 12 (rontolisp::ggml-id "Q4_K")))
    (is (null (rontolisp::find-ggml-type 9999)))
    (signals rontolisp:rontolisp-error (rontolisp::ggml-id "Q9_9"))
    (is (rontolisp::quantized-type-p 8))
    (is (not (rontolisp::quantized-type-p 0)))
    (is (not (rontolisp::quantized-type-p 16)))))

(test formats-ggml-type-bits
  "Bits per value, from C's block geometry (what quantize --help can list)."
  (is (= 32 (rontolisp::ggml-type-bits "F32")))
  (is (= 17/2 (rontolisp::ggml-type-bits "Q8_0")))
  (is (= 9/2 (rontolisp::ggml-type-bits "Q4_K")))
  (is (= 105/16 (rontolisp::ggml-type-bits 14)))
  (is (= 0 (rontolisp::ggml-type-bits "Q4_2"))))
