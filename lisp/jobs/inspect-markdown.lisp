;;;; inspect-markdown.lisp - `rontolisp inspect FILE --markdown': the
;;;; Markdown report of gguf-py's gguf_dump --markdown, character for
;;;; character (tests/golden/markdown/ holds its own output on a fixture).
;;;;
;;;; Its parts: a table of the key-value pairs, led by the header fields
;;;; gguf-py's reader lists as keys (GGUF.version, GGUF.tensor_count,
;;;; GGUF.kv_count), strings cut to 30 + 30 characters, arrays to their
;;;; first 5 strings or 7 numbers, scalars as numpy prints them; then the
;;;; tensors grouped by block (blk.N, enc.blk.N ...), each group's table
;;;; with human names, element counts, shapes (ggml order, padded to four
;;;; dims), types and bits per weight, and the totals.  One difference:
;;;; control characters in strings are escaped as in every form of
;;;; `inspect' (gguf_dump writes them raw, breaking the table).

(in-package "COMMAND-LINE")

(defun numpy-float-string (x)
  "X as numpy prints a float32 or float64 scalar: the shortest digits of
its format, positional from 1e-4 up to 1e16, else scientific with an
exponent of at least two digits (1e-05, 3.4e+38)."
  (cond ((ext:float-nan-p x) "nan")
        ((ext:float-infinity-p x) (if (plusp x) "inf" "-inf"))
        ((zerop x) (if (minusp (float-sign x)) "-0.0" "0.0"))
        (t
         (multiple-value-bind (k digits) (si::float-to-digits nil (abs x) nil nil)
           (let ((n (length digits))
                 (sign (if (minusp x) "-" "")))
             (if (<= 1/10000 (abs (rational x)) (1- (expt 10 16)))
                 (concatenate 'string sign
                              (cond ((<= k 0)
                                     (format nil "0.~A~A" (make-string (- k) :initial-element #\0) digits))
                                    ((>= k n)
                                     (format nil "~A~A.0" digits (make-string (- k n) :initial-element #\0)))
                                    (t (format nil "~A.~A" (subseq digits 0 k) (subseq digits k)))))
                 (format nil "~A~A~:[.~A~;~*~]e~:[+~;-~]~2,'0D" sign (char digits 0) (= n 1)
                         (subseq digits 1) (minusp (1- k)) (abs (1- k)))))))))

(defun numpy-string (value type)
  "A scalar VALUE of GGUF TYPE as str() of its numpy scalar."
  (case type
    (:bool (if value "True" "False"))
    ((:f32 :f64) (numpy-float-string value))
    (t (princ-to-string value))))

(defparameter *gguf-py-type-names*
  '((:u8 . "UINT8") (:i8 . "INT8") (:u16 . "UINT16") (:i16 . "INT16") (:u32 . "UINT32")
    (:i32 . "INT32") (:f32 . "FLOAT32") (:bool . "BOOL") (:string . "STRING")
    (:array . "ARRAY") (:u64 . "UINT64") (:i64 . "INT64") (:f64 . "FLOAT64"))
  "gguf-py's GGUFValueType names.")

(defun field-types (value type)
  "gguf-py's field.types of a VALUE of TYPE: ARRAY followed by the types of
its first element, down to a scalar."
  (if (consp type)
      (cons :array (and (plusp (length value))
                        (field-types (aref value 0) (second type))))
      (list type)))

(defun field-count (value type)
  "len(field.data) in gguf-py: 1 for a scalar, the scalars under an array."
  (if (consp type)
      (reduce #'+ (map-elements #'field-count value type))
      1))

(defun markdown-escape-code (string)
  "STRING as Markdown inline code, as gguf_dump quotes it: between runs of
one backtick more than its longest run, padded with spaces when it starts
or ends with a backtick; control characters escaped."
  (let ((longest 0) (run 0))
    (loop for c across string
          do (if (char= c #\`) (setf longest (max longest (incf run))) (setf run 0)))
    (let ((fence (make-string (1+ longest) :initial-element #\`))
          (text (with-output-to-string (s) (write-escaped string s :quotes nil))))
      (when (and (plusp (length string))
                 (or (char= #\` (char string 0)) (char= #\` (char string (1- (length string))))))
        (setf text (concatenate 'string " " text " ")))
      (concatenate 'string fence text fence))))

(defun markdown-string (string limit)
  (let ((n (length string)))
    (if (> n limit)
        (concatenate 'string (markdown-escape-code (subseq string 0 (floor limit 2))) "..."
                     (markdown-escape-code (subseq string (- n (floor limit 2)))))
        (markdown-escape-code string))))

(defun markdown-value (value type)
  (let ((types (field-types value type))
        (total (field-count value type)))
    (cond ((null (rest types))
           (case (first types)
             (:string (markdown-string value 60))
             (:array "")
             (t (numpy-string value (first types)))))
          (t
           (let* ((elem (second types))
                  (shown (cond ((eq elem :string) (min 5 (length value)))
                               ((eq elem :array) 0)
                               (t (min 7 (length value)))))
                  (items (map-elements (lambda (v et)
                                               (if (eq et :string)
                                                   (markdown-string v 30)
                                                   (numpy-string v et)))
                                             value type shown)))
             (format nil "[ ~A~:[~;, ...~] ]"
                     (string-trim " " (format nil "~{~A~^, ~}" items)) (> total shown)))))))

(defun markdown-table (columns rows stream)
  "Write ROWS (lists of cell strings) under COLUMNS ((header align) ...,
align :left or :right) as gguf_dump's markdown_table_with_alignment_support."
  (let ((widths (loop for (header) in columns
                      for i from 0
                      collect (max (+ 2 (length header))
                                   (+ 2 (reduce #'max rows :key (lambda (r) (length (nth i r)))
                                                           :initial-value 0))))))
    (flet ((line (cells)
             (write-char #\| stream)
             (loop for cell in cells
                   for (nil align) in columns
                   for w in widths
                   do (if (eq align :right)
                          (format stream "~v@A " (1- w) cell)
                          (format stream " ~vA" (1- w) cell))
                      (write-char #\| stream))
             (terpri stream)))
      (line (mapcar #'first columns))
      (write-char #\| stream)
      (loop for (nil align) in columns
            for w in widths
            do (write-string (if (eq align :right)
                                 (format nil "~v,,,'-A:" (1- w) "")
                                 (format nil ":~v,,,'-A" (1- w) ""))
                             stream)
               (write-char #\| stream))
      (terpri stream)
      (dolist (row rows) (line row)))))

(defun rounded-count (count)
  "gguf_dump's element_count_rounded_notation: ~1K, ~12M, 950."
  (multiple-value-bind (scale suffix)
      (cond ((> count 1d15) (values 1d-15 "Q")) ((> count 1d12) (values 1d-12 "T"))
            ((> count 1d9) (values 1d-9 "B")) ((> count 1d6) (values 1d-6 "M"))
            ((> count 1d3) (values 1d-3 "K")) (t (values nil "")))
    (format nil "~:[~;~~~]~D~A" scale (if scale (round (* (float count 1d0) scale)) count) suffix)))

(defun python-fixed (x places)
  "The double X with PLACES decimals as Python's format spec .Nf writes it
(the exact value rounded half to even); \"nan\" for NIL."
  (if (null x)
      "nan"
      (let* ((scaled (round (* (abs (rational x)) (expt 10 places))))
             (digits (format nil "~v,'0D" (1+ places) scaled)))
        (format nil "~:[~;-~]~A.~A" (and (minusp x) (plusp scaled))
                (subseq digits 0 (- (length digits) places))
                (subseq digits (- (length digits) places))))))

(defun python-title (string)
  "STRING as Python's str.title(): a letter after a letter in lower case,
any other in upper case."
  (let ((cased nil))
    (map 'string (lambda (c)
                   (prog1 (if (both-case-p c)
                              (if cased (char-downcase c) (char-upcase c))
                              c)
                     (setf cased (both-case-p c))))
         string)))

(defparameter *tensor-name-words*
  '(("token_embd" . "Token embedding") ("pos_embd" . "Position embedding")
    ("output_norm" . "Output normalization") ("output" . "Output")
    ("attn_norm" . "Attention normalization") ("attn_norm_2" . "Attention normalization")
    ("attn_qkv" . "Attention query-key-value") ("attn_q" . "Attention query")
    ("attn_k" . "Attention key") ("attn_v" . "Attention value")
    ("attn_output" . "Attention output") ("ffn_norm" . "Feed-forward network normalization")
    ("ffn_up" . "Feed-forward network \"up\"") ("ffn_gate" . "Feed-forward network \"gate\"")
    ("ffn_down" . "Feed-forward network \"down\"")
    ("ffn_gate_inp" . "Expert-routing layer for the Feed-forward network in Mixture of Expert models")
    ("ffn_gate_exp" . "Feed-forward network \"gate\" layer per expert in Mixture of Expert models")
    ("ffn_down_exp" . "Feed-forward network \"down\" layer per expert in Mixture of Expert models")
    ("ffn_up_exp" . "Feed-forward network \"up\" layer per expert in Mixture of Expert models")
    ("ssm_in" . "State space model input projections") ("ssm_conv1d" . "State space model rolling/shift")
    ("ssm_x" . "State space model selective parametrization")
    ("ssm_a" . "State space model state compression") ("ssm_d" . "State space model skip connection")
    ("ssm_dt" . "State space model time step") ("ssm_out" . "State space model output projection")
    ("blk" . "Block") ("enc" . "Encoder") ("dec" . "Decoder"))
  "gguf_dump's words for the parts of tensor names.")

(defun human-tensor-name (name)
  "gguf_dump's translate_tensor_name: each dotted part in words, title-cased."
  (format nil "~{~A~^ ~}"
          (mapcar (lambda (word)
                    (let ((known (assoc (string-downcase (string-trim '(#\Space #\Tab #\Newline) word))
                                        *tensor-name-words* :test #'string=)))
                      (python-title (if known (cdr known) word))))
                  (split-on #\. name))))

(defun tensor-group (name)
  (let ((parts (split-on #\. name)))
    (cond ((and (string= (first parts) "blk") (rest parts))
           (format nil "blk.~A" (second parts)))
          ((and (member (first parts) '("enc" "dec") :test #'string=)
                (string= (or (second parts) "") "blk") (cddr parts))
           (format nil "~A.blk.~A" (first parts) (third parts)))
          ((member (first parts) '("enc" "dec") :test #'string=) (first parts))
          (t "base"))))

(defun dims4 (info)
  (let ((dims (gguf:tensor-info-dims info)))
    (append dims (make-list (max 0 (- 4 (length dims))) :initial-element 1))))

(defun markdown-kv-section (f view stream)
  (let* ((header `(("GGUF.version" :u32 ,(gguf:version f))
                   ("GGUF.tensor_count" :u64 ,(length (gguf:tensor-infos f)))
                   ("GGUF.kv_count" :u64 ,(length (gguf:metadata f)))))
         (fields (append (if (view-filter view)
                             (remove-if-not (lambda (e) (regex-search (view-filter view) (first e)))
                                            header)
                             header)
                         (view-metadata view))))
    (format stream "## Key Value Metadata Store~%~%There are ~D key-value pairs in this file~%~%"
            (length fields))
    (markdown-table '(("POS" :right) ("TYPE" :left) ("Count" :right) ("Key" :left) ("Value" :left))
                    (loop for (key type value) in fields
                          for n from 1
                          collect (let ((types (field-types value type)))
                                    (list (princ-to-string n)
                                          (if (eq (first types) :array)
                                              (let ((nest (1- (length types))))
                                                (concatenate 'string (make-string nest :initial-element #\[)
                                                             (cdr (assoc (car (last types)) *gguf-py-type-names*))
                                                             (make-string nest :initial-element #\])))
                                              (cdr (assoc (first types) *gguf-py-type-names*)))
                                          (princ-to-string (field-count value type))
                                          (escape-control-only key)
                                          (markdown-value value type))))
                    stream)
    (terpri stream)))

(defun escape-control-only (string)
  (with-output-to-string (s) (write-escaped string s :quotes nil)))

(defun markdown-tensor-section (tensors stream)
  "The tensor part of gguf_dump --markdown; answers the bytes and elements."
  (let ((groups '()) (index (make-hash-table :test 'eq))
        (total (reduce #'+ tensors :key #'tensor-elements)))
    (loop for info in tensors
          for i from 0
          do (setf (gethash info index) i)
             (let* ((name (tensor-group (gguf:tensor-info-name info)))
                    (group (or (assoc name groups :test #'string=)
                               (car (push (list name) groups)))))
               (push info (cdr group))))
    (setf groups (mapcar (lambda (g) (cons (car g) (reverse (cdr g)))) (nreverse groups)))
    (format stream "## Tensors Overview ~A Elements~%~%Total number of elements in all tensors: ~D Elements~%~%"
            (rounded-count total) total)
    (loop for (name . members) in groups
          do (format stream "- [~A Tensor Group - ~A Elements](#~A)~%" (human-tensor-name name)
                     (rounded-count (reduce #'+ members :key #'tensor-elements))
                     (substitute #\_ #\. name)))
    (format stream "~%### Tensor Data Offset~%~%This table contains the offset and data segment relative to start of file~%~%")
    (markdown-table '(("T_ID" :right) ("Tensor Layer Name" :left) ("Data Offset (B)" :right)
                      ("Data Size (B)" :right))
                    (loop for info in tensors
                          for i from 0
                          collect (list (princ-to-string i) (escape-control-only (gguf:tensor-info-name info))
                                        (format nil "~16@A" (format nil "0x~(~X~)" (gguf:tensor-info-file-offset info)))
                                        (format nil "~16@A" (format nil "0x~(~X~)" (gguf:tensor-info-bytes info)))))
                    stream)
    (terpri stream)
    (let ((all-bytes 0) (all-elements 0))
      (loop for (name . members) in groups
            for elements = (reduce #'+ members :key #'tensor-elements)
            for bytes = (reduce #'+ members :key #'gguf:tensor-info-bytes)
            for est-width = (reduce #'max members :key (lambda (i) (length (rounded-count (tensor-elements i)))) :initial-value 1)
            for count-width = (reduce #'max members :key (lambda (i) (length (princ-to-string (tensor-elements i)))) :initial-value 1)
            for dim-widths = (loop for d below 4
                                   collect (reduce #'max members :key (lambda (i) (length (princ-to-string (nth d (dims4 i)))))
                                                                 :initial-value 1))
            do (format stream "### <a name=\"~A\">~A Tensor Group : ~A Elements</a>~%~%"
                       (substitute #\_ #\. name) (human-tensor-name name) (rounded-count elements))
               (markdown-table
                '(("T_ID" :right) ("Tensor Layer Name" :left) ("Human Friendly Tensor Layer Name" :left)
                  ("Elements" :left) ("Shape" :left) ("Type" :left) ("BPW" :right))
                (loop for info in members
                      for n = (tensor-elements info)
                      for tname = (gguf:tensor-info-name info)
                      collect (list (princ-to-string (gethash info index))
                                    (escape-control-only tname)
                                    (escape-control-only
                                     (human-tensor-name (replace-all (replace-all tname ".weight" ".(W)")
                                                                     ".bias" ".(B)")))
                                    (format nil "(~v@A) ~v@A" est-width (rounded-count n) count-width n)
                                    (format nil "~{~A~^ x ~}"
                                            (loop for d in (dims4 info) for w in dim-widths
                                                  collect (format nil "~v@A" w d)))
                                    (gguf:tensor-info-type info)
                                    (python-fixed (bits-per-weight (gguf:tensor-info-bytes info) n) 4)))
                stream)
               (format stream "~%- Total elements in ~A: (~4@A) ~D~%- Percentage of total elements: ~A%~%"
                       (escape-control-only name) (rounded-count elements) elements
                       (python-fixed (if (plusp total) (* (/ (float elements 1d0) total) 100) nil) 2))
               (if (plusp elements)
                   (format stream "- Bits per Weight (BPW) for ~A: ~A bits~%" (escape-control-only name)
                           (python-fixed (bits-per-weight bytes elements) 4))
                   (format stream "- Bits per Weight (BPW) for ~A: undefined (no elements)~%"
                           (escape-control-only name)))
               (format stream "~%~%")
               (incf all-bytes bytes)
               (incf all-elements elements))
      (values all-bytes all-elements))))

(defun print-markdown (f name view stream)
  "Write the GGUF file F, given on the command line as NAME, as gguf_dump
--markdown does, showing what VIEW chose."
  (format stream "# ~A - GGUF Internal File Dump~%~%- Endian: LITTLE endian~%~%" name)
  (unless (view-tensors-only view)
    (markdown-kv-section f view stream))
  (multiple-value-bind (bytes elements)
      (if (view-no-tensors view) (values 0 0) (markdown-tensor-section (view-tensors view) stream))
    (let ((base (let ((slash (position #\/ name :from-end t)))
                  (if slash (subseq name (1+ slash)) name))))
      (if (plusp elements)
          (format stream "Total BPW for ~A: ~A bits~%" base (python-fixed (bits-per-weight bytes elements) 4))
          (format stream "Total BPW for ~A: undefined (no elements)~%" base)))))
