;;;; test-template.lisp - the Jinja subset (lisp/text/template.lisp) against
;;;; Jinja2's own renders in tests/golden/templates.json (made by
;;;; tools/gen_template_goldens.py), and the refusals, offsets and limits.

(in-package "RONTOLISP-TESTS")

(def-suite template :in all :description "The Jinja subset of chat templates.")
(in-suite template)

(defun template-outcome (template bindings)
  "(:output TEXT), (:template-error MESSAGE OFFSET) or (:other-error TEXT):
what rendering TEMPLATE with BINDINGS did."
  (handler-case (list :output (rontolisp:render-template template bindings))
    (rontolisp:template-error (c)
      (list :template-error (princ-to-string c) (rontolisp:template-error-offset c)))
    (error (c) (list :other-error (format nil "~A: ~A" (type-of c) c)))))

(defun shorten (text)
  "TEXT cut to 300 characters for a failure report."
  (if (> (length text) 300) (concatenate 'string (subseq text 0 300) "...") text))

(defun golden-template-cases ()
  "The cases of tests/golden/templates.json, a vector of hash tables.  The
file is tracked by git: a missing one is a failure, not a skip."
  (let ((path (golden "templates.json")))
    (is (probe-file path) "~A is missing (tools/gen_template_goldens.py writes it)" path)
    (if (probe-file path)
        (gethash "cases" (rontolisp:read-json-file path))
        #())))

(defun golden-case-agrees (case)
  "Answers (values AGREES WHY): whether our render of CASE is what its
\"expect\" says."
  (let* ((outcome (template-outcome (gethash "template" case) (gethash "bindings" case)))
         (expect (gethash "expect" case)))
    (cond ((string= expect "output")
           (let ((want (gethash "output" (gethash "jinja2" case))))
             (values (equal outcome (list :output want))
                     (format nil "want ~S, got ~S" want outcome))))
          ((string= expect "error")
           (values (eq (first outcome) :template-error)
                   (format nil "Jinja2 raised ~A, we gave ~S"
                           (gethash "raises" (gethash "jinja2" case)) outcome)))
          (t
           (let ((offset (gethash "offset" case)) (construct (gethash "construct" case)))
             (values (and (eq (first outcome) :template-error)
                          (eql (third outcome) offset)
                          (contains (second outcome) (format nil "template offset ~D:" offset))
                          ;; A refusal, not some other error at the same place.
                          (or (contains (second outcome) "expected a construct of the supported subset")
                              (contains (second outcome) "nested at most"))
                          (contains (second outcome) construct))
                     (format nil "want a refusal naming ~S at offset ~D, got ~S"
                             construct offset outcome)))))))

(test template-matches-jinja2-goldens
  "Every golden case: Jinja2's text exactly, or a TEMPLATE-ERROR where
Jinja2 raised, or a refusal naming the construct and its offset."
  (let ((cases (golden-template-cases)) (agree 0))
    (is (>= (length cases) 60) "only ~D golden cases" (length cases))
    (loop for case across cases
          do (multiple-value-bind (ok why) (golden-case-agrees case)
               (when ok (incf agree))
               (is-true ok "golden case ~A (~S): ~A"
                        (gethash "name" case) (shorten (gethash "template" case))
                        (shorten why))))
    (is (= agree (length cases)) "~D of ~D golden cases agree" agree (length cases))))

(test template-golden-renders-once-compiled
  "A template compiled once renders every binding of it as the string does."
  (loop for case across (golden-template-cases)
        when (string= (gethash "expect" case) "output")
          do (let ((compiled (rontolisp:compile-template (gethash "template" case))))
               (is (rontolisp:compiled-template-p compiled))
               (dotimes (k 2)
                 (is (equal (gethash "output" (gethash "jinja2" case))
                            (rontolisp:render-template compiled (gethash "bindings" case)))
                     "~A, render ~D" (gethash "name" case) k)))))

(test template-render-into-a-kept-string-renders-the-same
  "RENDER-TEMPLATE-INTO one kept string, with one kept render scratch (the
loops' frames reused from one rendering to the next), writes every golden
output as RENDER-TEMPLATE does, twice each, a case's error on the way
changing nothing for the next; nested loops each see their own loop."
  (let ((out (make-array 4 :element-type 'character :adjustable t :fill-pointer 0))
        (scratch (text:make-render-scratch)))
    (loop for case across (golden-template-cases)
          do (let ((compiled (handler-case (rontolisp:compile-template (gethash "template" case))
                               (rontolisp:template-error () nil))))
               (when compiled
                 (dotimes (k 2)
                   (let ((want (handler-case (rontolisp:render-template compiled
                                                                        (gethash "bindings" case))
                                 (rontolisp:template-error () :error)))
                         (got (handler-case (copy-seq (text:render-template-into
                                                       compiled (gethash "bindings" case) out
                                                       :scratch scratch))
                                (rontolisp:template-error () :error))))
                     (is (equal want got) "~A, render ~D: ~S, expected ~S"
                         (gethash "name" case) k got want))))))
    (let ((tm (rontolisp:compile-template
               "{% for a in xs %}{% for b in ys %}{{ a }}{{ b }}{{ loop.index }},{% endfor %}{{ a }}{{ loop.index }}/{{ loop.last }};{% endfor %}")))
      (dotimes (k 2)
        (is (string= "x11,x22,x1/False;y11,y22,y2/True;"
                     (text:render-template-into tm (bindings "xs" #("x" "y") "ys" #(1 2)) out
                                                :scratch scratch)))))))

(defun bindings (&rest plist)
  (let ((h (make-hash-table :test 'equal)))
    (loop for (k v) on plist by #'cddr do (setf (gethash k h) v))
    h))

(test template-converter-template-is-the-golden-one
  "The converter writes the template the goldens exercise."
  (let ((case (find "systemone-strings" (golden-template-cases)
                    :key (lambda (c) (gethash "name" c)) :test #'equal)))
    (is (and case (string= (command-line::systemone-template "[CLS]" "[SEP]" "[MASK]")
                           (gethash "template" case))))))

(test template-compile-once-render-many
  (let ((tm (rontolisp:compile-template
             "{% for o in options %}[{{ loop.index }}:{{ o.text if o.text is defined else o }}]{% endfor %}")))
    (is (string= "[1:a][2:b]" (rontolisp:render-template tm (bindings "options" #("a" "b")))))
    (is (string= "[1:x]" (rontolisp:render-template
                          tm (bindings "options" (vector (bindings "text" "x"))))))
    ;; Lisp lists are sequences too.
    (is (string= "[1:p][2:q][3:r]" (rontolisp:render-template tm (bindings "options" '("p" "q" "r")))))
    (is (string= "" (rontolisp:render-template tm nil)))))

(test template-nil-is-false
  "NIL is Python's False: it prints so, and a loop over it is refused as
Jinja2 refuses to iterate a bool."
  (is (string= "False|no" (rontolisp:render-template "{{ f }}|{% if f %}yes{% else %}no{% endif %}"
                                                      (bindings "f" nil))))
  (signals rontolisp:template-error
    (rontolisp:render-template "{% for x in f %}{% endfor %}" (bindings "f" nil))))

(test template-errors-name-offsets
  (flet ((refusal (template &optional (b (bindings)))
           (destructuring-bind (kind &optional message offset) (template-outcome template b)
             (is (eq kind :template-error) "~S gave ~S" template (list kind message))
             (list message offset))))
    (destructuring-bind (message offset) (refusal "{{ a }}{% set x = 1 %}")
      (is (= 10 offset))
      (is (string= "template offset 10: expected a construct of the supported subset, found the tag \"set\""
                   message)))
    ;; Offsets count in the template as given, CR LF included.
    (destructuring-bind (message offset) (refusal (format nil "a~C~C{{ u.x }}" #\Return #\Newline))
      (is (= 7 offset))
      (is (contains message "template offset 7:"))
      (is (contains message "\"u\"")))
    (destructuring-bind (message offset) (refusal "{% if x %}{% for y in z %}")
      (is (= 13 offset) "~A" message)
      (is (contains message "endfor")))
    (destructuring-bind (message offset) (refusal "ab{{ 'x'|length }}{{ n|length }}" (bindings "n" 3))
      (is (= 23 offset) "~A" message)
      (is (contains message "|length")))
    (is (typep (nth-value 1 (ignore-errors (rontolisp:render-template "{{ x }}" 5)))
               'rontolisp:rontolisp-error))))

(test template-refuses-deep-nesting
  "Nesting past the limit is a TEMPLATE-ERROR, never a stack overflow."
  (let ((n 100000))
    (flet ((refused (template &optional (b (bindings)))
             (let ((outcome (template-outcome template b)))
               (is (eq :template-error (first outcome)) "~S..." (subseq template 0 40))
               (is (contains (second outcome) "nested at most 200 deep") "~S" outcome))))
      (refused (format nil "{{ ~A1~A }}" (make-string n :initial-element #\() (make-string n :initial-element #\))))
      (refused (with-output-to-string (s)
                 (dotimes (k n) (write-string "{% if 1 %}" s))
                 (dotimes (k n) (write-string "{% endif %}" s))))
      (refused (with-output-to-string (s)
                 (write-string "{% for x in xs %}" s)
                 (dotimes (k n) (write-string "{% for x in x %}" s))))
      (refused (with-output-to-string (s)
                 (write-string "{{ x" s)
                 (dotimes (k n) (write-string ".a" s))
                 (write-string " }}" s)))
      (refused (with-output-to-string (s)
                 (write-string "{{ " s)
                 (dotimes (k n) (write-string "not " s))
                 (write-string "x }}" s)))
      (refused (with-output-to-string (s)
                 (write-string "{{ x" s)
                 (dotimes (k n) (write-string "|trim" s))
                 (write-string " }}" s)))
      (refused (with-output-to-string (s)
                 (write-string "{{ 1" s)
                 (dotimes (k n) (write-string " if 1 else 2" s))
                 (write-string " }}" s)))
      ;; Deeply nested data compared with ==.
      (let ((deep #()))
        (dotimes (k 5000) (setf deep (vector deep)))
        (refused "{{ a == b }}" (bindings "a" deep "b" deep))))
    ;; Just under the limit is fine.
    (is (string= "1" (rontolisp:render-template
                      (format nil "{{ ~A1~A }}" (make-string 150 :initial-element #\()
                              (make-string 150 :initial-element #\)))
                      nil)))
    ;; Long flat chains are not nesting.
    (is (string= "1" (rontolisp:render-template
                         (format nil "{{ ~{~A~^ and ~} }}" (make-list 5000 :initial-element "1"))
                         nil)))
    (is (= 100000 (length (rontolisp:render-template
                           (format nil "{{ ~{~A~^ ~~ ~} }}" (make-list 100000 :initial-element "'x'"))
                           nil))))
    (is (= 100000 (length (rontolisp:render-template
                           (format nil "{{ ~{~A~^ ~} }}" (make-list 100000 :initial-element "'x'"))
                           nil))))))

(test template-prints-non-finite-doubles
  "A Lisp double no JSON file holds prints as Python prints it."
  (is (string= "inf -inf" (rontolisp:render-template
                           "{{ a }} {{ b }}"
                           (bindings "a" ext:double-float-positive-infinity
                                     "b" ext:double-float-negative-infinity)))))

(defun hundred-options ()
  (bindings "options" (coerce (loop for i below 100 collect (format nil "option ~D" i)) 'vector)
            "instructions" (make-string 300 :initial-element #\x)))

(test template-render-stops-nested-loops-at-the-iteration-limit
  "Loops inside loops multiply: a rendering runs at most
*TEMPLATE-MAX-ITERATIONS* iterations in all, then a TEMPLATE-ERROR names
the limit and the loop that passed it (six loops over 100 options, 10^12
iterations, once ran on without end)."
  (dolist (body '("" "{% if x0 == instructions %}{% endif %}"))
    (dolist (n '(3 6))
      (destructuring-bind (kind &optional message offset)
          (template-outcome (nested-loops n body) (hundred-options))
        (is (eq :template-error kind) "~D loops: ~S" n message)
        (is (eql (+ 3 (* 23 (1- n))) offset) "~S" offset)
        (is (contains message "expected at most 65536 loop iterations in one rendering")
            "~A" message)
        (is (contains message "rontolisp:*template-max-iterations*") "~A" message))))
  ;; A loop over a long string is refused before its items are made.
  (destructuring-bind (kind &optional message offset)
      (template-outcome "{% for c in s %}{% endfor %}"
                        (bindings "s" (make-string 100000 :initial-element #\y)))
    (is (eq :template-error kind) "~S" message)
    (is (eql 3 offset))
    (is (contains message "loop iterations")))
  ;; Up to the limit is fine.
  (let ((rontolisp::*template-max-iterations* 10100))
    (is (string= "" (rontolisp:render-template (nested-loops 2 "") (hundred-options))))
    (setf rontolisp::*template-max-iterations* 10099)
    (is (eq :template-error (first (template-outcome (nested-loops 2 "") (hundred-options)))))))

(test template-render-stops-at-the-length-limit
  "A rendering writes at most MAX-LENGTH characters, those of strings
joined with ~ counted too, and stops there with a TEMPLATE-ERROR naming
the limit and the construct that passed it: nothing past the limit is
built, a long literal included."
  (flet ((refused (template b max offset)
           (handler-case
               (progn (rontolisp:render-template template b :max-length max
                                                            :max-length-name "the test's limit")
                      (fail "~S rendered" (subseq template 0 (min 40 (length template)))))
             (rontolisp:template-error (c)
               (let ((message (princ-to-string c)))
                 (is (eql offset (rontolisp:template-error-offset c)) "~A" message)
                 (is (contains message (format nil "expected a rendered text of at most ~D ~
characters" max))
                     "~A" message)
                 (is (contains message "(the test's limit)") "~A" message))))))
    ;; {{ }} in six loops over 100 options: 3e14 characters
    (refused (nested-loops 6 "{{ instructions }}") (hundred-options) 6144 141)
    ;; a literal inside the loops, and a long literal alone
    (refused (nested-loops 6 "abc") (hundred-options) 6144 138)
    (refused (concatenate 'string "{{ 1 }}" (make-string 50000 :initial-element #\z)) nil 6144 7)
    ;; strings joined and compared, never written
    (refused (nested-loops 3 "{% if (instructions ~ instructions) == x0 %}{% endif %}")
             (hundred-options) 6144 76))
  ;; Exactly the limit is fine; the default limit is the parameter's.
  (is (= 6144 (length (rontolisp:render-template (make-string 6144 :initial-element #\z) nil
                                                 :max-length 6144))))
  (let ((rontolisp::*template-max-length* 10))
    (destructuring-bind (kind &optional message offset)
        (template-outcome "{{ 'abcdefghijk' }}" nil)
      (is (eq :template-error kind))
      (is (eql 3 offset))
      (is (contains message "rontolisp:*template-max-length*") "~A" message))))
