;;;; test-conditions.lisp - the signalling helpers of conditions.lisp: each
;;;; signals its condition with its slots filled and a one-line message
;;;; that starts with where the error arose.

(in-package "RONTOLISP-TESTS")

(def-suite conditions :in all :description "The conditions and their signalling helpers.")
(in-suite conditions)

(defun caught (thunk)
  "The condition THUNK signals, or NIL."
  (handler-case (progn (funcall thunk) nil)
    (condition (c) c)))

(test condition-helpers-fill-slots-and-messages
  (let ((c (caught (lambda () (rontolisp::shape-error 'vec:dot '(3) '(4) "expected length ~D, found ~D" 3 4)))))
    (is (typep c 'rontolisp:shape-error))
    (is (equal '(3) (rontolisp:shape-error-expected c)))
    (is (equal '(4) (rontolisp:shape-error-found c)))
    (is (string= "vec:dot: expected length 3, found 4" (princ-to-string c))))
  (let ((c (caught (lambda () (rontolisp::scale-overflow-error 'rontolisp:quantize 2 5 "block ~D" 5)))))
    (is (typep c 'rontolisp:quantize-error))
    (is (equal '(2 5) (list (rontolisp:scale-overflow-error-row c)
                            (rontolisp:scale-overflow-error-block c))))
    (is (string= "quantize: block 5" (princ-to-string c))))
  (let ((c (caught (lambda () (rontolisp::element-type-error '(setf aref) 7 "no")))))
    (is (typep c 'rontolisp:element-type-error))
    (is (equal (type-of 7) (rontolisp:element-type-error-found c)))
    (is (string= "(setf aref): no" (princ-to-string c))))
  (let ((c (caught (lambda () (gguf::gguf-error "/x.gguf" :truncated 12 "at byte ~D" 12)))))
    (is (typep c 'gguf:gguf-error))
    (is (equal '("/x.gguf" :truncated 12)
               (list (gguf:gguf-error-path c) (gguf:gguf-error-reason c) (gguf:gguf-error-offset c))))
    (is (string= "/x.gguf: at byte 12" (princ-to-string c))))
  (let ((c (caught (lambda () (rontolisp::tensor-data-error "m.gguf" "w" "has ~A" "NaNs")))))
    (is (typep c 'rontolisp:tensor-data-error))
    (is (string= "w" (rontolisp:tensor-data-error-tensor c)))
    (is (string= "m.gguf: tensor \"w\" has NaNs" (princ-to-string c))))
  (let ((c (caught (lambda () (rontolisp::json-error nil 3 "bad")))))
    (is (typep c 'rontolisp:json-error))
    (is (eql 3 (rontolisp:json-error-offset c)))
    (is (string= "bad" (princ-to-string c)))))

(test condition-helpers-name-the-operation
  (is (string= "quantize" (rontolisp::operation-name 'rontolisp:quantize)))
  (is (string= "gguf:read" (rontolisp::operation-name 'gguf:read)))
  (is (string= "linalg:row" (rontolisp::operation-name 'linalg:row)))
  (is (string= "aref" (rontolisp::operation-name 'aref)))
  (is (string= "vec:matvec-into" (rontolisp::operation-name "vec:matvec-into"))))

(test condition-messages-are-one-line
  (let* ((*print-pretty* t)
         (*print-right-margin* 20)
         (c (caught (lambda () (rontolisp::index-error 'aref "subscripts ~S out of range"
                                                       (loop for i below 40 collect i))))))
    (is (typep c 'rontolisp:index-error))
    (is (not (find #\Newline (princ-to-string c))))))
