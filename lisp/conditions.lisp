;;;; conditions.lisp - every condition rontolisp signals, rooted at one class.
;;;;
;;;; Callers handle our errors by type: RONTOLISP-ERROR catches them all, and
;;;; each kind of failure has a subclass with slots naming what was expected
;;;; and what was found.  The C primitives signal these classes too.

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

(defun usage-error (fmt &rest args)
  (error 'usage-error :message (apply #'format nil fmt args)))

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

(loop for (reader doc) in
      '((gguf::gguf-error-path "The file a GGUF-ERROR is about.")
        (gguf::gguf-error-offset "The byte offset of the field at fault, or NIL.")
        (gguf::gguf-error-reason "A keyword naming the problem of a GGUF-ERROR."))
      do (setf (documentation reader 'function) doc))

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

(define-condition file-io-error (rontolisp-error)
  ((path :initarg :path :initform nil :reader file-io-error-path))
  (:documentation "A file that cannot be read or written: PATH names it,
the message says what was expected and what was found."))

(setf (documentation 'file-io-error-path 'function)
      "The file a FILE-IO-ERROR is about.")
