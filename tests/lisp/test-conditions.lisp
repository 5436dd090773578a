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

(defun condition-subclasses (class)
  "CLASS and every class below it."
  (cons class (mapcan #'condition-subclasses (copy-list (clos:class-direct-subclasses class)))))

(test every-condition-and-slot-reader-is-documented
  ;; DEFINE-ERROR documents the class and every slot's reader: a condition
  ;; written by hand without them (regex-error's readers had none) fails.
  (dolist (class (remove-duplicates (condition-subclasses (find-class 'rontolisp:rontolisp-error))))
    (is-true (documentation class t) "~S has no docstring" (class-name class))
    (dolist (slot (clos:class-direct-slots class))
      (dolist (reader (clos:slot-definition-readers slot))
        (is-true (documentation reader 'function) "~S (a reader of ~S) has no docstring"
                 reader (class-name class))))))

(test define-error-signallers-fill-slots
  (let ((c (caught (lambda () (rontolisp::thread-limit-error 4 "expected ~D" 3)))))
    (is (typep c 'rontolisp:thread-limit-error))
    (is (eql 4 (rontolisp:thread-limit-error-limit c)))
    (is (string= "expected 3" (princ-to-string c))))
  (let ((c (caught (lambda () (rontolisp::regex-error "a(" 1 "expected ~A" ")")))))
    (is (typep c 'rontolisp::regex-error))
    (is (equal '("a(" 1) (list (rontolisp::regex-error-pattern c) (rontolisp::regex-error-position c))))
    (is (string= "regular expression \"a(\" at character 2: expected )" (princ-to-string c))))
  (let ((c (caught (lambda () (model::question-error "field ~S: none" "type")))))
    (is (typep c 'model:question-error))
    (is (string= "field \"type\": none" (princ-to-string c))))
  (let ((c (caught (lambda () (with-input-from-string (s "(((")
                                (rontolisp::read-nesting-error s 2 7 "deeper than ~D" 2))))))
    (is (typep c 'rontolisp::read-nesting-error))
    (is (typep c 'reader-error))
    (is (equal '(2 7) (list (rontolisp::read-nesting-error-limit c)
                            (rontolisp::read-nesting-error-position c))))
    (is (streamp (stream-error-stream c)))
    (is (string= "deeper than 2" (princ-to-string c)))))

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

(defparameter *big-array* (make-array '(64 64) :element-type 'single-float :initial-element 1.5)
  "An array whose full printed form is about 25 KB.")

(test condition-messages-summarize-big-arrays
  (let ((c (caught (lambda () (rontolisp::element-type-error 'vec:matvec *big-array*
                                                             "expected a vector, found ~S" *big-array*)))))
    (is (string= "vec:matvec: expected a vector, found #<(simple-array single-float (64 64))>"
                 (princ-to-string c)))))

(test every-condition-helper-reports-one-short-line
  "Whatever the arguments (a 10,000-character string, a big array, a long
list), every helper's report is one line of at most *message-limit*
characters that keeps where the error arose and what was found."
  (let* ((long (make-string 10000 :initial-element #\x))
         (args (list long *big-array* (loop for i below 1000 collect i)))
         (control (format nil "expected ~~S~~%~~S, found ~~S: END"))
         (thunks
           (list (lambda () (apply #'rontolisp::rontolisp-error 'aref control args))
                 (lambda () (apply #'rontolisp::usage-error control args))
                 (lambda () (apply #'rontolisp::shape-error 'aref 1 2 control args))
                 (lambda () (apply #'rontolisp::element-type-error 'aref 1 control args))
                 (lambda () (apply #'rontolisp::unknown-format-error 'aref :x control args))
                 (lambda () (apply #'rontolisp::non-finite-error 'aref '(0) control args))
                 (lambda () (apply #'rontolisp::scale-overflow-error 'aref 0 0 control args))
                 (lambda () (apply #'rontolisp::index-error 'aref control args))
                 (lambda () (apply #'rontolisp::immutable-error 'aref control args))
                 (lambda () (apply #'rontolisp::quantized-matrix-error 'aref control args))
                 (lambda () (apply #'gguf::file-closed-error "/m.gguf" control args))
                 (lambda () (apply #'gguf::gguf-error "/m.gguf" :x 0 control args))
                 (lambda () (apply #'rontolisp::tensor-data-error "/m.gguf" long control args))
                 (lambda () (apply #'rontolisp::safetensors-error "/m.st" :x 0 control args))
                 (lambda () (apply #'rontolisp::json-error "/c.json" 0 control args))
                 (lambda () (apply #'rontolisp::convert-error "/c.json" control args))
                 (lambda () (apply #'rontolisp::file-io-error "/c.json" control args)))))
    (dolist (thunk thunks)
      (let* ((c (caught thunk))
             (text (princ-to-string c))
             (line (command-line::condition-line c)))
        (is (typep c 'rontolisp:rontolisp-error))
        (dolist (s (list text line))
          (is (<= (length s) rontolisp::*message-limit*) "~A: ~D characters" (type-of c) (length s))
          (is (not (find #\Newline s)) "~A: more than one line" (type-of c))
          (is (contains s ": END") "~A lost its end: ~A" (type-of c) s))))))

(test condition-line-summarizes-lisp-errors
  "ECL's own conditions, reported in batch runs: a type error about a big
array names it by its type, an arithmetic error says what it is."
  (let ((line (command-line::condition-line (caught (lambda () (+ *big-array* 1))))))
    (is (<= (length line) rontolisp::*message-limit*))
    (is (contains line "#<(simple-array single-float (64 64))>") "~A" line))
  (let ((line (command-line::condition-line
               (make-condition 'floating-point-overflow :operation 'coerce
                                                        :operands (list (expt 10 400))))))
    (is (not (contains line "#<a")) "~A" line)
    (is (contains line "floating point overflow in (coerce ") "~A" line)
    (is (<= (length line) rontolisp::*message-limit*))))

(test condition-one-line-folds-and-cuts
  (is (string= "a b c" (rontolisp::one-line (format nil "  a ~%  b~%~%c~%"))))
  (is (string= "#(1 2 3)" (princ-to-string (rontolisp::summarize-argument #(1 2 3)))))
  (let* ((text (concatenate 'string "START" (make-string 1000 :initial-element #\x) "END"))
         (line (rontolisp::one-line text)))
    (is (= rontolisp::*message-limit* (length line)))
    (is (string= "START" line :end2 5))
    (is (string= "END" line :start2 (- (length line) 3)))
    (is (contains line " ... "))))

(defvar *big-single* 3.0e38
  "A single-float whose square overflows (a variable, so nothing folds it).")

(test kernels-hold-float-traps-and-give-them-back
  "A primitive whose arithmetic overflows answers IEEE infinity instead of
signalling, and Lisp arithmetic after it signals overflow again: the glue
masks the traps around a kernel and restores the caller's state."
  (let* ((w (make-array '(1 16) :element-type 'single-float :initial-element *big-single*))
         (xs (make-array '(2 16) :element-type 'single-float :initial-element *big-single*))
         (y (vec:matmul w xs)))
    (is (every (lambda (v) (> v most-positive-single-float))
               (make-array 2 :element-type 'single-float :displaced-to y)))
    (is (typep (caught (lambda () (* *big-single* *big-single*))) 'floating-point-overflow))
    (is (typep (caught (lambda () (/ 1.0 (- *big-single* *big-single*)))) 'division-by-zero))))
