;;;; export.lisp - `rontolisp export MODELS_DIR OUT_DIR': every model
;;;; directory under MODELS_DIR (Laya or Hugging Face, as `convert' takes
;;;; them) converted to OUT_DIR/NAME.gguf, benched over the built-in
;;;; questions at one thread beside its F32 conversion, and listed in
;;;; OUT_DIR/manifest.json and OUT_DIR/bench.json (doc/export.md).
;;;;
;;;; One model that fails (or a subdirectory that cannot be read) is
;;;; reported and skipped; the command exits 1 at the end.  Every file is
;;;; written atomically (GGUF:WRITE, WRITE-JSON-FILE), the F32 comparison
;;;; file is a WITH-TEMPORARY-FILE (an interrupt removes it), and a re-run
;;;; replaces the previous results whole, deleting only the .gguf files the
;;;; previous run wrote (PREVIOUS-EXPORTS: the old manifest is a claim to
;;;; check, not an order).  Directories are listed and files named through
;;;; base/files.lisp, so any name works, as for every other command.

(in-package "COMMAND-LINE")

;;; SHA-256 (FIPS 180-4) of a file, for the manifest: the blocks are
;;; folded by the primitive %SHA256-BLOCKS (prims/sha256.c).

(defun file-sha256 (path)
  "The SHA-256 of the file PATH's bytes, as 64 lowercase hex digits;
FILE-IO-ERROR when it cannot be read."
  (let ((h (make-array 8 :element-type '(unsigned-byte 32)
                         :initial-contents '(#x6a09e667 #xbb67ae85 #x3c6ef372 #xa54ff53a
                                             #x510e527f #x9b05688c #x1f83d9ab #x5be0cd19)))
        (buffer (make-array (+ (ash 1 20) 128) :element-type '(unsigned-byte 8)))
        (total 0))
    (let ((in (open-input-octets path)))
      (unwind-protect
           (loop
             (let* ((n (read-sequence buffer in :end (ash 1 20))))
               (incf total n)
               (if (= n (ash 1 20))
                   (%sha256-blocks h buffer n)
                   ;; The last piece: pad with 1, zeros and the bit length.
                   (let ((end (* 64 (ceiling (+ n 9) 64))))
                     (fill buffer 0 :start n :end end)
                     (setf (aref buffer n) #x80)
                     (loop for i from 0 below 8
                           do (setf (aref buffer (- end 1 i)) (ldb (byte 8 (* 8 i)) (* 8 total))))
                     (%sha256-blocks h buffer end)
                     (return)))))
        (close in)))
    (format nil "~(~{~8,'0X~}~)" (coerce h 'list))))

;;; The export.

(defun model-directory-p (dir)
  "True when DIR is a directory `convert' takes: a Laya directory
(encoder/config.json) or a Hugging Face one (config.json)."
  (let ((root (directory-prefix dir)))
    (or (path-kind (concatenate 'string root "encoder/config.json"))
        (path-kind (concatenate 'string root "config.json")))))

(defun model-subdirectories (models-dir)
  "The names of MODELS-DIR's subdirectories to export, in the byte order of
their names: those that are model directories (MODEL-DIRECTORY-P) and
those that cannot be read, so cannot be told (EXPORT-MODEL reports them).
A symbolic link to a directory is a subdirectory under its own name."
  (let ((root (directory-prefix models-dir))
        (kind (path-kind models-dir)))
    (unless (eq kind :directory)
      (file-io-error (namestring models-dir) "expected a directory of model directories, found ~
~:[nothing~;~:*a ~(~A~)~]" kind))
    (loop for (name . kind) in (directory-entries models-dir)
          for dir = (concatenate 'string root name)
          when (and (or (eq kind :directory)
                        (and (eq kind :link) (eq (path-kind dir) :directory)))
                    (or (not (ignore-errors (directory-entries dir) t))
                        (model-directory-p dir)))
            collect name)))

(defun file-type-counts (f)
  "The tensor types of the GGUF file object F as a JSON object: type name
to tensor count, in order of first appearance."
  (let ((counts '()))
    (dolist (info (gguf:tensor-infos f))
      (let ((entry (assoc (gguf:tensor-info-type info) counts :test #'string=)))
        (if entry (incf (cdr entry)) (push (cons (gguf:tensor-info-type info) 1) counts))))
    (cons :object (reverse counts))))

(defun file-parameters (f)
  "The number of weights in the GGUF file object F's tensors."
  (reduce #'+ (gguf:tensor-infos f) :key (lambda (i) (reduce #'* (gguf:tensor-info-dims i)))))

(defun file-question-probabilities (path reps)
  "The microseconds per question (MEDIAN-MICROSECONDS of REPS rounds of
MODEL:*QUESTIONS*) and the questions' probabilities of the model in the GGUF
file PATH at the current thread count, or NIL and NIL when it has no
decision head."
  (gguf:with-file (f path)
    (when (decision-head-p f)
      (let ((m (model:load f)))
        (values (/ (median-microseconds
                    (lambda () (dolist (q model:*questions*) (model:decide m q :activations :q8)))
                    reps)
                   (length model:*questions*))
                (question-probabilities m :q8))))))

(defun export-model (dir out &key type head-type reps)
  "Convert the model directory DIR to the GGUF file OUT (TYPE, HEAD-TYPE)
and bench it at one thread against an F32 conversion (written beside OUT
under a temporary name, WITH-TEMPORARY-FILE, and removed).  Answers the
manifest entry and the bench rows as plists; a DIR that cannot be read or
a failed conversion of OUT signals."
  (directory-entries dir)               ; a directory that cannot be read, named
  (convert-directory dir out :type type :head-type head-type)
  (let ((entry (gguf:with-file (f out)
                 (list :bytes (gguf:file-size f)
                       :parameters (file-parameters f) :types (file-type-counts f)
                       :tensors (length (gguf:tensor-infos f))))))
    (setf (getf entry :sha256) (file-sha256 out))
    (multiple-value-bind (us probabilities) (file-question-probabilities out reps)
      (multiple-value-bind (f32-us references)
          (if (and (eq type :f32) (eq head-type :f32))
              (values us probabilities)
              (with-temporary-file (f32-path out "f32")
                (when (ignore-errors (convert-directory dir f32-path :type :f32 :head-type :f32))
                  (file-question-probabilities f32-path reps))))
        (values entry
                (list (list :format (string-upcase (symbol-name type)) :us us
                            :dp (and probabilities references
                                     (max-probability-error probabilities references)))
                      (list :format "F32" :us f32-us :dp (and references 0d0))))))))

(defun export-machine ()
  "The machine the figures of bench.json were measured on (doc/export.md)."
  (let ((cpu (%cpu-info)))
    (list :object (cons "cores" (getf cpu :cores))
          (cons "llc_bytes" (if (plusp (getf cpu :llc-bytes)) (getf cpu :llc-bytes) :null))
          (cons "simd_path" (simd-path)))))

(defun json-or-null (x)
  "X for WRITE-JSON, or JSON null when X is NIL (a missing figure)."
  (if x x :null))

(defun manifest-model (name type head-type &key file entry error)
  "The manifest.json object of the model NAME (doc/export.md): its FILE and
ENTRY (EXPORT-MODEL's plist), or null figures and the message ERROR."
  (flet ((type-name (k) (string-downcase (symbol-name k))))
    (list :object (cons "name" name) (cons "file" (json-or-null file))
          (cons "bytes" (json-or-null (getf entry :bytes)))
          (cons "parameters" (json-or-null (getf entry :parameters)))
          (cons "tensors" (json-or-null (getf entry :tensors)))
          (cons "type" (type-name type)) (cons "head_type" (type-name head-type))
          (cons "types" (json-or-null (getf entry :types)))
          (cons "sha256" (json-or-null (getf entry :sha256)))
          (cons "error" (json-or-null error)))))

(defun bench-model (name rows)
  "The bench.json object of the model NAME with EXPORT-MODEL's ROWS
(doc/export.md)."
  (list :object (cons "name" name)
        (cons "formats"
              (map 'vector (lambda (r)
                             (list :object (cons "format" (getf r :format))
                                   (cons "us_per_question" (json-or-null (getf r :us)))
                                   (cons "max_abs_dp" (json-or-null (getf r :dp)))))
                   rows))))

(defun export-models (models-dir out-dir &key (type :f16) (head-type :f32) (reps 3))
  "Convert every model directory under MODELS-DIR to OUT-DIR/NAME.gguf,
bench each at one thread, and write OUT-DIR/manifest.json and
OUT-DIR/bench.json (doc/export.md).  A model that fails gets a line on
stderr, an \"error\" in the manifest and no file; the others go on.
Answers the number of failed models."
  (let* ((names (model-subdirectories models-dir))
         (root (directory-prefix models-dir))
         (out (directory-prefix out-dir))
         (previous (previous-exports out))
         (old-threads (threads))
         (manifest '()) (bench '()) (failures 0)
         (*progress* nil))              ; one line per model, ours
    (ensure-directories out)
    (unwind-protect
         (progn
           (setf (threads) 1)
           (loop for name in names
                 for i from 1
                 for file = (concatenate 'string name ".gguf")
                 for path = (concatenate 'string out file)
                 do (handler-case
                        (multiple-value-bind (entry rows)
                            (export-model (concatenate 'string root name) path
                                          :type type :head-type head-type :reps reps)
                          (push (manifest-model name type head-type :file file :entry entry)
                                manifest)
                          (push (bench-model name rows) bench)
                          (format t "[~D/~D] ~A: ~D bytes, ~
~:[no decision head~;~:*~,1F µs/question, max |dp| ~A~]~%"
                                  i (length names) name (getf entry :bytes)
                                  (getf (first rows) :us)
                                  (let ((dp (getf (first rows) :dp)))
                                    (if dp (float-text dp) "not measured")))
                          (finish-output))
                      (error (c)
                        (incf failures)
                        (remove-previous-export out name previous)
                        (format *error-output* "rontolisp export: ~A: ~A~%" name (condition-line c))
                        (push (manifest-model name type head-type :error (condition-line c))
                              manifest)
                        (push (bench-model name (list (list :format (string-upcase (symbol-name type)))
                                                      (list :format "F32")))
                              bench)))
                    (finish-output *error-output*)))
      (setf (threads) old-threads))
    (loop for (name . nil) in previous
          unless (member name names :test #'string=)
            do (remove-previous-export out name previous))
    (write-json-file (concatenate 'string out "manifest.json")
                     (list :object (cons "models" (coerce (reverse manifest) 'vector))))
    (write-json-file (concatenate 'string out "bench.json")
                     (list :object (cons "machine" (export-machine)) (cons "threads" 1)
                           (cons "iters" reps) (cons "questions" (length model:*questions*))
                           (cons "models" (coerce (reverse bench) 'vector))))
    failures))

(defun previous-exports (out)
  "What OUT/manifest.json, left by an earlier run, says export wrote in
OUT: an alist of (NAME . SHA256), one per model whose file was NAME.gguf.
The manifest may have been edited by anyone: an entry of any other form (a
file that is not its name followed by .gguf, a name with a slash, a
SHA-256 that is not 64 hex digits) says nothing, nor does a manifest that
cannot be read."
  (let* ((old (ignore-errors (read-json-file (concatenate 'string out "manifest.json"))))
         (models (and (hash-table-p old) (gethash "models" old))))
    (when (vectorp models)
      (loop for m across models
            for name = (and (hash-table-p m) (gethash "name" m))
            for file = (and (hash-table-p m) (gethash "file" m))
            for sha = (and (hash-table-p m) (gethash "sha256" m))
            when (and (stringp name) (plusp (length name))
                      (not (find-if (lambda (c) (member c (list #\/ (code-char 0)))) name))
                      (stringp file) (string= file (concatenate 'string name ".gguf"))
                      (stringp sha) (= 64 (length sha)) (every (lambda (c) (digit-char-p c 16)) sha))
              collect (cons name (string-downcase sha))))))

(defun remove-previous-export (out name previous)
  "Delete OUT/NAME.gguf when PREVIOUS (PREVIOUS-EXPORTS) lists it and it is
still the file export wrote: a regular file (not a symbolic link) with the
SHA-256 the manifest gave.  Anything else is left as it is."
  (let ((sha (cdr (assoc name previous :test #'string=)))
        (file (concatenate 'string name ".gguf")))
    (when (and sha
               (eq :file (cdr (assoc file (ignore-errors (directory-entries out)) :test #'string=)))
               (equal sha (ignore-errors (file-sha256 (concatenate 'string out file)))))
      (ignore-errors (delete-path (concatenate 'string out file))))))
