;;;; template.lisp - the Jinja subset a model file's tokenizer.chat_template
;;;; is written in, rendered to exactly the text Jinja2 renders.
;;;;
;;;; The subset and its semantics are doc/template.md: {{ expr }}, {% for %}
;;;; with loop.index/index0/first/last, {% if %}/{% elif %}/{% else %},
;;;; comments, whitespace control, and expressions of names, attribute and
;;;; subscript access, string and integer literals, `is [not] defined',
;;;; not/and/or, ==/!=, ~, inline if, |trim and |length.  Values are as
;;;; PARSE-JSON gives them.  Everything else signals TEMPLATE-ERROR naming
;;;; the construct and its offset, at compile time where the construct is
;;;; syntax, at render time where Jinja2 itself raises.
;;;;
;;;; Templates come from model files, so from anyone: the lexer is a loop,
;;;; and every recursion (nested tags, parentheses, expression trees,
;;;; compared data) stops at *TEMPLATE-NESTING-LIMIT* with a TEMPLATE-ERROR
;;;; instead of exhausting the stack.  A template is compiled once
;;;; (COMPILE-TEMPLATE) and rendered any number of times, from any threads.

(in-package "RONTOLISP")

(defparameter *template-nesting-limit* 200
  "How deep a template may nest tags, parentheses and expressions (and how
deep the data it compares may nest); deeper signals TEMPLATE-ERROR.")

(defstruct (compiled-template (:constructor %make-compiled-template (source body))
                              (:copier nil) (:predicate nil))
  "A template parsed by COMPILE-TEMPLATE, ready for RENDER-TEMPLATE."
  (source "" :read-only t)
  (body nil :read-only t))

(defun compiled-template-p (x)
  "True when X is a template parsed by COMPILE-TEMPLATE."
  (typep x 'compiled-template))

(defmethod print-object ((tm compiled-template) stream)
  (print-unreadable-object (tm stream :type t)
    (format stream "~D characters" (length (compiled-template-source tm)))))

(defun refuse-construct (offset control &rest args)
  "Signal TEMPLATE-ERROR: the construct at OFFSET (described by CONTROL and
ARGS) is valid Jinja but outside the subset."
  (template-error offset "expected a construct of the supported subset, found ~?" control args))

;;; Python's notion of whitespace (str.isspace, and \s of its re module),
;;; which Jinja2 strips around {%- -%} and in |trim, and skips inside tags.

(defun python-space-p (c)
  "True when the character C is whitespace to Python's str.isspace."
  (let ((code (char-code c)))
    (or (<= 9 code 13) (<= #x1c code #x20) (= code #x85) (= code #xa0) (= code #x1680)
        (<= #x2000 code #x200a) (= code #x2028) (= code #x2029) (= code #x202f)
        (= code #x205f) (= code #x3000))))

(defun python-strip (string &key (left t) (right t))
  "STRING without the leading (LEFT) and trailing (RIGHT) Python whitespace."
  (let* ((end (if right
                  (1+ (or (position-if-not #'python-space-p string :from-end t) -1))
                  (length string)))
         (start (if left (or (position-if-not #'python-space-p string :end end) end) 0)))
    (subseq string start end)))

;;; The lexer.  Tokens are lists (TYPE VALUE OFFSET), OFFSET in the template
;;; as given.  TYPE is :data, :var-begin, :var-end, :block-begin,
;;; :block-end, :name, :string, :integer, :op (VALUE the operator's text)
;;; or :eof.  Operators outside the subset, float literals and non-ASCII
;;; characters outside string literals are refused here: whatever the
;;; parser would have made of them, it is not ours.

(defun template-source (template)
  "TEMPLATE as Jinja2's lexer sees it: every CR LF and lone CR a LF, and one
final LF dropped.  The second value maps each character's index (and the
end) to its offset in TEMPLATE, or is NIL when nothing moved."
  (let ((n (length template)))
    (if (not (find #\Return template))
        (values (if (and (plusp n) (char= (char template (1- n)) #\Newline))
                    (subseq template 0 (1- n))
                    template)
                nil)
        (let ((out (make-string n)) (map (make-array (1+ n) :element-type 'fixnum)) (j 0))
          (loop with i = 0
                while (< i n)
                do (let ((c (char template i)))
                     (setf (aref map j) i)
                     (cond ((char= c #\Return)
                            (setf (char out j) #\Newline)
                            (incf i (if (and (< (1+ i) n) (char= (char template (1+ i)) #\Newline))
                                        2 1)))
                           (t (setf (char out j) c) (incf i)))
                     (incf j)))
          (setf (aref map j) n)
          (when (and (plusp j) (char= (char out (1- j)) #\Newline))
            (decf j))
          (values (subseq out 0 j) map)))))

(defun ascii-name-start-p (c)
  (or (char<= #\a c #\z) (char<= #\A c #\Z) (char= c #\_)))

(defun ascii-name-char-p (c)
  (or (ascii-name-start-p c) (char<= #\0 c #\9)))

(defun ascii-digit-p (c &optional (radix 10))
  (and (< (char-code c) 128) (digit-char-p c radix)))

(defun template-string-value (body offset)
  "The value of a string literal whose text between the quotes is BODY, as
Jinja2 makes it: each non-ASCII character written as Python's
backslashreplace escape, then Python's unicode-escape decoding of the
whole (so \\n, \\t, \\xHH, \\uHHHH, \\UHHHHHHHH, octal \\ooo and the rest,
an unknown escape kept as it is).  OFFSET is the literal's, for errors."
  (let* ((text (with-output-to-string (s)
                 (loop for c across body
                       for code = (char-code c)
                       do (cond ((< code 128) (write-char c s))
                                ((< code #x100) (format s "\\x~(~2,'0x~)" code))
                                ((< code #x10000) (format s "\\u~(~4,'0x~)" code))
                                (t (format s "\\U~(~8,'0x~)" code))))))
         (n (length text))
         (i 0))
    (flet ((hex (count what)
             (let ((end (+ i count)))
               (unless (and (<= end n) (loop for k from i below end
                                             always (ascii-digit-p (char text k) 16)))
                 (template-error offset "expected ~D hexadecimal digits after ~A in a string ~
                                        literal, found fewer (a truncated escape)" count what))
               (prog1 (parse-integer text :start i :end end :radix 16) (setf i end)))))
      (with-output-to-string (out)
        (loop while (< i n)
              do (let ((c (char text i)))
                   (incf i)
                   (if (char/= c #\\)
                       (write-char c out)
                       (let ((d (char text i)))
                         (incf i)
                         (flet ((put (code)
                                  (when (<= #xd800 code #xdfff)
                                    (refuse-construct offset "a string escape for the surrogate ~
                                                              code point U+~4,'0X" code))
                                  (when (> code #x10ffff)
                                    (template-error offset "expected a string escape of a ~
                                        code point up to U+10FFFF, found U+~X" code))
                                  (write-char (code-char code) out)))
                           (case d
                             (#\Newline)
                             ((#\\ #\' #\") (write-char d out))
                             (#\a (put 7)) (#\b (put 8)) (#\f (put 12)) (#\n (put 10))
                             (#\r (put 13)) (#\t (put 9)) (#\v (put 11))
                             ((#\0 #\1 #\2 #\3 #\4 #\5 #\6 #\7)
                              (let ((v (digit-char-p d)))
                                (loop repeat 2
                                      while (and (< i n) (ascii-digit-p (char text i) 8))
                                      do (setf v (+ (* v 8) (digit-char-p (char text i))))
                                         (incf i))
                                (put v)))
                             (#\x (put (hex 2 "\\x")))
                             (#\u (put (hex 4 "\\u")))
                             (#\U (put (hex 8 "\\U")))
                             (#\N (refuse-construct offset "a \\N{...} string escape"))
                             (t (write-char #\\ out) (write-char d out))))))))))))

(defun lex-template (template)
  "The tokens of TEMPLATE, a simple vector ending with an :eof token."
  (multiple-value-bind (src map) (template-source template)
    (let ((n (length src)) (pos 0) (tokens (make-array 64 :adjustable t :fill-pointer 0)))
      (labels ((offset (i) (if map (aref map i) i))
               (emit (type value start)
                 (vector-push-extend (list type value (offset start)) tokens))
               (looking-at (s p)
                 (let ((e (+ p (length s))))
                   (and (<= e n) (string= s src :start2 p :end2 e))))
               (skip-space (p)
                 (loop while (and (< p n) (python-space-p (char src p))) do (incf p))
                 p)
               (digits-end (p radix)
                 ;; The end of (\d+_)*\d+ at P, or NIL.
                 (when (and (< p n) (ascii-digit-p (char src p) radix))
                   (loop (loop while (and (< p n) (ascii-digit-p (char src p) radix)) do (incf p))
                         (if (and (< (1+ p) n) (char= (char src p) #\_)
                                  (ascii-digit-p (char src (1+ p)) radix))
                             (incf p)
                             (return p)))))
               (exponent-end (e)
                 (and (< e n) (char-equal (char src e) #\e)
                      (let ((q (1+ e)))
                        (when (and (< q n) (find (char src q) "+-")) (incf q))
                        (digits-end q 10))))
               (float-end (p)
                 ;; The end of Jinja2's float_re at P (digits, then a
                 ;; fraction, an exponent or both), or NIL.
                 (unless (and (plusp p) (char= (char src (1- p)) #\.))
                   (let ((e (digits-end p 10)))
                     (let ((fraction (and (< e n) (char= (char src e) #\.) (digits-end (1+ e) 10))))
                       (if fraction
                           (or (exponent-end fraction) fraction)
                           (exponent-end e))))))
               (lex-integer (p)
                 ;; Jinja2's integer_re at P: 0b.., 0o.., 0x.., decimal, zeros;
                 ;; underscores between digits.  Answers the end and the value.
                 (flet ((prefixed (radix)
                          (let ((q (+ p 2)) (end nil))
                            (loop (let ((r (if (and (< q n) (char= (char src q) #\_)) (1+ q) q)))
                                    (if (and (< r n) (ascii-digit-p (char src r) radix))
                                        (setf q (1+ r) end q)
                                        (return))))
                            end))
                        (value (start end radix)
                          (parse-integer (remove #\_ (subseq src start end)) :radix radix)))
                   (let ((second (and (< (1+ p) n) (char-downcase (char src (1+ p))))))
                     (loop for (letter radix) in '((#\b 2) (#\o 8) (#\x 16))
                           do (when (and (char= (char src p) #\0) (eql second letter))
                                (let ((end (prefixed radix)))
                                  (when end (return-from lex-integer
                                              (values end (value (+ p 2) end radix))))))))
                   (let ((q (1+ p)))
                     (if (char= (char src p) #\0)
                         (loop while (or (and (< q n) (char= (char src q) #\0))
                                         (and (< (1+ q) n) (char= (char src q) #\_)
                                              (char= (char src (1+ q)) #\0)))
                               do (incf q (if (char= (char src q) #\_) 2 1)))
                         (loop while (or (and (< q n) (ascii-digit-p (char src q)))
                                         (and (< (1+ q) n) (char= (char src q) #\_)
                                              (ascii-digit-p (char src (1+ q)))))
                               do (incf q (if (char= (char src q) #\_) 2 1))))
                     (values q (value p q 10)))))
               (lex-string (p)
                 (let ((quote (char src p)) (q (1+ p)))
                   (loop (cond ((>= q n)
                                (template-error (offset p) "expected the closing ~C of the string ~
                                                            literal, found the end of the template"
                                                quote))
                               ((char= (char src q) #\\) (incf q 2))
                               ((char= (char src q) quote) (return))
                               (t (incf q))))
                   (emit :string (template-string-value (subseq src (1+ p) (min q n)) (offset p)) p)
                   (1+ q)))
               (lex-operator (p)
                 (let ((op (or (find-if (lambda (o) (looking-at o p))
                                        '("==" "!=" "//" "**" "<=" ">="))
                               (and (find (char src p) "+-/*%~[](){}=<>.:|,;")
                                    (string (char src p))))))
                   (cond (op (emit :op op p) (+ p (length op)))
                         ((>= (char-code (char src p)) 128)
                          (refuse-construct (offset p) "the non-ASCII character ~S outside a ~
                                                        string literal" (string (char src p))))
                         (t (template-error (offset p) "expected a name, a literal or an ~
                                                        operator, found the character ~S"
                                            (string (char src p)))))))
               (lex-tag (variable start)
                 (emit (if variable :var-begin :block-begin) nil start)
                 (loop
                   (setf pos (skip-space pos))
                   (when (>= pos n)
                     (template-error (offset start) "expected the end ~S of the tag opened here, ~
                                                     found the end of the template"
                                     (if variable "}}" "%}")))
                   (let ((c (char src pos)))
                     (cond ((and variable (looking-at "-}}" pos))
                            (emit :var-end nil pos) (setf pos (skip-space (+ pos 3))) (return))
                           ((and variable (looking-at "}}" pos))
                            (emit :var-end nil pos) (incf pos 2) (return))
                           ((and (not variable) (looking-at "-%}" pos))
                            (emit :block-end nil pos) (setf pos (skip-space (+ pos 3))) (return))
                           ((and (not variable) (looking-at "+%}" pos))
                            (emit :block-end nil pos) (incf pos 3) (return))
                           ((and (not variable) (looking-at "%}" pos))
                            (emit :block-end nil pos) (incf pos 2) (return))
                           ((and (ascii-digit-p c) (float-end pos))
                            ;; Refused by the parser, which names the tag first.
                            (emit :float (subseq src pos (float-end pos)) pos)
                            (setf pos (float-end pos)))
                           ((ascii-digit-p c)
                            (multiple-value-bind (end value) (lex-integer pos)
                              (emit :integer value pos)
                              (setf pos end)))
                           ((ascii-name-start-p c)
                            (let ((end (or (position-if-not #'ascii-name-char-p src :start pos) n)))
                              (emit :name (subseq src pos end) pos)
                              (setf pos end)))
                           ((find c "'\"") (setf pos (lex-string pos)))
                           (t (setf pos (lex-operator pos))))))))
        (loop
          (let ((k (loop for i from pos below (1- n)
                         when (and (char= (char src i) #\{) (find (char src (1+ i)) "{%#"))
                           return i)))
            (unless k
              (when (< pos n) (emit :data (subseq src pos) pos))
              (return))
            (let* ((kind (char src (1+ k)))
                   (modifier (and (< (+ k 2) n) (find (char src (+ k 2)) "-+")))
                   (text (subseq src pos k)))
              (when (eql modifier #\-)
                (setf text (python-strip text :left nil)))
              (when (plusp (length text)) (emit :data text pos))
              (setf pos (+ k 2 (if modifier 1 0)))
              (if (char= kind #\#)
                  (let ((j (search "#}" src :start2 pos)))
                    (unless j
                      (template-error (offset k) "expected the end \"#}\" of the comment opened ~
                                                  here, found the end of the template"))
                    (setf pos (if (and (> j pos) (char= (char src (1- j)) #\-))
                                  (skip-space (+ j 2))
                                  (+ j 2))))
                  (lex-tag (char= kind #\{) k)))))
        (emit :eof nil n)
        (coerce tokens 'simple-vector)))))

;;; The parser: Jinja2's own recursive descent (jinja2/parser.py), pruned to
;;; the subset, so that what it accepts it reads as Jinja2 does (`if' tests
;;; and `for' iterables without an inline if, tests binding tighter than
;;; `~', `not' looser than `==', names like `in' or `if' in operand place
;;; being plain names).  Expressions are TX structures; statements are
;;; strings (text), (:output TX), (:for OFFSET NAME TX BODY) and
;;; (:if ((TX . BODY)...) ELSE-BODY).

