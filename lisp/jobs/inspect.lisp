;;;; inspect.lisp - `rontolisp inspect FILE [--max-array N] [--json] ...'.
;;;;
;;;; The text form lists the header, every metadata key with its type and
;;;; value, every tensor with its ggml dims, type and size, a total and a
;;;; summary per tensor type with its bits per weight; the JSON form
;;;; (doc/command-line.md) carries the same facts for programs; --markdown is gguf-py's
;;;; gguf_dump --markdown (inspect-markdown.lisp).  --no-tensors,
;;;; --tensors-only and --filter REGEX choose what is shown, as people use
;;;; gguf_dump.  Control characters in keys and strings are escaped in
;;;; every form.

(in-package "COMMAND-LINE")

(defparameter *default-text-max-array* 16
  "How many elements of an array value the text form shows by default.")

(defparameter *default-text-max-string* 60
  "How many characters of a string the text form shows by default, as
gguf_dump does.")

(defparameter *file-type-names*
  #("ALL_F32" "MOSTLY_F16" "MOSTLY_Q4_0" "MOSTLY_Q4_1" nil nil nil "MOSTLY_Q8_0"
    "MOSTLY_Q5_0" "MOSTLY_Q5_1" "MOSTLY_Q2_K" "MOSTLY_Q3_K_S" "MOSTLY_Q3_K_M"
    "MOSTLY_Q3_K_L" "MOSTLY_Q4_K_S" "MOSTLY_Q4_K_M" "MOSTLY_Q5_K_S" "MOSTLY_Q5_K_M"
    "MOSTLY_Q6_K" "MOSTLY_IQ2_XXS" "MOSTLY_IQ2_XS" "MOSTLY_Q2_K_S" "MOSTLY_IQ3_XS"
    "MOSTLY_IQ3_XXS" "MOSTLY_IQ1_S" "MOSTLY_IQ4_NL" "MOSTLY_IQ3_S" "MOSTLY_IQ3_M"
    "MOSTLY_IQ2_S" "MOSTLY_IQ2_M" "MOSTLY_IQ4_XS" "MOSTLY_IQ1_M" "MOSTLY_BF16" nil nil nil
    "MOSTLY_TQ1_0" "MOSTLY_TQ2_0" "MOSTLY_MXFP4_MOE" "MOSTLY_NVFP4" "MOSTLY_Q1_0" "MOSTLY_Q2_0")
  "llama.cpp's names of general.file_type values (gguf-py's LlamaFileType),
by value; NIL for values it removed.")

(defun file-type-name (n)
  "The LlamaFileType name of the general.file_type value N (with
\", GUESSED\" when its bit 1024 is set), or NIL when it has none."
  (let* ((guessed (and (integerp n) (logbitp 10 n)))
         (base (if guessed (- n 1024) n))
         (name (and (integerp base) (< -1 base (length *file-type-names*))
                    (aref *file-type-names* base))))
    (and name (if guessed (concatenate 'string name ", GUESSED") name))))

(defun cut-string (string max)
  "STRING cut as gguf_dump cuts it: when longer than MAX characters, its
first MAX - 3 and \"...\"; whole when MAX is NIL or 0."
  (if (and max (plusp max) (> (length string) max))
      (concatenate 'string (subseq string 0 (max 0 (- max 3))) "...")
      string))

(defun escape-control (string)
  "STRING with double quote, backslash and control characters escaped as in
JSON (\\n, \\t, \\u001b ...), and a byte that was not UTF-8 as \\xHH for
people to read (see WRITE-ESCAPED)."
  (with-output-to-string (s) (write-escaped string s)))

(defun type-label (type)
  "The text form of a GGUF value type: u32, string, array<string>,
array<array<f32>>, array<array> (no elements to say more), and for an array
whose inner arrays differ their types: array<array<u32>|array<string>>."
  (if (consp type)
      (format nil "array<~{~A~^|~}>"
              (remove-duplicates (mapcar #'type-label (rest type)) :test #'string= :from-end t))
      (string-downcase (symbol-name type))))

(defun value-text (value type max-array &optional max-string)
  "The text form of VALUE of the GGUF TYPE, arrays cut to MAX-ARRAY
elements and strings to MAX-STRING characters (NIL: whole)."
  (let ((base (if (consp type) (first type) type)))
    (case base
      (:string (format nil "\"~A\"" (escape-control (cut-string value max-string))))
      (:bool (if value "true" "false"))
      ((:f32 :f64) (float-text value))
      (:array
       (let* ((n (length value))
              (shown (if max-array (min n max-array) n)))
         (format nil "[~{~A~^, ~}~:[~;, ... (~D more)~]]"
                 (map-elements (lambda (v et) (value-text v et max-array max-string))
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

(defstruct (view (:constructor make-view (metadata tensors filter no-tensors tensors-only)))
  "What `inspect' shows of a file: the metadata entries and tensor infos
