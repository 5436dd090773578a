;;;; test-edit.lisp - `rontolisp edit': keys set, typed as given, kept or
;;;; inferred as gguf-py does, removed, tensors renamed, chat templates
;;;; replaced, and every tensor's bytes carried over unchanged.

(in-package "RONTOLISP-TESTS")

(def-suite edit :in all :description "The edit command.")
(in-suite edit)

(defun edit-input ()
  "A file to edit: a few keys of several types and a tensor of every ggml
type (from test-gguf.lisp)."
  (let ((path (tmp-path "edit-in.gguf")))
    (gguf:write path (gguf:make-file
                      :metadata `(("general.name" :string "before")
                                  ("general.url" :string "https://example.org/m")
                                  ("foo.count" :u32 5)
                                  ("foo.ids" (:array :i32) ,(make-array 2 :element-type '(signed-byte 32)
                                                                           :initial-contents '(1 2)))
                                  ("tokenizer.chat_template" :string "old")
                                  ("tokenizer.chat_template.tool_use" :string "old tools"))
                      :tensors (every-type-tensors)))
    path))

(defun metadata-of (path)
  (gguf:with-file (f path) (gguf:metadata f)))

(test edit-sets-removes-and-renames-keeping-tensor-bytes
  (let ((in (edit-input)) (out (tmp-path "edit-out.gguf")))
    (multiple-value-bind (code stdout)
        (run-exe (list "edit" in out "--set" "general.name=after" "--set" "foo.count=7"
                       "--set" "new.int=42" "--set" "new.float=1.5" "--set" "new.flag=true"
                       "--set" "new.str=hello" "--set" "new.typed=3:u64"
                       "--set" "new.url=http://h:80" "--set" "new.num-as-text=12:string"
                       "--remove" "general.url" "--rename-tensor" "t.Q4_K" "blk.0.q4k"))
      (is (= 0 code))
      (is (search "set general.name (string): \"before\" -> \"after\"" stdout))
      (is (search "remove general.url" stdout))
      (is (search "rename tensor t.Q4_K -> blk.0.q4k" stdout)))
    (is (equalp `(("general.name" :string "after")
                  ("foo.count" :u32 7)
                  ("foo.ids" (:array :i32) #(1 2))
                  ("tokenizer.chat_template" :string "old")
                  ("tokenizer.chat_template.tool_use" :string "old tools")
                  ("general.alignment" :u32 32)
                  ("new.int" :i32 42) ("new.float" :f32 1.5) ("new.flag" :bool t)
                  ("new.str" :string "hello") ("new.typed" :u64 3)
                  ("new.url" :string "http://h:80") ("new.num-as-text" :string "12"))
                (metadata-of out)))
    (gguf:with-file (a in)
      (gguf:with-file (b out)
        (is (equal (substitute "blk.0.q4k" "t.Q4_K" (gguf:tensor-names a) :test #'string=)
                   (gguf:tensor-names b)))
        (loop for ta in (gguf:tensor-infos a)
              for tb in (gguf:tensor-infos b)
              do (is (= (gguf:tensor-info-type-id ta) (gguf:tensor-info-type-id tb)))
                 (is (equalp (gguf:tensor-octets a (gguf:tensor-info-name ta))
                             (gguf:tensor-octets b (gguf:tensor-info-name tb)))
                     "~A's bytes changed" (gguf:tensor-info-name ta)))))
    (delete-file in) (delete-file out)))

(test edit-without-changes-is-byte-identical-and-dry-run-writes-nothing
  (let ((in (edit-input)) (out (tmp-path "edit-same.gguf")) (dry (tmp-path "edit-dry.gguf")))
    (multiple-value-bind (code stdout) (run-exe (list "edit" in out))
      (is (= 0 code))
      (is (string= (format nil "no change~%") stdout)))
    (is (equalp (file-octets in) (file-octets out)))
    (multiple-value-bind (code stdout) (run-exe (list "edit" in dry "--dry-run" "--set" "foo.count=9"))
      (is (= 0 code))
      (is (string= (format nil "set foo.count (u32): 5 -> 9~%") stdout)))
    (is (null (probe-file dry)))
    ;; editing in place: the output replaces the mapped input atomically
    (is (= 0 (run-exe (list "edit" in in "--set" "foo.count=11"))))
    (is (equalp '("foo.count" :u32 11) (assoc "foo.count" (metadata-of in) :test #'string=)))
    (delete-file in) (delete-file out)))

(test edit-sets-the-chat-template-from-a-file
  (let ((in (edit-input)) (out (tmp-path "edit-tpl.gguf"))
        (template (format nil "{% for m in messages %}~C{{ m.content }}{% endfor %}~%"
                          (code-char #x00e9))))
    (let ((file (tmp-path "tpl.jinja")))
      (with-open-file (s file :direction :output :external-format :utf-8)
        (write-string template s))
      (is (= 0 (run-exe (list "edit" in out "--set-chat-template" file))))
      (let ((md (metadata-of out)))
        (is (equal template (third (assoc "tokenizer.chat_template" md :test #'string=))))
        (is (null (assoc "tokenizer.chat_template.tool_use" md :test #'string=))))
      (delete-file file))
    (delete-file in) (delete-file out)))

(test edit-refuses-bad-usage
  (let ((in (edit-input)) (out (tmp-path "edit-bad.gguf")))
    (dolist (args `(("--set" "no-equals-sign") ("--set" "foo.count=-1")
                    ("--set" "foo.count=x") ("--set" "new.k=300:u8") ("--set" "new.b=maybe:bool")
                    ("--set" "foo.ids=1") ("--remove" "no.such.key")
                    ("--rename-tensor" "no.such.tensor" "x") ("--rename-tensor" "t.F32" "t.F16")
                    ("--rename-tensor" "t.F32")))
      (multiple-value-bind (code stdout stderr) (run-exe (list* "edit" in out args))
        (declare (ignore stdout))
        (is (= 2 code) "~S: exit ~D" args code)
        (is (search "expect" stderr) "~S: ~S" args stderr)))
    (is (null (probe-file out)))
    (is (= 2 (run-exe (list "edit" in))))
    (multiple-value-bind (code stdout) (run-exe '("edit" "--help"))
      (is (= 0 code))
      (is (search "--rename-tensor OLD NEW" stdout)))
    (delete-file in)))

(test edit-refuses-numbers-beyond-their-type
  ;; one rule for every number: 1e999999999 once ran for ever (the Lisp
  ;; reader built the bignum), and an untyped 1e999 was kept as a string
  ;; while 1e39 was refused
  (let ((in (edit-input)) (out (tmp-path "edit-range.gguf")))
    (loop for (arg range) in '(("new.d=1e999999999:f64" "the f64 range")
                               ("new.d=1e999:f64" "the f64 range")
                               ("new.x=1e999" "the f32 range")
                               ("new.x=1e39" "the f32 range")
                               ("new.x=1e39:f32" "the f32 range")
                               ("new.i=300:u8" "an integer from 0 to 255"))
          do (multiple-value-bind (code stdout stderr) (run-exe (list "edit" in out "--set" arg))
               (declare (ignore stdout))
               (is (= 2 code) "~S: exit ~D" arg code)
               (is (search "--set new." stderr) "~S: ~S" arg stderr)
               (is (search range stderr) "~S: ~S" arg stderr)))
    (is (null (probe-file out)))
    (is (= 0 (run-exe (list "edit" in out "--set" "new.d=1e308:f64" "--set" "new.x=-2.5e-3"))))
    (is (equalp '(("new.d" :f64 1d308) ("new.x" :f32 -2.5e-3))
                (last (metadata-of out) 2)))
    (delete-file in) (ignore-errors (delete-file out))))

