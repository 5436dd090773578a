;;;; regex.lisp - the regular expressions people type at a command line
;;;; (`inspect --filter'), searched for anywhere in a string as Python's
;;;; re.search does.
;;;;
;;;; Syntax: literals, `.' (any character but newline), `[abc]', `[a-z]',
;;;; `[^...]', `^' and `$' (start; end or before a final newline), `|',
;;;; groups `(...)' and `(?:...)', the repetitions `*' `+' `?' `{m}' `{m,}'
;;;; `{m,n}' (a lazy `?' after one is accepted: only whether a string
;;;; matches is asked), and escapes: `\d' `\w' `\s' and their negations
;;;; `\D' `\W' `\S' (also inside brackets), `\n' `\t' `\r', the word
;;;; boundary `\b' and its negation `\B' (as in ECMAScript and Python; `\b'
;;;; inside brackets is a backspace), and a backslash before any other
;;;; punctuation for that character.  Case matters; inline flags such as
;;;; `(?i)' and look-arounds are refused by name.
;;;;
;;;; The pattern is parsed into a tree, compiled into a program for a Pike
;;;; VM and run as a set of threads over the string, one step per
;;;; character: time linear in the string for any pattern, so no pattern
;;;; can make a search take exponential time.  A counted repetition is
;;;; compiled as that many copies of what it repeats, so nested counts
;;;; multiply ((a{1000}){1000} is a million copies): a pattern whose program
;;;; would pass +REGEX-MAX-PROGRAM+ instructions is refused before any is
;;;; made, which bounds both the memory and the time of a search.  A
;;;; malformed pattern signals REGEX-ERROR naming the character at fault.

(in-package "TEXT")

(defstruct (regex (:constructor %make-regex (source program)) (:copier nil))
  "A compiled regular expression (COMPILE-REGEX)."
  (source "" :read-only t)
  (program #() :read-only t))

(document-functions
  regex-source "The pattern REGEX was compiled from, as COMPILE-REGEX was given it.")

(defconstant +regex-max-repeat+ 1000
  "The largest count a {m,n} repetition may give.")

(defconstant +regex-max-program+ 10000
  "The most instructions a compiled pattern may have: a search takes time
and memory in proportion to it for each character.")

(defun regex-program-size (node)
  "How many instructions REGEX-COMPILE-TREE makes for the parsed NODE (an
exact count, computed without making them)."
  (ecase (first node)
    ((:char :any :class :bol :eol :boundary :not-boundary) 1)
    (:seq (reduce #'+ (rest node) :key #'regex-program-size))
    (:alt (+ 2 (regex-program-size (second node)) (regex-program-size (third node))))
    (:repeat (destructuring-bind (sub min max) (rest node)
               (let ((s (regex-program-size sub)))
                 (+ (* min s) (if max (* (- max min) (1+ s)) (+ s 2))))))))

;;; Parsing: (:char c) (:any) (:class negated items) (:bol) (:eol)
;;; (:boundary) (:not-boundary) (:seq nodes...) (:alt a b) (:repeat node min max-or-nil)

(defun compile-regex (pattern)
  "Compile the string PATTERN (see the file's header for the syntax) into
a REGEX for REGEX-SEARCH; a malformed pattern signals REGEX-ERROR."
  (unless (stringp pattern)
    (element-type-error 'compile-regex pattern "expected a pattern string, found ~S" pattern))
  (let ((pos 0) (n (length pattern)))
    (labels ((bad (control &rest args)
               (regex-error pattern pos "~?" control args))
             (peek () (and (< pos n) (char pattern pos)))
             (next () (prog1 (char pattern pos) (incf pos)))
             (alternation ()
               (let ((left (sequence*)))
                 (if (eql (peek) #\|)
                     (progn (next) (list :alt left (alternation)))
                     left)))
             (sequence* ()
               (loop while (and (peek) (not (member (peek) '(#\| #\)))))
                     collect (repetition) into nodes
                     finally (return (cons :seq nodes))))
             (repetition ()
               (let* ((start pos)
                      (node (atom*))
                      (c (peek)))
                 (multiple-value-bind (min max)
                     (case c
                       (#\* (next) (values 0 nil))
                       (#\+ (next) (values 1 nil))
                       (#\? (next) (values 0 1))
                       ;; both values of COUNTED (OR would keep the first only,
                       ;; and {m} would become {m,})
                       (#\{ (multiple-value-bind (min max) (counted)
                              (if min (values min max) (return-from repetition node))))
                       (t (return-from repetition node)))
                   (when (member (first node) '(:bol :eol :boundary :not-boundary))
                     (bad "expected something to repeat before ~A, found an anchor" c))
                   (when (eql (peek) #\?) (next))
                   (when (or (member (peek) '(#\* #\+ #\?))
                             (and (eql (peek) #\{) (let ((at pos)) (prog1 (counted) (setf pos at)))))
                     (bad "expected one repetition, found ~A after ~A" (peek) c))
                   (let ((repeat (list :repeat node min max)))
                     (bounded repeat start)))))
             (bounded (node start)
               ;; NODE, parsed from START, when its program is within the limit
               (let ((size (regex-program-size node)))
                 (when (> size +regex-max-program+)
                   (setf pos start)
                   (bad "expected at most ~D pattern elements once counted repetitions are ~
expanded (a{3} is aaa), found ~D" +regex-max-program+ size))
                 node))
             (number* ()
               (let ((start pos))
                 (loop while (and (peek) (digit-char-p (peek))) do (next))
                 (and (> pos start) (parse-integer pattern :start start :end pos))))
             (counted ()
               ;; {m} {m,} {m,n}; anything else is a literal brace, as in Python
               (let ((start pos))
                 (next)
                 (let* ((min (or (number*) (and (eql (peek) #\,) 0)))
                        (comma (and min (eql (peek) #\,) (next)))
                        (max (if comma (number*) min)))
                   (cond ((and min (eql (peek) #\}))
                          (next)
                          (when (or (> min +regex-max-repeat+)
                                    (and max (or (> max +regex-max-repeat+) (< max min))))
                            (setf pos start)
                            (bad "expected a repetition {m,n} with m <= n <= ~D" +regex-max-repeat+))
                          (values min max))
                         (t (setf pos start) nil)))))
             (atom* ()
               (let ((c (next)))
                 (case c
                   (#\. (list :any))
                   (#\^ (list :bol))
                   (#\$ (list :eol))
                   (#\( (when (and (eql (peek) #\?) (< (1+ pos) n) (char= #\: (char pattern (1+ pos))))
                          (incf pos 2))
                    (when (eql (peek) #\?)
                      (bad "expected a group ( or (?: , found ~A"
                           (regex-group-name (subseq pattern pos (min n (+ pos 3))))))
                    (let ((inner (alternation)))
                      (unless (eql (peek) #\)) (bad "expected ) to close the group, found ~
~:[the end~;~:*~S~]" (peek)))
                      (next)
                      inner))
                   (#\[ (bracket))
                   (#\\ (let ((e (escape)))
                          (cond ((characterp e) (list :char e))
                                ((member e '(:boundary :not-boundary)) (list e))
                                (t (list :class nil (list e))))))
                   ((#\* #\+ #\?) (decf pos) (bad "expected something to repeat before ~A" c))
                   (t (list :char c)))))
             (escape ()
               (let ((c (or (peek) (bad "expected a character after \\, found the end"))))
                 (next)
                 (case c
                   (#\d :digit) (#\D '(:not :digit))
                   (#\w :word) (#\W '(:not :word))
                   (#\s :space) (#\S '(:not :space))
                   (#\b :boundary) (#\B :not-boundary)
                   (#\n #\Newline) (#\t #\Tab) (#\r #\Return)
                   (t (when (alphanumericp c)
                        (decf pos)
                        (bad "expected \\d \\w \\s \\D \\W \\S \\b \\B \\n \\t \\r or \\ ~
before punctuation, found \\~A" c))
                      c))))
             (bracket ()
               (let ((negated (and (eql (peek) #\^) (next) t))
                     (items '())
                     (first t))
                 (loop
                   (let ((c (or (peek) (bad "expected ] to close the bracket, found the end"))))
                     (when (and (char= c #\]) (not first))
                       (next)
                       (return (list :class negated items)))
                     (setf first nil)
                     (next)
                     (let ((lo (if (char= c #\\) (escape) c)))
                       (case lo                ; [\b] is a backspace, as in ECMAScript
                         (:boundary (setf lo (code-char 8)))
                         (:not-boundary (decf pos)
                          (bad "expected \\B outside brackets, found it inside")))
                       (if (and (characterp lo) (eql (peek) #\-) (< (1+ pos) n)
                                (char/= #\] (char pattern (1+ pos))))
                           (progn
                             (next)
                             (let* ((d (next))
                                    (hi (if (char= d #\\) (escape) d)))
                               (unless (and (characterp hi) (char<= lo hi))
                                 (bad "expected a range a-z with a <= z, found ~A-~A" lo hi))
                               (push (cons lo hi) items)))
                           (push lo items))))))))
      (let ((tree (alternation)))
        (when (< pos n)
          (bad "expected the end of the pattern, found an unmatched )"))
        (bounded tree 0)
        (%make-regex pattern (regex-compile-tree tree))))))

;;; Compiling: instructions (:char c) (:any) (:class negated items)
;;; (:split a b) (:jump a) (:bol) (:eol) (:match).

(defun regex-compile-tree (tree)
  (let ((code (make-array 16 :adjustable t :fill-pointer 0)))
    (labels ((emit (&rest inst) (vector-push-extend inst code) (1- (length code)))
             (patch (at &rest inst) (setf (aref code at) inst))
             (here () (length code))
             (gen (node)
               (ecase (first node)
                 ((:char :any :class :bol :eol :boundary :not-boundary) (apply #'emit node))
                 (:seq (mapc #'gen (rest node)))
                 (:alt (let ((split (emit :split 0 0)))
                         (gen (second node))
                         (let ((jump (emit :jump 0))
                               (b (here)))
                           (gen (third node))
                           (patch split :split (1+ split) b)
                           (patch jump :jump (here)))))
                 (:repeat
                  (destructuring-bind (sub min max) (rest node)
                    (loop repeat min do (gen sub))
                    (if max
                        (loop repeat (- max min)
                              collect (prog1 (emit :split 0 0) (gen sub)) into splits
                              finally (dolist (s splits) (patch s :split (1+ s) (here))))
                        (let ((split (emit :split 0 0)))
                          (gen sub)
                          (emit :jump split)
                          (patch split :split (1+ split) (here)))))))))
      (gen tree)
      (emit :match)
      (coerce code 'simple-vector))))

(defun regex-group-name (start)
  "What the group START (the text after an opening parenthesis, `?' and at
