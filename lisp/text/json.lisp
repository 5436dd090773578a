;;;; json.lisp - writing JSON, for every command's --json (inspect, embed,
;;;; bench, eval) and the converter's test inputs.
;;;;
;;;; Values map to JSON as: a list (:object (KEY . VALUE) ...) to an object
;;;; whose keys are strings, in order; a vector (other than a string) to an
;;;; array; a string to a string (control characters, quote and backslash
;;;; escaped, each byte that was not UTF-8 as the lone surrogate escape
;;;; \udcHH, which strict parsers accept and Python's surrogateescape turns
;;;; back into the byte, so nothing is replaced; everything else written as
;;;; UTF-8 by the stream); an integer to itself; a float to the shortest digits
;;;; that read back as the same float of its format, and NaN or an infinity
;;;; to the strings "nan", "inf", "-inf"; :true, :false and :null to
;;;; themselves.

(in-package "TEXT")

(defun json-float-string (x)
  "The shortest decimal form of the float X that reads back as X in X's own
format, in JSON syntax (NaN and infinities as the strings \"nan\", \"inf\",
\"-inf\", quoted).  A normal single-float or a zero is written from C
(prims/numtext.h: the digits PRIN1 prints, a tenth of its time)."
  (cond ((ext:float-nan-p x) "\"nan\"")
        ((ext:float-infinity-p x) (if (plusp x) "\"inf\"" "\"-inf\""))
        ((and (typep x 'single-float)
              (or (zerop x) (>= (abs x) least-positive-normalized-single-float)))
         (%numbers-text (make-array 1 :element-type 'single-float :initial-element x) "" t))
        (t
         ;; PRIN1 already prints the shortest round-trip digits of X's
         ;; format; only the exponent marker and a bare trailing dot need
         ;; changing for JSON.
         (let* ((*read-default-float-format* (if (typep x 'double-float)
                                                 'double-float 'single-float))
                (s (prin1-to-string x))
                (e (position-if (lambda (c) (find c "eEdDfFsSlL")) s)))
           (when e (setf s (concatenate 'string (subseq s 0 e) "e" (subseq s (1+ e)))))
           (let ((dot (position #\. s)))
             (when (and dot (or (= dot (1- (length s)))
                                (not (digit-char-p (char s (1+ dot))))))
               (setf s (concatenate 'string (subseq s 0 (1+ dot)) "0" (subseq s (1+ dot))))))
           s))))

(defun write-numbers (vector stream &key (separator " ") json)
  "Write the numbers of VECTOR (integers or single-floats) to STREAM with
SEPARATOR between them: integers in decimal, floats as FLOAT-TEXT writes
them (as JSON-FLOAT-STRING with JSON true).  A simple vector of fixnums, of
(signed-byte 64 or 32) or of single-floats is written from C in one string
(a FORMAT per number was most of a command's time)."
  (let ((text (%numbers-text vector separator json)))
    (if text
        (write-string text stream)
        (loop for i from 0 below (length vector)
              for x = (aref vector i)
              do (when (plusp i) (write-string separator stream))
                 (cond ((integerp x) (format stream "~D" x))
                       (json (write-string (json-float-string x) stream))
                       (t (write-string (float-text x) stream))))))
  vector)

(defun write-newline (&optional (stream *standard-output*))
  "Write a newline to STREAM without flushing it: ECL's TERPRI and
WRITE-LINE flush, a system call per line of a command's output."
  (write-char #\Newline stream))

(declaim (inline escaped-char-p))
(defun escaped-char-p (code)
  "True when the character CODE is written as \\uXXXX: C0 and DEL, C1
(U+0080-U+009F, CSI U+009B among them, which a terminal obeys), the
bidirectional controls, which reorder what a reader sees (U+061C, U+200E,
U+200F, U+202A-U+202E, U+2066-U+2069), and surrogates, which no UTF-8 text
holds."
  (declare (fixnum code))
  (or (< code 32) (<= 127 code 159)
      (= code #x061c) (<= #x200e code #x200f) (<= #x202a code #x202e) (<= #x2066 code #x2069)
      (<= #xd800 code #xdfff)))

(defun write-escaped (string stream &key (quotes t) json)
  "Write STRING to STREAM with double quote, backslash and the characters
ESCAPED-CHAR-P names escaped (\\n, \\t, \\u001b, \\u202e ...).  Each byte
that was not UTF-8 (read as U+DC80..U+DCFF, see prims/utf8.h) is written
as \\xHH for people to read, or with JSON true as the lone surrogate escape
\\udcHH, which is valid JSON and which Python's surrogateescape turns back
into the byte.  With QUOTES false the double quote and backslash are
written as they are.  The one escaping function of every text and JSON
output but the lines of `tokenize --json', which prims/jsontext.h escapes
the same way in C (the tokenizer suite holds the two together on every
character below U+10000).  Each run of characters written as they are
goes out in one WRITE-STRING (a WRITE-CHAR per character was most of the
time of `tokenize --json')."
  (let ((start 0) (n (length string)))
    (declare (fixnum start n))
    (dotimes (i n)
      (let* ((c (char string i))
             (code (char-code c)))
        (declare (fixnum code))
        (when (or (escaped-char-p code) (and quotes (or (= code 34) (= code 92))))
          (when (< start i)
            (write-string string stream :start start :end i))
          (setf start (1+ i))
          (cond ((= code 34) (write-string "\\\"" stream))
                ((= code 92) (write-string "\\\\" stream))
                ((= code 10) (write-string "\\n" stream))
                ((= code 13) (write-string "\\r" stream))
                ((= code 9) (write-string "\\t" stream))
                ((and (not json) (<= #xdc80 code #xdcff))
                 (format stream "\\x~(~2,'0x~)" (- code #xdc00)))
                (t (format stream "\\u~(~4,'0x~)" code))))))
    (when (< start n)
      (write-string string stream :start start :end n))))

(defun write-json-string (string stream)
  "Write STRING to STREAM as a JSON string (see WRITE-ESCAPED)."
  (write-char #\" stream)
  (write-escaped string stream :json t)
  (write-char #\" stream))

(defun write-json (value stream &key (indent nil) (level 0))
  "Write VALUE (see the file's header for the mapping) to STREAM as JSON.
With INDENT (a number of spaces), objects and arrays of objects are laid out
one member a line."
  (flet ((newline (lvl)
           (when indent
             (terpri stream)
             (dotimes (i (* indent lvl)) (write-char #\Space stream)))))
    (cond ((eq value :true) (write-string "true" stream))
          ((eq value :false) (write-string "false" stream))
          ((eq value :null) (write-string "null" stream))
          ((stringp value) (write-json-string value stream))
          ((integerp value) (format stream "~D" value))
          ((floatp value) (write-string (json-float-string value) stream))
          ((and (consp value) (eq (first value) :object))
           (write-char #\{ stream)
           (loop for (pair . more) on (rest value)
                 do (newline (1+ level))
                    (write-json-string (string (car pair)) stream)
                    (write-string (if indent ": " ":") stream)
                    (write-json (cdr pair) stream :indent indent :level (1+ level))
                    (when more (write-char #\, stream)))
           (when (rest value) (newline level))
           (write-char #\} stream))
          ;; a vector of fixnums or single-floats: its text from C, at once
          ((let ((text (and (vectorp value) (%numbers-text value (if indent ", " ",") t))))
             (when text
               (write-char #\[ stream)
               (write-string text stream)
               (write-char #\] stream)
               t)))
          ((vectorp value)
           (let ((nested (and indent (some (lambda (v) (and (consp v) (eq (first v) :object)))
                                           value))))
             (write-char #\[ stream)
             (loop for i from 0 below (length value)
                   do (when nested (newline (1+ level)))
                      (write-json (aref value i) stream :indent indent :level (1+ level))
                      (when (< i (1- (length value)))
                        (write-char #\, stream)
                        (unless nested (when indent (write-char #\Space stream)))))
             (when (and nested (plusp (length value))) (newline level))
             (write-char #\] stream)))
          (t (rontolisp-error 'write-json "expected a JSON value, found ~S" value)))))

(defun json-brief (value &optional (width 48))
  "VALUE, as PARSE-JSON makes it, written as the JSON it came from, for a
message: null, true, 1.5, \"text\", [[1, 2], {\"text\": 5}] (an object's
keys in the order of their text).  Past about WIDTH characters a string or
a container is cut, its end written \"...\".  A value JSON has not
(from a Lisp caller) is written as Lisp prints it."
  (let ((left width))
    (with-output-to-string (s)
      (labels ((out (text)
                 (write-string text s)
                 (decf left (length text)))
               (items (open close list)
                 (out open)
                 (loop for (item . more) on list for first = t then nil
                       do (unless first (out ", "))
                          (when (<= left 0) (out "...") (return))
                          (funcall item))
                 (out close))
               (walk (v)
                 (typecase v
                   ((eql t) (out "true"))
                   (null (out "false"))
                   ((eql :null) (out "null"))
                   (integer (out (format nil "~D" v)))
                   (float (out (json-float-string v)))
                   (string
                    (let* ((keep (max left 8)) (cut (> (length v) keep)))
                      (out "\"")
                      (out (with-output-to-string (e)
                             (write-escaped (if cut (subseq v 0 keep) v) e)))
                      (out (if cut "...\"" "\""))))
                   (vector
                    (items "[" "]" (loop for x across v
                                         for i below (max left 1)
                                         collect (let ((x x)) (lambda () (walk x))))))
                   (hash-table
                    (let ((keys (sort (loop for k being the hash-keys of v collect k)
                                      #'string< :key #'princ-to-string)))
                      (items "{" "}" (loop for k in keys
                                           for i below (max left 1)
                                           collect (let ((k k))
                                                     (lambda ()
                                                       (walk k)
                                                       (out ": ")
                                                       (walk (gethash k v))))))))
                   (t (out (prin1-to-string v))))))
        (walk value)))))

(defun float-text (x)
  "The text of the float X as the commands print it: nan, inf and -inf by
name, any other value as JSON writes it."
  (cond ((ext:float-nan-p x) "nan")
        ((ext:float-infinity-p x) (if (plusp x) "inf" "-inf"))
        (t (json-float-string x))))

(defun json-array-p (value)
  "True when the parsed JSON VALUE is an array: a vector that is not a
string (a string is a vector to Lisp, and would pass for an array of its
characters)."
  (and (vectorp value) (not (stringp value))))

(defun json-type-mismatch (value type)
  "NIL when the parsed JSON VALUE is of TYPE: string, hash-table (an
object), vector (an array, JSON-ARRAY-P) or boolean; else the words
\"expected T, found V\" for a message."
  (unless (case type
            (vector (json-array-p value))
            (boolean (member value '(t nil)))
            (t (typep value type)))
    (format nil "expected ~A, found ~A"
            (ecase type
              (string "a string") (hash-table "a JSON object") (vector "an array")
              (boolean "true or false"))
            (if (stringp value)
                (format nil "the string ~A" (json-brief value))
                (json-brief value)))))

(defun parse-json-octets (octets &key path key-order)
  "The JSON value in OCTETS (UTF-8 text, an (unsigned-byte 8) vector) as
PARSE-JSON answers it.  Invalid JSON, bytes that are not UTF-8 and nesting
deeper than libjansson's limit (2048) signal JSON-ERROR (PATH, when given,
names its file in the message)."
  (let ((order (and key-order (make-hash-table :test 'eq))))
    (multiple-value-bind (value status message offset) (%json-parse octets order)
      (when (and (null value) (eq status :json))
        (json-error path offset "invalid JSON ~A" message))
      (values value order))))

(defun parse-json (string &key path key-order)
  "The JSON value in STRING as Lisp data (objects as EQUAL hash tables,
arrays as simple vectors, true/false as T/NIL, null as :NULL).  Invalid JSON
signals JSON-ERROR (PATH, when given, names its file in the message).  With
KEY-ORDER true, a second value as READ-JSON-FILE's."
  (check-type string string)
  (parse-json-octets (%utf8-octets string) :path path :key-order key-order))

(defun read-json-file (path &key key-order)
  "The JSON value in the UTF-8 file PATH, as PARSE-JSON answers it.  A
missing file, one that is not a regular file (a directory, a FIFO) or
invalid JSON signals JSON-ERROR naming the file.  With KEY-ORDER true, a
second value: an EQ hash table from each object's table to the list of its
keys in the order the file writes them (the tables keep no order)."
  (let* ((name (absolute-namestring path))
         (octets (handler-case (read-file-octets name :what "a JSON file")
                   (file-io-error (c)
                     (error 'json-error :path name :message (rontolisp-error-message c))))))
    (parse-json-octets octets :path name :key-order key-order)))
