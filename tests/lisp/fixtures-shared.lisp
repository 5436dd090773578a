;;;; fixtures-shared.lisp - the helpers that more than one suite uses, beside
;;;; fixtures.lisp: running the executable on a pseudo-terminal, model files,
;;;; gguf-py and llama-quantize, JSON and file names.  A suite loads the
;;;; fixtures and its own file, never another suite's file, so what two
;;;; suites share lives here.

(in-package "RONTOLISP-TESTS")

;;; Running the executable on a pseudo-terminal.

(defparameter *pty-run*
  (or (ext:getenv "RONTOLISP_PTY_RUN")
      (namestring (merge-pathnames "build/tools/pty_run" *root*)))
  "The pseudo-terminal driver (make tools builds it).")

(defun fresh-home ()
  "A new empty directory to serve as HOME, as a string ending in /."
  (let ((dir (format nil "~A/" (tmp-path "home"))))
    (ensure-directories-exist dir)
    dir))

(defun remove-home (home)
  (dolist (f (directory (merge-pathnames "*.*" home)))
    (ignore-errors (delete-file f)))
  (dolist (f (directory (merge-pathnames ".*" home)))
    (ignore-errors (delete-file f)))
  (ignore-errors (si:rmdir home)))

(defun pty-session (steps &key (args '()) (home nil) (seconds 30))
  "Run the executable with ARGS on a pseudo-terminal, HOME set to HOME (a
fresh directory when NIL), driven by STEPS (a list of strings, each
\"expect TEXT\", \"send TEXT\" or \"sleep MS\" as tools/pty_run.c takes
them), for SECONDS at most; answer (values exit-status output)."
  (let ((file (write-file-string (tmp-path "steps") (format nil "~{~A~%~}" steps)))
        (home* (or home (fresh-home))))
    (unwind-protect
         (multiple-value-bind (code out err)
             (apply #'sh "h=$1; p=$2; t=$3; f=$4; shift 4; HOME=\"$h\" exec \"$p\" \"$t\" \"$f\" -- \"$0\" \"$@\""
                    home* *pty-run* (princ-to-string seconds) file args)
           (values code (concatenate 'string out err)))
      (ignore-errors (delete-file file))
      (unless home (remove-home home*)))))

;;; File names.

(defun names-in (dir)
  "The names in the directory DIR (a path of any characters) sorted as
bytes, each decoded from its bytes as UTF-8 (a byte that is not UTF-8 kept
as U+DC80..U+DCFF, so the bytes are compared exactly)."
  (let ((out (tmp-path "ls")))
    (sh "LC_ALL=C ls -A \"$1\" > \"$2\"" (rontolisp::native-namestring dir) out)
    (prog1 (let ((bytes (file-octets out)) (start 0) (names '()))
             (loop for nl = (position 10 bytes :start start)
                   while nl
                   do (push (rontolisp::%utf8-string (subseq bytes start nl)) names)
                      (setf start (1+ nl)))
             (nreverse names))
      (delete-file out))))

(defun native-arg (string)
  "STRING (any characters) as an argument ECL's run-program passes as its
UTF-8 bytes (see OCTETS-ARG)."
  (octets-arg (rontolisp::%utf8-octets string)))

;;; Temporary directories and patched files.

(defun poke-f32-bits (path tensor index bits)
  "Overwrite element INDEX (row-major) of the F32 TENSOR of the GGUF file
PATH with the 32-bit pattern BITS (a NaN, say, which Lisp will not make)."
  (let ((pos (gguf:with-file (f path)
               (+ (gguf:data-offset f) (gguf:tensor-info-offset (gguf:tensor-info f tensor))
                  (* 4 index)))))
    (with-open-file (s path :direction :io :element-type '(unsigned-byte 8) :if-exists :overwrite)
      (file-position s pos)
      (write-sequence (coerce (loop for b below 4 collect (ldb (byte 8 (* 8 b)) bits))
                              '(vector (unsigned-byte 8)))
                      s))))

(defmacro with-tmp-dir ((var) &body body)
  `(let ((,var (string-right-trim "/" (tmp-path "dir"))))
     (ensure-directories-exist (format nil "~A/" ,var))
     (unwind-protect (progn ,@body)
       (dolist (f (directory (format nil "~A/*.*" ,var))) (ignore-errors (delete-file f)))
       (ignore-errors (si:rmdir ,var)))))

;;; GGUF files.

(defun every-type-tensors ()
  "(name octets :type id :dims ne) for every ggml type with a block layout."
  (loop for id below 256
        for (name block-size block-bytes known) = (multiple-value-list (rontolisp::%ggml-type id))
        when known
          collect (let* ((n (* 2 2 block-bytes))
                         (v (make-array n :element-type '(unsigned-byte 8))))
                    (dotimes (i n) (setf (aref v i) (mod (+ (* 7 i) (* 13 id)) 256)))
                    (list (format nil "t.~A" name) v :type id :dims (list (* 2 block-size) 2)))))

;;; JSON files.

(defun edit-json (path fn)
  "Replace the JSON file PATH by FN of its parsed object (edited in place
or answered)."
  (let* ((v (rontolisp:read-json-file path))
         (new (or (funcall fn v) v)))
    (with-open-file (s path :direction :output :if-exists :supersede :external-format :utf-8)
      (text::write-json (json-data new) s))))

(defun json-data (v)
  "Parsed JSON V in the form WRITE-JSON takes."
  (cond ((hash-table-p v)
         (cons :object (loop for k being the hash-keys of v using (hash-value x)
                             collect (cons k (json-data x)))))
        ((stringp v) v)
        ((vectorp v) (map 'vector #'json-data v))
        ((eq v t) :true)
        ((null v) :false)
        (t v)))

;;; Conditions.

(defun error-message (thunk)
  (handler-case (progn (funcall thunk) nil)
    (error (c) (princ-to-string c))))

;;; Comparing floats.

(defun flat (m)
  "The elements of the matrix M as a vector over its storage."
  (make-array (array-total-size m) :element-type (array-element-type m) :displaced-to m))

(defun same-bits-p (a b)
  "True when the float vectors A and B (no NaNs) hold the same values with
the same signs, zeros included: for floats, the same bits."
  (and (= (length a) (length b))
       (equal (array-element-type a) (array-element-type b))
       (every (lambda (u v) (and (= u v) (= (float-sign u) (float-sign v)))) a b)))

;;; The encoder's knobs.

(defun enc-with-knobs (fn)
  "Call FN with SIMD off and on and 1 to 3 threads; the knobs restored."
  (let ((simd (rontolisp:simd)) (threads (rontolisp:threads)))
    (unwind-protect
         (dolist (on '(nil t))
           (loop for n from 1 to 3
                 do (setf (rontolisp:simd) on (rontolisp:threads) n)
                    (funcall fn on n)))
      (setf (rontolisp:simd) simd (rontolisp:threads) threads))))

;;; Model files and the encoder.

(defvar *encoder-files* (make-hash-table :test 'equal)
  "Encoder-only random model files written once per run, by (preset type).")

(defun encoder-file (preset type)
  "The path of an encoder-only GGUF file of the random PRESET with encoder
matrices of TYPE, written on first use."
  (let ((key (list preset type)))
    (or (gethash key *encoder-files*)
        (let ((path (tmp-path (format nil "~A-~(~A~).gguf" preset type))))
          (gguf:write path (command-line::random-model preset :type type :encoder-only t))
          (setf (gethash key *encoder-files*) path)))))

(defun token-sequence (n &key (vocab 1000) (seed 3))
  (loop for i below n collect (mod (+ seed (* i 37)) vocab)))

(defun relative-error (ours reference)
  "max |OURS - REFERENCE| over max |REFERENCE|, and the cosine."
  (multiple-value-bind (diff big cos) (command-line::hidden-state-error ours reference)
    (values (/ diff big) cos)))

(defun llama-or-skip (file sequences)
  (or (command-line::llama-encode file sequences)
      (progn (skip-reference "llama.cpp's libraries or build/tools/llama_embed are missing (run sh ~
tests/fetch-llama-lib.sh, or set RL_LLAMA_LIB)")
             nil)))

(defun dequantized-file (file)
  "An F32 in-memory copy of FILE, its Q8_0 matrices dequantized."
  (let ((f (gguf:read file)))
    (gguf:make-file
     :metadata (remove "general.alignment" (gguf:metadata f) :key #'first :test #'string=)
     :tensors (loop for info in (gguf:tensor-infos f)
                    for name = (gguf:tensor-info-name info)
                    for data = (gguf:tensor f name)
                    collect (list name (cond ((rontolisp:quantized-matrix-p data)
                                              (rontolisp:dequantize data))
                                             ((or (rontolisp:float16-array-p data)
                                                  (rontolisp:bfloat16-array-p data))
                                              (rontolisp:half-array-to-single data))
                                             (t data))
                                  :dims (gguf:tensor-info-dims info))))))

(defun check-same-bits-on-every-path (e ids &key (thread-counts '(1 2)))
  "Check that the encoder E answers the same bits for IDS with SIMD off and
on and each of THREAD-COUNTS, for :q8 and for :q8x2 activations."
  (let ((old-threads (rontolisp:threads)) (old-simd (rontolisp:simd))
        (results '()))
    (unwind-protect
         (dolist (simd '(nil t))
           (dolist (threads thread-counts)
             (setf (rontolisp:simd) simd (rontolisp:threads) threads)
             (dolist (act '(:q8 :q8x2))
               (push (list simd threads act (model:encode e ids :activations act)) results))))
      (setf (rontolisp:threads) old-threads (rontolisp:simd) old-simd))
    (dolist (act '(:q8 :q8x2))
      (let ((runs (remove act results :key #'third :test-not #'eq)))
        (dolist (r (rest runs))
          (is (equalp (fourth (first runs)) (fourth r))
              "~A: simd ~A threads ~D differs from simd ~A threads ~D" act (first r) (second r)
              (first (first runs)) (second (first runs))))))))

(defun file-without (path &key key tensor)
  "An in-memory copy of the GGUF file PATH without the metadata KEY or the
TENSOR."
  (let ((f (gguf:read path)))
    (gguf:make-file
     :metadata (remove-if (lambda (e) (or (string= (first e) "general.alignment")
                                          (equal (first e) key)))
                          (gguf:metadata f))
     :tensors (loop for info in (gguf:tensor-infos f)
                    for name = (gguf:tensor-info-name info)
                    unless (equal name tensor)
                      collect (list name (gguf:tensor f name) :dims (gguf:tensor-info-dims info))))))

(defun file-with (path &key key value type tensor change)
  "An in-memory copy of the GGUF file PATH with the metadata KEY set to
VALUE of the GGUF TYPE (added when absent), and the data of TENSOR (a
fresh single-float copy) passed to CHANGE, which alters it in place."
  (let ((f (gguf:read path)))
    (gguf:make-file
     :metadata (append (loop for e in (gguf:metadata f)
                             unless (member (first e) (list "general.alignment" key)
                                            :test #'equal)
                               collect e)
                       (and key (list (list key type value))))
     :tensors (loop for info in (gguf:tensor-infos f)
                    for name = (gguf:tensor-info-name info)
                    for data = (gguf:tensor f name)
                    collect (list name (if (equal name tensor)
                                           (let ((copy (copy-seq* data)))
                                             (funcall change copy)
                                             copy)
                                           data)
                                  :dims (gguf:tensor-info-dims info))))))

(defun copy-seq* (a)
  "A fresh copy of the single-float array A."
  (let ((copy (make-array (array-dimensions a) :element-type 'single-float)))
    (dotimes (i (array-total-size a) copy)
      (setf (row-major-aref copy i) (row-major-aref a i)))))

(defun model-error-message (thunk)
  "The message of the MODEL-ERROR THUNK signals, or NIL when it signals none."
  (handler-case (progn (funcall thunk) nil)
    (model:model-error (c) (rontolisp:rontolisp-error-message c))))

(defun hostile-file (file tensor &key change nan-at)
  "Write a temporary copy of the F32 GGUF FILE whose TENSOR CHANGE altered
(a function of a fresh copy of its data) and whose TENSOR's element
NAN-AT (row-major) is a NaN; answer its path."
  (let ((path (tmp-path "hostile.gguf")))
    (gguf:write path (file-with file :tensor tensor :change (or change #'identity)))
    (when nan-at
      (poke-f32-bits path tensor nan-at #x7fc00000))
    path))

;;; embed's JSON.

;;; The decision suite's model files, which the server's suite serves too.

(defvar *decision-files* (make-hash-table :test 'equal)
  "Random model files with their head, written once per run, by (preset head-type).")

(defun decision-file (preset head-type)
  "The path of a GGUF file of the random PRESET with its decision head of
HEAD-TYPE (encoder F32), written on first use."
  (let ((key (list preset head-type)))
    (or (gethash key *decision-files*)
        (let ((path (tmp-path (format nil "~A-head-~(~A~).gguf" preset head-type))))
          (gguf:write path (command-line::random-model preset :type :f32 :head-type head-type))
          (setf (gethash key *decision-files*) path)))))

;;; Servers in child processes (swank, serve) announce their port on a line.

(defun wait-for-line (path pattern deadline)
  "The first line of the file PATH that contains PATTERN, waiting for it
until the internal real time DEADLINE; NIL when it never came."
  (loop
    (let ((line (ignore-errors
                 (with-open-file (s path)
                   (loop for l = (read-line s nil) while l
                         when (search pattern l) return l)))))
      (when line (return line))
      (when (> (get-internal-real-time) deadline) (return nil))
      (sleep 0.2))))

(defun embed-json (args)
  "The parsed JSON lines of `rontolisp embed ARGS --json'."
  (multiple-value-bind (code out err) (run-exe (append (list "embed") args (list "--json")))
    (is (eql 0 code) "embed ~{~A~^ ~}: ~A" args err)
    (mapcar #'yason:parse (split-lines out))))

(defun json-floats (row)
  (map '(simple-array single-float (*)) (lambda (x) (coerce x 'single-float)) row))

;;; gguf-py.

(defparameter *gguf-py-deadline* 300
  "Seconds one gguf-py script may run on one of the small test files.")

(defun gguf-py-python ()
  "A python3 that imports numpy, tqdm and yaml (what gguf-py's scripts need): the
first of $RL_PYTHON, /usr/bin/python3 (Debian's, where python3-numpy
installs) and the python3 on PATH that does; NIL when none does."
  (multiple-value-bind (code out)
      (sh "for p in \"$RL_PYTHON\" /usr/bin/python3 python3; do
             [ -n \"$p\" ] && \"$p\" -c 'import numpy, tqdm, yaml' >/dev/null 2>&1 && { echo \"$p\"; exit 0; }
           done; exit 1")
    (and (eql code 0) (first (split-lines out)))))

(defun run-gguf-py (python script &rest args)
  "Run gguf-py's SCRIPT with PYTHON and ARGS within *GGUF-PY-DEADLINE*;
answer (values exit-status output) with stdout and stderr together."
  (let ((out (tmp-path "gguf-py-out")))
    (unwind-protect
         (values (run-child python (list* script args)
                            :input nil :output out :error :output :if-output-exists :supersede
                            :deadline *gguf-py-deadline*)
                 (read-file-string out))
      (ignore-errors (delete-file out)))))

;;; llama-quantize.

(defun run-llama-quantize (&rest args)
  "Run build/tools/llama_quantize with ARGS; answer (values exit-status
output), stdout and stderr together, or NIL when it is not built."
  (let ((tool (namestring (merge-pathnames "build/tools/llama_quantize" *root*)))
        (out (tmp-path "llama-quantize-out")))
    (when (probe-file tool)
      (unwind-protect
           (values (run-child tool args :input nil :output out :error :output
                                        :if-output-exists :supersede)
                   (read-file-string out))
        (ignore-errors (delete-file out))))))

;;; Templates (the template and decision suites).

(defun nested-loops (n body)
  "A template of N loops over `options', one inside the other, around BODY."
  (with-output-to-string (s)
    (dotimes (k n) (format s "{% for x~D in options %}" k))
    (write-string body s)
    (dotimes (k n) (write-string "{% endfor %}" s))))

;;; Model recipes and JSON answers (the decision-refs and trained suites).

(defun recipe-path (template dir)
  "TEMPLATE (a recipe's path or argument) with {dir} replaced by DIR."
  (let ((at (search "{dir}" template)))
    (if at
        (concatenate 'string (subseq template 0 at) dir (subseq template (+ at 5)))
        template)))

(defun delete-tree (dir)
  "Delete the directory DIR (a namestring ending in /) and everything in it."
  (dolist (f (directory (merge-pathnames "**/*.*" dir)))
    (unless (or (pathname-name f) (pathname-type f)) (setf f nil))
    (when f (ignore-errors (delete-file f))))
  (dolist (d (sort (mapcar #'namestring (directory (merge-pathnames "**/" dir))) #'>
                   :key #'length))
    (ignore-errors (si:rmdir d))))

(defun json-same (a b)
  "True when the parsed JSON values A and B are equal (strings by STRING=,
objects by their keys and values)."
  (typecase a
    (string (and (stringp b) (string= a b)))
    (hash-table (and (hash-table-p b) (= (hash-table-count a) (hash-table-count b))
                     (loop for k being the hash-keys of a using (hash-value v)
                           always (multiple-value-bind (w found) (gethash k b)
                                    (and found (json-same v w))))))
    (vector (and (vectorp b) (not (stringp b)) (= (length a) (length b))
                 (every #'json-same a b)))
    (t (eql a b))))

;;; A command as a co-process: one line in, its answer out, then the next.

(defun complete-lines (path)
  "The lines of the file PATH that end in a newline so far (NIL for none
or no file)."
  (let ((text (ignore-errors (read-file-string path))))
    (and text (split-lines (subseq text 0 (1+ (or (position #\Newline text :from-end t) -1)))))))

(defun co-process-answers (args inputs &key (seconds 30))
  "Run the executable with ARGS, its standard input a pipe: write each line
of INPUTS (strings) in turn, and before writing the next wait (at most
SECONDS from the start) for the answer line it printed.  Answers the list of
answers, one line each, a NIL for an answer that never came (the rest are
then not written), and the standard error.  The child is killed however
this is left."
  (let ((out (tmp-path "co-out")) (err (tmp-path "co-err")))
    (multiple-value-bind (process stream)
        (run-child *exe* args :wait nil :input :stream :output out :error err
                              :if-output-exists :supersede :if-error-exists :supersede)
      (unwind-protect
           (let ((deadline (+ (get-internal-real-time) (* seconds internal-time-units-per-second)))
                 (answers '()))
             (loop for input in inputs
                   for k from 1
                   do (write-line input stream)
                      (finish-output stream)
                      (let ((line (loop for lines = (complete-lines out)
                                        when (>= (length lines) k) return (nth (1- k) lines)
                                        when (> (get-internal-real-time) deadline) return nil
                                        do (sleep 0.05))))
                        (push line answers)
                        (unless line (return))))
             (close stream)
             (wait-child process :deadline seconds :what (format nil "rontolisp~{ ~A~}" args))
             (values (nreverse answers) (ignore-errors (read-file-string err))))
        (ignore-errors (close stream))
        (end-child process)
        (dolist (f (list out err)) (ignore-errors (delete-file f)))))))

(defun check-co-process (args inputs)
  "Check that ARGS (a command reading standard input with \"-\") answers
each of INPUTS as its line comes, and with the line the same command
prints for INPUTS written at once."
  (multiple-value-bind (answers err) (co-process-answers args inputs)
    (is (every #'stringp answers) "~{~A~^ ~}: answers ~S before the next line; stderr ~A"
        args answers err)
    (is (= (length inputs) (length answers)))
    (multiple-value-bind (code out err2) (run-exe args :input (format nil "~{~A~%~}" inputs))
      (is (eql 0 code) "~A" err2)
      (is (equal (split-lines out) answers) "~S~%~S" (split-lines out) answers))))

;;; Pages in a real browser: Debian's chromium, headless, driven by
;;; tests/ref/browse.js over the DevTools protocol (the serve page, bench.html).

(defun browser-missing ()
  "Why the pages cannot be opened in a browser here (no chromium, no node),
or NIL."
  (multiple-value-bind (code out) (sh "for p in chromium node; do
  command -v \"$p\" >/dev/null 2>&1 || printf '%s ' \"$p\"; done; exit 0")
    (declare (ignore code))
    (let ((missing (string-trim " " out)))
      (and (plusp (length missing)) missing))))

(defmacro with-browser (() &body body)
  "Run BODY when the pages can be opened in a browser here; otherwise skip
the test (fail under CI=true, SKIP-REFERENCE) saying what is missing.  A
browser test puts all of its checks in BODY, so that without a browser it
is skipped, never passed."
  (let ((missing (gensym)))
    `(let ((,missing (browser-missing)))
       (if ,missing
           (skip-reference "the browser tests need ~A (tests/ensure-deps.sh installs them)" ,missing)
           (progn ,@body)))))

(defun browse (url steps &key (deadline 90) (width 1200) (height 800))
  "Open URL in headless chromium, run STEPS (a list of hash tables or
plists, as tests/ref/browse.js takes them: :type/:text, :click,
:press/:ctrl, :wait, :eval, :screenshot) and answer the values of the :eval steps in order and
the errors the page logged (console errors, uncaught exceptions, failed
requests), each a list.  Called within WITH-BROWSER; a step that fails,
or a run past DEADLINE seconds (the browser is then killed), fails the
test.  The window is WIDTH by HEIGHT pixels (a screenshot takes the
whole page, at least that)."
  (let ((missing (browser-missing)))
    (when missing
      (error "the browser tests need ~A: open pages within WITH-BROWSER" missing)))
  (let ((job (tmp-path "browse.json"))
        (*read-default-float-format* 'double-float))
    (unwind-protect
         (progn
           (with-open-file (s job :direction :output :if-exists :supersede :external-format :utf-8)
             (yason:encode
              (alexandria:plist-hash-table
               (list "url" url "deadline" deadline "width" width "height" height
                     "steps" (mapcar (lambda (step)
                                       (if (hash-table-p step)
                                           step
                                           (alexandria:plist-hash-table
                                            (loop for (k v) on step by #'cddr
                                                  append (list (string-downcase k) v))
                                            :test 'equal)))
                                     steps))
               :test 'equal)
              s))
           (multiple-value-bind (code out err)
               (let ((*child-deadline* (+ deadline 30)))
                 (sh "exec node \"$1\" \"$2\"" (namestring (merge-pathnames "tests/ref/browse.js" *root*))
                     job))
             (unless (eql 0 code)
               (error "the browser at ~A: exit ~S: ~A" url code err))
             (let ((answer (yason:parse out)))
               (values (coerce (gethash "results" answer) 'list)
                       (coerce (gethash "errors" answer) 'list)))))
      (ignore-errors (delete-file job)))))

(defun page-screenshot (name)
  "Where a page test puts its screenshot NAME.png: build/pages/ (README's
pictures, doc/images/, are copies of them)."
  (namestring (ensure-directories-exist (merge-pathnames (format nil "build/pages/~A.png" name)
                                                         *root*))))

(defun png-file-p (path)
  "True when PATH holds a PNG image (its eight-byte signature)."
  (equalp (ignore-errors (read-octets path 0 8)) #(137 80 78 71 13 10 26 10)))
;;; The trained model of tests/models/pico-tasks (doc/trained-model.md).

(defun trained-path (name)
  "The path of NAME under tests/models/pico-tasks/, as a string."
  (namestring (merge-pathnames (concatenate 'string "tests/models/pico-tasks/" name) *root*)))

(defun trained-questions ()
  "The held-out questions of questions.jsonl, parsed (each with its \"answer\")."
  (command-line::read-question-file (trained-path "questions.jsonl")))
