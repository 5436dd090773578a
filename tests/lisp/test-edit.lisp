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
