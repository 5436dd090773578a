;;;; fixtures.lisp - what several suites share: the executable under test
;;;; and running it, temporary files, the golden files and their gguf-py JSON
;;;; dumps, random test data.

(in-package "RONTOLISP-TESTS")

(defparameter *root*
  (asdf:system-source-directory "rontolisp-tests")
  "The repository's root directory: every path the tests name is relative
to it.")
(defparameter *exe* (or (ext:getenv "RONTOLISP_EXE")
                        (namestring (merge-pathnames "build/rontolisp" *root*)))
  "The executable under test, for tests of the command line (the environment
variable RONTOLISP_EXE overrides build/rontolisp).")
(defvar *tmp-counter* 0)

(defun tmp-path (name)
  "A fresh path under the system's temporary directory."
  (format nil "~A/rl-test-~D-~D-~A"
          (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp"))
          (ext:getpid) (incf *tmp-counter*) name))

(defun golden (name)
  "The path of a file under tests/golden/, as a string."
  (namestring (merge-pathnames (concatenate 'string "tests/golden/" name) *root*)))

(defun read-file-string (path)
  (with-open-file (s path :external-format :utf-8)
    (let* ((str (make-string (file-length s)))
           (n (read-sequence str s)))
      (subseq str 0 n))))

(defun write-file-string (path string)
  (with-open-file (s path :direction :output :if-exists :supersede
                          :external-format :utf-8)
    (write-string string s))
  path)

(defun run-exe (args &key (input ""))
  "Run the rontolisp executable with ARGS (strings), INPUT (a string) on its
standard input; answer (values exit-status stdout stderr)."
  (let ((in (write-file-string (tmp-path "in") input))
        (out (tmp-path "out"))
        (err (tmp-path "err")))
    (unwind-protect
         (let ((code (nth-value 1 (ext:run-program *exe* args
                                                   :input in :output out :error err
                                                   :if-output-exists :supersede
                                                   :if-error-exists :supersede
                                                   :wait t))))
           (values code (read-file-string out) (read-file-string err)))
      (dolist (f (list in out err)) (ignore-errors (delete-file f))))))

(defun contains (haystack needle)
  (and (search needle haystack) t))

(defmacro skip-unless-file ((path) &body body)
  "Run BODY when PATH exists; otherwise say the test is skipped (a skip is
not a pass)."
  `(if (probe-file ,path)
       (progn ,@body)
       (skip "missing test file ~A" ,path)))

;;; Golden files: their JSON dumps (made by gguf-py, see tests/golden/README.md)
;;; and raw tensor bytes read at the offsets the dumps give, so the tests of
;;; the quantizer do not depend on our own GGUF reader.

(defun golden-json (name)
  "The parsed JSON dump NAME.json of the golden file NAME (a hash table)."
  (with-open-file (s (golden (concatenate 'string name ".json")) :external-format :utf-8)
    (let ((*read-default-float-format* 'double-float)) ; JSON numbers are doubles
      (yason:parse s))))

(defun json-tensors (json)
  (gethash "tensors" json))

(defun json-tensor (json name)
  (find name (json-tensors json) :key (lambda (h) (gethash "name" h)) :test #'string=))

(defun read-octets (path start count)
  (with-open-file (s path :element-type '(unsigned-byte 8))
    (file-position s start)
    (let ((v (make-array count :element-type '(unsigned-byte 8))))
      (assert (= count (read-sequence v s)))
      v)))

(defun file-octets (path)
  "Every byte of the file at PATH."
  (read-octets path 0 (with-open-file (s path :element-type '(unsigned-byte 8)) (file-length s))))

(defun golden-tensor-octets (name json tensor)
  (read-octets (golden name)
               (+ (gethash "data_offset" json) (gethash "offset" tensor))
               (gethash "nbytes" tensor)))

(defun tensor-rows-cols (tensor)
  "A golden tensor's shape as (rows cols): cols = ne[0], rows the rest."
  (let ((ne (gethash "ne" tensor)))
    (list (reduce #'* (rest ne)) (first ne))))

(defun octets-u16 (octets)
  (let ((v (make-array (floor (length octets) 2) :element-type '(unsigned-byte 16))))
    (dotimes (i (length v) v)
      (setf (aref v i) (logior (aref octets (* 2 i)) (ash (aref octets (1+ (* 2 i))) 8))))))

(defun octets-f32 (octets)
  (let ((v (make-array (floor (length octets) 4) :element-type 'single-float)))
    (dotimes (i (length v) v)
      (let ((bits (logior (aref octets (* 4 i)) (ash (aref octets (+ 1 (* 4 i))) 8)
                          (ash (aref octets (+ 2 (* 4 i))) 16) (ash (aref octets (+ 3 (* 4 i))) 24))))
        (setf (aref v i) (rontolisp::%bits-single bits))))))

(defun reshape (vector dims)
  "A fresh simple array of DIMS with VECTOR's elements in row-major order."
  (let ((a (make-array dims :element-type (array-element-type vector))))
    (dotimes (i (length vector) a)
      (setf (row-major-aref a i) (aref vector i)))))

(defun golden-source-array (name json tensor)
  "The golden tensor as the array QUANTIZE takes: a (rows cols) single-float
array for F32, a float16-array or bfloat16-array for F16 and BF16."
  (let ((octets (golden-tensor-octets name json tensor))
        (dims (tensor-rows-cols tensor)))
    (ecase (gethash "type_id" tensor)
      (0 (reshape (octets-f32 octets) dims))
      (1 (rontolisp::%make-float16-array (reshape (octets-u16 octets) dims)))
      (30 (rontolisp::%make-bfloat16-array (reshape (octets-u16 octets) dims))))))

(defun matrix-octets (m)
  "The bytes WRITE-SEQUENCE writes for the quantized matrix M, through a
temporary file."
  (let ((path (tmp-path "qm.bin")))
    (unwind-protect
         (progn
           (with-open-file (s path :direction :output :element-type '(unsigned-byte 8)
                                   :if-exists :supersede)
             (write-sequence m s))
           (with-open-file (s path :element-type '(unsigned-byte 8))
             (let ((v (make-array (file-length s) :element-type '(unsigned-byte 8))))
               (read-sequence v s)
               v)))
      (ignore-errors (delete-file path)))))

;;; gguf-py's names for GGUF value types, and the bad-file corpus: for the
;;; GGUF reader's tests and inspect's.

(defparameter *gguf-py-types*
  '(("UINT8" . "u8") ("INT8" . "i8") ("UINT16" . "u16") ("INT16" . "i16")
    ("UINT32" . "u32") ("INT32" . "i32") ("FLOAT32" . "f32") ("BOOL" . "bool")
    ("STRING" . "string") ("ARRAY" . "array") ("UINT64" . "u64") ("INT64" . "i64")
    ("FLOAT64" . "f64")))

(defun our-type-name (gguf-py-name)
  (cdr (assoc gguf-py-name *gguf-py-types* :test #'string=)))

(defun bad-corpus ()
  (directory (merge-pathnames "tests/bad/*.gguf" *root*)))

;;; Random test data.

(defun random-matrix (rows cols &key (scale 1.0) (state (make-random-state t)))
  (let ((a (make-array (list rows cols) :element-type 'single-float)))
    (dotimes (i (array-total-size a) a)
      (setf (row-major-aref a i) (* scale (- (random 2.0 state) 1.0))))))

(defun vec-random-matrix (rows cols scale state)
  (random-matrix rows cols :scale scale :state state))

(defun vec-random-vector (n scale state &optional (type 'single-float))
  (let ((v (make-array n :element-type type)))
    (dotimes (i n v)
      (setf (aref v i) (coerce (* scale (- (random 2.0 state) 1.0)) type)))))
