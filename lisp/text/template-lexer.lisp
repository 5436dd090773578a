;;;; template-lexer.lisp - the first of the chat template files (the
;;;; subset, its limits and its errors are described in template.lisp's
;;;; header and doc/template.md): the compiled template, the refusal of a
;;;; construct outside the subset, Python's whitespace, and the lexer that
;;;; cuts a template into tokens.

(in-package "TEXT")

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
