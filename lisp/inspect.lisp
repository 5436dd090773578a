;;;; inspect.lisp - `rontolisp inspect FILE [--max-array N] [--json]'.
;;;;
;;;; The text form lists the header, every metadata key with its type and
;;;; value, every tensor with its ggml dims, type and size, and a total; the
;;;; JSON form (SPEC 6) carries the same facts for programs.  Control
;;;; characters in keys and strings are escaped in both.

(in-package "RONTOLISP")

(defparameter *default-text-max-array* 16
  "How many elements of an array value the text form shows by default.")

(defun escape-control (string)
  "STRING with double quote, backslash and control characters escaped as in
JSON (\\n, \\t, \\u001b ...)."
  (with-output-to-string (s) (write-escaped string s)))

(defun type-label (type)
  "The text form of a GGUF value type: u32, string, array<string>,
array<array<f32>>, array<array> (no elements to say more), and for an array
whose inner arrays differ their types: array<array<u32>|array<string>>."
  (if (consp type)
      (format nil "array<~{~A~^|~}>"
              (remove-duplicates (mapcar #'type-label (rest type)) :test #'string= :from-end t))
      (string-downcase (symbol-name type))))

(defun float-text (x)
  (cond ((ext:float-nan-p x) "nan")
        ((ext:float-infinity-p x) (if (plusp x) "inf" "-inf"))
        (t (json-float-string x))))

(defun value-text (value type max-array)
  (let ((base (if (consp type) (first type) type)))
    (case base
      (:string (format nil "\"~A\"" (escape-control value)))
      (:bool (if value "true" "false"))
      ((:f32 :f64) (float-text value))
      (:array
       (let* ((n (length value))
              (shown (if max-array (min n max-array) n)))
         (format nil "[~{~A~^, ~}~:[~;, ... (~D more)~]]"
                 (gguf::map-elements (lambda (v et) (value-text v et max-array))
                                     value type shown)
                 (< shown n) (- n shown))))
      (t (format nil "~D" value)))))

(defun tensor-elements (info)
  (reduce #'* (gguf:tensor-info-dims info)))

(defun dims-text (dims)
  "DIMS as [a, b, c]."
  (with-output-to-string (s)
    (write-char #\[ s)
    (loop for (d . more) on dims
          do (princ d s)
             (when more (write-string ", " s)))
    (write-char #\] s)))

(defun write-padded (string width stream)
  "STRING then spaces to WIDTH columns and one more, as FORMAT's ~WIDTHA and
a space."
  (write-string string stream)
  (loop repeat (- width (length string)) do (write-char #\Space stream))
  (write-char #\Space stream))

(defun print-inspection (f stream max-array)
  (format stream "~A: GGUF v~D, ~D bytes, alignment ~D~%~%"
          (gguf:path f) (gguf:version f) (gguf:file-size f) (gguf:alignment f))
  (format stream "~D metadata key~:P:~%" (length (gguf:metadata f)))
  (loop for (key type value) in (gguf:metadata f)
        do (format stream "  ~A (~A~@[[~D]~]) = ~A~%"
                   (escape-control key) (type-label type)
                   (and (consp type) (length value))
                   (value-text value type max-array)))
  (format stream "~D tensor~:P (ggml dims, ne[0] = innermost):~%" (length (gguf:tensor-infos f)))
  (let ((params 0) (bytes 0))
    (dolist (info (gguf:tensor-infos f))
      (incf params (tensor-elements info))
      (incf bytes (gguf:tensor-info-bytes info))
      ;; Columns written by hand: ECL's FORMAT parses its control string on
      ;; every call, most of the time of a 100k-tensor listing.
      (write-string "  " stream)
      (write-padded (escape-control (gguf:tensor-info-name info)) 40 stream)
      (write-padded (dims-text (gguf:tensor-info-dims info)) 22 stream)
      (write-padded (gguf:tensor-info-type info) 10 stream)
      (let ((n (princ-to-string (gguf:tensor-info-bytes info))))
        (loop repeat (- 6 (length n)) do (write-char #\Space stream))
        (write-string n stream))
      (write-line " bytes" stream))
    (format stream "total: ~D parameters, ~D bytes of tensor data~%" params bytes)))

(defun json-value (value type max-array)
  (let ((base (if (consp type) (first type) type)))
    (case base
      (:bool (if value :true :false))
      (:array
       (let ((n (if max-array (min max-array (length value)) (length value))))
         (coerce (gguf::map-elements (lambda (v et) (json-value v et max-array)) value type n)
                 'vector)))
      (t value))))

(defun element-type-label (type)
  (let ((elem (second type)))
    (if (consp elem) "array" (string-downcase (symbol-name elem)))))

(defun inspection-json (f max-array)
  (list :object
        (cons "file" (gguf:path f))
        (cons "size" (gguf:file-size f))
        (cons "version" (gguf:version f))
        (cons "alignment" (gguf:alignment f))
        (cons "data_offset" (gguf:data-offset f))
        (cons "metadata"
              (map 'vector
                   (lambda (entry)
                     (destructuring-bind (key type value) entry
                       (if (consp type)
                           (list :object (cons "key" key) (cons "type" "array")
                                 (cons "element_type" (element-type-label type))
                                 (cons "length" (length value))
                                 (cons "value" (json-value value type max-array)))
                           (list :object (cons "key" key)
                                 (cons "type" (string-downcase (symbol-name type)))
                                 (cons "value" (json-value value type max-array))))))
                   (gguf:metadata f)))
        (cons "tensors"
              (map 'vector
                   (lambda (info)
                     (list :object
                           (cons "name" (gguf:tensor-info-name info))
                           (cons "dims" (coerce (gguf:tensor-info-dims info) 'vector))
                           (cons "shape" (coerce (gguf:tensor-info-shape info) 'vector))
                           (cons "type" (gguf:tensor-info-type info))
                           (cons "type_id" (gguf:tensor-info-type-id info))
                           (cons "offset" (gguf:tensor-info-offset info))
                           (cons "bytes" (gguf:tensor-info-bytes info))))
                   (gguf:tensor-infos f)))))

(define-command "inspect" (file)
    (:usage "FILE.gguf [--max-array N] [--json]"
     :summary "print a GGUF file's header, metadata and tensors (--json: as one JSON object)"
     :options ((max-array "--max-array N" :parse (integer-parser :min 0)
                          :help "show at most N elements of each array value (the text
form shows 16 unless told; --json shows all)")
               (json "--json" :help "write one JSON object (SPEC 6) instead of the text")))
  (gguf:with-file (f file)
    (if json
        (progn (write-json (inspection-json f max-array) *standard-output* :indent 1)
               (terpri))
        (print-inspection f *standard-output* (or max-array *default-text-max-array*))))
  0)
