;;;; test-inspect.lisp - `rontolisp inspect': its JSON agrees with gguf-py's
;;;; dump, the text form, escaping, usage errors, and every broken file
;;;; refused with one line naming it.

(in-package "RONTOLISP-TESTS")

(def-suite inspect :in all :description "The inspect command.")
(in-suite inspect)

(defun parse-json-string (s)
  (let ((*read-default-float-format* 'double-float))
    (yason:parse s)))

(test inspect-json-agrees-with-gguf-py
  (dolist (name '("q8_main.q8_0.gguf" "vocab/ggml-vocab-gpt-2.gguf"))
    (skip-unless-file ((golden name))
      (multiple-value-bind (code out err) (run-exe (list "inspect" (golden name) "--json"))
        (is (= 0 code) "~A" err)
        (let ((ours (parse-json-string out))
              (theirs (golden-json name)))
          (is (string= (golden name) (gethash "file" ours)))
          (dolist (k '(("size" . "file_size") ("version" . "version")
                       ("alignment" . "alignment") ("data_offset" . "data_offset")))
            (is (eql (gethash (car k) ours) (gethash (cdr k) theirs)) "~A ~A" name (car k)))
          (is (= (length (gethash "kv" theirs)) (length (gethash "metadata" ours))))
          (loop for m in (gethash "metadata" ours)
                for kv in (gethash "kv" theirs)
                do (is (string= (gethash "key" m) (gethash "key" kv)))
                   (is (string= (gethash "type" m) (our-type-name (gethash "type" kv))))
                   (when (string= "array" (gethash "type" m))
                     (is (= (gethash "length" m) (gethash "length" kv)))
                     (is (= (gethash "length" m) (length (gethash "value" m))))
                     (is (string= (gethash "element_type" m)
                                  (our-type-name (gethash "array_type" kv))))))
          (loop for tj in (gethash "tensors" theirs)
                for tm in (gethash "tensors" ours)
                do (is (string= (gethash "name" tj) (gethash "name" tm)))
                   (is (equal (gethash "ne" tj) (gethash "dims" tm)))
                   (is (equal (reverse (gethash "ne" tj)) (gethash "shape" tm)))
                   (is (string= (gethash "type_name" tj) (gethash "type" tm)))
                   (is (= (gethash "type_id" tj) (gethash "type_id" tm)))
                   (is (= (gethash "offset" tj) (gethash "offset" tm)))
                   (is (= (gethash "nbytes" tj) (gethash "bytes" tm)))))))))

(test inspect-json-max-array-and-floats
  (skip-unless-file ((golden "q8_main.q8_0.gguf"))
    (multiple-value-bind (code out) (run-exe (list "inspect" (golden "q8_main.q8_0.gguf")
                                                   "--json" "--max-array" "1"))
      (is (= 0 code))
      (let* ((ours (parse-json-string out))
             (arr (find "test.arr_i32" (gethash "metadata" ours)
                        :key (lambda (m) (gethash "key" m)) :test #'string=))
             (f32 (find "test.f32" (gethash "metadata" ours)
                        :key (lambda (m) (gethash "key" m)) :test #'string=)))
        (is (equal '(1) (gethash "value" arr)))
        (is (= 3 (gethash "length" arr)))
        ;; shortest digits that read back as the same f32
        (is (search "\"value\": 0.1" out))
        (is (= 0.1 (float (gethash "value" f32) 1.0)))))))

(test inspect-text-form
  (skip-unless-file ((golden "q8_main.q8_0.gguf"))
    (multiple-value-bind (code out) (run-exe (list "inspect" (golden "q8_main.q8_0.gguf")
                                                   "--max-array" "2"))
      (is (= 0 code))
      (is (search (format nil "~A: GGUF v3, 99072 bytes, alignment 32" (golden "q8_main.q8_0.gguf"))
                  out))
      (is (search "24 metadata keys:" out))
      (is (search "  test.arr_i32 (array<i32>[3]) = [1, -2, ... (1 more)]" out))
      (is (search "17 tensors (ggml dims, ne[0] = innermost):" out))
      (is (search "  blk.0.experts_3d.weight                  [64, 4, 2]             Q8_0          544 bytes" out))
      (is (search "total: 89408 parameters, 97108 bytes of tensor data" out)))))

(test inspect-escapes-control-characters
  (let ((path (tmp-path "ctl.gguf")))
    (gguf:write path (gguf:make-file :metadata `((,(format nil "a~Cb" #\Newline) :string
                                                  ,(format nil "x~Cy\"z" (code-char 27))))))
    (multiple-value-bind (code out) (run-exe (list "inspect" path))
      (is (= 0 code))
      (is (search "a\\nb (string) = \"x\\u001by\\\"z\"" out)))
    (multiple-value-bind (code out) (run-exe (list "inspect" path "--json"))
      (is (= 0 code))
      (is (search "\"a\\nb\"" out))
      (is (string= (format nil "x~Cy\"z" (code-char 27))
                   (gethash "value" (first (gethash "metadata" (parse-json-string out)))))))
    (delete-file path)))

