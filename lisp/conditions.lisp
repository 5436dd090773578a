;;;; conditions.lisp - DEFINE-ERROR, the root of every condition rontolisp
;;;; signals, the conditions shared by the modules, and the functions that
;;;; signal them.  GGUF's conditions are in gguf/conditions.lisp, MODEL's in
;;;; model/conditions.lisp.
;;;;
;;;; Callers handle our errors by type: RONTOLISP-ERROR catches them all, and
;;;; each kind of failure has a subclass with slots naming what was expected
;;;; and what was found.  The C primitives signal these classes too; Lisp
;;;; code signals them through the function of the same name that
;;;; DEFINE-ERROR defines beside each class.

(in-package "RONTOLISP")

;;; One form per condition.  Signalling follows cl-ppcre's
;;; signal-syntax-error: callers say where the error arose and what was
;;; expected and found, and every message comes out in one shape, on one
;;; line: "WHERE: " followed by CONTROL formatted with ARGS.  WHERE is the
;;; operation (a symbol such as 'quantize or 'vec:matvec, or a string) or,
;;; for the file conditions, the file's path; NIL leaves the prefix out.

(defmacro document-functions (&rest names-and-docs)
  "Give each function NAME its docstring DOC, NAMES-AND-DOCS being NAME DOC
pairs (names unevaluated): for a structure's accessors and predicate,
which DEFSTRUCT leaves without one.  ECL's SETF of DOCUMENTATION does not
document them (DOCUMENTATION still answers NIL), so this stores the
docstring where DOCUMENTATION looks."
  `(progn ,@(loop for (name doc) on names-and-docs by #'cddr
                  collect `(si::set-documentation ',name 'function ,doc))
          nil))