most two characters more) is, for the refusal of anything but (?:."
  (flet ((is (prefix) (and (>= (length start) (length prefix)) (string= prefix start :end2 (length prefix)))))
    (cond ((is "?=") "the look-ahead (?=, which is not supported")
          ((is "?!") "the negative look-ahead (?!, which is not supported")
          ((or (is "?<=") (is "?<!")) "a look-behind (?<= or (?<!, which is not supported")
          ((or (is "?<") (is "?P")) "a named group (?<name> or (?P<name>, which is not supported: use ( or (?:")
          ((and (> (length start) 1) (alpha-char-p (char start 1)))
           (format nil "the inline flag ~A (flags are not supported; ~
ECMAScript, what llama-quantize's std::regex speaks, has none: write the cases in brackets, [Aa])"
                   (concatenate 'string "(" (subseq start 0 2) ")")))
          (t "an unsupported (? group"))))

(defun regex-word-char-p (c)
  "A character of \\w: a letter, a digit or `_'."
  (or (alphanumericp c) (char= c #\_)))

(defun regex-class-member-p (c item)
  (cond ((characterp item) (char= c item))
        ((consp item)
         (if (eq (car item) :not)
             (not (regex-class-member-p c (second item)))
             (char<= (car item) c (cdr item))))
        (t (ecase item
             (:digit (digit-char-p c))
             (:word (regex-word-char-p c))
             (:space (member c '(#\Space #\Tab #\Newline #\Return #\Page #.(code-char 11))))))))

(defun regex-search (regex string)
  "True when REGEX (a REGEX or a pattern string) matches somewhere in
STRING, as Python's re.search."
  (let* ((regex (if (regex-p regex) regex (compile-regex regex)))
         (program (regex-program regex))
         (n (length string))
         (marks (make-array (length program) :initial-element -1))
         (current (make-array (length program) :fill-pointer 0))
         (next (make-array (length program) :fill-pointer 0)))
    (labels ((add (list pc i)
               (unless (= (svref marks pc) i)
                 (setf (svref marks pc) i)
                 (let ((inst (svref program pc)))
                   (case (first inst)
                     (:jump (add list (second inst) i))
                     (:split (add list (second inst) i) (add list (third inst) i))
                     (:bol (when (= i 0) (add list (1+ pc) i)))
                     (:eol (when (or (= i n) (and (= i (1- n)) (char= #\Newline (char string i))))
                             (add list (1+ pc) i)))
                     ((:boundary :not-boundary)
                      (when (eq (eq (first inst) :boundary)
                                (not (eq (and (> i 0) (regex-word-char-p (char string (1- i))))
                                         (and (< i n) (regex-word-char-p (char string i))))))
                        (add list (1+ pc) i)))
                     (t (vector-push pc list)))))))
      (loop for i from 0 to n
            do (add current 0 i)
               (loop for pc across current
                     for inst = (svref program pc)
                     do (case (first inst)
                          (:match (return-from regex-search t))
                          (t (when (and (< i n)
                                        (let ((c (char string i)))
                                          (case (first inst)
                                            (:char (char= c (second inst)))
                                            (:any (char/= c #\Newline))
                                            (:class (let ((in (some (lambda (item)
                                                                      (regex-class-member-p c item))
                                                                    (third inst))))
                                                      (if (second inst) (not in) in))))))
                               (add next (1+ pc) (1+ i))))))
               (rotatef current next)
               (setf (fill-pointer next) 0))
      nil)))

(defun regex-parser (option string)
  "The compiled REGEX of the pattern STRING given to the command-line
OPTION (`inspect --filter', `quantize --tensor-type'); a malformed pattern
is bad usage."
  (handler-case (compile-regex string)
    (regex-error (c) (usage-error "~A: ~A" option (rontolisp-error-message c)))))
