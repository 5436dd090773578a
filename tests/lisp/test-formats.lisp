;;;; test-formats.lisp - lisp/formats.lisp: the tensor-type table built from
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

(test formats-f16-bits-refuses-reals-beyond-double-range
  "A rational too large for any float signals our condition with its
value; one within the double-float range becomes an infinity, as a
double-float beyond binary16 does."
  (dolist (fn (list #'rontolisp:f16-bits #'rontolisp:bf16-bits))
    (let ((e (handler-case (funcall fn (expt 10 400)) (error (e) e))))
      (is (typep e 'rontolisp:rontolisp-error) "~S" e)
      (is (contains (princ-to-string e) "found 1.0000e400") "~A" e))
    (let ((e (handler-case (funcall fn (- (* 3 (expt 10 400)))) (error (e) e))))
      (is (contains (princ-to-string e) "found -3.0000e400") "~A" e)))
  (is (= #x7c00 (rontolisp:f16-bits (expt 10 39))))
  (is (= #x7c00 (rontolisp:f16-bits 1d300)))
  (is (= (rontolisp:f16-bits (coerce 1/3 'single-float)) (rontolisp:f16-bits 1/3))))
