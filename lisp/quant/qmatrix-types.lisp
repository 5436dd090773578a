;;;; qmatrix-types.lisp - the block types a quantized matrix holds: Q8_0,
;;;; and the legacy, K-quant and IQ4 types llama-quantize writes without an
;;;; importance matrix (prims/quants.h, doc/formats.md §3-§4a).
;;;;
;;;; A matrix's FORMAT slot is a symbol of this package named as ggml names
;;;; the type with '-' for '_' (Q8-0, Q4-K, IQ4-NL); the C glue
;;;; (prims/ecl/qmatrix.c) knows the same symbols and decodes the one block
;;;; an element lives in with the type's own dequantizer.

(in-package "RONTOLISP")

(defun ggml-name-format (name)
  "The FORMAT symbol of a quantized matrix of the ggml type NAME (\"Q4_K\"
-> Q4-K)."
  (intern (substitute #\- #\_ (string-upcase name)) "RONTOLISP"))

(defun format-ggml-name (format)
  "The ggml name of a quantized matrix FORMAT symbol (Q4-K -> \"Q4_K\")."
  (substitute #\_ #\- (symbol-name format)))

(defvar *format-layouts* (make-hash-table :test 'eq)
  "FORMAT symbol -> (ggml-id block-size block-bytes), filled on first use.")

(defun format-layout (format)
  "(ggml-id values-per-block bytes-per-block) of FORMAT, or NIL when no
quantized matrix holds that format (the types of C's table that are
quantized: Q8_0, the legacy, K and IQ4 types)."
  (multiple-value-bind (layout found) (gethash format *format-layouts*)
    (if found
        layout
        (setf (gethash format *format-layouts*)
              (let ((type (find-ggml-type (format-ggml-name format))))
                (when (and type (quantized-type-p (ggml-type-id type)))
                  (list (ggml-type-id type) (ggml-type-block-size type)
                        (ggml-type-block-bytes type))))))))

(defun quantized-format-of-type-id (id)
  "The FORMAT symbol for a tensor of ggml type ID held as a quantized
matrix (Q8_0, the legacy, K-quant and IQ4 types), or NIL."
  (and (quantized-type-p id) (ggml-name-format (ggml-type-name (find-ggml-type id)))))

(defun quantized-matrix-type (m)
  "The ggml type name of the blocks the quantized matrix M holds: \"Q8_0\",
\"Q4_0\", \"Q4_1\", \"Q5_0\", \"Q5_1\", \"Q2_K\" ... \"Q6_K\", \"IQ4_NL\" or
\"IQ4_XS\" (ARRAY-ELEMENT-TYPE answers the same as a symbol, e.g.
RONTOLISP:Q4-K)."
  (check-quantized-matrix 'quantized-matrix-type m)
  (format-ggml-name (quantized-matrix-format m)))

(defun quantized-matrix-type-id (m)
  "The ggml type id of M's blocks."
  (first (format-layout (quantized-matrix-format m))))

(defun format-description (format)
  "A phrase describing the blocks of FORMAT, for DESCRIBE."
  (destructuring-bind (id block bytes) (format-layout format)
    (declare (ignore id))
    (format nil "blocks of ~D values in ~D bytes, ggml's ~A" block bytes
            (format-ggml-name format))))

(defun q8-0-matrix-p (x)
  "True when X is a quantized matrix of Q8_0 blocks."
  (and (quantized-matrix-p x) (eq (quantized-matrix-format x) 'q8-0)))

;;; QUANTIZE into the other types.

(defun other-quantized-format (format)
  "The FORMAT symbol FORMAT (a symbol or string such as 'q4-k or
\"Q4_K\") names when it is a quantized-matrix type other than Q8_0, else
NIL."
  (when (and (or (symbolp format) (stringp format)) format)
    (let ((sym (ggml-name-format (string format))))
      (and (not (eq sym 'q8-0)) (format-layout sym) sym))))

(defun single-float-copy (src kind)
  "SRC (a packed array of the number KIND) as a simple single-float array
of its dimensions: SRC itself when it is one, else each value as the
kernels read it (FLAT-VALUE)."
  (if (= kind (number-kind :f32))
      src
      (let ((out (make-array (array-dimensions src) :element-type 'single-float)))
        (dotimes (i (array-total-size src) out)
          (setf (row-major-aref out i) (flat-value src kind i))))))

(defun quantize-other (array format outliers)
  "QUANTIZE for FORMAT, a type of prims/quants.h."
  (when outliers
    (element-type-error 'quantize outliers "expected no :outliers for the format ~(~A~) (the ~
outlier-aware scales are Q8_0's), found ~S" format outliers))
  (multiple-value-bind (src kind) (packed-numbers array)
    (unless src
      (element-type-error 'quantize array "expected a (simple-array single-float), ~
(simple-array double-float), float16-array or bfloat16-array, found ~A"
                          (describe-object-type array)))
    (destructuring-bind (id block bytes) (format-layout format)
      (declare (ignore bytes))
      (let* ((dims (array-dimensions src))
             (rank (length dims)))
        (unless (<= 1 rank 2)
          (shape-error 'quantize "rank 1 or 2" dims "expected an array of rank 1 or 2, found ~
rank ~D (dimensions ~S)" rank dims))
        (let ((cols (car (last dims)))
              (rows (if (= rank 2) (first dims) 1)))
          (unless (zerop (mod cols block))
            (shape-error 'quantize (format nil "last dimension a multiple of ~D" block) dims
                         "expected the last dimension to be a multiple of ~D (~A blocks), found ~D ~
(dimensions ~S)" block (format-ggml-name format) cols dims))
          (multiple-value-bind (octets status where)
              (%quant-quantize id (single-float-copy src kind))
            (case status
              ((nil) (%make-quantized-matrix octets 0 nil dims rows cols format))
              (:non-finite
               (let ((index (if (= rank 2) (multiple-value-list (floor where cols)) (list where))))
                 (non-finite-error 'quantize index "expected finite values, found ~A at index ~S"
                                   (non-finite-description src kind where) index)))
              (:scale-overflow
               (let* ((per-row (floor cols block))
                      (row (floor where per-row))
                      (blk (mod where per-row)))
                 (scale-overflow-error 'quantize row blk "the scales of row ~D, block ~D (values ~
~D to ~D of the row) overflow ~A's binary16 scales" row blk (* blk block)
                                       (+ (* blk block) block -1) (format-ggml-name format))))
              (t (rontolisp-error 'quantize "internal failure ~S" status)))))))))
