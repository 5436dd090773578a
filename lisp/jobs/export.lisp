;;;; export.lisp - `rontolisp export MODELS_DIR OUT_DIR': every model
;;;; directory under MODELS_DIR (Laya or Hugging Face, as `convert' takes
;;;; them) converted to OUT_DIR/NAME.gguf, benched over the built-in
;;;; questions at one thread beside its F32 conversion, and listed in
;;;; OUT_DIR/manifest.json and OUT_DIR/bench.json, which OUT_DIR/bench.html
;;;; shows as one page (doc/export.md).
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

;;; bench.html: bench.json and the manifest's sizes as one page.

(defparameter *bench-page* (source-file-text "bench-page.html")
  "The page bench.html is made from (lisp/jobs/bench-page.html), whose
markers {{machine}} and {{models}} BENCH-PAGE fills.")

(defun object-value (object key)
  "The value of KEY in OBJECT, a JSON object as WRITE-JSON takes it
((:object (KEY . VALUE) ...)); NIL when it has none."
  (cdr (assoc key (rest object) :test #'string=)))

(defun page-figure (value control)
  "VALUE formatted with the FORMAT CONTROL as HTML text, or the placeholder
of a missing figure when it is NIL or JSON null."
  (if (member value '(nil :null))
      "<span class=\"missing\" title=\"not measured\">&mdash;</span>"
      (html-text (format nil control value))))

(defun dp-text (dp)
  "A max |dp| in two significant digits (0 as 0)."
  (if (zerop dp) "0" (string-downcase (format nil "~,1,,,,,'eE" dp))))

(defun bench-page (manifest bench)
  "The text of bench.html for the MANIFEST and BENCH objects of
manifest.json and bench.json: the machine, then one row per model (its
name, parameters, file size and tensors, and per format the microseconds
per question and max |dp|), a placeholder for each null figure."
  (let* ((models (coerce (object-value bench "models") 'list))
         (entries (coerce (object-value manifest "models") 'list))
         (formats (remove-duplicates
                   (loop for m in models
                         append (map 'list (lambda (f) (object-value f "format"))
                                     (object-value m "formats")))
                   :test #'string= :from-end t))
         (machine (object-value bench "machine")))
    (fill-page
     *bench-page*
     "{{machine}}"
     (format nil "<b>~D</b> core~:P, last-level cache <b>~A</b>, SIMD path <b>~A</b>; ~
<b>~D</b> thread, the median of <b>~D</b> round~:P over <b>~D</b> questions"
             (object-value machine "cores")
             (let ((llc (object-value machine "llc_bytes")))
               (if (integerp llc) (html-text (size-string llc)) "unknown"))
             (html-text (object-value machine "simd_path"))
             (object-value bench "threads") (object-value bench "iters")
             (object-value bench "questions"))
     "{{models}}"
     (with-output-to-string (s)
       (format s "<table>~%<thead>~%<tr><th rowspan=\"2\">model</th><th rowspan=\"2\">parameters</th>~
<th rowspan=\"2\">file</th><th rowspan=\"2\">tensors</th>~
~{<th class=\"format\" colspan=\"2\">~A</th>~}</tr>~%<tr>~{~*<th class=\"first\">&micro;s / question</th>~
<th>max |&Delta;p|</th>~}</tr>~%</thead>~%<tbody>~%"
               (mapcar #'html-text formats) formats)
       (dolist (m models)
         (let* ((name (object-value m "name"))
                (entry (find name entries :key (lambda (e) (object-value e "name"))
                                          :test #'equal))
                (bytes (object-value entry "bytes"))
                (err (object-value entry "error"))
                (figures (object-value m "formats")))
           (format s "<tr data-model=\"~A\"><th scope=\"row\">~A~@[<span class=\"error\">~A</span>~]~
~:[~;<span class=\"small\">no decision head</span>~]</th>~
<td>~A</td><td>~A~@[<span class=\"small\">~A</span>~]</td><td>~A</td>"
                   (html-text name) (html-text name)
                   (and (stringp err) (html-text err))
                   ;; Converted, yet no figure for its own format: no head.
                   (and (not (stringp err)) (plusp (length figures))
                        (eq :null (object-value (aref figures 0) "us_per_question")))
                   (page-figure (object-value entry "parameters") "~:D")
                   (page-figure bytes "~:D B")
                   (and (integerp bytes) (>= bytes 1024) (html-text (size-string bytes)))
                   (page-figure (object-value entry "tensors") "~D"))
           (dolist (kind formats)
             (let* ((f (find kind figures
                             :key (lambda (f) (object-value f "format")) :test #'string=))
                    (dp (object-value f "max_abs_dp")))
               (format s "<td class=\"first\">~A</td><td>~A</td>"
                       (page-figure (object-value f "us_per_question") "~,1F")
                       (if (realp dp) (html-text (dp-text dp)) (page-figure dp "")))))
           (format s "</tr>~%")))
       (format s "</tbody>~%</table>")))))

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

(defun file-question-probabilities (path reps questions)
  "The microseconds per question (MEDIAN-MICROSECONDS of REPS rounds of
QUESTIONS) and the questions' probabilities of the model in the GGUF file
PATH at the current thread count, or NIL and NIL when it has no decision
head."
  (gguf:with-file (f path)
    (when (decision-head-p f)
      (let ((m (model:load f)))
        (values (/ (median-microseconds
                    (lambda () (dolist (q questions) (model:decide m q :activations :q8)))
                    reps)
                   (length questions))
                (question-probabilities m :q8 questions))))))

(defparameter *model-questions-file* "questions.jsonl"
  "The file of a model directory whose questions export benches the model
over, in place of the built-in ones (doc/export.md).")

(defun model-questions (dir)
  "The questions the model directory DIR is benched over: those of its
*MODEL-QUESTIONS-FILE* when it has one (READ-QUESTION-FILE), else
MODEL:*QUESTIONS*; the second value is the file's name, or NIL."
  (let ((path (concatenate 'string (directory-prefix dir) *model-questions-file*)))
    (if (path-kind path)
        (values (read-question-file path) *model-questions-file*)
        (values model:*questions* nil))))

(defun export-model (dir out &key type head-type reps)
  "Convert the model directory DIR to the GGUF file OUT (TYPE, HEAD-TYPE)
and bench it at one thread against an F32 conversion (written beside OUT
under a temporary name, WITH-TEMPORARY-FILE, and removed), over
MODEL-QUESTIONS of DIR.  Answers the manifest entry, the bench rows as
plists, and the number of questions and their file's name (NIL: the
built-in ones); a DIR that cannot be read, a failed conversion of OUT, a
question file that cannot be read or a bench that fails signals, and OUT,
once written, is then removed (a model that fails has no file)."
  (directory-entries dir)               ; a directory that cannot be read, named
  (multiple-value-bind (questions question-file) (model-questions dir) ; before OUT is written
    (convert-directory dir out :type type :head-type head-type)
    (let ((done nil))
      (unwind-protect
           (multiple-value-prog1 (bench-exported-model dir out type head-type reps questions
                                                       question-file)
             (setf done t))
        (unless done (ignore-errors (delete-path out)))))))

(defun bench-exported-model (dir out type head-type reps questions question-file)
  "EXPORT-MODEL's figures of OUT, converted from DIR, over QUESTIONS (from
QUESTION-FILE, or NIL)."
  (let ((entry (gguf:with-file (f out)
                 (list :bytes (gguf:file-size f)
                       :parameters (file-parameters f) :types (file-type-counts f)
                       :tensors (length (gguf:tensor-infos f))))))
    (setf (getf entry :sha256) (file-sha256 out))
    (multiple-value-bind (us probabilities) (file-question-probabilities out reps questions)
      (multiple-value-bind (f32-us references)
          (if (and (eq type :f32) (eq head-type :f32))
              (values us probabilities)
              (with-temporary-file (f32-path out "f32")
                (when (ignore-errors (convert-directory dir f32-path :type :f32 :head-type :f32))
                  (file-question-probabilities f32-path reps questions))))
        (values entry
                (list (list :format (string-upcase (symbol-name type)) :us us
                            :dp (and probabilities references
                                     (max-probability-error probabilities references))
                            :accuracy (and probabilities
                                           (decision-accuracy probabilities questions)))
                      (list :format "F32" :us f32-us :dp (and references 0d0)
                            :accuracy (and references (decision-accuracy references questions))))
                (length questions) question-file)))))

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

(defun bench-model (name rows &optional questions question-file)
  "The bench.json object of the model NAME with EXPORT-MODEL's ROWS, the
number of QUESTIONS it was benched over and their QUESTION-FILE
(doc/export.md)."
  (list :object (cons "name" name)
        (cons "questions" (json-or-null questions))
        (cons "question_file" (json-or-null question-file))
        (cons "formats"
              (map 'vector (lambda (r)
                             (list :object (cons "format" (getf r :format))
                                   (cons "us_per_question" (json-or-null (getf r :us)))
                                   (cons "max_abs_dp" (json-or-null (getf r :dp)))
                                   (cons "accuracy" (json-or-null (getf r :accuracy)))))
                   rows))))

(defun export-models (models-dir out-dir &key (type :f16) (head-type :f32) (reps 3))
  "Convert every model directory under MODELS-DIR to OUT-DIR/NAME.gguf,
bench each at one thread, and write OUT-DIR/manifest.json,
OUT-DIR/bench.json and OUT-DIR/bench.html (doc/export.md).  A model that fails gets a line on
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
                        (multiple-value-bind (entry rows questions question-file)
                            (export-model (concatenate 'string root name) path
                                          :type type :head-type head-type :reps reps)
                          (push (manifest-model name type head-type :file file :entry entry)
                                manifest)
                          (push (bench-model name rows questions question-file) bench)
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
    (let ((manifest (list :object (cons "models" (coerce (reverse manifest) 'vector))))
          (bench (list :object (cons "machine" (export-machine)) (cons "threads" 1)
                       (cons "iters" reps) (cons "questions" (length model:*questions*))
                       (cons "models" (coerce (reverse bench) 'vector)))))
      (write-json-file (concatenate 'string out "manifest.json") manifest)
      (write-json-file (concatenate 'string out "bench.json") bench)
      (with-output-to-file (s (concatenate 'string out "bench.html"))
        (write-string (bench-page manifest bench) s)))
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