(test inspect-usage-errors-exit-2
  (is (= 2 (run-exe '("inspect"))))
  (is (= 2 (run-exe '("inspect" "a.gguf" "--frob"))))
  (is (= 2 (run-exe '("inspect" "a.gguf" "--max-array" "many")))))

(test inspect-refuses-llama-quantize-align64-output
  (skip-unless-file ((golden "q8_align64.q8_0.gguf"))
    (multiple-value-bind (code out err) (run-exe (list "inspect" (golden "q8_align64.q8_0.gguf")))
      (is (= 1 code))
      (is (string= "" out))
      (is (= 1 (count #\Newline err)))
      (is (search "offset 480" err))
      (is (search "q8_align64.q8_0.gguf" err)))))

(test gguf-bad-corpus-refused-by-inspect
  (let ((files (bad-corpus)))
    (is (< 30 (length files)) "the bad-file corpus is missing")
    (let ((bad '()))
      (dolist (f files)
        (multiple-value-bind (code out err) (run-exe (list "inspect" (namestring f)))
          (unless (and (= 1 code) (string= "" out) (= 1 (count #\Newline err))
                       (search (file-namestring f) err) (search "byte" err))
            (push (list (file-namestring f) code err) bad))))
      (is (null bad) "not refused cleanly: ~S" bad))))

(test inspect-escapes-c1-bidi-and-invalid-bytes
  "C1 and bidirectional controls as \\uXXXX, bytes that are not UTF-8 as
\\xHH, in keys and strings, in both forms; nothing is replaced."
  (let ((path (tmp-path "c1.gguf")))
    (write-octets-file
     path (raw-gguf :kvs `((,(octets "k" #xff "ey") (:string ,(octets "x" #xc2 #x9b "31m"
                                                                     #xe2 #x80 #xae "y"
                                                                     #xd8 #x9c #xe2 #x81 #xa6
                                                                     #x7f #xc0 #xaf #xed #xa0 #x80))))))
    (let ((want-key "k\\xffey")
          (want-value "\"x\\u009b31m\\u202ey\\u061c\\u2066\\u007f\\xc0\\xaf\\xed\\xa0\\x80\""))
      (multiple-value-bind (code out) (run-exe-octets (list "inspect" path))
        (is (= 0 code))
        (is (every (lambda (b) (< b 128)) out) "raw control bytes in the text form")
        (let ((text (map 'string #'code-char out)))
          (is (contains text (format nil "  ~A (string) = ~A" want-key want-value)) "~A" text)))
      (multiple-value-bind (code out) (run-exe-octets (list "inspect" path "--json"))
        (is (= 0 code))
        (is (every (lambda (b) (< b 128)) out) "raw control bytes in the JSON form")
        (let ((text (map 'string #'code-char out)))
          (is (contains text (format nil "\"key\": \"~A\"" want-key)))
          (is (contains text (format nil "\"value\": ~A" want-value))))))
    (delete-file path)))

(test inspect-prints-nested-arrays-as-json
  "Arrays of arrays read as JSON in both forms, and their types name the
inner element types, as each inner array states them."
  (let ((path (tmp-path "nested.gguf")))
    (write-octets-file path (nested-arrays-gguf))
    (multiple-value-bind (code out err) (run-exe (list "inspect" path))
      (is (= 0 code) "~A" err)
      (dolist (line '("  n.f32 (array<array<f32>>[2]) = [[1.5, -2.0], []]"
                      "  n.str (array<array<string>>[1]) = [[\"a\\\"b\"]]"
                      "  n.empty (array<array>[0]) = []"
                      "  n.empty-inner (array<array<u32>>[1]) = [[]]"
                      "  n.mixed (array<array<u32>|array<string>|array<array<f32>>>[3]) = [[7], [\"s\"], [[0.5]]]"))
        (is (contains out line) "missing ~S in ~A" line out)))
    (multiple-value-bind (code out) (run-exe (list "inspect" path "--json"))
      (is (= 0 code))
      (let ((meta (gethash "metadata" (parse-json-string out))))
        (is (equal '("n.f32" "n.str" "n.empty" "n.empty-inner" "n.mixed")
                   (mapcar (lambda (m) (gethash "key" m)) meta)))
        (is (every (lambda (m) (string= "array" (gethash "element_type" m))) meta))
        (is (equalp '(((1.5d0 -2.0d0) ()) (("a\"b")) () (()) ((7) ("s") ((0.5d0))))
                    (mapcar (lambda (m) (gethash "value" m)) meta)))))
    (delete-file path)))

(test inspect-prints-paths-as-their-bytes
  "A path that is not UTF-8 comes out as its own bytes in the text form
and in messages, and as \\xHH in the JSON form."
  (let ((src (tmp-path "bytes-path.gguf")))
    (write-octets-file src (raw-gguf :kvs `((,(octets "k") (:u32 1)))))
    (multiple-value-bind (code out err)
        (sh "d=$(mktemp -d) && f=\"$d/x$(printf '\\377')\" && cp \"$1\" \"$f\" &&
hex() { od -An -v -tx1 | tr -d ' \\n'; echo; }
\"$0\" inspect \"$f\" | head -n 1 | hex
\"$0\" inspect \"$f\" --json | grep '\"file\"'
\"$0\" inspect \"$f.none\" 2>&1 | hex
rm -r \"$d\"" src)
      (is (= 0 code) "~A" err)
      (let ((lines (split-lines out)))
        (is (= 3 (length lines)) "~S" out)
        ;; "/x" 0xFF ": GGUF"
        (is (contains (first lines) "2f78ff3a2047475546") "~A" (first lines))
        (is (contains (second lines) "/x\\xff\",") "~A" (second lines))
        ;; "/x" 0xFF ".none"
        (is (contains (third lines) "2f78ff2e6e6f6e65") "~A" (third lines))))
    (delete-file src)))
