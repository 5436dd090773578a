;;;; qmatrix.lisp - the quantized matrix: QUANTIZE, DEQUANTIZE, and what
;;;; CL's array functions answer for it.
;;;;
;;;; A quantized matrix holds Q8_0 blocks (ggml's int8 format, doc/formats.md §2),
;;;; or those of a legacy, K-quant or IQ4 type (qmatrix-types.lisp), in
;;;; memory it does not share with Lisp arrays: its own octet vector when
;;;; QUANTIZE made it, a region of a mapped file when gguf:tensor did.  It is
;;;; a struct, not an array (ARRAYP is false), yet AREF, ROW-MAJOR-AREF,
;;;; ARRAY-DIMENSIONS and friends answer for it: this file says what they
;;;; answer (the QM- functions), ecl-aref.lisp installs them in ECL's array
;;;; functions.
;;;;
;;;; The C side (prims/ecl/qmatrix.c) reads the struct's slots by position
;;;; and refuses to start when QUANTIZED-MATRIX's slot order differs from
;;;; its enum.

(in-package "RONTOLISP")

(defstruct (quantized-matrix
            (:constructor %make-quantized-matrix (base offset owner dims rows cols format))
            (:copier nil)
            (:predicate nil))
  "A matrix (rank 2) or vector (rank 1) of quantized values: Q8_0 blocks,
or those of one of the legacy, K-quant and IQ4 types (QUANTIZED-MATRIX-TYPE
names it).  AREF and ROW-MAJOR-AREF answer the dequantized value as a
double-float (ggml's dequantizer's single-float, exactly); elements cannot
be written.  Made by RONTOLISP:QUANTIZE (Q8_0) or read from a GGUF file."
  (base nil :read-only t)        ; octet vector, or foreign pointer to a mapping
  (offset 0 :type fixnum :read-only t) ; byte offset of block 0 in BASE
  (owner nil :read-only t)       ; what keeps BASE's memory alive
  (dims nil :type list :read-only t)
  (rows 0 :type fixnum :read-only t)   ; 1 for rank 1
  (cols 0 :type fixnum :read-only t)
  (format 'q8-0 :type symbol :read-only t))

(document-functions
  quantized-matrix-dims "The dimensions of the quantized matrix M, as ARRAY-DIMENSIONS answers."
  quantized-matrix-rows "The rows of the quantized matrix M (1 for a vector)."
  quantized-matrix-cols "The values per row of the quantized matrix M.")

(declaim (inline quantized-matrix-p))
(defun quantized-matrix-p (x)
  "True when X is a quantized matrix."
  (typep x 'quantized-matrix))

(defmethod print-object ((m quantized-matrix) stream)
  (if *print-readably*
      (error 'print-not-readable :object m)
      (format stream "#<quantized-matrix ~(~A~) ~S>"
              (quantized-matrix-format m) (quantized-matrix-dims m))))

;; ECL's DESCRIBE of a structure prints every slot, and BASE holds every
;; packed byte: thousands of lines for a small matrix.
(defmethod describe-object ((m quantized-matrix) stream)
  (format stream "~&~S~%  A ~(~A~)-quantized ~:[vector~;matrix~] of ~{~D~^ x ~} values ~
                  (~D bytes: ~A), read-only;~%  ~
                  AREF answers each value dequantized, as a double-float.~%"
          m (quantized-matrix-format m) (= 2 (length (quantized-matrix-dims m)))
          (quantized-matrix-dims m) (qm-byte-size m)
          (if (eq (quantized-matrix-format m) 'q8-0)
              "blocks of 32 values with one f16 scale each"
              (format-description (quantized-matrix-format m))))
  (values))

(defun packed-dimensions (data)
  "The dimensions of DATA: a float array, a float16/bfloat16 array or a
quantized matrix (the kinds of tensor data the file tools handle)."
  (etypecase data
    ((or float16-array bfloat16-array) (half-array-dimensions data))
    (quantized-matrix (copy-list (quantized-matrix-dims data)))
    (array (array-dimensions data))))

(defun qm-byte-size (m)
  "The bytes of M's blocks."
  (destructuring-bind (id block bytes) (format-layout (quantized-matrix-format m))
    (declare (ignore id))
    (* (floor (* (quantized-matrix-rows m) (quantized-matrix-cols m)) block) bytes)))

;;; QUANTIZE and DEQUANTIZE.

(defun format-name-p (format)
  (and (or (symbolp format) (stringp format))
       (member (string format) '("Q8-0" "Q8_0" "q8-0" "q8_0") :test #'string=)))

(defun quantize (array format &key outliers)
  "Quantize ARRAY into a quantized matrix in FORMAT.  FORMAT Q4-0, Q4-1,
Q5-0, Q5-1, Q2-K ... Q6-K, IQ4-NL or IQ4-XS (any symbol or string of that
name, '_' or '-') gives the bytes llama-quantize writes for that type without
an importance matrix (doc/formats.md §3-§4a); the last dimension must then be
a multiple of the type's block (32, or 256 for the K types and IQ4-XS), and
OUTLIERS is refused.  Otherwise FORMAT is Q8-0 (any symbol of that name,
e.g. 'q8-0 or :q8-0), ggml's Q8_0: blocks of
32 consecutive values of a row, each one binary16 scale d = absmax/127 and
32 signed bytes q = round(x/d), bit for bit what llama-quantize writes.
ARRAY is a (simple-array single-float) or (simple-array double-float) (each
double first rounded to single), a FLOAT16-ARRAY or a BFLOAT16-ARRAY, of
rank 1 or 2, its last dimension a multiple of 32.  OUTLIERS, a list or
vector of column indices (see OUTLIER-COLUMNS), selects the outlier-aware
scales of doc/outliers.md: each block holding an outlier column takes the scale
among f16(|w|/k) for its outlier weights w and k = 1..127, or the standard
one, with the least squared error when outlier columns weigh 10^4; other
blocks are the standard bytes, and the result is ordinary Q8_0.  Signals
UNKNOWN-FORMAT-ERROR, ELEMENT-TYPE-ERROR, SHAPE-ERROR, NON-FINITE-ERROR (a
NaN or infinity, with the subscripts of the first) or SCALE-OVERFLOW-ERROR
(a block whose scale overflows binary16, with its row and block); a bad
OUTLIERS signals ELEMENT-TYPE-ERROR or INDEX-ERROR."
  (let ((other (other-quantized-format format)))
    (when other
      (return-from quantize (quantize-other array other outliers))))
  (unless (format-name-p format)
    (unknown-format-error 'quantize format "expected the format q8-0, q4-0, q4-1, q5-0, q5-1, ~
q2-k, q3-k, q4-k, q5-k, q6-k, iq4-nl or iq4-xs, found ~S" format))
  (multiple-value-bind (src kind) (packed-numbers array)
    (unless src
      (element-type-error 'quantize array "expected a (simple-array single-float), ~
(simple-array double-float), float16-array or bfloat16-array, found ~A"
                          (describe-object-type array)))
    (let* ((dims (array-dimensions src))
           (rank (length dims)))
      (unless (<= 1 rank 2)
        (shape-error 'quantize "rank 1 or 2" dims "expected an array of rank 1 or 2, found rank ~D ~
(dimensions ~S)" rank dims))
      (let ((cols (car (last dims)))
            (rows (if (= rank 2) (first dims) 1)))
        (unless (zerop (mod cols 32))
          (shape-error 'quantize "last dimension a multiple of 32" dims "expected the last ~
dimension to be a multiple of 32 (Q8_0 blocks), found ~D (dimensions ~S)" cols dims))
        (multiple-value-bind (bytes status where)
            (if outliers
                (%q8-quantize-outliers src kind (outlier-mask 'quantize outliers cols))
                (%q8-quantize src kind))
          (case status
            ((nil) (%make-quantized-matrix bytes 0 nil dims rows cols 'q8-0))
            (:non-finite
             (let ((index (if (= rank 2) (multiple-value-list (floor where cols)) (list where))))
               (non-finite-error 'quantize index "expected finite values, found ~A at index ~S"
                                 (non-finite-description src kind where) index)))
            (:scale-overflow
             (let* ((per-row (floor cols 32))
                    (row (floor where per-row))
                    (blk (mod where per-row)))
               (scale-overflow-error 'quantize row blk "the scale of row ~D, block ~D (values ~D ~
to ~D of the row) overflows binary16: expected a block absmax below 8321040, found one of ~A"
                                     row blk (* blk 32) (+ (* blk 32) 31)
                                     (block-absmax src kind (* where 32)))))
            (t (rontolisp-error 'quantize "internal failure ~S" status))))))))

(defun flat-value (src kind i)
  "Element I of SRC (row-major) as the kernels see it: half bits widened,
a double narrowed to single-float as every kernel narrows it."
  (let ((x (row-major-aref src i)))
    (cond ((= kind (number-kind :f64)) (%double-to-single x))
          ((= kind (number-kind :f16)) (f16-value x))
          ((= kind (number-kind :bf16)) (bf16-value x))
          (t x))))

(defun non-finite-description (src kind i)
  (let ((x (flat-value src kind i)))
    (cond ((ext:float-nan-p x) "NaN")
          ((plusp x) "+infinity")
          (t "-infinity"))))

(defun block-absmax (src kind start)
  "The largest magnitude of the 32 values of SRC (an array of number kind
KIND, as PACKED-NUMBERS answers) from index START: a Q8_0 block's scale
is it divided by 127."
  (loop for i from start below (+ start 32)
        maximize (abs (flat-value src kind i))))

(defun check-quantized-matrix (fn m)
  (unless (quantized-matrix-p m)
    (element-type-error fn m "expected a quantized matrix, found ~A" (describe-object-type m))))

(defun dequantize (m)
  "A fresh (simple-array single-float) of the quantized matrix M's shape
holding its values: q*d (exact) for Q8_0, and for the other types the
floats ggml's dequantize_row_* gives, bit for bit."
  (check-quantized-matrix 'dequantize m)
  (%q8-dequantize-into m (make-array (quantized-matrix-dims m) :element-type 'single-float)))

(defun quantized-matrix-octets (m)
  "A fresh (simple-array (unsigned-byte 8) (*)) holding the quantized matrix
M's blocks as stored (Q8_0: 34 bytes per block of 32 values; the other
types their own blocks), the tensor data llama.cpp reads."
  (check-quantized-matrix 'quantized-matrix-octets m)
  (let ((n (qm-byte-size m)))
    (%q8-copy-bytes m 0 n (make-array n :element-type '(unsigned-byte 8)))))

;;; What the array functions answer for a quantized matrix.

(defun qm-aref (m subscripts)
  (case (length subscripts)
    (1 (%qm-aref-1 m (first subscripts)))
    (2 (%qm-aref-2 m (first subscripts) (second subscripts)))
    (t (index-error 'aref "a rank-~D quantized matrix takes ~D subscript~:P, given ~D"
                    (length (quantized-matrix-dims m))
                    (length (quantized-matrix-dims m))
                    (length subscripts)))))

(defun qm-setf-error (m &rest ignore)
  (declare (ignore ignore))
  (immutable-error '(setf aref) "~A has no element storage of its own (an element is decoded ~
from the block holding it); dequantize it, change the copy and quantize again" m))

(defun qm-array-dimension (m axis)
  (let ((dims (quantized-matrix-dims m)))
    (unless (and (integerp axis) (< -1 axis (length dims)))
      (index-error 'array-dimension "expected an axis from 0 to ~D of a rank-~D quantized ~
matrix, found ~S" (1- (length dims)) (length dims) axis))
    (nth axis dims)))

(defun qm-array-total-size (m)
  (* (quantized-matrix-rows m) (quantized-matrix-cols m)))

(defun qm-array-in-bounds-p (m subscripts)
  (let ((dims (quantized-matrix-dims m)))
    (unless (= (length subscripts) (length dims))
      (index-error 'array-in-bounds-p "a rank-~D quantized matrix takes ~D subscript~:P, ~
given ~D" (length dims) (length dims) (length subscripts)))
    (every (lambda (i d) (and (integerp i) (< -1 i d))) subscripts dims)))

(defun qm-array-row-major-index (m subscripts)
  (unless (qm-array-in-bounds-p m subscripts)
    (index-error 'array-row-major-index "subscripts ~S out of range for ~A" subscripts m))
  (if (= 1 (length subscripts))
      (first subscripts)
      (+ (* (first subscripts) (quantized-matrix-cols m)) (second subscripts))))

(defun octet-stream-p (stream)
  (and (streamp stream)
       (let ((type (stream-element-type stream)))
         (and (subtypep type '(unsigned-byte 8)) (subtypep '(unsigned-byte 8) type)))))

(defun qm-write-sequence (m stream &key (start 0) end)
  "Write the block bytes of M (from byte START below END) to STREAM, an
(unsigned-byte 8) stream."
  ;; A wider binary stream would store each byte in an element of its own
  ;; and a character stream would take them as characters: neither holds
  ;; the tensor's bytes.
  (unless (octet-stream-p stream)
    (element-type-error 'write-sequence stream "expected an (unsigned-byte 8) output stream for ~
the bytes of ~A, found ~:[~S~;a stream of element type ~:*~S~]"
                        m (and (streamp stream) (stream-element-type stream)) stream))
  (let* ((size (qm-byte-size m))
         (end (or end size)))
    (unless (and (typep start 'fixnum) (typep end 'fixnum) (<= 0 start end size))
      (index-error 'write-sequence "expected 0 <= start <= end <= ~D (the matrix's bytes), ~
found :start ~S :end ~S" size start end))
    (let ((base (quantized-matrix-base m)))
      (if (typep base '(simple-array (unsigned-byte 8) (*)))
          (write-sequence base stream :start (+ (quantized-matrix-offset m) start)
                                      :end (+ (quantized-matrix-offset m) end))
          (let ((buf (make-array (min (- end start) (* 1024 1024))
                                 :element-type '(unsigned-byte 8))))
            (loop for pos from start below end by (length buf)
                  for n = (min (length buf) (- end pos))
                  do (%q8-copy-bytes m pos n buf)
                     (write-sequence buf stream :end n)))))
    m))
