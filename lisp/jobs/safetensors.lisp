;;;; safetensors.lisp - JSON and safetensors files from Lisp, for the
;;;; converter.
;;;;
;;;; Both parsers are C: libjansson for JSON (a Debian library, fast on the
;;;; megabytes of a tokenizer.json and strict: duplicate keys and invalid
;;;; UTF-8 are refused) and gguf/safetensors.c, which checks every offset,
;;;; shape and dtype of a safetensors file before anything is built from it.
;;;; JSON maps to Lisp as: object -> EQUAL hash table, array -> simple
;;;; vector, string -> string, integer -> integer, real -> double-float,
;;;; true -> T, false -> NIL, null -> :NULL.  A lone surrogate escape
;;;; \udc80..\udcff, which WRITE-JSON writes for a byte that was not UTF-8,
;;;; reads back as that byte's character U+DC80..U+DCFF (jansson alone
;;;; refuses it; see prims/ecl/safetensors.c); any other lone surrogate is
;;;; refused.
;;;;
;;;; The writer is Lisp: it lays out the little-endian bytes of each array
;;;; after a JSON header padded to 8 bytes and hands them to the atomic
;;;; writer (files.lisp).

(in-package "COMMAND-LINE")

(defun call-with-safetensors (path fn)
  "Call FN with the open safetensors file PATH (its handle and its name as
a string); a file that breaks the format signals SAFETENSORS-ERROR."
  (let ((name (absolute-namestring path)))
    (multiple-value-bind (handle status message offset) (%st-open (%utf8-octets name))
      (unless handle
        (safetensors-error name status offset "~A" message))
      (unwind-protect (funcall fn handle name)
        (%release handle)))))

(defun header-entries (handle)
  "The (name dims) of each tensor of the open safetensors file HANDLE."
  (loop for (tname nil shape) in (%st-tensors handle) collect (list tname shape)))

(defun read-safetensors-header (path)
  "The tensors the header of the safetensors file PATH names, a list of
(name dims) in the header's order, read without their data (the header is
checked as READ-SAFETENSORS checks it)."
  (call-with-safetensors path (lambda (handle name)
                                (declare (ignore name))
                                (header-entries handle))))

(defun read-safetensors (path &key check)
  "Read the safetensors file PATH.  Answers a list of (name array) in the
header's order -- ARRAY a fresh (simple-array single-float) of the tensor's
shape for F32, a FLOAT16-ARRAY or BFLOAT16-ARRAY for F16 and BF16 -- and as
second value the __metadata__ as a list of (key . value) strings.  A file
that breaks the format (header length, JSON, dtype, shape, offsets, sizes,
overlaps) signals SAFETENSORS-ERROR naming the file and the byte offset.
CHECK, when given, is called with the header's (name dims) list (as
READ-SAFETENSORS-HEADER answers it) before any tensor's data is read: it
refuses a file whose header it finds wrong by signalling."
  (call-with-safetensors
   path
   (lambda (handle name)
     (declare (ignore name))
     (when check (funcall check (header-entries handle)))
     (values
      (loop for (tname dtype shape) in (%st-tensors handle)
            for i from 0
            for type = (tensor-type-keyword (find-tensor-type dtype))
            collect (list tname
                          (if (eq type :f32)
                              (%st-copy-tensor handle i (make-array shape :element-type 'single-float))
                              (let ((bits (%st-copy-tensor handle i (make-array shape :element-type '(unsigned-byte 16)))))
                                (if (eq type :f16)
                                    (%make-float16-array bits)
                                    (%make-bfloat16-array bits))))))
      (%st-metadata handle)))))

(defun safetensors-dtype (array)
  "The safetensors dtype of ARRAY: F32, F16 and BF16 are spelled as ggml
spells them."
  (let ((tt (tensor-type-of array)))
    (unless (and tt (member (tensor-type-keyword tt) '(:f32 :f16 :bf16)))
      (error 'type-error :datum array
                         :expected-type '(or (simple-array single-float) float16-array bfloat16-array)))
    (tensor-type-name tt)))

(defun write-safetensors (path tensors &key metadata)
  "Write TENSORS, a list of (name array) -- ARRAY a (simple-array
single-float), FLOAT16-ARRAY or BFLOAT16-ARRAY -- to the safetensors file
PATH, with METADATA (a list of (key . value) strings) as __metadata__.  The
file is written atomically (WRITE-FILE-ATOMICALLY).  Answers PATH."
  (let* ((offset 0)
         (blobs '())
         (entries '()))
    (dolist (entry tensors)
      (destructuring-bind (tname array) entry
        (let* ((raw (if (typep array '(or float16-array bfloat16-array)) (half-array-bits array) array))
               (octets (%octets-of raw)))
          (push octets blobs)
          (push (cons tname (list :object
                                  (cons "dtype" (safetensors-dtype array))
                                  (cons "shape" (coerce (array-dimensions raw) 'vector))
                                  (cons "data_offsets" (vector offset (+ offset (length octets))))))
                entries)
          (incf offset (length octets)))))
    (let* ((header (with-output-to-string (s)
                     (write-json (list* :object
                                        (append (when metadata
                                                  (list (cons "__metadata__" (cons :object metadata))))
                                                (reverse entries)))
                                 s)))
           (hbytes (%utf8-octets header))
           (pad (mod (- (length hbytes)) 8))
           (n (+ (length hbytes) pad)))
      (let ((prefix (make-array (+ 8 (length hbytes) pad) :element-type '(unsigned-byte 8)
                                                           :initial-element 32)))
        (dotimes (i 8) (setf (aref prefix i) (ldb (byte 8 (* 8 i)) n)))
        (replace prefix hbytes :start1 8)
        (write-file-atomically path (cons prefix (reverse blobs)))))
    path))
