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

(test export-doc-lists-the-fields
  "The layouts the tests check are read from doc/export.md's tables."
  (is (equal '("name" "file" "bytes" "parameters" "tensors" "type" "head_type" "types" "sha256" "error")
             (manifest-fields)))
  (is (equal '("machine" "threads" "iters" "questions" "models") (bench-fields)))
  (is (equal '("format" "us_per_question" "max_abs_dp") (bench-format-fields))))

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
          do (is (equal '("F16" "F32") (map 'list (lambda (f) (field f "format")) (field m "formats"))))
             (loop for f across (gethash "formats" m)
                   do (dolist (k (bench-format-fields)) (field f k))
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
             (declare (ignore stdout))
             (is (= 0 code))
             (is (string= "" stderr)))
           (let ((manifest (rontolisp:read-json-file (format nil "~A/manifest.json" out)))
                 (bench (rontolisp:read-json-file (format nil "~A/bench.json" out))))
             (is (equal '("b-nano") (map 'list (lambda (m) (gethash "name" m)) (gethash "models" manifest))))
             (check-manifest-model out (aref (gethash "models" manifest) 0) "c-broken")
             (check-bench bench '("b-nano") "c-broken")
             (is-false (probe-file (format nil "~A/a-pico.gguf" out)))))
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
                          (rontolisp::file-sha256 path))
                 "~D bytes" n))
        (ignore-errors (delete-file path))))))

(test export-sha256-blocks-refuses-a-partial-block
  (let ((h (make-array 8 :element-type '(unsigned-byte 32))))
    (signals rontolisp::index-error
      (rontolisp::%sha256-blocks h (make-array 64 :element-type '(unsigned-byte 8)) 63))))
