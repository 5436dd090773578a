;;;; edit.lisp - `rontolisp edit IN OUT': a GGUF file's metadata and tensor
;;;; names changed, as gguf-py's gguf_new_metadata does it.
;;;;
;;;; The output is IN's file object with its metadata and names changed,
;;;; written by GGUF:WRITE: tensor bytes go from IN's mapping to OUT
;;;; unchanged (any ggml type, nothing decoded), the write is atomic, and an
;;;; edit that changes nothing gives IN back byte for byte.  Kept keys stay
;;;; in place, new ones go at the end, as gguf_new_metadata orders them.

(in-package "COMMAND-LINE")

(defparameter *edit-scalar-types*
  '((:u8 0 255) (:i8 -128 127) (:u16 0 65535) (:i16 -32768 32767)
    (:u32 0 4294967295) (:i32 -2147483648 2147483647)
    (:u64 0 18446744073709551615) (:i64 -9223372036854775808 9223372036854775807)
    (:f32) (:f64) (:bool) (:string))
  "The GGUF value types `edit --set' writes, integers with their ranges.")

(defun edit-type (name)
  "The GGUF scalar type keyword named NAME (\"u32\", \"string\" ...), or NIL."
  (car (find name *edit-scalar-types* :key (lambda (e) (symbol-name (car e)))
                                      :test #'string-equal)))

(defun split-set-argument (arg)
  "KEY, VALUE and the TYPE keyword or NIL of a --set argument KEY=VALUE[:TYPE].
Only a known type name after the last colon is a type, so a value such as
a URL keeps its colons."
  (let ((sign (position #\= arg)))
    (unless (and sign (plusp sign))
      (usage-error "--set expects KEY=VALUE[:TYPE], found ~S" arg))
    (let* ((key (subseq arg 0 sign))
           (rest (subseq arg (1+ sign)))
           (colon (position #\: rest :from-end t))
           (type (and colon (edit-type (subseq rest (1+ colon))))))
      (values key (if type (subseq rest 0 colon) rest) type))))

(defun infer-edit-type (string)
  "The type gguf-py's GGUFValueType.get_type gives the Python literal
STRING: bool for true/false, i32 for an integer, f32 for a float, else
string.  A number is a number whatever its size (SCAN-NUMBER), so one out
of its type's range is refused, never kept as text."
  (multiple-value-bind (n float) (scan-number string)
    (cond ((member string '("true" "false") :test #'string-equal) :bool)
          ((null n) :string)
          (float :f32)
          (t :i32))))

(defun parse-edit-value (key string type)
  "STRING as a Lisp value of the GGUF scalar TYPE for KEY; signals
USAGE-ERROR when it does not spell one (NUMBER-ARGUMENT for the numbers:
the type's range in the message)."
  (case type
    (:string string)
    (:bool (cond ((member string '("true" "1") :test #'string-equal) t)
                 ((member string '("false" "0") :test #'string-equal) nil)
                 (t (usage-error "--set ~A: expected true, false, 1 or 0 for type bool, found ~S"
                                 key string))))
    (t (number-argument (format nil "--set ~A (~(~A~))" key type) string
                        (or (rest (assoc type *edit-scalar-types*)) type)))))

(defun edit-set-entry (f arg)
  "The (key type value) a --set ARG gives for the file F: the type given,
else the existing key's (as gguf_set_metadata keeps it), else the one
gguf-py infers from the literal (u32 for general.alignment, the only type
the format allows it).  Signals USAGE-ERROR for a general.alignment that
is not a u32 power of two, which no file may have."
  (multiple-value-bind (key string type) (split-set-argument arg)
    (let ((old (gguf:value-type f key))
          (alignment (string= key "general.alignment")))
      (when (and (null type) (consp old))
        (usage-error "--set ~A: the key holds an array; expected a scalar type given as ~
KEY=VALUE:TYPE, found none" key))
      (let* ((type (or type old (if alignment :u32 (infer-edit-type string))))
             (value (parse-edit-value key string type)))
        (when (and alignment (not (and (eq type :u32) (plusp value)
                                       (zerop (logand value (1- value))))))
          (usage-error "--set general.alignment: expected a power of two of type u32, ~
found ~S of type ~(~A~)" string type))
        (list key type value)))))

(defun read-template (path)
  "The text of the chat template file PATH."
  (%utf8-string (read-file-octets path :what "a chat template file")))

(defparameter *edit-report-max-string* 40
  "How many characters of a string value `edit' prints in its report of a
change; a longer one is cut, with its length after it.")

(defparameter *edit-report-max-array* 8
  "How many elements of an array value `edit' prints in its report.")

(defun change-type-text (type value)
  "The type of a reported value: u32, string, array<i32>[2] (the element
count after an array's type, as `inspect' prints it)."
  (format nil "~A~@[[~D]~]" (type-label type) (and (consp type) (length value))))

(defun change-value-text (type value)
  "VALUE of the GGUF TYPE as `edit' reports it, briefly whatever its size:
a short string whole and escaped, a long one as its escaped start, \"...\"
and its length in characters; an array as its first elements and how many
more (each string element cut the same way).  Only the part printed is ever
copied, so a template of many megabytes costs no memory here."
  (let ((text (value-text value type *edit-report-max-array* *edit-report-max-string*)))
    (if (and (eq type :string) (> (length value) *edit-report-max-string*))
        (format nil "~A (~D characters)" text (length value))
        text)))

(defun plan-edit (f sets removes renames template)
  "The metadata and tensor names of F after the edit, and the changes as
a list of lines to print.  Signals USAGE-ERROR for a key to remove or a
tensor to rename that F does not have, or a new tensor name it has, and
for general.alignment as a key to remove: every file GGUF:WRITE makes
from one that has the key has it again, so the report would say a change
that the file does not show."
  (let ((metadata (copy-list (gguf:metadata f)))
        (names (gguf:tensor-names f))
        (changes '()))
    (flet ((note (control &rest args) (push (apply #'format nil control args) changes)))
      (when template
        (setf sets (append (remove "tokenizer.chat_template" sets :key #'first :test #'string=)
                           (list (list "tokenizer.chat_template" :string template))))
        ;; gguf_new_metadata drops the named templates along with the default
        (dolist (entry metadata)
          (let ((key (first entry)))
            (when (and (> (length key) 24) (string= "tokenizer.chat_template." key :end2 24))
              (push key removes)))))
      ;; a key named twice (or by --remove and the template's) goes once
      (dolist (key (remove-duplicates removes :test #'string= :from-end t))
        (when (string= key "general.alignment")
          (usage-error "--remove: expected a key that can be removed, found general.alignment, ~
which every file written holds (--set general.alignment=32 gives the default layout)"))
        (unless (assoc key metadata :test #'string=)
          (usage-error "--remove: expected a key of the input, found none named ~S" key))
        (setf metadata (remove key metadata :key #'first :test #'string=))
        (note "remove ~A" (escape-control key)))
      (dolist (entry sets)
        (destructuring-bind (key type value) entry
          (let ((old (assoc key metadata :test #'string=)))
            (cond (old
                   (note "set ~A (~A~:[ -> ~A~;~*~]): ~A -> ~A" (escape-control key)
                         (change-type-text (second old) (third old))
                         (equal (second old) type) (change-type-text type value)
                         (change-value-text (second old) (third old))
                         (change-value-text type value))
                   (setf metadata (substitute entry old metadata)))
                  (t
                   (note "add ~A (~A) = ~A" (escape-control key) (change-type-text type value)
                         (change-value-text type value))
                   (setf metadata (append metadata (list entry))))))))
      (dolist (pair renames)
        (destructuring-bind (old new) pair
          (unless (member old names :test #'string=)
            (usage-error "--rename-tensor: expected a tensor of the input, found none named ~S" old))
          (when (member new names :test #'string=)
            (usage-error "--rename-tensor: expected a new name, found ~S already in the input" new))
          (setf names (substitute new old names :test #'string=))
          (note "rename tensor ~A -> ~A" (escape-control old) (escape-control new)))))
    (values metadata names (nreverse changes))))
