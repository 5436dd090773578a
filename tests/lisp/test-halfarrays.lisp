;;;; test-halfarrays.lisp - float16 and bfloat16 arrays: made from singles,
;;;; printed, widened back exactly, refusing what they cannot hold.

(in-package "RONTOLISP-TESTS")

(def-suite halfarrays :in all :description "The float16 and bfloat16 arrays.")
(in-suite halfarrays)

(test half-arrays-round-trip
  (let* ((s (random-matrix 2 8 :scale 100.0))
         (h (rontolisp:make-float16-array s))
         (b (rontolisp:make-bfloat16-array s)))
    (is (rontolisp:float16-array-p h))
    (is (rontolisp:bfloat16-array-p b))
    (is (equal '(2 8) (rontolisp:half-array-dimensions h)))
    (is (string= "#<float16-array (2 8)>" (prin1-to-string h)))
    (let ((back (rontolisp:half-array-to-single h)))
      (is (typep back '(simple-array single-float (2 8))))
      (is (every #'identity
                 (loop for i below 16
                       collect (= (rontolisp:f16-value
                                   (rontolisp:f16-bits (row-major-aref s i)))
                                  (row-major-aref back i))))))
    (is (equalp (rontolisp:half-array-bits h)
                (rontolisp:half-array-bits
                 (rontolisp:make-float16-array (rontolisp:half-array-to-single h)))))
    (signals rontolisp:element-type-error (rontolisp:make-float16-array #(1 2 3)))))