(defmacro define-error (name parents slots &body options)
  "Define the condition class NAME and, given a :SIGNAL option, the
function NAME that signals it.

PARENTS are its superclasses (RONTOLISP-ERROR when the list is empty).
Each of SLOTS is (SLOT DOCSTRING): the slot has the initarg :SLOT, the
initform NIL and the reader NAME-SLOT (in NAME's package), which DOCSTRING
documents.  OPTIONS are (:documentation STRING), the class's docstring,
any other option of DEFINE-CONDITION (such as :report), and

  (:signal LAMBDA-LIST DOCSTRING &key where message initargs)

which defines (NAME ,@LAMBDA-LIST CONTROL &rest ARGS), documented by
DOCSTRING, signalling NAME with each of its own slots named in LAMBDA-LIST
set from that argument, the plist INITARGS (forms evaluated in the
function) and the message MESSAGE, a form that may use CONTROL and ARGS.
MESSAGE defaults to (ERROR-MESSAGE WHERE CONTROL ARGS), the one-line
\"WHERE: \" + CONTROL message; WHERE defaults to the argument WHERE, else
PATH, else NIL (by name: the arguments may be of NAME's package)."
  (let* ((parents (or parents '(rontolisp-error)))
         (package (symbol-package name))
         (reader (lambda (slot)
                   (intern (format nil "~A-~A" (symbol-name name) (symbol-name slot)) package)))
         (signal (rest (assoc :signal options)))
         (class-options (remove :signal options :key #'first))
         ;; CONTROL and ARGS as MESSAGE, read in NAME's module, spells them
         (control (intern "CONTROL" package))
         (args (intern "ARGS" package)))
    `(progn
       (define-condition ,name ,parents
         ,(loop for (slot) in slots
                collect `(,slot :initarg ,(intern (symbol-name slot) "KEYWORD") :initform nil
                                :reader ,(funcall reader slot)))
         ,@class-options)
       ,@(loop for (slot doc) in slots
               collect `(setf (documentation ',(funcall reader slot) 'function) ,doc))
       ,@(when signal
           (destructuring-bind (lambda-list doc &key (where (or (find "WHERE" lambda-list
                                                                     :test #'string=)
                                                               (find "PATH" lambda-list
                                                                     :test #'string=)))
                                                  (message `(error-message ,where ,control ,args))
                                                  initargs)
               signal
             `((defun ,name (,@lambda-list ,control &rest ,args)
                 ,doc
                 (error ',name
                        ,@(loop for (slot) in slots
                                when (member slot lambda-list)
                                  append (list (intern (symbol-name slot) "KEYWORD") slot))
                        ,@initargs
                        :message ,message)))))
       ',name)))

(define-error rontolisp-error (error)
    ((message "The message of a RONTOLISP-ERROR: what was expected and what was found."))
  (:documentation "The root of every error rontolisp signals.  Its message
says what was expected and what was found.")
  (:report (lambda (c s)
             (write-string (or (rontolisp-error-message c)
                               "unspecified rontolisp error")
                           s)))
  (:signal (where) "Signal a plain RONTOLISP-ERROR (a failure no subclass describes)."))

(define-error usage-error ()
    ()
  (:documentation "The command line was not understood.  The command-line
front end prints the usage string and exits with status 2.")
  (:signal () "Signal USAGE-ERROR with CONTROL formatted with ARGS; the command front
end names the command before it and prints the command's usage after it."))

(define-error read-nesting-error (rontolisp-error reader-error)
    ((limit "The nesting depth a READ-NESTING-ERROR's input went past.")
     (position "The character position where a READ-NESTING-ERROR's input went past its limit, or NIL."))
  (:documentation "Lisp source (a script, a loaded file, --eval, the REPL's
input) whose forms nest deeper than LIMIT, which the reader refuses before
its recursion exhausts the stack; POSITION is the character of the stream
where the limit was passed, or NIL.")
  (:signal (stream limit position) "Signal READ-NESTING-ERROR about STREAM, whose forms nest deeper than
LIMIT at the character POSITION (or NIL)."
   :initargs (:stream stream)))

;;; Arrays and quantization.

(define-error shape-error ()
    ((expected "What shape a SHAPE-ERROR's operation wanted.")
     (found "The dimensions a SHAPE-ERROR's operation was given."))
  (:documentation "An array of the wrong rank or dimensions: EXPECTED and
FOUND describe what was wanted and what was given.")
  (:signal (where expected found) "Signal SHAPE-ERROR: EXPECTED and FOUND describe the wanted and the given
dimensions (its slots), the message says the same in words."))

(define-error element-type-error ()
    ((found "The type of the object an ELEMENT-TYPE-ERROR refused."))
  (:documentation "An array (or other object) whose element type the
operation cannot take; FOUND is the object's type.")
  (:signal (where object) "Signal ELEMENT-TYPE-ERROR for OBJECT (its type goes in the FOUND slot)."
   :initargs (:found (type-of object))))

(define-error unknown-format-error ()
    ((format "The format an UNKNOWN-FORMAT-ERROR did not know."))
  (:documentation "A quantization format rontolisp does not know.")
  (:signal (where format) "Signal UNKNOWN-FORMAT-ERROR for the format FORMAT."))

(define-error quantize-error ()
    ()
  (:documentation "Values that cannot be quantized."))

(define-error non-finite-error (quantize-error)
    ((index "The subscripts of the first NaN or infinity."))
  (:documentation "A NaN or infinity in the input; INDEX is the list of
subscripts of the first one.")
  (:signal (where index) "Signal NON-FINITE-ERROR; INDEX is the list of subscripts of the first
NaN or infinity."))

(define-error scale-overflow-error (quantize-error)
    ((row "The row of the block whose scale overflows binary16.")
     (block "The block (counted within its row) whose scale overflows."))
  (:documentation "A block whose scale d = absmax/127 does not fit in
binary16 (absmax of about 8.3e6 or more), as llama-quantize refuses it; ROW
and BLOCK (counted within the row) locate it.")
  (:signal (where row block) "Signal SCALE-OVERFLOW-ERROR for the block BLOCK of row ROW."))

(define-error index-error ()
    ()
  (:documentation "A subscript out of range, or the wrong number of them.")
  (:signal (where) "Signal INDEX-ERROR: a subscript out of range or the wrong number of them."))

(define-error out-of-range-error ()
    ((value "The number an OUT-OF-RANGE-ERROR refused."))
  (:documentation "A number no float format at hand can hold (an integer or
ratio beyond double-float range, a double beyond single-float range where
that would silently become infinity); VALUE is the number given.")
  (:signal (where value) "Signal OUT-OF-RANGE-ERROR for the number VALUE (its slot)."))

(define-error immutable-error ()
    ()
  (:documentation "An attempt to write an element of a quantized matrix: an
element has no storage of its own (writing one would re-quantize its
block).")
  (:signal (where) "Signal IMMUTABLE-ERROR: a write to an element of a quantized matrix."))

(define-error quantized-matrix-error ()
    ()
  (:documentation "An operation that wants a packed float array was given a
quantized matrix; rontolisp:dequantize it first.")
  (:signal (where) "Signal QUANTIZED-MATRIX-ERROR: a quantized matrix where a packed float
array is wanted."))

;;; Files.

(define-error file-io-error ()
    ((path "The file a FILE-IO-ERROR is about."))
  (:documentation "A file that cannot be read or written: PATH names it,
the message says what was expected and what was found.")
  (:signal (path) "Signal FILE-IO-ERROR about the file PATH."))

(define-error file-name-error (file-io-error file-error)
    ()
  (:documentation "ECL's own FILE-ERROR about a file named beyond ASCII,
told with the name as the user wrote it (base/ecl-filenames.lisp): PATH
and FILE-ERROR-PATHNAME are that name, the message is ECL's with that name
in place of its bytes."))

;;; Regular expressions (regex.lisp).

(define-error regex-error ()
    ((pattern "The regular expression a REGEX-ERROR is about.")
     (position "The position (from 0) of the character at fault in a REGEX-ERROR's pattern."))
  (:documentation "A malformed regular expression: PATTERN, and the
POSITION (from 0) of the character at fault.")
  (:signal (pattern position) "Signal REGEX-ERROR about PATTERN at POSITION."
   :message (format nil "regular expression ~S at character ~D: ~?"
                    pattern (1+ position) control args)))

;;; Conversion tools: quantize-tool.lisp, safetensors.lisp, convert.lisp.

(define-error tensor-data-error ()
    ((path "The file a TENSOR-DATA-ERROR is about.")
     (tensor "The name of the tensor a TENSOR-DATA-ERROR is about."))
  (:documentation "A tensor whose values a conversion refuses (a NaN or
infinity, a Q8_0 scale or an F16 value that overflows binary16, a type it
cannot convert): PATH names the file, TENSOR the tensor.")
  (:signal (path tensor) "Signal TENSOR-DATA-ERROR about the tensor named TENSOR of the file PATH;
the message reads \"PATH: tensor \"TENSOR\" \" + CONTROL."
   :message (error-message path "tensor ~S ~?" (list tensor control args))))

(define-error safetensors-error ()
    ((path "The file a SAFETENSORS-ERROR is about.")
     (offset "The byte offset of the field at fault, or NIL.")
     (reason "A keyword naming the problem of a SAFETENSORS-ERROR."))
  (:documentation "A safetensors file that cannot be read: PATH names the
file, OFFSET the byte at fault (or NIL), REASON a keyword naming the
problem (:header-length, :offsets, :overlap, ...).")
  (:signal (path reason offset) "Signal SAFETENSORS-ERROR about the file PATH: REASON a keyword, OFFSET
the byte at fault or NIL."))

(define-error json-error ()
    ((path "The file a JSON-ERROR is about, or NIL.")
     (offset "The byte position of a JSON-ERROR's problem, or NIL."))
  (:documentation "Text that is not valid JSON: PATH names the file (or
NIL for a string), OFFSET the byte position of the problem.")
  (:signal (path offset) "Signal JSON-ERROR about the file PATH (NIL for a string) at byte OFFSET
(or NIL)."))

(define-error convert-error ()
    ((path "The file a CONVERT-ERROR is about."))
  (:documentation "A model directory the converter cannot use: a missing
file, a configuration key of the wrong type, a tensor of the wrong shape;
PATH names the file at fault.")
  (:signal (path) "Signal CONVERT-ERROR about the file PATH of a model directory."))

;;; Templates (template.lisp).

(define-error template-error ()
    ((offset "The character offset (from 0) in the template of a TEMPLATE-ERROR's construct."))
  (:documentation "A chat template that cannot be compiled or rendered: a
construct outside the supported Jinja subset, bad syntax, or an operation
Jinja2 itself refuses at render time (an attribute of an undefined value,
the length of a number).  OFFSET is the character (from 0) of the template
where the construct at fault starts; see doc/template.md.")
  (:signal (offset) "Signal TEMPLATE-ERROR about the construct at character OFFSET of the
template; the message reads \"template offset OFFSET: \" + CONTROL."
   :message (error-message nil "template offset ~D: ~?" (list offset control args))))

;;; Threads (threads.lisp).

(define-error thread-limit-error ()
    ((limit "The limit on live Lisp threads in force when a THREAD-LIMIT-ERROR was signalled."))
  (:documentation "A Lisp thread that was not started: LIMIT (the value of
*THREAD-LIMIT*) threads were alive already, or the system refused one.")
  (:signal (limit) "Signal THREAD-LIMIT-ERROR: a thread not started with LIMIT threads allowed."))

;;; The HTTP server (jobs/serve.lisp).

(define-error request-error ()
    ((status "The HTTP status a REQUEST-ERROR answers (400, 404, 405, 501, ...).")
     (type "llama-server's error type of a REQUEST-ERROR (\"invalid_request_error\", ...)."))
  (:documentation "A request `rontolisp serve' refuses: STATUS is the HTTP
status of the answer, TYPE the error type of its JSON body
{\"error\": {\"code\", \"message\", \"type\"}}, as llama-server names them.")
  (:signal (status type) "Signal REQUEST-ERROR answering STATUS with the error TYPE and the
message CONTROL formatted with ARGS."
   :message (error-message nil control args)))

;;; Messages.
(defun operation-name (where)
  "WHERE as the start of an error message: a string as it is, a symbol of
RONTOLISP or CL by its name, any other symbol with its package's prefix
(vec:matvec), a list such as (setf aref) as printed; all in lower case."
  (typecase where
    (string where)
    (symbol (let ((p (symbol-package where)))
              (if (member p (list (find-package "RONTOLISP") (find-package "CL") nil))
                  (string-downcase (symbol-name where))
                  (format nil "~(~A:~A~)" (package-name p) (symbol-name where)))))
    (t (let ((*print-pretty* nil)) (string-downcase (princ-to-string where))))))

(defparameter *message-limit* 300
  "The most characters an error message has: a longer one keeps its start
(where the error arose) and its end (what was found), with the middle cut.")

(defstruct (object-summary (:constructor make-object-summary (text)))
  "Stands in a message for an object too big to print (a 64x64 array would
be 25 KB on one line); it prints as TEXT, e.g. #<(simple-array
single-float (64 64))>."
  text)

(defmethod print-object ((s object-summary) stream)
  (write-string (object-summary-text s) stream))

(defun summarize-argument (x)
  "X as it should appear in a message: an array other than a string with
more than 16 elements as the summary of its type (#<(simple-array
single-float (64 64))>), anything else as itself."
  (if (and (arrayp x) (not (stringp x)) (> (array-total-size x) 16))
      (make-object-summary (let ((*print-pretty* nil))
                             (format nil "#<~(~S~)>" (type-of x))))
      x))

(defmacro with-message-printing (() &body body)
  "Run BODY with the printer set for messages: no pretty printing (no line
breaks), long lists and deep nesting cut."
  `(let ((*print-pretty* nil) (*print-length* 16) (*print-level* 4) (*print-lines* nil)
         (*print-circle* nil) (*print-readably* nil))
     ,@body))

(defun one-line (text)
  "TEXT on one line, at most *MESSAGE-LIMIT* characters: line breaks and the
spaces around them become one space, and a longer text loses its middle."
  (let* ((words (with-output-to-string (s)
                  (let ((break nil) (last nil))
                    (loop for c across (string-trim '(#\Space #\Tab #\Newline #\Return) text)
                          do (cond ((member c '(#\Newline #\Return)) (setf break t))
                                   ((and break (char= c #\Space)))
                                   (t (when (and break (not (eql last #\Space)))
                                        (write-char #\Space s))
                                      (setf break nil last c)
                                      (write-char c s)))))))
         (n (length words))
         (cut " ... "))
    (if (<= n *message-limit*)
        words
        (let ((tail (floor *message-limit* 4)))
          (concatenate 'string (subseq words 0 (- *message-limit* tail (length cut)))
                       cut (subseq words (- n tail)))))))

(defun error-message (where control args)
  "The one-line message \"WHERE: \" + CONTROL formatted with ARGS: big
arrays among ARGS print as a summary of their type, and the whole is one
line of at most *MESSAGE-LIMIT* characters (ONE-LINE)."
  (with-message-printing ()
    (one-line (format nil "~@[~A: ~]~?" (and where (operation-name where)) control
                      (mapcar #'summarize-argument args)))))