(defstruct (tx (:constructor %make-tx (kind offset height args)) (:copier nil) (:predicate nil))
  "An expression node: KIND, the OFFSET of its token, its HEIGHT (the
depth of the tree below it, bounded) and the ARGS of its kind."
  kind offset height args)

(defun make-tx (kind offset children &rest args)
  "A TX node over the sub-expressions CHILDREN (a list of TX); refused when
the tree would be deeper than *TEMPLATE-NESTING-LIMIT*."
  (let ((height (1+ (reduce #'max children :key #'tx-height :initial-value 0))))
    (when (> height *template-nesting-limit*)
      (template-error offset "expected expressions nested at most ~D deep, found deeper"
                      *template-nesting-limit*))
    (%make-tx kind offset height args)))

(defun describe-token (token)
  "TOKEN in words, for messages."
  (destructuring-bind (type value offset) token
    (declare (ignore offset))
    (ecase type
      (:eof "the end of the template")
      (:var-end "the end \"}}\" of the expression")
      (:block-end "the end \"%}\" of the tag")
      ((:var-begin :block-begin :data) "the start of a tag")
      (:name (format nil "the name ~S" value))
      (:string (format nil "the string literal ~S" value))
      (:integer (format nil "the integer ~D" value))
      (:float (format nil "the float literal ~A" value))
      (:op (format nil "~S" value)))))

(defun parse-template (tokens)
  "The statement list of the template whose tokens are TOKENS."
  (let ((i 0) (depth 0) (loops 0) (last (1- (length tokens))))
    (labels ((cur () (svref tokens i))
             (ahead () (svref tokens (min (1+ i) last)))
             (advance () (prog1 (svref tokens i) (when (< i last) (incf i))))
             (offset () (third (cur)))
             (type-p (type &optional value (token (cur)))
               (and (eq (first token) type) (or (null value) (equal (second token) value))))
             (name-p (value &optional (token (cur))) (type-p :name value token))
             (op-p (value) (type-p :op value))
             (fail (what)
               ;; Where Jinja2 would go on with an operator or a float we
               ;; do not take, the construct is refused by name.
               (destructuring-bind (type value at) (cur)
                 (cond ((eq type :float) (refuse-construct at "the float literal ~A" value))
                       ((and (eq type :op) (equal value "{"))
                        (refuse-construct at "a dict literal"))
                       ((and (eq type :op) (equal value ","))
                        (refuse-construct at "a tuple or a list of arguments (\",\")"))
                       ((and (eq type :op)
                             (not (member value '("~" "[" "]" "(" ")" "." "|" "==" "!=")
                                          :test #'string=)))
                        (refuse-construct at "the operator ~S" value))))
               (template-error (offset) "expected ~A, found ~A" what (describe-token (cur))))
             (expect (type value what)
               (unless (type-p type value) (fail what))
               (advance))
             (deeper ()
               (when (> (incf depth) *template-nesting-limit*)
                 (template-error (offset) "expected tags and parentheses nested at most ~D ~
                                           deep, found deeper" *template-nesting-limit*)))
             (shallower () (decf depth))
             ;; Statements.
             (subparse (end-names)
               (let ((body '()))
                 (loop
                   (let ((token (cur)))
                     (case (first token)
                       (:data (push (second token) body) (advance))
                       (:var-begin
                        (advance)
                        (push (list :output (tuple-expression t)) body)
                        (expect :var-end nil "the end \"}}\" of the expression"))
                       (:block-begin
                        (advance)
                        (unless (type-p :name) (fail "a tag name"))
                        (let ((name (second (cur))))
                          (when (member name end-names :test #'string=)
                            (return (values (nreverse body) name)))
                          (cond ((string= name "for") (push (parse-for) body))
                                ((string= name "if") (push (parse-if) body))
                                ((member name '("elif" "else" "endif" "endfor") :test #'string=)
                                 (template-error (offset) "expected ~:[a tag~;~:*~{~S~^ or ~}~], ~
                                                           found the tag ~S out of place"
                                                 end-names name))
                                (t (refuse-construct (offset) "the tag ~S" name))))
                        (expect :block-end nil "the end \"%}\" of the tag"))
                       (:eof (return (values (nreverse body) nil)))
                       (t (fail "text or a tag")))))))
             (block-body (end-names opener what)
               (multiple-value-bind (body end) (subparse end-names)
                 (unless end
                   (template-error opener "expected {% ~A %} closing the ~A opened here, found ~
                                           the end of the template" (car (last end-names)) what))
                 (values body end)))
             (parse-for ()
               (let ((opener (offset)))
                 (deeper)
                 (advance)
                 (let ((target (cur)))
                   (unless (and (type-p :name)
                                (not (member (second target) '("true" "false" "none" "True"
                                                               "False" "None" "in" "loop")
                                             :test #'string=)))
                     (fail "a loop variable name"))
                   (when (string= (second target) "self")
                     (refuse-construct (offset) "the template reference \"self\""))
                   (advance)
                   (expect :name "in" "\"in\" after the loop variable")
                   (when (tuple-end-p "recursive") (fail "an expression to iterate over"))
                   (let ((sequence (parse-or)))
                     (cond ((name-p "if") (refuse-construct (offset) "the loop filter \"if\""))
                           ((name-p "recursive") (refuse-construct (offset) "a recursive loop")))
                     (expect :block-end nil "the end \"%}\" of the tag")
                     (incf loops)
                     (multiple-value-bind (body end) (block-body '("else" "endfor") opener "for")
                       (when (string= end "else")
                         (refuse-construct (offset) "the tag \"else\" of a for loop"))
                       (decf loops)
                       (advance)
                       (shallower)
                       (list :for opener (second target) sequence body))))))
             (parse-if ()
               (let ((opener (offset)) (clauses '()))
                 (deeper)
                 (advance)
                 (loop
                   (let ((test (tuple-expression nil)))
                     (expect :block-end nil "the end \"%}\" of the tag")
                     (multiple-value-bind (body end)
                         (block-body '("elif" "else" "endif") opener "if")
                       (push (cons test body) clauses)
                       (advance)
                       (cond ((string= end "elif"))
                             ((string= end "else")
                              (expect :block-end nil "the end \"%}\" of the tag")
                              (let ((else (block-body '("endif") opener "if")))
                                (advance)
                                (shallower)
                                (return (list :if (nreverse clauses) else))))
                             (t (shallower)
                                (return (list :if (nreverse clauses) nil)))))))))
             ;; Expressions.
             (tuple-end-p (&optional extra)
               (or (type-p :var-end) (type-p :block-end) (op-p ")") (and extra (name-p extra))))
             (tuple-expression (with-inline-if)
               (when (tuple-end-p) (fail "an expression"))
               (if with-inline-if (parse-expression) (parse-or)))
             (parse-expression ()
               (deeper)
               (prog1 (parse-inline-if) (shallower)))
             (parse-inline-if ()
               (let* ((start (offset)) (expr (parse-or)))
                 (loop while (name-p "if")
                       do (let* ((at (progn (advance) start))
                                 (test (parse-or))
                                 (else (when (name-p "else")
                                         (advance)
                                         (deeper)
                                         (prog1 (parse-inline-if) (shallower)))))
                            (setf expr (make-tx :if at (remove nil (list expr test else))
                                                expr test else))))
                 expr))
             (parse-n-ary (kind word next)
               (let ((at (offset)) (items (list (funcall next))))
                 (loop while (name-p word) do (advance) (push (funcall next) items))
                 (if (rest items)
                     (make-tx kind at items (nreverse items))
                     (first items))))
             (parse-or () (parse-n-ary :or "or" #'parse-and))
             (parse-and () (parse-n-ary :and "and" #'parse-not))
             (parse-not ()
               (if (name-p "not")
                   (let ((at (third (advance))))
                     (deeper)
                     (prog1 (let ((e (parse-not))) (make-tx :not at (list e) e))
                       (shallower)))
                   (parse-compare)))
             (parse-compare ()
               (let ((at (offset)) (first (parse-concat)) (ops '()))
                 (loop (cond ((or (op-p "==") (op-p "!="))
                              (let ((op (second (advance))))
                                (push (cons op (parse-concat)) ops)))
                             ((name-p "in") (refuse-construct (offset) "the operator \"in\""))
                             ((and (name-p "not") (name-p "in" (ahead)))
                              (refuse-construct (offset) "the operator \"not in\""))
                             (t (return))))
                 (if ops
                     (make-tx :compare at (cons first (mapcar #'cdr ops)) first (nreverse ops))
                     first)))
             (parse-concat ()
               (let ((at (offset)) (items (list (parse-unary))))
                 (loop while (op-p "~") do (advance) (push (parse-unary) items))
                 (if (rest items)
                     (make-tx :concat at items (nreverse items))
                     (first items))))
             (parse-unary ()
               (parse-filters (parse-postfix (parse-primary))))
             (parse-primary ()
               (let ((token (cur)) (at (offset)))
                 (case (first token)
                   (:name
                    (let ((name (second token)))
                      (advance)
                      (cond ((member name '("true" "True") :test #'string=) (make-tx :const at nil t))
                            ((member name '("false" "False") :test #'string=)
                             (make-tx :const at nil nil))
                            ((member name '("none" "None") :test #'string=)
                             (make-tx :const at nil :null))
                            ((and (string= name "loop") (plusp loops)) (parse-loop-attribute at))
                            ((string= name "self")
                             (refuse-construct at "the template reference \"self\""))
                            (t (make-tx :name at nil name)))))
                   (:string
                    (make-tx :const at nil
                             (with-output-to-string (s)
                               (loop while (type-p :string)
                                     do (write-string (second (advance)) s)))))
                   (:integer (advance) (make-tx :const at nil (second token)))
                   (:op
                    (cond ((op-p "(")
                           (advance)
                           (when (op-p ")") (refuse-construct at "the empty tuple \"()\""))
                           (when (tuple-end-p) (fail "an expression"))
                           (prog1 (parse-expression) (expect :op ")" "\")\"")))
                          ((op-p "[") (refuse-construct at "a list literal"))
                          (t (fail "an expression"))))
                   (t (fail "an expression")))))
             (parse-loop-attribute (at)
               (unless (and (op-p ".") (member (second (ahead)) '("index" "index0" "first" "last")
                                               :test #'equal)
                            (type-p :name nil (ahead)))
                 (refuse-construct at "\"loop\" other than as loop.index, loop.index0, ~
                                       loop.first or loop.last"))
               (advance)
               (make-tx :loop at nil (second (advance))))
             (parse-postfix (node)
               (loop
                 (cond ((op-p ".")
                        (let* ((at (third (advance))) (token (advance)))
                          (setf node
                                (case (first token)
                                  (:name (make-tx :getattr at (list node) node (second token)))
                                  (:integer
                                   (let ((key (make-tx :const (third token) nil (second token))))
                                     (make-tx :getitem at (list node) node key)))
                                  (t (setf i (max 0 (1- i)))
                                     (fail "a name or number after \".\""))))))
                       ((op-p "[")
                        (let ((at (third (advance))))
                          (when (op-p "]") (refuse-construct at "an empty subscript \"[]\""))
                          (let ((key (parse-expression)))
                            (expect :op "]" "\"]\"")
                            (setf node (make-tx :getitem at (list node key) node key)))))
                       ((op-p "(") (refuse-construct (offset) "a call"))
                       (t (return node)))))
             (parse-filters (node)
               (loop
                 (cond ((op-p "|")
                        (advance)
                        (let ((at (offset)))
                          (unless (type-p :name) (fail "a filter name"))
                          (let ((name (second (advance))))
                            (when (op-p ".") (refuse-construct at "a dotted filter name"))
                            (when (op-p "(")
                              (if (type-p :op ")" (ahead))
                                  (progn (advance) (advance))
                                  (refuse-construct at "arguments to the filter ~S" name)))
                            (unless (member name '("trim" "length") :test #'string=)
                              (refuse-construct at "the filter ~S" name))
                            (setf node (make-tx :filter at (list node) name node)))))
                       ((name-p "is")
                        (let ((at (third (advance))) (negated nil))
                          (when (name-p "not") (advance) (setf negated t))
                          (let ((name-at (offset)))
                            (unless (type-p :name) (fail "the name of a test"))
                            (let ((name (second (advance))))
                              (when (op-p ".") (refuse-construct name-at "a dotted test name"))
                              (when (or (op-p "(") (op-p "[") (type-p :string) (type-p :integer)
                                        (and (type-p :name)
                                             (not (member (second (cur)) '("else" "or" "and")
                                                          :test #'string=))))
                                (if (name-p "is")
                                    (template-error (offset) "expected one test after \"is\", ~
                                                              found a second \"is\"")
                                    (refuse-construct (offset) "an argument to the test ~S" name)))
                              (unless (string= name "defined")
                                (refuse-construct name-at "the test ~S" name))
                              (setf node (make-tx :defined at (list node) node negated))))))
                       ((op-p "(") (refuse-construct (offset) "a call"))
                       (t (return node))))))
      (multiple-value-bind (body end) (subparse '())
        (declare (ignore end))
        body))))

(defun compile-template (template)
  "TEMPLATE, a string in the Jinja subset of doc/template.md, parsed once
for RENDER-TEMPLATE.  A construct outside the subset or bad syntax signals
TEMPLATE-ERROR naming it and its character offset."
  (unless (stringp template)
    (element-type-error 'compile-template template "expected a template string, found ~S"
                        template))
  (%make-compiled-template template (parse-template (lex-template template))))

;;; Values, as Python sees them: see doc/template.md for the mapping.

(defstruct (undefined-value (:constructor make-undefined-value ()) (:copier nil))
  "Jinja2's Undefined: what a missing name, key or index evaluates to.")

(defvar *undefined* (make-undefined-value)
  "The one undefined value.")

(defun value-kind (value offset)
  "The Python type VALUE stands for: :undefined, :bool, :none, :int, :float,
:string, :list or :dict; anything else signals TEMPLATE-ERROR at OFFSET."
  (cond ((eq value *undefined*) :undefined)
        ((member value '(t nil :true :false)) :bool)
        ((eq value :null) :none)
        ((integerp value) :int)
        ((typep value 'double-float) :float)
        ((stringp value) :string)
        ((or (consp value) (vectorp value)) :list)
        ((hash-table-p value) :dict)
        (t (template-error offset "expected a JSON value (hash table, vector, list, string, ~
                                   integer, double-float, T, NIL or :NULL), found ~S" value))))

(defun truthy (value)
  "VALUE's truth as Python's bool(): false for undefined, false, None, 0,
0.0 and empty strings, sequences and mappings."
  (cond ((member value '(nil :false :null)) nil)
        ((eq value *undefined*) nil)
        ((numberp value) (not (zerop value)))
        ((vectorp value) (plusp (length value)))
        ((hash-table-p value) (plusp (hash-table-count value)))
        (t t)))

(defun kind-name (kind)
  (ecase kind
    (:undefined "an undefined value") (:bool "a boolean") (:none "None") (:int "an integer")
    (:float "a float") (:string "a string") (:list "a list") (:dict "a mapping")))

(defun python-float-digits (x)
  "The digits Python's repr() prints for the positive double X, as (values
DIGITS POINT) with X = 0.DIGITS x 10^POINT: the fewest digits that read
back as X (round to nearest, ties to even) and, among as few, the nearest
to X.  Exact rational arithmetic, so no printer's rounding enters."
  (multiple-value-bind (mantissa exponent) (integer-decode-float x)
    ;; ECL normalizes a subnormal's mantissa to 53 bits; its neighbours
    ;; are 2^-1074 apart all the same.
    (when (< exponent -1074)
      (setf mantissa (ash mantissa (+ exponent 1074)) exponent -1074))
    (let* ((r (rational x))
           (succ (* (1+ mantissa) (expt 2 exponent)))
           (pred (if (and (= mantissa (expt 2 52)) (> exponent -1074))
                     (* (1- (expt 2 53)) (expt 2 (1- exponent)))
                     (* (1- mantissa) (expt 2 exponent))))
           (low (/ (+ r pred) 2))
           (high (/ (+ r succ) 2))
           (e (floor (log x 10d0))))
      ;; 10^E <= X < 10^(E+1), the estimate made exact.
      (loop while (> (expt 10 e) r) do (decf e))
      (loop while (<= (expt 10 (1+ e)) r) do (incf e))
      (flet ((reads-back (d)
               (or (< low d high) (and (evenp mantissa) (or (= d low) (= d high))))))
        (loop for k from 1 to 17
              do (let* ((s (- k 1 e))
                        (scale (expt 10 s))
                        (m0 (round (* r scale)))
                        (best nil))
                   (dolist (m (list m0 (1- m0) (1+ m0)))
                     (let ((d (/ m scale)))
                       (when (and (plusp m) (reads-back d)
                                  (or (null best) (< (abs (- d r)) (abs (- (/ best scale) r)))))
                         (setf best m))))
                   (when best
                     (let ((text (princ-to-string best)))
                       (return-from python-float-digits
                         (values (string-right-trim "0" text) (- (length text) s)))))))
        (rontolisp-error 'python-float-digits "expected 17 digits to read back as ~S, ~
                                                found none" x)))))

(defun python-float-repr (x)
  "The double X as Python's repr() and str() print it: 1.0, 0.1, 1e-05,
1.5e+16, -0.0, inf, nan."
  (cond ((ext:float-nan-p x) "nan")
        ((ext:float-infinity-p x) (if (plusp x) "inf" "-inf"))
        ((zerop x) (if (minusp (float-sign x)) "-0.0" "0.0"))
        (t
         (multiple-value-bind (digits point) (python-float-digits (abs x))
           (let ((sign (if (minusp x) "-" "")) (n (length digits)))
             (cond ((or (<= point -4) (> point 16))
                    (format nil "~A~C~:[.~A~;~*~]e~:[+~;-~]~2,'0D" sign (char digits 0)
                            (= n 1) (subseq digits 1) (minusp (1- point)) (abs (1- point))))
                   ((<= point 0)
                    (format nil "~A0.~A~A" sign (make-string (- point) :initial-element #\0)
                            digits))
                   ((>= point n)
                    (format nil "~A~A~A.0" sign digits
                            (make-string (- point n) :initial-element #\0)))
                   (t (format nil "~A~A.~A" sign (subseq digits 0 point)
                              (subseq digits point)))))))))

(defun python-str (value offset)
  "VALUE as Python's str() makes it, which is what {{ }} prints and ~
joins; an undefined value is the empty string.  Lists and mappings are
refused (TEMPLATE-ERROR at OFFSET): their repr is outside the subset."
  (ecase (value-kind value offset)
    (:undefined "")
    (:bool (if (truthy value) "True" "False"))
    (:none "None")
    (:int (format nil "~D" value))
    (:float (python-float-repr value))
    (:string value)
    ((:list :dict)
     (refuse-construct offset "~A printed as text (Python's repr of it)"
                       (kind-name (value-kind value offset))))))

(defun python-equal (a b offset &optional (depth 0))
  "Python's a == b on two values: numbers (booleans as 0 and 1) by value,
strings by characters, lists element by element, mappings key by key,
undefined equal only to undefined."
  (when (> depth *template-nesting-limit*)
    (template-error offset "expected compared values nested at most ~D deep, found deeper"
                    *template-nesting-limit*))
  (let ((ka (value-kind a offset)) (kb (value-kind b offset)))
    (flet ((number (v k) (if (eq k :bool) (if (truthy v) 1 0) v)))
      (cond ((and (member ka '(:bool :int :float)) (member kb '(:bool :int :float)))
             (= (number a ka) (number b kb)))
            ((not (eq ka kb)) nil)
            ((member ka '(:undefined :none)) t)
            ((eq ka :string) (string= a b))
            ((eq ka :list)
             (let ((va (coerce a 'simple-vector)) (vb (coerce b 'simple-vector)))
               (and (= (length va) (length vb))
                    (every (lambda (x y) (python-equal x y offset (1+ depth))) va vb))))
            (t ; :dict
             (and (= (hash-table-count a) (hash-table-count b))
                  (loop for k being the hash-keys of a using (hash-value v)
                        always (multiple-value-bind (w found) (gethash k b)
                                 (and found (python-equal v w offset (1+ depth)))))))))))

(defparameter *python-type-attributes*
  '((:string "capitalize" "casefold" "center" "count" "encode" "endswith" "expandtabs" "find"
     "format" "format_map" "index" "isalnum" "isalpha" "isascii" "isdecimal" "isdigit"
     "isidentifier" "islower" "isnumeric" "isprintable" "isspace" "istitle" "isupper" "join"
     "ljust" "lower" "lstrip" "maketrans" "partition" "removeprefix" "removesuffix" "replace"
     "rfind" "rindex" "rjust" "rpartition" "rsplit" "rstrip" "split" "splitlines" "startswith"
     "strip" "swapcase" "title" "translate" "upper" "zfill")
    (:dict "clear" "copy" "fromkeys" "get" "items" "keys" "pop" "popitem" "setdefault" "update"
     "values")
    (:list "append" "clear" "copy" "count" "extend" "index" "insert" "pop" "remove" "reverse"
     "sort")
    (:int "as_integer_ratio" "bit_count" "bit_length" "conjugate" "denominator" "from_bytes"
     "imag" "numerator" "real" "to_bytes")
    (:bool "as_integer_ratio" "bit_count" "bit_length" "conjugate" "denominator" "from_bytes"
     "imag" "numerator" "real" "to_bytes")
    (:float "as_integer_ratio" "conjugate" "fromhex" "hex" "imag" "is_integer" "real"))
  "The public attributes (mostly methods) Python's str, dict, list, int,
bool and float have (Python 3.11's dir()), which Jinja2's attribute lookup
finds before any key; a template naming one is refused.")

(defun check-python-attribute (kind name offset)
  "Refuse NAME as an attribute of a value of KIND when Python would find a
method or attribute of the type under it (or NAME starts with __)."
  (when (or (and (>= (length name) 2) (string= "__" name :end2 2))
            (member name (cdr (assoc kind *python-type-attributes*)) :test #'string=))
    (refuse-construct offset "the attribute ~S of ~A (a Python method or attribute)"
                      name (kind-name kind))))

(defun undefined-operand (node offset what)
  "Signal TEMPLATE-ERROR: WHAT was applied to NODE, which is undefined."
  (template-error offset "expected a defined value before ~A, found ~:[an undefined value~;~
                          the undefined name ~:*~S~]"
                  what (and (eq (tx-kind node) :name) (first (tx-args node)))))

(defvar *template-bindings* nil "The bindings of the render under way.")
(defvar *template-locals* '() "The loop variables in scope: an alist.")
(defvar *template-loop* nil "The innermost loop: (INDEX0 . LENGTH).")

(defparameter *jinja-globals* '("range" "dict" "lipsum" "cycler" "joiner" "namespace")
  "The names Jinja2's default environment binds to functions and classes,
which a template sees unless the bindings hide them.")

(defun template-lookup (name offset)
  "The value of the variable NAME (at OFFSET): a loop variable, else a
binding, else undefined; one of Jinja2's global functions is refused."
  (let ((local (assoc name *template-locals* :test #'string=)))
    (when local (return-from template-lookup (cdr local)))
    (when *template-bindings*
      (multiple-value-bind (value found) (gethash name *template-bindings*)
        (when found (return-from template-lookup value))))
    (when (member name *jinja-globals* :test #'string=)
      (refuse-construct offset "the Jinja2 global ~S" name))
    *undefined*))

(defun template-getitem (object key node offset)
  "Jinja2's subscript OBJECT[KEY]: the element or key if there is one, else
(for a string KEY) the attribute, else undefined."
  (let ((kind (value-kind object offset)) (key-kind (value-kind key offset)))
    (when (eq kind :undefined) (undefined-operand node offset "a subscript"))
    (when (and (member kind '(:list :string)) (member key-kind '(:int :bool)))
      (let* ((n (length object))
             (k (if (eq key-kind :bool) (if (truthy key) 1 0) key))
             (k (if (minusp k) (+ k n) k)))
        (when (< -1 k n)
          (return-from template-getitem
            (if (eq kind :string) (string (char object k)) (elt object k))))))
    (when (and (eq kind :dict) (eq key-kind :string))
      (multiple-value-bind (value found) (gethash key object)
        (when found (return-from template-getitem value))))
    (when (eq key-kind :string) (check-python-attribute kind key offset))
    *undefined*))

(defun template-getattr (object name node offset)
  "Jinja2's attribute OBJECT.NAME: a Python attribute of the type (refused),
else the key NAME of a mapping, else undefined."
  (let ((kind (value-kind object offset)))
    ;; Python finds __class__ and the like even on Jinja2's undefined.
    (when (eq kind :undefined)
      (check-python-attribute kind name offset)
      (undefined-operand node offset (format nil "\".~A\"" name)))
    (check-python-attribute kind name offset)
    (if (eq kind :dict)
        (multiple-value-bind (value found) (gethash name object)
          (if found value *undefined*))
        *undefined*)))

(defun template-length (value offset)
  (let ((kind (value-kind value offset)))
    (case kind
      (:undefined 0)
      ((:string :list) (length value))
      (:dict (hash-table-count value))
      (t (template-error offset "expected a string, list or mapping for |length, found ~A ~
                                 (Python's len() refuses it)" (kind-name kind))))))

(defun template-eval (x)
  "The value of the expression X in the current bindings."
  (let ((args (tx-args x)) (offset (tx-offset x)))
    (ecase (tx-kind x)
      (:const (first args))
      (:name (template-lookup (first args) offset))
      (:loop (destructuring-bind (index . length) *template-loop*
               (let ((key (first args)))
                 (cond ((string= key "index") (1+ index))
                       ((string= key "index0") index)
                       ((string= key "first") (= index 0))
                       (t (= index (1- length)))))))
      (:getattr (template-getattr (template-eval (first args)) (second args) (first args) offset))
      (:getitem (template-getitem (template-eval (first args)) (template-eval (second args))
                                  (first args) offset))
      (:defined (let ((defined (not (eq (template-eval (first args)) *undefined*))))
                  (if (second args) (not defined) defined)))
      (:not (not (truthy (template-eval (first args)))))
      (:and (loop for (e . more) on (first args)
                  for v = (template-eval e)
                  when (or (null more) (not (truthy v))) return v))
      (:or (loop for (e . more) on (first args)
                 for v = (template-eval e)
                 when (or (null more) (truthy v)) return v))
      (:compare (let ((left (template-eval (first args))))
                  (loop for (op . e) in (second args)
                        for right = (template-eval e)
                        do (unless (eq (python-equal left right offset) (string= op "=="))
                             (return nil))
                           (setf left right)
                        finally (return t))))
      (:concat (with-output-to-string (s)
                 (dolist (e (first args))
                   (write-string (python-str (template-eval e) (tx-offset e)) s))))
      (:if (destructuring-bind (then test else) args
             (cond ((truthy (template-eval test)) (template-eval then))
                   (else (template-eval else))
                   (t *undefined*))))
      (:filter (let ((value (template-eval (second args))))
                 (if (string= (first args) "trim")
                     (python-strip (python-str value offset))
                     (template-length value offset)))))))

(defun template-sequence (value offset)
  "The items a {% for %} takes from VALUE, as a simple vector."
  (let ((kind (value-kind value offset)))
    (case kind
      (:undefined #())
      (:list (coerce value 'simple-vector))
      (:string (map 'simple-vector #'string value))
      (:dict (refuse-construct offset "a loop over a mapping (its key order is not kept)"))
      (t (template-error offset "expected a sequence to loop over, found ~A" (kind-name kind))))))

(defun render-statements (body stream)
  (dolist (s body)
    (if (stringp s)
        (write-string s stream)
        (ecase (first s)
          (:output (let ((x (second s)))
                     (write-string (python-str (template-eval x) (tx-offset x)) stream)))
          (:if (loop for (test . clause) in (second s)
                     when (truthy (template-eval test))
                       do (render-statements clause stream) (return)
                     finally (render-statements (third s) stream)))
          (:for (destructuring-bind (offset name sequence loop-body) (rest s)
                  (declare (ignore offset))
                  (let ((items (template-sequence (template-eval sequence) (tx-offset sequence))))
                    (loop for item across items
                          for index from 0
                          do (let ((*template-locals* (acons name item *template-locals*))
                                   (*template-loop* (cons index (length items))))
                               (render-statements loop-body stream))))))))))

(defun render-template (template bindings)
  "The text Jinja2 renders from TEMPLATE (a string, or a COMPILED-TEMPLATE
from COMPILE-TEMPLATE) with BINDINGS, an EQUAL hash table from variable
names to values as PARSE-JSON gives them (hash tables, vectors, strings,
integers, double-floats, T, NIL for false, :NULL) or Lisp lists as
sequences; NIL is false, never an empty list.  NIL BINDINGS binds nothing.
Anything outside the subset of doc/template.md, and anything Jinja2
raises on, signals TEMPLATE-ERROR naming its offset in the template."
  (unless (or (null bindings)
              (and (hash-table-p bindings) (member (hash-table-test bindings)
                                                   '(equal equalp))))
    (element-type-error 'render-template bindings
                        "expected an EQUAL hash table of bindings, found ~S" bindings))
  (let ((compiled (if (compiled-template-p template) template (compile-template template)))
        (*template-bindings* bindings)
        (*template-locals* '())
        (*template-loop* nil))
    (with-output-to-string (s)
      (render-statements (compiled-template-body compiled) s))))