chosen by its options, the --filter pattern (or NIL), and whether the
tensors or the metadata are left out."
  metadata tensors filter no-tensors tensors-only)

(defun file-view (f &key filter no-tensors tensors-only)
  "The VIEW of F: its keys unless TENSORS-ONLY, its tensors unless
NO-TENSORS, of either only those whose name the regex FILTER matches."
  (flet ((chosen (items name)
           (if filter
               (remove-if-not (lambda (item) (regex-search filter (funcall name item))) items)
               items)))
    (make-view (if tensors-only '() (chosen (gguf:metadata f) #'first))
               (if no-tensors '() (chosen (gguf:tensor-infos f) #'gguf:tensor-info-name))
               filter no-tensors tensors-only)))

(defun metadata-value-text (key type value max-array max-string)
  "The text of a metadata VALUE, general.file_type followed by its name."
  (let ((text (value-text value type max-array max-string))
        (name (and (string= key "general.file_type") (integerp value) (file-type-name value))))
    (if name (format nil "~A (~A)" text name) text)))

(defun type-summary (tensors)
  "(type tensors parameters bytes) for each tensor type of TENSORS, in the
order of first appearance."
  (let ((rows '()))
    (dolist (info tensors)
      (let ((row (or (assoc (gguf:tensor-info-type info) rows :test #'string=)
                     (car (push (list (gguf:tensor-info-type info) 0 0 0) rows)))))
        (incf (second row))
        (incf (third row) (tensor-elements info))
        (incf (fourth row) (gguf:tensor-info-bytes info))))
    (nreverse rows)))

(defun bits-per-weight (bytes parameters)
  "8 x BYTES / PARAMETERS as a double, or NIL when PARAMETERS is 0."
  (and (plusp parameters) (/ (* 8d0 bytes) parameters)))

(defun print-type-summary (tensors stream)
  (format stream "by type:~%")
  (loop for (type count params bytes) in (type-summary tensors)
        do (format stream "  ~10A ~6D tensor~:P ~14D parameters ~14D bytes ~:[       -~;~:*~8,4F~] bits/weight~%"
                   type count params bytes (bits-per-weight bytes params))))

(defun print-inspection (f stream max-array &optional (view (file-view f)) max-string)
  (format stream "~A: GGUF v~D, ~D bytes, alignment ~D~%~%"
          (gguf:path f) (gguf:version f) (gguf:file-size f) (gguf:alignment f))
  (unless (view-tensors-only view)
    (print-count-line (length (view-metadata view)) (length (gguf:metadata f)) "metadata key"
                      (view-filter view) "" stream)
    (loop for (key type value) in (view-metadata view)
          do (format stream "  ~A (~A~@[[~D]~]) = ~A~%"
                     (escape-control key) (type-label type)
                     (and (consp type) (length value))
                     (metadata-value-text key type value max-array max-string))))
  (unless (view-no-tensors view)
    (print-tensor-listing f view stream)))

(defun print-count-line (shown total noun filter tail stream)
  "\"3 tensors (...):\", or \"2 of 14 tensors matching \"re\" (...):\" with a FILTER."
  (format stream "~D ~@[of ~D ~]~A~P~@[ matching \"~A\"~]~A:~%" shown (and filter total) noun
          (if filter total shown)
          (and filter (with-output-to-string (s) (write-escaped (regex-source filter) s :quotes nil)))
          tail))

(defun print-tensor-listing (f view stream)
  (print-count-line (length (view-tensors view)) (length (gguf:tensor-infos f)) "tensor"
                    (view-filter view) " (ggml dims, ne[0] = innermost)" stream)
  (let ((params 0) (bytes 0))
    (dolist (info (view-tensors view))
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
    (format stream "total: ~D parameters, ~D bytes of tensor data~@[, ~,4F bits/weight~]~%"
            params bytes (bits-per-weight bytes params))
    (when (view-tensors view)
      (print-type-summary (view-tensors view) stream))))

(defun json-value (value type max-array)
  (let ((base (if (consp type) (first type) type)))
    (case base
      (:bool (if value :true :false))
      (:array
       (let ((n (if max-array (min max-array (length value)) (length value))))
         (coerce (map-elements (lambda (v et) (json-value v et max-array)) value type n)
                 'vector)))
      (t value))))

(defun element-type-label (type)
  (let ((elem (second type)))
    (if (consp elem) "array" (string-downcase (symbol-name elem)))))

(defun inspection-json (f max-array &optional (view (file-view f)))
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
                   (view-metadata view)))
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
                   (view-tensors view)))
        (cons "types"
              (map 'vector
                   (lambda (row)
                     (destructuring-bind (type count params bytes) row
                       (list :object (cons "type" type) (cons "tensors" count)
                             (cons "parameters" params) (cons "bytes" bytes)
                             (cons "bits_per_weight" (or (bits-per-weight bytes params) :null)))))
                   (type-summary (view-tensors view))))))
