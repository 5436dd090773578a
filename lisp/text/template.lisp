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
;;;; instead of exhausting the stack.  Loops nested in loops multiply, so a
;;;; rendering counts its loop iterations (*TEMPLATE-MAX-ITERATIONS*) and
;;;; the characters it writes and joins (RENDER-TEMPLATE's MAX-LENGTH) as it
;;;; goes, and stops at either limit with a TEMPLATE-ERROR naming it.  A
;;;; template is compiled once (COMPILE-TEMPLATE) and rendered any number of
;;;; times, from any threads.
;;;;
;;;; The lexer is template-lexer.lisp, the parser and COMPILE-TEMPLATE
;;;; template-parser.lisp; this file holds the values as Python sees them
;;;; and RENDER-TEMPLATE.

(in-package "TEXT")

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

(defparameter *python-type-attribute-tables*
  (loop for (kind . names) in *python-type-attributes*
        collect (cons kind (let ((table (make-hash-table :test 'equal :size (length names))))
                             (dolist (name names table)
                               (setf (gethash name table) t)))))
  "*PYTHON-TYPE-ATTRIBUTES* as an alist from the kind to an EQUAL hash table
of its names: a template's attribute names are checked on every rendering,
one lookup each rather than a comparison with every name.")

(defun check-python-attribute (kind name offset)
  "Refuse NAME as an attribute of a value of KIND when Python would find a
method or attribute of the type under it (or NAME starts with __)."
  ;; EQUAL and character tests rather than STRING=, whose keyword
  ;; arguments cost more than the comparison here.
  (when (or (and (>= (length name) 2) (char= #\_ (char name 0)) (char= #\_ (char name 1)))
            (let ((table (cdr (assoc kind *python-type-attribute-tables*))))
              (and table (gethash name table))))
    (refuse-construct offset "the attribute ~S of ~A (a Python method or attribute)"
                      name (kind-name kind))))

(defun undefined-operand (node offset what)
  "Signal TEMPLATE-ERROR: WHAT was applied to NODE, which is undefined."
  (template-error offset "expected a defined value before ~A, found ~:[an undefined value~;~
                          the undefined name ~:*~S~]"
                  what (and (eq (tx-kind node) :name) (first (tx-args node)))))

;;; The limits of one rendering.

(defparameter *template-max-iterations* 65536
  "The most loop iterations one rendering may run, every loop counted (a
loop inside another runs once per item of the outer one); more signals
TEMPLATE-ERROR.")

(defparameter *template-max-length* 16777216
  "The most characters a rendering may write, those of every string `~'
joins counted too, when RENDER-TEMPLATE is not given its own MAX-LENGTH;
more signals TEMPLATE-ERROR.")

(defvar *template-length-limit* 0
  "The most characters the render under way may write and join.")
(defvar *template-length-limit-name* ""
  "Where *TEMPLATE-LENGTH-LIMIT* comes from, for its message.")
(defvar *template-written* 0
  "The characters the render under way has written and joined.")
(defvar *template-iterations-left* 0
  "The loop iterations the render under way may still run.")

(defun count-characters (n offset)
  "Add N characters, written or joined by the construct at OFFSET, to what
the render under way has made; past its length limit, signal
TEMPLATE-ERROR naming the limit."
  (let ((written (+ *template-written* n)))
    (when (> written *template-length-limit*)
      (template-error offset "expected a rendered text of at most ~D characters, strings ~
                              joined with ~~ counted too (~A), found more"
                      *template-length-limit* *template-length-limit-name*))
    (setf *template-written* written)))

(defun append-text (string out)
  "Add STRING at OUT's fill pointer (OUT an adjustable string), OUT grown
only when it is too short: a rendering into a kept string conses nothing."
  (let* ((start (fill-pointer out)) (end (+ start (length string))))
    (when (> end (array-dimension out 0))
      (adjust-array out (max end (* 2 (array-dimension out 0)))))
    (setf (fill-pointer out) end)
    (replace out string :start1 start)
    out))

(defun template-write (string out offset)
  "Add STRING, the output of the construct at OFFSET, to OUT (APPEND-TEXT),
counted by COUNT-CHARACTERS first."
  (count-characters (length string) offset)
  (append-text string out))

(defun count-iterations (n offset)
  "Take N loop iterations of the loop at OFFSET from what the render may
still run; more than are left signals TEMPLATE-ERROR."
  (when (> n *template-iterations-left*)
    (template-error offset "expected at most ~D loop iterations in one rendering ~
                            (rontolisp:*template-max-iterations*), found more"
                    *template-max-iterations*))
  (decf *template-iterations-left* n))

(defvar *template-bindings* nil "The bindings of the render under way.")
(defvar *template-locals* '() "The loop variables in scope: an alist.")
(defvar *template-loop* nil "The innermost loop: (INDEX0 . LENGTH).")
(defvar *template-cells* '()
  "Free conses the render under way takes its loop frames from (a loop's
variable and its index, each a cons changed in place from one iteration
to the next), given back when the loop ends: a rendering with a kept
TEMPLATE-CELLS list conses nothing for its loops.")

(defun template-cell (car cdr)
  "A cons of CAR and CDR, one of *TEMPLATE-CELLS* when there is one."
  (let ((cell *template-cells*))
    (if cell
        (progn (setf *template-cells* (cdr cell))
               (rplaca cell car)
               (rplacd cell cdr))
        (cons car cdr))))

(defparameter *jinja-globals* '("range" "dict" "lipsum" "cycler" "joiner" "namespace")
  "The names Jinja2's default environment binds to functions and classes,
which a template sees unless the bindings hide them.")

(defun template-lookup (name offset)
  "The value of the variable NAME (at OFFSET): a loop variable, else a
binding, else undefined; one of Jinja2's global functions is refused."
  (let ((local (assoc name *template-locals* :test #'equal))) ; names are strings
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
                 (cond ((equal key "index") (1+ index))
                       ((equal key "index0") index)
                       ((equal key "first") (= index 0))
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
                        do (unless (eq (python-equal left right offset) (equal op "=="))
                             (return nil))
                           (setf left right)
                        finally (return t))))
      (:concat (with-output-to-string (s)
                 (dolist (e (first args))
                   (let ((part (python-str (template-eval e) (tx-offset e))))
                     (count-characters (length part) offset)
                     (write-string part s)))))
      (:if (destructuring-bind (then test else) args
             (cond ((truthy (template-eval test)) (template-eval then))
                   (else (template-eval else))
                   (t *undefined*))))
      (:filter (let ((value (template-eval (second args))))
                 (if (equal (first args) "trim")
                     (python-strip (python-str value offset))
                     (template-length value offset)))))))

(defun template-sequence (value offset loop)
  "The items a {% for %} (at LOOP) takes from VALUE (at OFFSET), as a
simple vector, their count first taken from the iterations the render may
still run (COUNT-ITERATIONS)."
  (let ((kind (value-kind value offset)))
    (case kind
      (:undefined #())
      (:list (count-iterations (length value) loop)
       (coerce value 'simple-vector))
      (:string (count-iterations (length value) loop)
       (map 'simple-vector #'string value))
      (:dict (refuse-construct offset "a loop over a mapping (its key order is not kept)"))
      (t (template-error offset "expected a sequence to loop over, found ~A" (kind-name kind))))))

(defun render-statements (body out)
  (dolist (s body)
    (ecase (first s)
      (:text (template-write (third s) out (second s)))
      (:output (let ((x (second s)))
                 (template-write (python-str (template-eval x) (tx-offset x)) out
                                 (tx-offset x))))
      (:if (loop for (test . clause) in (second s)
                 when (truthy (template-eval test))
                   do (render-statements clause out) (return)
                 finally (render-statements (third s) out)))
      (:for (destructuring-bind (offset name sequence loop-body) (rest s)
              (let ((items (template-sequence (template-eval sequence) (tx-offset sequence)
                                              offset)))
                (when (plusp (length items))
                  ;; One frame per loop, its cells changed in place from one
                  ;; item to the next and given back at the end (nothing
                  ;; keeps a frame past its iteration).
                  (let* ((binding (template-cell name nil))
                         (frame (template-cell binding *template-locals*))
                         (index (template-cell 0 (length items))))
                    (let ((*template-locals* frame) (*template-loop* index))
                      (loop for item across items
                            for i from 0
                            do (rplacd binding item)
                               (rplaca index i)
                               (render-statements loop-body out)))
                    (rplaca binding nil)
                    (rplaca frame nil)
                    (rplacd binding *template-cells*)
                    (rplacd index binding)
                    (rplacd frame index)
                    (setf *template-cells* frame)))))))))

(defun render-template (template bindings &key (max-length *template-max-length*)
                                               (max-length-name "rontolisp:*template-max-length*"))
  "The text Jinja2 renders from TEMPLATE (a string, or a COMPILED-TEMPLATE
from COMPILE-TEMPLATE) with BINDINGS, an EQUAL hash table from variable
names to values as PARSE-JSON gives them (hash tables, vectors, strings,
integers, double-floats, T, NIL for false, :NULL) or Lisp lists as
sequences; NIL is false, never an empty list.  NIL BINDINGS binds nothing.
Anything outside the subset of doc/template.md, and anything Jinja2
raises on, signals TEMPLATE-ERROR naming its offset in the template.  So
does a rendering that would write more than MAX-LENGTH characters (or join
a longer string with ~), the message naming the limit by MAX-LENGTH-NAME,
or run more than *TEMPLATE-MAX-ITERATIONS* loop iterations: both are
counted as the rendering goes, so it stops there in bounded memory."
  (let ((out (make-array 256 :element-type 'character :adjustable t :fill-pointer 0)))
    (coerce (render-template-into template bindings out :max-length max-length
                                                        :max-length-name max-length-name)
            'simple-string)))

(defstruct (render-scratch (:constructor make-render-scratch ()))
  "What one thread keeps between renderings into a kept string
(RENDER-TEMPLATE-INTO's CELLS): the free conses of its loop frames."
  (cells '() :type list))

(document-functions
  make-render-scratch "A fresh RENDER-SCRATCH for one thread's calls of RENDER-TEMPLATE-INTO.")

(defun render-template-into (template bindings out &key (max-length *template-max-length*)
                                                      (max-length-name
                                                       "rontolisp:*template-max-length*")
                                                      scratch)
  "RENDER-TEMPLATE's text written into OUT, an adjustable string with a
fill pointer, from its start (the fill pointer set to the text's length;
OUT grown only when the text is longer); answers OUT.  SCRATCH, a
RENDER-SCRATCH of the caller's thread, keeps the conses of the loops'
frames from one rendering to the next: with the same template and a
kept OUT and SCRATCH, a rendering conses nothing but what `~' and |trim
make and the integers it prints.  The arguments and conditions are
RENDER-TEMPLATE's."
  (unless (typep max-length '(integer 0))
    (element-type-error 'render-template max-length
                        "expected a non-negative integer :max-length, found ~S" max-length))
  (unless (or (null bindings)
              (and (hash-table-p bindings) (member (hash-table-test bindings)
                                                   '(equal equalp))))
    (element-type-error 'render-template bindings
                        "expected an EQUAL hash table of bindings, found ~S" bindings))
  (let ((compiled (if (compiled-template-p template) template (compile-template template)))
        (*template-bindings* bindings)
        (*template-locals* '())
        (*template-loop* nil)
        (*template-length-limit* max-length)
        (*template-length-limit-name* max-length-name)
        (*template-written* 0)
        (*template-iterations-left* *template-max-iterations*)
        (*template-cells* (and scratch (shiftf (render-scratch-cells scratch) '()))))
    (setf (fill-pointer out) 0)
    (render-statements (compiled-template-body compiled) out)
    (when scratch
      (setf (render-scratch-cells scratch) *template-cells*))
    out))
