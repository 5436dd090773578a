;;;; test-export.lisp - `rontolisp export': a directory of three random
;;;; models (s1-pico, s1-nano and one with a truncated safetensors file)
;;;; converted, benched and listed; manifest.json and bench.json against
;;;; doc/export.md's layouts, the files against `inspect --json' and
;;;; sha256sum, and a re-run replacing the results.

(in-package "RONTOLISP-TESTS")

(def-suite export :in all :description "The export command: convert, bench and list a models directory.")
(in-suite export)

(defun doc-tables (heading)
  "The first-column names of each table under the section HEADING of
doc/export.md: a list of lists, one per table, in order (the names are
written `so` in the table's first column)."
  (let ((lines (split-lines (read-file-string (merge-pathnames "doc/export.md" *root*))))
        (in nil) (tables '()) (current '()))
    (dolist (line lines)
      (cond ((and (>= (length line) 3) (string= "## " line :end2 3))
             (setf in (string= line heading)))
            ((and in (>= (length line) 3) (string= "| `" line :end2 3))
             (push (subseq line 3 (position #\` line :start 3)) current))
            (current (push (reverse current) tables) (setf current '()))))
    (when current (push (reverse current) tables))
    (reverse tables)))

(defun manifest-fields ()
  "The fields of a model of manifest.json, as doc/export.md lists them."
  (first (doc-tables "## `manifest.json`")))

(defun bench-fields ()
  "The fields of bench.json, as doc/export.md lists them."
  (first (doc-tables "## `bench.json`")))

(defun bench-format-fields ()
  "The fields of a format of a model of bench.json, as doc/export.md lists them."
  (second (doc-tables "## `bench.json`")))

(defun bench-model-fields ()
  "The fields of a model of bench.json, as doc/export.md lists them."
  (third (doc-tables "## `bench.json`")))

(test export-doc-lists-the-fields
  "The layouts the tests check are read from doc/export.md's tables."
  (is (equal '("name" "file" "bytes" "parameters" "tensors" "type" "head_type" "types" "sha256" "error")
             (manifest-fields)))
  (is (equal '("machine" "threads" "iters" "questions" "models") (bench-fields)))
  (is (equal '("format" "us_per_question" "max_abs_dp" "accuracy") (bench-format-fields)))
  (is (equal '("name" "questions" "question_file" "formats") (bench-model-fields))))

(defun field (object key)
  "KEY of the parsed JSON OBJECT, failing the test when it is absent."
  (multiple-value-bind (v present) (gethash key object)
    (is-true present "expected the field ~S, found ~S" key
             (loop for k being the hash-keys of object collect k))
    v))

(defun json-null-p (v) (eq v :null))

(defun check-manifest-model (out m broken)
  (dolist (k (manifest-fields)) (field m k))
  (let ((name (gethash "name" m)))
    (if (string= name broken)
        (progn
          (is (stringp (gethash "error" m)))
          (dolist (k '("file" "bytes" "parameters" "tensors" "types" "sha256"))
            (is (json-null-p (gethash k m)) "~A: ~A should be null" name k))
          (is-false (probe-file (format nil "~A/~A.gguf" out name))))
        (let* ((path (format nil "~A/~A" out (gethash "file" m)))
               (inspect (multiple-value-bind (code stdout) (run-exe (list "inspect" "--json" path))
                          (is (= 0 code))
                          (rontolisp:parse-json stdout))))
          (is (json-null-p (gethash "error" m)))
          (is (string= (format nil "~A.gguf" name) (gethash "file" m)))
          (is (= (gethash "size" inspect) (gethash "bytes" m)))
          (is (= (length (gethash "tensors" inspect)) (gethash "tensors" m)))
          (is (= (length (gethash "tensors" inspect))
                 (loop for v being the hash-values of (gethash "types" m) sum v)))
          (is (= (if (string= name "a-pico") 202305 1134209) (gethash "parameters" m)))
          (is (string= "f16" (gethash "type" m)))
          (is (string= (subseq (nth-value 1 (sh "sha256sum \"$1\"" path)) 0 64)
                       (gethash "sha256" m)))))))

(defun check-bench (bench names broken)
  (dolist (k (bench-fields)) (field bench k))
  (let ((machine (gethash "machine" bench)))
    (dolist (k '("cores" "llc_bytes" "simd_path")) (field machine k)))
  (is (= 1 (gethash "threads" bench)))
  (is (= 1 (gethash "iters" bench)))
  (let ((models (gethash "models" bench)))
    (is (equal names (map 'list (lambda (m) (field m "name")) models)))
    (loop for m across models
          for name = (gethash "name" m)
          do (dolist (k (bench-model-fields)) (field m k))
             (is (json-null-p (gethash "question_file" m)))
             (if (string= name broken)
                 (is (json-null-p (gethash "questions" m)))
                 (is (= (gethash "questions" bench) (gethash "questions" m))))
             (is (equal '("F16" "F32") (map 'list (lambda (f) (field f "format")) (field m "formats"))))
             (loop for f across (gethash "formats" m)
                   do (dolist (k (bench-format-fields)) (field f k))
                      (is (json-null-p (gethash "accuracy" f)))
                      (if (string= name broken)
                          (is (and (json-null-p (gethash "us_per_question" f))
                                   (json-null-p (gethash "max_abs_dp" f))))
                          (progn (is (plusp (gethash "us_per_question" f)))
                                 (is (<= 0 (gethash "max_abs_dp" f) 1d-2))))))))

(test export-three-models
  "pico and nano are converted and listed, the broken one is reported on
one stderr line and in the manifest, the command exits 1, and a re-run
without pico replaces the results (its file and entries go)."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")))
    (unwind-protect
         (progn
           (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
           (rontolisp::write-random-laya (format nil "~A/b-nano" models) "s1-nano")
           (rontolisp::write-random-laya (format nil "~A/c-broken" models) "s1-pico")
           (sh "truncate -s 1000 \"$1\"/c-broken/model.safetensors" models)
           (sh "mkdir \"$1\"/not-a-model" models)
           (multiple-value-bind (code stdout stderr) (run-exe (list "export" models out "--iters" "1"))
             (declare (ignore stdout))
             (is (= 1 code))
             (is (= 1 (length (split-lines stderr))) "stderr: ~A" stderr)
             (is (contains stderr "c-broken")))
           (let ((manifest (rontolisp:read-json-file (format nil "~A/manifest.json" out)))
                 (bench (rontolisp:read-json-file (format nil "~A/bench.json" out))))
             (is (equal '("a-pico" "b-nano" "c-broken")
                        (map 'list (lambda (m) (gethash "name" m)) (gethash "models" manifest))))
             (loop for m across (gethash "models" manifest)
                   do (check-manifest-model out m "c-broken"))
             (check-bench bench '("a-pico" "b-nano" "c-broken") "c-broken"))
           ;; A re-run without pico and with the broken one removed: exit 0,
           ;; pico's file and entries gone.
           (sh "rm -rf \"$1\"/a-pico \"$1\"/c-broken" models)
           (multiple-value-bind (code stdout stderr) (run-exe (list "export" models out "--iters" "1"))
             (is (= 0 code))
             (is (string= "" stderr))
             ;; its table on stdout, terminal or not: a line per model
             (is (= 1 (length (split-lines stdout))) "stdout: ~A" stdout)
             (is (contains stdout "[1/1] b-nano: ") "stdout: ~A" stdout)
             (is (contains stdout " µs/question, max |dp| ") "stdout: ~A" stdout))
           (let ((manifest (rontolisp:read-json-file (format nil "~A/manifest.json" out)))
                 (bench (rontolisp:read-json-file (format nil "~A/bench.json" out))))
             (is (equal '("b-nano") (map 'list (lambda (m) (gethash "name" m)) (gethash "models" manifest))))
             (check-manifest-model out (aref (gethash "models" manifest) 0) "c-broken")
             (check-bench bench '("b-nano") "c-broken")
             (is-false (probe-file (format nil "~A/a-pico.gguf" out)))))
      (sh "rm -rf \"$1\" \"$2\"" models out))))

(defun export-for-page (models out broken)
  "Export a random s1-pico (a-pico) and a model whose safetensors file is
cut short (named BROKEN) from MODELS into OUT (exit 1: the broken one)."
  (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
  (rontolisp::write-random-laya (format nil "~A/~A" models broken) "s1-pico")
  (sh "truncate -s 1000 \"$1/$2/model.safetensors\"" models broken)
  (is (= 1 (run-exe (list "export" models out "--iters" "1")))))

(defparameter *page-broken-name* "c-<broken> & \"quoted\""
  "A model name that is HTML markup if it is not escaped.")

(test export-writes-a-bench-page
  "bench.html beside bench.json: one self-contained page (no script, no
asset from elsewhere) with a row per model (its name escaped), its sizes
and per format its figures, a placeholder for each null: the broken
model's parameters, file, tensors and two figures of each format."
  (let ((models (tmp-path "models")) (out (tmp-path "exported"))
        (placeholder "<span class=\"missing\" title=\"not measured\">&mdash;</span>"))
    (unwind-protect
         (progn
           (export-for-page models out *page-broken-name*)
           (let ((page (read-file-string (format nil "~A/bench.html" out))))
             (is (search "<tr data-model=\"a-pico\">" page))
             (is (search "<tr data-model=\"c-&lt;broken&gt; &amp; &quot;quoted&quot;\">" page))
             (is (not (search "<broken>" page)))
             (is (= 7 (loop for at = (search placeholder page)
                              then (search placeholder page :start2 (1+ at))
                            while at count t))
                 "~A" page)
             (is (search "202,305" page))
             (dolist (external '("src=" "href=\"http" "@import" "url(" "<script"))
               (is (not (search external page)) "the page loads ~A" external))))
      (sh "rm -rf \"$1\" \"$2\"" models out))))

(test export-bench-page-in-a-browser
  "In headless chromium, bench.html loads with no error logged and shows
every model under its own name, the broken one with a dash for each of
its seven missing figures and the benched one with none.  The screenshot
is README's picture."
  (with-browser ()
    (let ((models (tmp-path "models")) (out (tmp-path "exported"))
          (shot (page-screenshot "bench")))
      (ignore-errors (delete-file shot))
      (unwind-protect
           (progn
             (export-for-page models out *page-broken-name*)
             (multiple-value-bind (results errors)
                 (browse (format nil "file://~A/bench.html" out)
                         `((:eval "[...document.querySelectorAll('tbody tr')].map(r => [r.dataset.model, r.querySelectorAll('.missing').length, [...r.querySelectorAll('.missing')].map(m => m.textContent).join('')])")
                           (:eval "[...document.querySelectorAll('thead th.format')].map(t => t.textContent)")
                           (:screenshot ,shot))
                         :height 400)
               (destructuring-bind (rows formats) results
                 (is (equal (list (list "a-pico" 0 "")
                                  (list *page-broken-name* 7
                                        (make-string 7 :initial-element (code-char #x2014))))
                            rows)
                     "~S" rows)
                 (is (equal '("F16" "F32") formats)))
               (is (null errors) "the page logged ~S" errors)
               (is (png-file-p shot))))
        (sh "rm -rf \"$1\" \"$2\"" models out)))))
(test export-trained-model-over-its-questions
  "A model directory with questions.jsonl (the trained model of
tests/models) is benched over those questions, not the built-in ones (whose
types its head does not know): max |dp| of the F16 file against the F32
conversion over its 200 questions, and the share answered right per
format, the figures recomputed here from convert's files."
  (let ((models (tmp-path "models")) (out (tmp-path "exported"))
        (f16 (tmp-path "trained-f16.gguf")) (f32 (tmp-path "trained-f32.gguf")))
    (unwind-protect
         (progn
           (sh "mkdir -p \"$1\" && ln -s \"$2\" \"$1\"/pico-tasks" models
               (string-right-trim "/" (trained-path "")))
           (multiple-value-bind (code stdout stderr) (run-exe (list "export" models out "--iters" "1"))
             (is (= 0 code) "export: exit ~A: ~A" code stderr)
             (is (contains stdout "[1/1] pico-tasks: ") "stdout: ~A" stdout))
           (assert (eql 0 (run-exe (list "convert" (trained-path "") f16 "--type" "f16"))))
           (assert (eql 0 (run-exe (list "convert" (trained-path "") f32 "--type" "f32"))))
           (let* ((bench (let ((*read-default-float-format* 'double-float))
                           (rontolisp:read-json-file (format nil "~A/bench.json" out))))
                  (m (aref (gethash "models" bench) 0))
                  (formats (gethash "formats" m))
                  (questions (trained-questions)))
             (flet ((decisions (path)
                      (let ((model (model:load path)))
                        (mapcar (lambda (q) (model:decide model q)) questions)))
                    (right (decisions)
                      (/ (loop for p in decisions for q in questions
                               count (= (position (reduce #'max p) p) (gethash "answer" q)))
                         200d0)))
               (let ((d16 (decisions f16)) (d32 (decisions f32)))
                 (is (equal "pico-tasks" (gethash "name" m)))
                 (is (equal "questions.jsonl" (gethash "question_file" m)))
                 (is (= 200 (gethash "questions" m)))
                 (is (equal '("F16" "F32") (map 'list (lambda (f) (gethash "format" f)) formats)))
                 (is (= (command-line::max-probability-error d16 d32)
                        (gethash "max_abs_dp" (aref formats 0))))
                 (is (< 1d-4 (gethash "max_abs_dp" (aref formats 0)) 1d-2))
                 (is (zerop (gethash "max_abs_dp" (aref formats 1))))
                 (is (= (right d16) (gethash "accuracy" (aref formats 0))))
                 (is (= (right d32) (gethash "accuracy" (aref formats 1))))
                 (is (<= 0.95 (gethash "accuracy" (aref formats 1))))
                 (loop for f across formats
                       do (is (plusp (gethash "us_per_question" f))))))))
      (sh "rm -rf \"$1\" \"$2\"" models out)
      (ignore-errors (delete-file f16))
      (ignore-errors (delete-file f32)))))

(test export-model-that-fails-its-bench-leaves-no-file
  "A model that converts but cannot be benched (the trained model without
its questions.jsonl: its head knows none of the built-in questions' types)
fails as any model does, and the file converted for it is removed: a model
that fails has no file in OUT_DIR."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")))
    (unwind-protect
         (progn
           (sh "mkdir -p \"$1\" && cp -r \"$2\" \"$1\"/pico-tasks && rm \"$1\"/pico-tasks/questions.jsonl"
               models (string-right-trim "/" (trained-path "")))
           (multiple-value-bind (code stdout stderr) (run-exe (list "export" models out "--iters" "1"))
             (declare (ignore stdout))
             (is (= 1 code))
             (is (contains stderr "pico-tasks: ") "~A" stderr)
             (is (contains stderr "question type") "~A" stderr))
           (is (equal '("bench.html" "bench.json" "manifest.json") (entry-names out))))
      (sh "rm -rf \"$1\" \"$2\"" models out))))

(test export-model-with-a-bad-question-file-fails
  "A model directory whose questions.jsonl has a line that is not a
question fails as any model does: a line on stderr naming the file's line,
an error in the manifest, no file written."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")))
    (unwind-protect
         (progn
           (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
           (write-file-string (format nil "~A/a-pico/questions.jsonl" models) "not json
")
           (multiple-value-bind (code stdout stderr) (run-exe (list "export" models out "--iters" "1"))
             (declare (ignore stdout))
             (is (= 1 code))
             (is (contains stderr "a-pico") "~A" stderr)
             (is (contains stderr "questions.jsonl line 1") "~A" stderr))
           (is (stringp (gethash "error" (aref (gethash "models" (rontolisp:read-json-file
                                                                   (format nil "~A/manifest.json" out)))
                                               0))))
           (is (equal '("bench.html" "bench.json" "manifest.json") (entry-names out))))
      (sh "rm -rf \"$1\" \"$2\"" models out))))

(test export-usage
  "Missing operands and a type export does not take are usage errors (2);
a MODELS_DIR that is a file is an error (1) naming it, before OUT_DIR is
made."
  (is (= 2 (run-exe (list "export"))))
  (is (= 2 (run-exe (list "export" "a" "b" "--type" "bf16"))))
  (let ((file (write-file-string (tmp-path "not-a-dir") "x")) (out (tmp-path "exported")))
    (unwind-protect
         (multiple-value-bind (code stdout stderr) (run-exe (list "export" file out))
           (declare (ignore stdout))
           (is (= 1 code))
           (is (= 1 (length (split-lines stderr))))
           (is (contains stderr "found a file"))
           (is-false (rontolisp::path-kind out)))
      (ignore-errors (delete-file file)))))

(test export-sha256-matches-sha256sum
  "FILE-SHA256 agrees with coreutils' sha256sum at the padding's edges (a
last block with and without room for the length) and across the reader's
1 MiB pieces."
  (dolist (n (list 0 3 55 56 63 64 119 (ash 1 20) (1+ (ash 1 20))))
    (let ((path (tmp-path "sha")))
      (unwind-protect
           (progn
             (rontolisp::write-file-atomically
              path (list (let ((v (make-array n :element-type '(unsigned-byte 8))))
                           (dotimes (i n v) (setf (aref v i) (mod (* i 131) 251))))))
             (is (string= (subseq (nth-value 1 (sh "sha256sum \"$1\"" path)) 0 64)
                          (command-line::file-sha256 path))
                 "~D bytes" n))
        (ignore-errors (delete-file path))))))

(test export-sha256-blocks-refuses-a-partial-block
  (let ((h (make-array 8 :element-type '(unsigned-byte 32))))
    (signals rontolisp::index-error
      (command-line::%sha256-blocks h (make-array 64 :element-type '(unsigned-byte 8)) 63))))

;;; Only its own files (issue 36): the previous manifest, names, links,
;;; unreadable directories, temporary files.

(defun manifest-names (out)
  (map 'list (lambda (m) (gethash "name" m))
       (gethash "models" (rontolisp:read-json-file (format nil "~A/manifest.json" out)))))

(test export-deletes-only-the-gguf-files-it-wrote
  "A manifest.json already in OUT_DIR is no order to delete: of the files
it lists for models that are gone (or that fail), only a NAME.gguf that is
still the regular file export wrote (its SHA-256 the manifest's) is
deleted; another name, a symbolic link, an edited file, a path out of
OUT_DIR and a file the user put there for a failing model stay."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")) (outside (tmp-path "outside")))
    (unwind-protect
         (progn
           (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
           (rontolisp::write-random-laya (format nil "~A/c-broken" models) "s1-pico")
           (sh "truncate -s 1000 \"$1\"/c-broken/model.safetensors" models)
           (rontolisp::ensure-directories (format nil "~A/" out))
           (loop for (name text) in '(("notes.txt" "notes") ("README" "readme")
                                      ("edited.gguf" "edited") ("c-broken.gguf" "mine")
                                      ("target" "target"))
                 do (write-file-string (format nil "~A/~A" out name) (format nil "~A~%" text)))
           (write-file-string outside "x")
           (sh "ln -s target \"$1\"/link.gguf" out)
           (let* ((old (format nil "~A/old.gguf" out))
                  (sha (progn (write-file-string old "an old export") (command-line::file-sha256 old)))
                  (zeros (make-string 64 :initial-element #\0))
                  (outside-name (subseq outside (1+ (position #\/ outside :from-end t)))))
             (write-file-string
              (format nil "~A/manifest.json" out)
              (format nil "{\"models\": [~{{\"name\": ~S, \"file\": ~S, \"sha256\": ~S}~^, ~}]}"
                      (list "gone" "notes.txt" sha "README" "README" sha
                            "link" "link.gguf" (command-line::file-sha256 (format nil "~A/target" out))
                            "edited" "edited.gguf" zeros
                            (format nil "../~A" outside-name) (format nil "../~A" outside-name) sha
                            "c-broken" "c-broken.gguf" zeros
                            "old" "old.gguf" sha)))
             (multiple-value-bind (code stdout stderr) (run-exe (list "export" models out "--iters" "1"))
               (declare (ignore stdout))
               (is (= 1 code))
               (is (= 1 (length (split-lines stderr))) "stderr: ~A" stderr))
             (is (equal '("README" "a-pico.gguf" "bench.html" "bench.json" "c-broken.gguf" "edited.gguf"
                          "link.gguf" "manifest.json" "notes.txt" "target")
                        (entry-names out)))
             (is (eq :link (cdr (assoc "link.gguf" (rontolisp::directory-entries out)
                                       :test #'string=))))
             (is (string= (format nil "mine~%") (read-file-string (format nil "~A/c-broken.gguf" out))))
             (is (eq :file (rontolisp::path-kind outside)))))
      (sh "rm -rf \"$1\" \"$2\" \"$3\"" models out outside))))

(test export-deletes-its-own-file-of-a-failing-model
  "The file a previous run wrote for a model that now fails, unchanged
since, is deleted (the model has no file)."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")))
    (unwind-protect
         (progn
           (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
           (is (= 0 (run-exe (list "export" models out "--iters" "1"))))
           (is (eq :file (rontolisp::path-kind (format nil "~A/a-pico.gguf" out))))
           (sh "truncate -s 1000 \"$1\"/a-pico/model.safetensors" models)
           (is (= 1 (run-exe (list "export" models out "--iters" "1"))))
           (is (equal '("bench.html" "bench.json" "manifest.json") (entry-names out))))
      (sh "rm -rf \"$1\" \"$2\"" models out))))

(test export-takes-any-directory-name
  "MODELS_DIR, OUT_DIR and the model directories may be named with any
characters, as every other command takes them: non-ASCII letters and the
characters CL's pathnames read as wildcards or escapes (* ? [ \\ ~)."
  (let* ((base (tmp-path "names"))
         (models (format nil "~A/mödels *?[x]\\~~" base))
         (out (format nil "~A/oüt *?\\" base))
         (names '("a*b?" "modèle" "x\\y")))
    (unwind-protect
         (progn
           (dolist (name names)
             (rontolisp::write-random-laya (format nil "~A/~A" models name) "s1-pico"))
           (multiple-value-bind (code stdout stderr)
               (run-exe-octets (list "export" (rontolisp::%utf8-octets models)
                                     (rontolisp::%utf8-octets out) "--iters" "1"))
             (declare (ignore stdout))
             (is (= 0 code) "exit ~A: ~A" code (rontolisp::%utf8-string stderr)))
           (is (equal names (manifest-names out)))
           (is (equal (sort (append (mapcar (lambda (n) (format nil "~A.gguf" n)) names)
                                    (list "bench.html" "bench.json" "manifest.json"))
                            #'string<)
                      (entry-names out))))
      (sh "rm -rf \"$1\"" base))))

(test export-lists-a-link-under-its-own-name
  "A symbolic link to a model directory is a model under the link's name,
converted from the directory it names; the directory itself is listed
once, under its own name."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")))
    (unwind-protect
         (progn
           (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
           (sh "ln -s a-pico \"$1\"/b-link" models)
           (is (= 0 (run-exe (list "export" models out "--iters" "1"))))
           (is (equal '("a-pico" "b-link") (manifest-names out)))
           (is (equal '("a-pico.gguf" "b-link.gguf" "bench.html" "bench.json" "manifest.json") (entry-names out))))
      (sh "rm -rf \"$1\" \"$2\"" models out))))

(defun run-exe-unprivileged (args)
  "Run the executable with ARGS as the user nobody when this process is
root (whom permissions do not stop), else as it is: (values exit-status
stdout stderr), or NIL when root cannot become nobody (no setpriv)."
  (cond ((/= 0 (nth-value 0 (sh "test \"$(id -u)\" = 0")))
         (run-exe args))
        ((/= 0 (nth-value 0 (sh "command -v setpriv")))
         nil)
        (t (sh "exec setpriv --reuid=65534 --regid=65534 --clear-groups -- \"$0\" \"$@\""
               (first args) (second args) (third args) (fourth args) (fifth args)))))

(test export-reports-an-unreadable-subdirectory
  "A subdirectory export cannot read (so cannot tell whether it is a
model) is reported as a model that fails: a line on stderr naming it, an
error in the manifest, exit 1; the other models are exported."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")))
    (unwind-protect
         (progn
           (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
           (rontolisp::write-random-laya (format nil "~A/b-secret" models) "s1-pico")
           (sh "chmod 000 \"$1\"/b-secret" models)
           (multiple-value-bind (code stdout stderr)
               (run-exe-unprivileged (list "export" models out "--iters" "1"))
             (declare (ignore stdout))
             (if (null code)
                 (skip "running as root without setpriv: no user whom a directory's permissions stop")
                 (progn
                   (is (= 1 code))
                   (is (= 1 (length (split-lines stderr))) "stderr: ~A" stderr)
                   (is (contains stderr "rontolisp export: b-secret: ") "stderr: ~A" stderr)
                   (is (contains stderr "cannot read the directory") "stderr: ~A" stderr)
                   (is (equal '("a-pico" "b-secret") (manifest-names out)))
                   (is (equal '("a-pico.gguf" "bench.html" "bench.json" "manifest.json") (entry-names out)))))))
      (sh "chmod 755 \"$1\"/b-secret; rm -rf \"$1\" \"$2\"" models out))))

(defun whole-f32-file-p (name)
  "True when NAME is that of export's F32 comparison file once written
whole (not the writer's temporary file of it)."
  (let ((at (search "f32" name)))
    (and at (not (search ".rontolisp-tmp." name :start2 at)))))

(test export-interrupt-removes-the-f32-file
  "SIGINT or SIGTERM while the F32 comparison file exists ends the run with
128 + the signal and removes that file; no temporary file is left."
  (dolist (signal '(2 15))
    (let ((models (tmp-path "models")) (out (tmp-path "exported")))
      (unwind-protect
           (progn
             (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
             ;; Enough rounds that the F32 file stays while the signal comes.
             (let ((p (run-child *exe* (list "export" models out "--iters" "100")
                                 :input nil :output nil :error nil :wait nil)))
               (unwind-protect
                    (when (interrupt-once-entry-appears p out #'whole-f32-file-p signal "export")
                      (is (equal '() (remove-if-not (lambda (n) (or (search "f32" n)
                                                                    (search "rontolisp-tmp" n)))
                                                    (entry-names out)))))
                 (end-child p))))
        (sh "rm -rf \"$1\" \"$2\"" models out)))))

(test export-removes-temporaries-of-ended-runs
  "Temporary files a killed run left for a model's file (the writer's, the
F32 comparison file's) are removed, with a note on stderr, once their
process has ended; a living process's, another file's and other names
stay."
  (let ((models (tmp-path "models")) (out (tmp-path "exported")) (dead (dead-pid)))
    (unwind-protect
         (let ((stale (list (format nil "a-pico.gguf.rontolisp-tmp.~D.0" dead)
                            (format nil "a-pico.gguf.rontolisp-tmp.~D.f32" dead)
                            (format nil "a-pico.gguf.rontolisp-tmp.~D.f32.rontolisp-tmp.~D.1"
                                    dead dead)
                            (format nil "manifest.json.rontolisp-tmp.~D.3" dead)))
               (kept (list "a-pico.gguf.rontolisp-tmp.1.0" ; PID 1 lives
                           (format nil "a-pico.gguf.rontolisp-tmp.~D.0" (ext:getpid))
                           (format nil "notes.txt.rontolisp-tmp.~D.0" dead)
                           (format nil "a-pico.gguf.rontolisp-tmp.~D.0.bak" dead)
                           "keep.txt")))
           (rontolisp::write-random-laya (format nil "~A/a-pico" models) "s1-pico")
           (rontolisp::ensure-directories (format nil "~A/" out))
           (dolist (name (append stale kept))
             (write-file-string (format nil "~A/~A" out name) "x"))
           (multiple-value-bind (code stdout stderr) (run-exe (list "export" models out "--iters" "1"))
             (declare (ignore stdout))
             (is (= 0 code))
             (is (= (length stale) (length (split-lines stderr))) "stderr: ~A" stderr)
             (dolist (name stale)
               (is (contains stderr (format nil "removed ~A/~A, a temporary file of process ~D, ~
which has ended" out name dead))
                   "no note for ~A: ~A" name stderr)))
           (is (equal (sort (append (list "a-pico.gguf" "bench.html" "bench.json" "manifest.json") kept) #'string<)
                      (entry-names out))))
      (sh "rm -rf \"$1\" \"$2\"" models out))))
