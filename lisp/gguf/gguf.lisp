;;;; gguf.lisp - GGUF files from Lisp: GGUF:READ, GGUF:TENSOR, GGUF:WRITE.
;;;;
;;;; GGUF:READ maps the file (the C reader in gguf/ checks every field of it
;;;; first) and reads its metadata and tensor table into a GGUF-FILE object.
;;;; Tensor data stay in the mapping: GGUF:TENSOR copies F32, F16 and BF16
;;;; tensors into Lisp arrays, and answers a Q8_0 tensor, or one of the
;;;; other types llama-quantize writes without an importance matrix (legacy,
;;;; K-quants, IQ4), as a quantized matrix over the file's own bytes, which
;;;; keeps the mapping alive.
;;;; GGUF:CLOSE releases it at once; a matrix used after that signals
;;;; GGUF:FILE-CLOSED-ERROR.
;;;;
;;;; Shapes: the file lists ggml dims innermost first (ne[0] = row length);
;;;; TENSOR-INFO-SHAPE is row-major (rows first), TENSOR-INFO-DIMS the file's.

(in-package "GGUF")

(defstruct (gguf-file (:constructor %make-gguf-file) (:copier nil) (:predicate nil))
  "A GGUF file read by GGUF:READ or made by GGUF:MAKE-FILE."
  (path nil)
  (version 3)
  (alignment 32)
  (size nil)
  (data-offset nil)
  (metadata '())        ; list of (key type value), in file order
  (tensors '())         ; list of TENSOR-INFO, in file order
  (handle nil)          ; foreign handle of the C reader, NIL when not read
  (base nil)            ; the handle again, kept after close: what its matrices pin
  (implicit-alignment nil) ; read from a file without general.alignment
  (shards '())          ; the other shards of a set opened with :SHARDS T
  (by-name nil))        ; (tensors . table): see TENSOR-TABLE

(defun gguf-file-p (x)
  "True when X is a GGUF file object."
  (typep x 'gguf-file))

(defstruct (tensor-info (:copier nil) (:predicate nil) (:conc-name ti-)
                        (:constructor make-ti))
  "A tensor of a GGUF file: NAME, SHAPE (row-major), DIMS (ggml order, as
written), TYPE (the ggml type name, e.g. \"Q8_0\"), TYPE-ID, OFFSET (from
the data section) and BYTES."
  name shape dims type type-id offset bytes
  (absolute nil)   ; byte offset in the file
  (file nil)       ; the shard holding the bytes, when not the file itself
  (data nil))      ; for files made by MAKE-FILE: the tensor itself

(defmethod print-object ((f gguf-file) stream)
  (print-unreadable-object (f stream)
    (format stream "gguf-file ~@[~S ~]v~D, ~D key~:P, ~D tensor~:P~:[~; (closed)~]"
            (gguf-file-path f) (gguf-file-version f) (length (gguf-file-metadata f))
            (length (gguf-file-tensors f))
            (and (gguf-file-base f) (null (gguf-file-handle f))))))

(defmethod print-object ((ti tensor-info) stream)
  (print-unreadable-object (ti stream)
    (format stream "tensor ~S ~A ~S" (tensor-info-name ti) (tensor-info-type ti)
            (tensor-info-shape ti))))

(defmacro define-reader (name (arg) doc form)
  `(progn (declaim (inline ,name))
          (defun ,name (,arg) ,doc ,form)))

(define-reader path (f) "The path a GGUF file object was read from (NIL when made)."
  (gguf-file-path f))
(define-reader version (f) "The GGUF version of a file object (2 or 3)."
  (gguf-file-version f))
(define-reader alignment (f) "The alignment of a file object's tensor data, in bytes."
  (gguf-file-alignment f))
(define-reader file-size (f) "The size in bytes of the file a file object was read from."
  (gguf-file-size f))
(define-reader data-offset (f) "The byte offset of a file's data section."
  (gguf-file-data-offset f))
(define-reader metadata (f)
  "The metadata of a file object: a list of (key type value) in file order.
TYPE is a keyword (:u8 :i8 :u16 :i16 :u32 :i32 :u64 :i64 :f32 :f64 :bool
:string) or (:array element-type).  An array of arrays has the type
(:array (:array ...)) when its elements agree, (:array :array) when it is
empty, and (:array type-0 type-1 ...), one type per element, when they
differ (each inner array states its own element type in the file)."
  (gguf-file-metadata f))
(define-reader tensor-infos (f) "The TENSOR-INFO of every tensor of a file object, in file order."
  (gguf-file-tensors f))
(define-reader tensor-info-name (ti) "A tensor's name." (ti-name ti))
(define-reader tensor-info-shape (ti) "A tensor's shape, row-major (rows first)." (ti-shape ti))
(define-reader tensor-info-dims (ti) "A tensor's dimensions as the file lists them (ne[0] first)."
  (ti-dims ti))
(define-reader tensor-info-type (ti) "A tensor's ggml type name, e.g. \"F32\", \"Q8_0\", \"Q4_K\"."
  (ti-type ti))
(define-reader tensor-info-type-id (ti) "A tensor's ggml type id." (ti-type-id ti))
(define-reader tensor-info-offset (ti) "A tensor's byte offset from the start of the data section."
  (ti-offset ti))
(define-reader tensor-info-bytes (ti) "A tensor's size in bytes." (ti-bytes ti))
(define-reader tensor-info-file-offset (ti)
  "A tensor's byte offset from the start of the file holding its bytes (its
shard, in a set read with :SHARDS T); NIL for a tensor of a file made by
MAKE-FILE."
  (ti-absolute ti))

(defun type-name (id)
  "The ggml name of the tensor type ID (\"F32\", \"Q8_0\", \"Q4_K\", ...),
or \"other N\" for an id ggml never used."
  (or (%ggml-type id) (format nil "other ~D" id)))

(declaim (ftype function open-shard-set))

(defun read (path &key shards)
  "Read the GGUF file at PATH (version 2 or 3) and answer a file object.
The file is mapped, not copied, and checked before anything is built from
it: a bad file signals GGUF-ERROR naming the byte offset at fault.  Tensor
data stay in the mapping until GGUF:CLOSE or until nothing refers to them.
With SHARDS true and PATH the first shard of a set split as llama.cpp
does (split.count above 1), the answer holds the tensors of every shard
(their offsets each in its own shard) and the first shard's metadata; a
shard missing, of another set or with counts that disagree signals
GGUF:SHARD-ERROR (see lisp/gguf/shards.lisp), and closes what it opened."
  (let ((f (read-one path))
        (ok nil))
    (if shards
        (unwind-protect (prog1 (open-shard-set f) (setf ok t))
          (unless ok (close f)))
        f)))

(defun read-one (path)
  (let ((name (if (pathnamep path) (namestring path) path)))
    (unless (stringp name)
      (rontolisp:element-type-error 'read path "expected a path (string or pathname), found ~S"
                                    path))
    (multiple-value-bind (handle status message offset)
        (%gguf-open (path-octets name))
      (unless handle
        (gguf-error name status offset "~A" message))
      (destructuring-bind (version alignment size data-offset kv-count tensor-count header-end)
          (%gguf-facts handle)
        (declare (ignore kv-count tensor-count header-end))
        (let ((metadata (%gguf-metadata handle)))
          (%make-gguf-file
           :path name :version version :alignment alignment :size size
           :data-offset data-offset :metadata metadata
           :handle handle :base handle
           :implicit-alignment (not (assoc "general.alignment" metadata :test #'string=))
           :tensors (loop for (tname n-dims ne type-id offset bytes absolute)
                            in (%gguf-tensors handle)
                          collect (make-ti
                                   :name tname :dims ne :shape (reverse ne)
                                   :type (type-name type-id) :type-id type-id
                                   :offset offset :bytes bytes :absolute absolute)
                          do (assert (= n-dims (length ne))))))))))

(defmacro with-file ((var path) &body body)
  "Bind VAR to (gguf:read PATH) around BODY and close the file after."
  `(let ((,var (read ,path)))
     (unwind-protect (progn ,@body)
       (close ,var))))

(defun close (f)
  "Release F's mapping now rather than when the garbage collector finds it
unreachable.  Tensors taken from F before (quantized matrices over its
bytes) signal GGUF:FILE-CLOSED-ERROR when used after this; copied arrays
stay valid.  Closing twice is harmless."
  (check-file 'close f)
  (mapc #'close (gguf-file-shards f))
  (when (gguf-file-handle f)
    (%gguf-close (gguf-file-handle f) (gguf-file-base f))
    (setf (gguf-file-handle f) nil))
  f)

(defun check-file (fn f)
  (unless (gguf-file-p f)
    (rontolisp:element-type-error fn f "expected a GGUF file object (from gguf:read or ~
gguf:make-file), found ~S" f)))

(defun keys (f)
  "The metadata keys of F, in file order."
  (check-file 'keys f)
  (mapcar #'first (gguf-file-metadata f)))

(defun value (f key)
  "The value of the metadata KEY of F, its GGUF type as second value and T
as third; NIL NIL NIL when F has no such key."
  (check-file 'value f)
  (let ((entry (assoc key (gguf-file-metadata f) :test #'string=)))
    (if entry
        (values (third entry) (second entry) t)
        (values nil nil nil))))

(defun value-type (f key)
  "The GGUF type of the metadata KEY of F (:u32, :string, (:array :i32),
...), or NIL."
  (nth-value 1 (value f key)))

(defun tensor-names (f)
  "The names of F's tensors, in file order."
  (check-file 'tensor-names f)
  (mapcar #'tensor-info-name (gguf-file-tensors f)))

(defun tensor-info (f name)
  "The TENSOR-INFO of F's tensor NAME (shape, type, offset, bytes); signals
GGUF-ERROR when F has none of that name."
  (check-file 'tensor-info f)
  (or (car (gethash name (tensor-table f)))
      (gguf-error (gguf-file-path f) :no-such-tensor nil
                  "expected a tensor named ~S, found none (~D tensor~:P: ~{~S~^, ~}~@[, ...~])"
                  name (length (gguf-file-tensors f))
                  (subseq (tensor-names f) 0 (min 5 (length (gguf-file-tensors f))))
                  (> (length (gguf-file-tensors f)) 5))))

(defun tensor-table (f)
  "A table of F's tensors by name: name -> (tensor-info . index), the first
of a name.  Built on first use and again whenever the tensor list is no
longer the one it was built from, so a lookup per tensor keeps a pass over
every tensor of a file linear."
  (let ((cache (gguf-file-by-name f))
        (tensors (gguf-file-tensors f)))
    (if (and cache (eq (car cache) tensors))
        (cdr cache)
        (let ((table (make-hash-table :test 'equal :size (max 16 (length tensors)))))
          (loop for ti in tensors
                for i from 0
                unless (gethash (ti-name ti) table)
                  do (setf (gethash (ti-name ti) table) (cons ti i)))
          (setf (gguf-file-by-name f) (cons tensors table))
          table))))

(defun edit-file (f metadata names)
  "Give the file object F the METADATA (a list of (key type value), as
GGUF:METADATA answers) and its tensors the NAMES (one per tensor, in file
order), for GGUF:WRITE to write out; lookups by name then use the new
names.  Answers F."
  (setf (gguf-file-metadata f) metadata)
  (loop for info in (gguf-file-tensors f)
        for name in names
        do (setf (ti-name info) name))
  (setf (gguf-file-by-name f) nil)
  f)

(defun tensor-index (f info)
  (let ((entry (gethash (ti-name info) (tensor-table f))))
    (if (and entry (eq (car entry) info))
        (cdr entry)
        (position info (gguf-file-tensors f)))))

(defun live-handle (f)
  (or (gguf-file-handle f)
      (file-closed-error (gguf-file-path f) "the GGUF file was closed with gguf:close")))

(defun tensor-keyword (info)
  "The keyword of INFO's tensor type (:f32 :f16 :bf16 :q8_0), or NIL for a
type rontolisp does not hold in Lisp."
  (let ((tt (find-tensor-type (tensor-info-type-id info))))
    (and tt (tensor-type-keyword tt))))

(defun tensor (f name)
  "F's tensor NAME: F32 as a fresh (simple-array single-float) of its
row-major shape, F16 and BF16 as a FLOAT16-ARRAY or BFLOAT16-ARRAY; Q8_0,
Q4_0, Q4_1, Q5_0, Q5_1, Q2_K to Q6_K, IQ4_NL and IQ4_XS as a quantized
matrix over the file's own bytes (no copy; the file stays mapped while the
matrix is reachable; its values are ggml's dequantizer's, doc/formats.md
§2-§4a, doc/quantized-matrix.md).  Other ggml types signal GGUF-ERROR."
  (let* ((info (tensor-info f name))
         (data (ti-data info)))
    (when data
      (return-from tensor data))
    (when (ti-file info)
      (return-from tensor (tensor (ti-file info) name)))
    (let ((handle (live-handle f))
          (shape (tensor-info-shape info)))
      (case (tensor-keyword info)
        (:f32 (%gguf-copy-tensor handle (tensor-index f info)
                                            (make-array shape :element-type 'single-float)))
        ((:f16 :bf16)
         (let ((bits (%gguf-copy-tensor
                      handle (tensor-index f info)
                      (make-array shape :element-type '(unsigned-byte 16)))))
           (if (eq :f16 (tensor-keyword info))
               (%make-float16-array bits)
               (%make-bfloat16-array bits))))
        (t (let ((format (quantized-format-of-type-id (tensor-info-type-id info))))
             (if format
               (%make-quantized-matrix
                (gguf-file-base f) (ti-absolute info) f shape
                (reduce #'* (butlast shape)) (car (last shape)) format)
               (gguf-error (gguf-file-path f) :unsupported-type
                           (+ (gguf-file-data-offset f) (tensor-info-offset info))
                           "tensor ~S: expected type F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, ~
Q5_1, Q2_K..Q6_K, IQ4_NL or IQ4_XS to read, found ~A"
                           name (tensor-info-type info)))))))))

;;; Making and writing files.

(defun tensor-octets (f name)
  "F's tensor NAME as an (unsigned-byte 8) vector of its bytes as stored,
for any ggml type: a view of the file's mapping, not a copy.  The mapping
stays alive while the vector is reachable, even after GGUF:CLOSE; a
tensor of a file made by MAKE-FILE answers its raw data only when it was
given as octets."
  (let* ((info (tensor-info f name))
         (data (ti-data info)))
    (cond ((typep data '(simple-array (unsigned-byte 8) (*))) data)
          ((ti-file info) (tensor-octets (ti-file info) name))
          (data (gguf-error nil :not-raw nil "gguf:tensor-octets: tensor ~S: expected raw ~
octets, found ~S (use gguf:tensor)" name (type-of data)))
          (t (%gguf-tensor-octets (live-handle f) (tensor-index f info))))))

(defun raw-tensor-info (name octets options)
  "The TENSOR-INFO of a raw tensor for MAKE-FILE: OCTETS of ggml type
:TYPE (id or name) with ggml :DIMS, checked against the type's blocks, or
:STREAM for a tensor whose bytes GGUF:WRITE's :STREAM function gives."
  (let* ((type (getf options :type))
         (dims (getf options :dims))
         (id (if (stringp type)
                 (loop for i below 256 when (equalp (%ggml-type i) type) return i)
                 type)))
    (multiple-value-bind (tname block-size block-bytes known)
        (and (typep id '(integer 0 255)) (%ggml-type id))
      (flet ((bad (control &rest args)
               (gguf-error nil :bad-tensor nil "gguf:make-file: tensor ~S: ~?" name control args)))
        (unless tname
          (bad "expected a ggml type id or name with :type, found ~S" type))
        (unless known
          (bad "expected a ggml type with a block layout, found ~A (removed from ggml)" tname))
        (unless (and (consp dims) (<= 1 (length dims) 4) (every (lambda (d) (typep d '(integer 0))) dims))
          (bad "expected :dims, 1 to 4 non-negative integers (ne[0] first), found ~S" dims))
        (unless (zerop (mod (first dims) block-size))
          (bad "expected ne[0] a multiple of ~A's block size ~D, found ~D" tname block-size (first dims)))
        (let ((bytes (* (/ (reduce #'* dims) block-size) block-bytes)))
          (unless (or (eq octets :stream) (= bytes (length octets)))
            (bad "expected ~D bytes for ~A ~S, found ~D" bytes tname dims (length octets))))
        (make-ti :name name :dims dims :shape (reverse dims) :type tname :type-id id
                 :data octets)))))


(defun data-type-id (data)
  (if (rontolisp:quantized-matrix-p data)
      (quantized-matrix-type-id data) ; any of its types, written as it is
      (let ((tt (tensor-type-of data)))
        (and tt (tensor-type-id tt)))))

(defun map-elements (fn value type &optional (end (length value)))
  "Call FN with each element of the array VALUE of GGUF TYPE (see
GGUF:METADATA) below END and that element's GGUF type; answers the list of
FN's values."
  (let ((types (rest type)))
    (loop for i below end
          collect (funcall fn (aref value i) (if (rest types) (pop types) (first types))))))

(defun value-type-id (type)
  (position (if (consp type) (first type) type) (gguf-value-types)))

(defun check-value (key type value)
  "Signal GGUF-ERROR unless VALUE is a valid value of the GGUF TYPE."
  (flet ((bad (expected)
           (gguf-error nil :bad-value nil "gguf:make-file: key ~S of type ~(~S~): expected ~A, ~
found ~S" key type expected value)))
    (let ((base (if (consp type) (first type) type)))
      (unless (value-type-id type)
        (bad "a GGUF type (:u8 :i8 :u16 :i16 :u32 :i32 :u64 :i64 :f32 :f64 :bool :string or (:array type))"))
      (case base
        (:u8 (unless (typep value '(unsigned-byte 8)) (bad "an integer from 0 to 255")))
        (:i8 (unless (typep value '(signed-byte 8)) (bad "an integer from -128 to 127")))
        (:u16 (unless (typep value '(unsigned-byte 16)) (bad "an integer from 0 to 65535")))
        (:i16 (unless (typep value '(signed-byte 16)) (bad "a 16-bit signed integer")))
        (:u32 (unless (typep value '(unsigned-byte 32)) (bad "a 32-bit unsigned integer")))
        (:i32 (unless (typep value '(signed-byte 32)) (bad "a 32-bit signed integer")))
        (:u64 (unless (typep value '(unsigned-byte 64)) (bad "a 64-bit unsigned integer")))
        (:i64 (unless (typep value '(signed-byte 64)) (bad "a 64-bit signed integer")))
        (:f64 (unless (floatp value) (bad "a float")))
        ;; A finite double beyond single-float range would be written as
        ;; infinity without a word.
        (:f32 (unless (and (floatp value)
                           (or (not (typep value 'double-float))
                               (ext:float-infinity-p value)
                               (ext:float-nan-p value)
                               (not (ext:float-infinity-p (%double-to-single value)))))
                (bad "a float within the f32 range (magnitude below 3.4e38)")))
        (:bool (unless (member value '(t nil)) (bad "T or NIL")))
        (:string (unless (stringp value) (bad "a string")))
        (:array (unless (and (vectorp value) (not (stringp value)) (consp type) (rest type)
                             (every #'value-type-id (rest type)))
                  (bad "a vector, with the type given as (:array element-type)"))
         (when (and (cddr type) (/= (length (rest type)) (length value)))
           (bad "a vector of as many elements as the type gives element types"))
         (map-elements (lambda (v elem) (check-value key elem v)) value type))))))

(defun make-file (&key metadata tensors (alignment 32) implicit-alignment)
  "A GGUF file object to write with GGUF:WRITE.  METADATA is a list of (key
type value): TYPE one of :u8 :i8 :u16 :i16 :u32 :i32 :u64 :i64 :f32 :f64
:bool :string, or (:array element-type) with a vector VALUE.  TENSORS is a
list of (name data) or (name data :dims ne): DATA a (simple-array
single-float) (written F32), a float16-array (F16), a bfloat16-array (BF16)
or a quantized matrix (Q8_0); the file's ggml dims are the reverse of the
data's dimensions unless :DIMS gives them.  Raw tensors of any ggml type
are (name octets :type id-or-name :dims ne): OCTETS an (unsigned-byte 8)
vector (e.g. from GGUF:TENSOR-OCTETS) of exactly the bytes the type's
blocks take, written unchanged; OCTETS :STREAM instead declares a tensor
whose bytes GGUF:WRITE's :STREAM function gives while the file is written.  general.alignment is
written (ALIGNMENT unless METADATA has the key), except with
IMPLICIT-ALIGNMENT true, METADATA without the key and ALIGNMENT 32, GGUF's
default: then the file has no such key, as llama.cpp writes the shards after
a set's first."
  (let ((given (assoc "general.alignment" metadata :test #'string=)))
    (dolist (entry metadata)
      (destructuring-bind (key type value) entry
        (unless (and (stringp key) (plusp (length key)))
          (gguf-error nil :bad-key nil "gguf:make-file: expected a non-empty string key, found ~S"
                      key))
        (check-value key type value)))
    (when (and given (not (eq (second given) :u32)))
      (gguf-error nil :alignment-type nil "gguf:make-file: expected general.alignment of type ~
:u32, found ~S" (second given)))
    (%make-gguf-file
     :alignment (if given (third given) alignment)
     :implicit-alignment (and implicit-alignment (not given) (eql alignment 32))
     :metadata (copy-list metadata)
     :tensors
     (loop for (name data . options) in tensors
           when (or (eq data :stream) (typep data '(simple-array (unsigned-byte 8) (*))))
             collect (raw-tensor-info name data options)
           else
           collect
           (let* ((type-id (or (data-type-id data)
                             (gguf-error nil :bad-tensor nil "gguf:make-file: tensor ~S: expected ~
a (simple-array single-float), float16-array, bfloat16-array or quantized matrix, found ~S"
                                         name data)))
                  (dims (or (getf options :dims) (reverse (packed-dimensions data)))))
             (make-ti :name name :dims dims :shape (reverse dims)
                      :type (type-name type-id) :type-id type-id
                      :data data))))))

(defun octets (string)
  (%utf8-octets string))

(defun write-value (w type value)
  (let ((id (value-type-id type)))
    (case (if (consp type) (first type) type)
      (:string (%gguf-w-string w (octets value)))
      (:array
       (let* ((elem (second type))
              (elem-id (value-type-id elem)))
         (%gguf-w-array-begin w elem-id)
         (if (and (member elem '(:u8 :i8 :u16 :i16 :u32 :i32 :u64 :i64 :f32 :f64))
                  (typep value '(simple-array * (*)))
                  (equal (upgraded-array-element-type (array-element-type value))
                         (upgraded-array-element-type (elem-lisp-type elem))))
             (%gguf-w-array-raw w value)
             (map-elements (lambda (v et) (write-value w et v)) value type))
         (%gguf-w-array-end w)))
      (t (%gguf-w-scalar w id value)))))

(defun elem-lisp-type (elem)
  (ecase elem
    (:u8 '(unsigned-byte 8)) (:i8 '(signed-byte 8))
    (:u16 '(unsigned-byte 16)) (:i16 '(signed-byte 16))
    (:u32 '(unsigned-byte 32)) (:i32 '(signed-byte 32))
    (:u64 '(unsigned-byte 64)) (:i64 '(signed-byte 64))
    (:f32 'single-float) (:f64 'double-float)))

(defvar *writing* nil
  "The path GGUF:WRITE is writing, while its :STREAM function runs.")

(defun write (path f &key stream)
  "Write the file object F to PATH as GGUF version 3: its metadata in
order (general.alignment always present, except that a file read from a
file without the key is written back without it, byte for byte), then its
tensors, each padded to the alignment.  The file is written under a
temporary name and renamed, so a failure leaves no partial file; it
signals GGUF-ERROR.  Answers PATH.

STREAM, a function of one argument, is how tensors declared :STREAM (see
MAKE-FILE) get their bytes: the header and tensor table are written first,
then STREAM is called once with the writer, and must give every such
tensor's bytes in file order (with %STREAM-TENSOR or
%GGUF-W-STREAM-PUT); the other tensors are written as the stream reaches
them.  Only one tensor's bytes need be in memory at a time.  A non-local
exit from STREAM removes the temporary file."
  (check-file 'write f)
  (let* ((name (absolute-namestring path))
         (w (%gguf-writer-new (gguf-file-alignment f)
                                         (gguf-file-implicit-alignment f)))
         (streamed nil))
    (flet ((check (ok &optional reason message offset)
             (unless ok
               (gguf-error name reason offset "~A" message))))
      (unwind-protect
           (progn
             (dolist (entry (gguf-file-metadata f))
               (destructuring-bind (key type value) entry
                 (%gguf-w-key w (octets key))
                 (write-value w type value)))
             (dolist (info (gguf-file-tensors f))
               (let ((data (ti-data info)))
                 (cond ((eq data :stream)
                        (setf streamed t)
                        (%gguf-w-tensor-deferred w (octets (tensor-info-name info))
                                                 (tensor-info-dims info)
                                                 (tensor-info-type-id info)))
                       (data
                        (%gguf-w-tensor w (octets (tensor-info-name info))
                                        (tensor-info-dims info)
                                        (tensor-info-type-id info)
                                        (if (typep data '(or rontolisp:float16-array
                                                          rontolisp:bfloat16-array))
                                            (rontolisp:half-array-bits data)
                                            data)))
                       (t
                        (let ((source (or (ti-file info) f)))
                          (live-handle source)
                          (%gguf-w-tensor-raw w (octets (tensor-info-name info))
                                              (tensor-info-dims info)
                                              (tensor-info-type-id info)
                                              (gguf-file-base source)
                                              (ti-absolute info)
                                              (tensor-info-bytes info)))))))
             (cond (streamed
                    (unless stream
                      (gguf-error name :no-stream nil "gguf:write: tensors declared :stream ~
need the :stream function that gives their bytes"))
                    (multiple-value-call #'check (%gguf-w-stream-begin w (octets name)))
                    (let ((*writing* name))
                      (funcall stream w))
                    (multiple-value-call #'check (%gguf-w-stream-end w)))
                   (t
                    (multiple-value-call #'check (%gguf-w-write w (octets name))))))
        ;; Freeing the writer removes the temporary file of a stream left open.
        (%release w)))
    path))

(defun stream-put-tensor (w f name &key (type (tensor-info-type-id (tensor-info f name)))
                                        mask (release t))
  "Inside GGUF:WRITE's :STREAM function: append the tensor NAME of the
open GGUF file F to the writer W's stream, converted to the ggml TYPE id
(F32, F16, BF16, Q8_0 or a legacy, K-quant or IQ4 type; a tensor of one
of the quantized types is dequantized first; the tensor's own type copies
it, checked) in
pieces of a few MiB, on the thread pool, the values read from F's file
(for a set of shards, the tensor's own shard's)
with pread through the descriptor of the file mapped (much faster than
the first touches of its mapping, and a file truncated meanwhile is a
:read-error GGUF-ERROR naming it, not a fault), or from the mapping for a
file parsed from memory.  MASK, an (unsigned-byte 8)
vector of one flag per column, gives Q8_0 its outlier-aware scales.
RELEASE drops the mapping's pages once read.  Answers T, or (values NIL status
where) when a value is NaN or infinite (:non-finite, WHERE its element
index) or overflows TYPE (:scale-overflow, WHERE the element, or the
quantized type's block); a failure of the output signals GGUF-ERROR."
  (let* ((info (tensor-info f name))
         (dims (tensor-info-dims info))
         (source (or (ti-file info) f)))  ; the tensor's own shard of a set
    (live-handle source)
    (multiple-value-bind (ok status where offset)
        (%stream-tensor w (gguf-file-base source) (ti-absolute info)
                                   (tensor-info-type-id info) (reduce #'* dims) (first dims)
                                   type mask release
                                   ;; pread through the file's own descriptor
                                   (and (gguf-file-path source) t))
      (cond (ok t)
            ((eq status :read-error) (gguf-error (gguf-file-path source) status offset "~A" where))
            (offset (gguf-error *writing* status offset "~A" where))
            (t (values nil status where))))))