;;; The report: brief whatever the size of a value, and always what the
;;; written file shows.

(test edit-reports-long-values-briefly
  "A template of a megabyte (and the long one it replaces) is reported as
its type, its length and an escaped start, not echoed whole."
  (let* ((in (tmp-path "edit-long-in.gguf")) (out (tmp-path "edit-long-out.gguf"))
         (file (tmp-path "long.jinja"))
         (unit (format nil "~C[31m\"q\\ {{ m }}~%" (code-char 27)))
         (template (with-output-to-string (s)
                     (loop repeat (ceiling 1000000 (length unit)) do (write-string unit s))))
         (old (make-string 5000 :initial-element #\o)))
    (gguf:write in (gguf:make-file :metadata `(("tokenizer.chat_template" :string ,old))))
    (write-file-string file template)
    (multiple-value-bind (code stdout stderr) (run-exe (list "edit" in out "--set-chat-template" file))
      (is (= 0 code) "~A" stderr)
      (is (< (length stdout) 400) "a report of ~D characters" (length stdout))
      (is (= 1 (count #\Newline stdout)) "~S" stdout)
      (is (contains stdout (format nil "(5000 characters) -> \"\\u001b[31m\\\"q\\\\ {{ m }}\\n")))
      (is (contains stdout (format nil "(~D characters)~%" (length template))))
      (is (notany (lambda (c) (< (char-code c) 32)) (remove #\Newline stdout))
          "a raw control character in the report"))
    (is (equal template (third (assoc "tokenizer.chat_template" (metadata-of out) :test #'string=))))
    (delete-file in) (delete-file out) (delete-file file)))

(defun report-keys (stdout)
  "The (verb key) of each line of an edit report: remove, add or set."
  (loop for line in (split-lines stdout)
        for space = (position #\Space line)
        for verb = (subseq line 0 space)
        when (member verb '("remove" "add" "set") :test #'string=)
          collect (list verb (subseq line (1+ space) (position #\Space line :start (1+ space))))))

(defun check-report-against-files (args in out stdout)
  "Each line of the report STDOUT of `edit IN OUT ARGS' is true of OUT read
back, and every key whose presence, type or value differs between IN and
OUT has a line."
  (let* ((before (metadata-of in)) (after (metadata-of out))
         (reported (report-keys stdout)))
    (flet ((entry (key md) (assoc key md :test #'string=)))
      ;; a key's first line is true of the input, its last of the output
      (loop for (verb key) in reported
            for old = (entry key before)
            unless (find key seen :test #'string=)
              do (is (if (string= verb "add") (null old) (not (null old)))
                     "~S: reports ~A ~A first, the input has ~S" args verb key old)
            collect key into seen)
      (loop for (verb key) in (reverse reported)
            for new = (entry key after)
            unless (find key seen :test #'string=)
              do (cond ((string= verb "remove")
                        (is (null new) "~S: reports remove ~A, the file has ~S" args key new))
                       (t
                        (is (not (null new)) "~S: reports ~A ~A, the file lacks it" args verb key)
                        (when new
                          (is (contains stdout (command-line::change-value-text (second new) (third new)))
                              "~S: the report of ~A does not show the written value ~S" args key
                              (third new)))))
            collect key into seen)
      (dolist (key (union (mapcar #'first before) (mapcar #'first after) :test #'string=))
        (unless (equalp (entry key before) (entry key after))
          (is (find key reported :key #'second :test #'string=)
              "~S: ~A changed (~S -> ~S) and the report does not say so: ~S"
              args key (entry key before) (entry key after) stdout))))
    (gguf:with-file (f out)
      (let ((a (third (assoc "general.alignment" (gguf:metadata f) :test #'string=))))
        (is (= (or a 32) (gguf:alignment f)))
        (dolist (info (gguf:tensor-infos f))
          (is (zerop (mod (gguf:tensor-info-offset info) (gguf:alignment f)))))))))

(test edit-report-matches-the-written-file
  "For each edit, what the report says is what the file read back holds
(general.alignment, which every file written has, included), the dry run
says the same, and an edit the file could not show is refused with
nothing written."
  (let ((in (edit-input)) (out (tmp-path "edit-report.gguf"))
        (tpl (write-file-string (tmp-path "report.jinja") "new")))
    (loop for (outcome . args)
            in `((:refused "--remove" "general.alignment")
                 (:written "--set" "general.alignment=64")
                 (:refused "--set" "general.alignment=48")
                 (:refused "--set" "general.alignment=64:u64")
                 (:written "--set" "foo.count=6:u64" "--set" "general.name=x" "--set" "general.name=y")
                 (:written "--set-chat-template" ,tpl "--remove" "tokenizer.chat_template.tool_use")
                 (:written "--remove" "foo.ids" "--set" "foo.ids=3:i8" "--rename-tensor" "t.F32" "z"))
      do (ignore-errors (delete-file out))
      (let ((dry (nth-value 1 (run-exe (list* "edit" in out "--dry-run" args)))))
        (multiple-value-bind (code stdout stderr) (run-exe (list* "edit" in out args))
          (cond ((eq outcome :written)
                 (is (= 0 code) "~S: exit ~D: ~A" args code stderr)
                 (when (= 0 code)
                   (is (string= dry stdout) "~S: the dry run says ~S, the edit ~S" args dry stdout)
                   (check-report-against-files args in out stdout)))
                (t
                 (is (= 2 code) "~S: exit ~D: ~A" args code stderr)
                 (is (search "expected" stderr) "~S: ~S" args stderr)
                 (is (null (probe-file out)) "~S: refused, yet wrote the output" args))))))
    (delete-file in) (delete-file tpl) (ignore-errors (delete-file out))))
