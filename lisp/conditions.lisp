;;;; conditions.lisp - every condition rontolisp signals, rooted at one class,
;;;; and the functions that signal them.
;;;;
;;;; Callers handle our errors by type: RONTOLISP-ERROR catches them all, and
;;;; each kind of failure has a subclass with slots naming what was expected
;;;; and what was found.  The C primitives signal these classes too; Lisp
;;;; code signals them through the helpers at the end of this file.

(in-package "RONTOLISP")

(define-condition rontolisp-error (error)
  ((message :initarg :message :initform nil :reader rontolisp-error-message))
  (:documentation "The root of every error rontolisp signals.  Its message
says what was expected and what was found.")
  (:report (lambda (c s)
             (write-string (or (rontolisp-error-message c)
                               "unspecified rontolisp error")
                           s))))

(setf (documentation 'rontolisp-error-message 'function)
      "The message of a RONTOLISP-ERROR: what was expected and what was found.")

(define-condition usage-error (rontolisp-error)
  ()
  (:documentation "The command line was not understood.  The command-line
front end prints the usage string and exits with status 2."))

(define-condition read-nesting-error (rontolisp-error reader-error)
  ((limit :initarg :limit :reader read-nesting-error-limit)
   (position :initarg :position :initform nil :reader read-nesting-error-position))
  (:documentation "Lisp source (a script, a loaded file, --eval, the REPL's
input) whose forms nest deeper than LIMIT, which the reader refuses before
its recursion exhausts the stack; POSITION is the character of the stream
where the limit was passed, or NIL."))

(setf (documentation 'read-nesting-error-limit 'function)
      "The nesting depth a READ-NESTING-ERROR's input went past."
      (documentation 'read-nesting-error-position 'function)
      "The character position where a READ-NESTING-ERROR's input went past its limit, or NIL.")

;;; Arrays and quantization.

(define-condition shape-error (rontolisp-error)
  ((expected :initarg :expected :initform nil :reader shape-error-expected)
   (found :initarg :found :initform nil :reader shape-error-found))
  (:documentation "An array of the wrong rank or dimensions: EXPECTED and
FOUND describe what was wanted and what was given."))

(define-condition element-type-error (rontolisp-error)
  ((found :initarg :found :initform nil :reader element-type-error-found))
  (:documentation "An array (or other object) whose element type the
operation cannot take; FOUND is the object's type."))

(define-condition unknown-format-error (rontolisp-error)
  ((format :initarg :format :initform nil :reader unknown-format-error-format))
  (:documentation "A quantization format rontolisp does not know."))

(define-condition quantize-error (rontolisp-error)
  ()
  (:documentation "Values that cannot be quantized."))

(define-condition non-finite-error (quantize-error)
  ((index :initarg :index :initform nil :reader non-finite-error-index))
  (:documentation "A NaN or infinity in the input; INDEX is the list of
subscripts of the first one."))

(define-condition scale-overflow-error (quantize-error)
  ((row :initarg :row :initform nil :reader scale-overflow-error-row)
   (block :initarg :block :initform nil :reader scale-overflow-error-block))
  (:documentation "A block whose scale d = absmax/127 does not fit in
binary16 (absmax of about 8.3e6 or more), as llama-quantize refuses it; ROW
and BLOCK (counted within the row) locate it."))

(define-condition index-error (rontolisp-error)
  ()
  (:documentation "A subscript out of range, or the wrong number of them."))

(define-condition out-of-range-error (rontolisp-error)
  ((value :initarg :value :initform nil :reader out-of-range-error-value))
  (:documentation "A number no float format at hand can hold (an integer or
ratio beyond double-float range, a double beyond single-float range where
that would silently become infinity); VALUE is the number given."))

(setf (documentation 'out-of-range-error-value 'function)
      "The number an OUT-OF-RANGE-ERROR refused.")

(define-condition immutable-error (rontolisp-error)
  ()
  (:documentation "An attempt to write an element of a quantized matrix: an
element has no storage of its own (writing one would re-quantize its
block)."))

(define-condition quantized-matrix-error (rontolisp-error)
  ()
  (:documentation "An operation that wants a packed float array was given a
quantized matrix; rontolisp:dequantize it first."))

;;; GGUF files.

(define-condition gguf::file-closed-error (rontolisp-error)
  ()
  (:documentation "A tensor or file object used after gguf:close released
its file."))

;;; Slot readers, documented for the exported API.
(loop for (reader doc) in
      '((shape-error-expected "What shape a SHAPE-ERROR's operation wanted.")
        (shape-error-found "The dimensions a SHAPE-ERROR's operation was given.")
        (element-type-error-found "The type of the object an ELEMENT-TYPE-ERROR refused.")
        (unknown-format-error-format "The format an UNKNOWN-FORMAT-ERROR did not know.")
        (non-finite-error-index "The subscripts of the first NaN or infinity.")
        (scale-overflow-error-row "The row of the block whose scale overflows binary16.")
        (scale-overflow-error-block "The block (counted within its row) whose scale overflows."))
      do (setf (documentation reader 'function) doc))

(define-condition gguf::gguf-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader gguf::gguf-error-path)
   (offset :initarg :offset :initform nil :reader gguf::gguf-error-offset)
   (reason :initarg :reason :initform nil :reader gguf::gguf-error-reason))
  (:documentation "A GGUF file that cannot be read or written: PATH names
the file, OFFSET the byte at fault (or NIL), REASON a keyword naming the
problem (:truncated, :misaligned-tensor, ...); the message says what was
expected and what was found."))

;;; Shard sets (lisp/shards.lisp): REASON is :missing-shard, :foreign-shard
;;; or :shard-count.
(define-condition gguf::shard-error (gguf::gguf-error) ()
  (:documentation "A set of GGUF shards (PREFIX-00001-of-0000N.gguf, as
llama.cpp's gguf-split writes them) that does not hold together; PATH names
the shard at fault."))

(define-condition gguf::missing-shard-error (gguf::shard-error) ()
  (:documentation "A shard of a set is missing: PATH names the file that
should be there."))

(define-condition gguf::foreign-shard-error (gguf::shard-error) ()
  (:documentation "A file in a shard's place that is not that shard of this
set: its split.no is not its place, or it is not a shard at all."))

(define-condition gguf::shard-count-error (gguf::shard-error) ()
  (:documentation "The counts of a shard set disagree: split.count or
split.tensors.count differ between shards, or the tensors found are not
as many as split.tensors.count says."))

(loop for (reader doc) in
      '((gguf::gguf-error-path "The file a GGUF-ERROR is about.")
        (gguf::gguf-error-offset "The byte offset of the field at fault, or NIL.")
        (gguf::gguf-error-reason "A keyword naming the problem of a GGUF-ERROR."))
      do (setf (documentation reader 'function) doc))

;;; Regular expressions (regex.lisp).

(define-condition regex-error (rontolisp-error)
  ((pattern :initarg :pattern :reader regex-error-pattern)
   (position :initarg :position :reader regex-error-position))
  (:documentation "A malformed regular expression: PATTERN, and the
POSITION (from 0) of the character at fault."))

(defun regex-error (pattern position control &rest args)
  "Signal REGEX-ERROR about PATTERN at POSITION."
  (error 'regex-error :pattern pattern :position position
                      :message (format nil "regular expression ~S at character ~D: ~?"
                                       pattern (1+ position) control args)))

;;; Conversion tools: quantize-tool.lisp, safetensors.lisp, convert.lisp.

(define-condition tensor-data-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader tensor-data-error-path)
   (tensor :initarg :tensor :initform nil :reader tensor-data-error-tensor))
  (:documentation "A tensor whose values a conversion refuses (a NaN or
infinity, a Q8_0 scale or an F16 value that overflows binary16, a type it
cannot convert): PATH names the file, TENSOR the tensor."))

(define-condition safetensors-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader safetensors-error-path)
   (offset :initarg :offset :initform nil :reader safetensors-error-offset)
   (reason :initarg :reason :initform nil :reader safetensors-error-reason))
  (:documentation "A safetensors file that cannot be read: PATH names the
file, OFFSET the byte at fault (or NIL), REASON a keyword naming the
problem (:header-length, :offsets, :overlap, ...)."))

(define-condition json-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader json-error-path)
   (offset :initarg :offset :initform nil :reader json-error-offset))
  (:documentation "Text that is not valid JSON: PATH names the file (or
NIL for a string), OFFSET the byte position of the problem."))

(define-condition convert-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader convert-error-path))
  (:documentation "A model directory the converter cannot use: a missing
file, a configuration key of the wrong type, a tensor of the wrong shape;
PATH names the file at fault."))

(loop for (reader doc) in
      '((tensor-data-error-path "The file a TENSOR-DATA-ERROR is about.")
        (tensor-data-error-tensor "The name of the tensor a TENSOR-DATA-ERROR is about.")
        (safetensors-error-path "The file a SAFETENSORS-ERROR is about.")
        (safetensors-error-offset "The byte offset of the field at fault, or NIL.")
        (safetensors-error-reason "A keyword naming the problem of a SAFETENSORS-ERROR.")
        (json-error-path "The file a JSON-ERROR is about, or NIL.")
        (json-error-offset "The byte position of a JSON-ERROR's problem, or NIL.")
        (convert-error-path "The file a CONVERT-ERROR is about."))
      do (setf (documentation reader 'function) doc))

;;; Signalling.  One function per condition, named after it, as cl-ppcre's
;;; signal-syntax-error: callers say where the error arose and what was
;;; expected and found, and every message comes out in one shape, on one
;;; line: "WHERE: " followed by CONTROL formatted with ARGS.  WHERE is the
;;; operation (a symbol such as 'quantize or 'vec:matvec, or a string) or,
;;; for the file conditions, the file's path; NIL leaves the prefix out.

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

(defun rontolisp-error (where control &rest args)
  "Signal a plain RONTOLISP-ERROR (a failure no subclass describes)."
  (error 'rontolisp-error :message (error-message where control args)))

(defun usage-error (control &rest args)
  "Signal USAGE-ERROR with CONTROL formatted with ARGS; the command front
end names the command before it and prints the command's usage after it."
  (error 'usage-error :message (error-message nil control args)))

(defun shape-error (where expected found control &rest args)
  "Signal SHAPE-ERROR: EXPECTED and FOUND describe the wanted and the given
dimensions (its slots), the message says the same in words."
  (error 'shape-error :expected expected :found found
                      :message (error-message where control args)))

(defun element-type-error (where object control &rest args)
  "Signal ELEMENT-TYPE-ERROR for OBJECT (its type goes in the FOUND slot)."
  (error 'element-type-error :found (type-of object)
                             :message (error-message where control args)))

(defun unknown-format-error (where format control &rest args)
  "Signal UNKNOWN-FORMAT-ERROR for the format FORMAT."
  (error 'unknown-format-error :format format :message (error-message where control args)))

(defun non-finite-error (where index control &rest args)
  "Signal NON-FINITE-ERROR; INDEX is the list of subscripts of the first
NaN or infinity."
  (error 'non-finite-error :index index :message (error-message where control args)))

(defun scale-overflow-error (where row block control &rest args)
  "Signal SCALE-OVERFLOW-ERROR for the block BLOCK of row ROW."
  (error 'scale-overflow-error :row row :block block
                               :message (error-message where control args)))

(defun index-error (where control &rest args)
  "Signal INDEX-ERROR: a subscript out of range or the wrong number of them."
  (error 'index-error :message (error-message where control args)))

(defun out-of-range-error (where value control &rest args)
  "Signal OUT-OF-RANGE-ERROR for the number VALUE (its slot)."
  (error 'out-of-range-error :value value :message (error-message where control args)))

(defun immutable-error (where control &rest args)
  "Signal IMMUTABLE-ERROR: a write to an element of a quantized matrix."
  (error 'immutable-error :message (error-message where control args)))

(defun quantized-matrix-error (where control &rest args)
  "Signal QUANTIZED-MATRIX-ERROR: a quantized matrix where a packed float
array is wanted."
  (error 'quantized-matrix-error :message (error-message where control args)))

(defun gguf::file-closed-error (path control &rest args)
  "Signal GGUF:FILE-CLOSED-ERROR about the file at PATH."
  (error 'gguf::file-closed-error :message (error-message path control args)))

(defun gguf::gguf-error (path reason offset control &rest args)
  "Signal GGUF:GGUF-ERROR about the file PATH (or NIL for a file object
not yet written): REASON a keyword, OFFSET the byte at fault or NIL."
  (error 'gguf::gguf-error :path path :reason reason :offset offset
                           :message (error-message path control args)))

(defun gguf::shard-error (class path offset control &rest args)
  "Signal the SHARD-ERROR subclass CLASS about the shard PATH."
  (error class :path path
               :reason (ecase class
                         (gguf::missing-shard-error :missing-shard)
                         (gguf::foreign-shard-error :foreign-shard)
                         (gguf::shard-count-error :shard-count))
               :offset offset
               :message (error-message path control args)))

(defun tensor-data-error (path tensor control &rest args)
  "Signal TENSOR-DATA-ERROR about the tensor named TENSOR of the file PATH;
the message reads \"PATH: tensor \"TENSOR\" \" + CONTROL."
  (error 'tensor-data-error
         :path path :tensor tensor
         :message (error-message path "tensor ~S ~?" (list tensor control args))))

(defun safetensors-error (path reason offset control &rest args)
  "Signal SAFETENSORS-ERROR about the file PATH: REASON a keyword, OFFSET
the byte at fault or NIL."
  (error 'safetensors-error :path path :reason reason :offset offset
                            :message (error-message path control args)))

(defun json-error (path offset control &rest args)
  "Signal JSON-ERROR about the file PATH (NIL for a string) at byte OFFSET
(or NIL)."
  (error 'json-error :path path :offset offset :message (error-message path control args)))

(defun convert-error (path control &rest args)
  "Signal CONVERT-ERROR about the file PATH of a model directory."
  (error 'convert-error :path path :message (error-message path control args)))

(define-condition file-io-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader file-io-error-path))
  (:documentation "A file that cannot be read or written: PATH names it,
the message says what was expected and what was found."))

(setf (documentation 'file-io-error-path 'function)
      "The file a FILE-IO-ERROR is about.")

(defun file-io-error (path control &rest args)
  "Signal FILE-IO-ERROR about the file PATH."
  (error 'file-io-error :path path :message (error-message path control args)))

;;; Templates (template.lisp).

(define-condition template-error (rontolisp-error)
  ((offset :initarg :offset :initform nil :reader template-error-offset))
  (:documentation "A chat template that cannot be compiled or rendered: a
construct outside the supported Jinja subset, bad syntax, or an operation
Jinja2 itself refuses at render time (an attribute of an undefined value,
the length of a number).  OFFSET is the character (from 0) of the template
where the construct at fault starts; see doc/template.md."))

(setf (documentation 'template-error-offset 'function)
      "The character offset (from 0) in the template of a TEMPLATE-ERROR's construct.")

(defun template-error (offset control &rest args)
  "Signal TEMPLATE-ERROR about the construct at character OFFSET of the
template; the message reads \"template offset OFFSET: \" + CONTROL."
  (error 'template-error :offset offset
                         :message (error-message nil "template offset ~D: ~?"
                                                 (list offset control args))))

;;; Threads (threads.lisp).

(define-condition thread-limit-error (rontolisp-error)
  ((limit :initarg :limit :initform nil :reader thread-limit-error-limit))
  (:documentation "A Lisp thread that was not started: LIMIT (the value of
*THREAD-LIMIT*) threads were alive already, or the system refused one."))

(setf (documentation 'thread-limit-error-limit 'function)
      "The limit on live Lisp threads in force when a THREAD-LIMIT-ERROR was signalled.")

;;; The encoder (model.lisp).

(define-condition model::model-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader model::model-error-path))
  (:documentation "A GGUF file that is not a modern-bert encoder MODEL:LOAD
can run: a missing tensor or key, a key of the wrong type, a tensor of the
wrong shape; PATH names the file."))

(setf (documentation 'model::model-error-path 'function)
      "The file a MODEL:MODEL-ERROR is about.")

(defun model::model-error (path control &rest args)
  "Signal MODEL:MODEL-ERROR about the GGUF file PATH."
  (error 'model::model-error :path path :message (error-message path control args)))

;;; Questions for the decision head (decision.lisp).

(define-condition model::question-error (rontolisp-error)
  ()
  (:documentation "A question the decision head cannot answer: not a
question object, a missing field, an unknown type, no options, a marker
count other than the option count, more tokens than decision.max_tokens, an
option's marker beyond the head's window."))

;;; Tokenizers (tokenizer.lisp).

(define-condition model::tokenizer-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader model::tokenizer-error-path))
  (:documentation "A tokenizer that cannot be built or used: a GGUF file or
tokenizer.json of another kind (SentencePiece, WordPiece, another
pre-tokenizer), a malformed or oversized one, a text that is not UTF-8, an
id outside the vocabulary.  PATH names the tokenizer's file (or NIL)."))

(setf (documentation 'model::tokenizer-error-path 'function)
      "The file a MODEL:TOKENIZER-ERROR is about, or NIL.")

(defun model::tokenizer-error (path control &rest args)
  "Signal MODEL:TOKENIZER-ERROR about the tokenizer file PATH (NIL leaves
the file out of the message)."
  (error 'model::tokenizer-error :path path :message (error-message path control args)))
