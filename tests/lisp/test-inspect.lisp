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
    (with-tracked-fixture ((golden name))
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
  (with-tracked-fixture ((golden "q8_main.q8_0.gguf"))
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
  (with-tracked-fixture ((golden "q8_main.q8_0.gguf"))
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
  (with-tracked-fixture ((golden "q8_align64.q8_0.gguf"))
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
  "C1 and bidirectional controls as \\uXXXX in keys and strings, in both
forms; bytes that are not UTF-8 as \\xHH in the text form and \\udcHH in
JSON; nothing is replaced."
  (let ((path (tmp-path "c1.gguf")))
    (write-octets-file
     path (raw-gguf :kvs `((,(octets "k" #xff "ey") (:string ,(octets "x" #xc2 #x9b "31m"
                                                                     #xe2 #x80 #xae "y"
                                                                     #xd8 #x9c #xe2 #x81 #xa6
                                                                     #x7f #xc0 #xaf #xed #xa0 #x80))))))
    (let ((want-key "k\\xffey")
          (want-value "\"x\\u009b31m\\u202ey\\u061c\\u2066\\u007f\\xc0\\xaf\\xed\\xa0\\x80\"")
          (json-key "k\\udcffey")
          (json-value "\"x\\u009b31m\\u202ey\\u061c\\u2066\\u007f\\udcc0\\udcaf\\udced\\udca0\\udc80\""))
      (multiple-value-bind (code out) (run-exe-octets (list "inspect" path))
        (is (= 0 code))
        (is (every (lambda (b) (< b 128)) out) "raw control bytes in the text form")
        (let ((text (map 'string #'code-char out)))
          (is (contains text (format nil "  ~A (string) = ~A" want-key want-value)) "~A" text)))
      (multiple-value-bind (code out) (run-exe-octets (list "inspect" path "--json"))
        (is (= 0 code))
        (is (every (lambda (b) (< b 128)) out) "raw control bytes in the JSON form")
        (let ((text (map 'string #'code-char out)))
          (is (contains text (format nil "\"key\": \"~A\"" json-key)) "~A" text)
          (is (contains text (format nil "\"value\": ~A" json-value)) "~A" text))))
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
and in messages, and as \\udcHH in the JSON form."
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
        (is (contains (second lines) "/x\\udcff\",") "~A" (second lines))
        ;; "/x" 0xFF ".none"
        (is (contains (third lines) "2f78ff2e6e6f6e65") "~A" (third lines))))
    (delete-file src)))

;;; gguf_dump's options: --markdown against gguf-py's own output on a
;;; fixture, --no-tensors, --tensors-only, --filter, --max-string,
;;; general.file_type's name and the summary per type.

(defun i32-vector (&rest xs)
  (make-array (length xs) :element-type '(signed-byte 32) :initial-contents xs))

(defun markdown-fixture ()
  "A file for the --markdown golden test: values of every GGUF type that
gguf_dump prints in its own ways (long and backticked strings, numpy's
floats, arrays cut at 5 and 7, nested and empty arrays) and a tensor of
every ggml type in several groups (blk.N, enc.blk.N, dec, base)."
  (gguf:make-file
   :metadata
   `(("general.architecture" :string "llama")
     ("general.name" :string "a `tiny` model")
     ("general.description" :string
      "Ünïcödé text that goes on well past the sixty characters gguf_dump shows of it")
     ("general.file_type" :u32 15)
     ("test.u8" :u8 255) ("test.i8" :i8 -5) ("test.u16" :u16 65535) ("test.i16" :i16 -300)
     ("test.i32" :i32 -7) ("test.u64" :u64 ,(expt 2 40)) ("test.i64" :i64 ,(- (expt 2 40)))
     ("test.f32.small" :f32 1e-4) ("test.f32.big" :f32 123456789.0) ("test.f32.tenth" :f32 0.1)
     ("test.f32.third" :f32 ,(/ 1.0 3)) ("test.f32.negzero" :f32 -0.0)
     ("test.f32.inf" :f32 ,ext:single-float-positive-infinity)
     ("test.f64.big" :f64 1d16) ("test.f64.small" :f64 1d-5) ("test.f64.tenth" :f64 0.1d0)
     ("test.bool" :bool t)
     ("test.backtick_end" :string "ends in a backtick `")
     ("test.arr_i32" (:array :i32) ,(i32-vector 1 -2 3 4 5 6 7 8 9 10))
     ("test.arr_f32" (:array :f32) ,(make-array 3 :element-type 'single-float
                                                  :initial-contents '(0.5 1e-7 2.5e10)))
     ("test.arr_bool" (:array :bool) #(t nil))
     ("test.arr_str" (:array :string)
      #("a" "b``c" "a string of more than thirty characters in all" "d" "e" "f" "g"))
     ("test.arr_empty" (:array :i32) ,(i32-vector))
     ("test.nested" (:array (:array :i32)) ,(vector (i32-vector 1 2) (i32-vector 3))))
   :tensors
   (loop for (nil octets . options) in (every-type-tensors)
         for i from 0
         for type = (gguf:type-name (getf options :type))
         collect (list* (case (mod i 5)
                          (0 (format nil "blk.~D.attn_q.~A.weight" (mod i 3) type))
                          (1 (format nil "blk.~D.ffn_up.~A.bias" (mod i 3) type))
                          (2 (format nil "enc.blk.0.attn_k.~A.weight" type))
                          (3 (format nil "dec.output.~A.weight" type))
                          (t (format nil "token_embd.~A" type)))
                        octets options))))

(defun write-markdown-fixture (path)
  "Write the --markdown fixture to PATH (tools/make-markdown-golden.sh)."
  (gguf:write path (markdown-fixture)))

(defun markdown-golden (name)
  (golden (concatenate 'string "markdown/" name)))

(test inspect-markdown-is-gguf-dump-markdown
  ;; The fixture is ours, so it must still be what our builder writes.
  (let ((fresh (tmp-path "markdown.gguf")))
    (write-markdown-fixture fresh)
    (is (equalp (file-octets (markdown-golden "fixture.gguf")) (file-octets fresh))
        "tests/golden/markdown/fixture.gguf is no longer what markdown-fixture writes: ~
regenerate it with tools/make-markdown-golden.sh")
    (delete-file fresh))
  (loop for (args expected) in '((() "fixture.md") (("--no-tensors") "fixture.no-tensors.md"))
        do (multiple-value-bind (code out err)
               (sh "cd \"$1\" && \"$0\" inspect tests/golden/markdown/fixture.gguf --markdown $2"
                   (namestring *root*) (format nil "~{~A~^ ~}" args))
             (is (= 0 code) "~A" err)
             (is (string= (read-file-string (markdown-golden expected)) out)
                 "inspect --markdown ~{~A~^ ~} differs from gguf_dump's ~A" args expected))))

(test inspect-no-tensors-tensors-only-and-filter
  (let ((path (tmp-path "opts.gguf")))
    (gguf:write path (markdown-fixture))
    (multiple-value-bind (code out) (run-exe (list "inspect" path "--no-tensors"))
      (is (= 0 code))
      (is (search "general.file_type (u32) = 15 (MOSTLY_Q4_K_M)" out))
      (is (not (search "tensor" out))))
    (multiple-value-bind (code out) (run-exe (list "inspect" path "--tensors-only"))
      (is (= 0 code))
      (is (not (search "metadata key" out)))
      (is (search "blk.0.attn_q.F32.weight" out))
      (is (search "by type:" out))
      (is (search (format nil "  Q8_0            1 tensor            128 parameters            136 bytes   8.5000 bits/weight~%") out)))
    (multiple-value-bind (code out) (run-exe (list "inspect" path "--filter" "^test\\.f(32|64)\\.t|Q[4-6]_K\\."))
      (is (= 0 code))
      (is (search "3 of 29 metadata keys matching \"^test\\.f(32|64)\\.t|Q[4-6]_K\\.\":" out))
      (is (search "3 of 35 tensors matching" out))
      (is (search "test.f32.tenth" out))
      (is (search "test.f64.tenth" out))
      (is (not (search "test.f32.big" out)))
      (is (equal '("Q4_K" "Q5_K" "Q6_K")
                 (loop for line in (split-lines out)
                       for at = (search "_K." line)
                       when (and at (> at 2) (char= #\Space (char line 0)) (search " bytes" line))
                         collect (subseq line (- at 2) (+ at 2))))))
    (multiple-value-bind (code out) (run-exe (list "inspect" path "--json" "--filter" "arr_(i32|empty)"
                                                   "--no-tensors"))
      (is (= 0 code))
      (let ((json (parse-json-string out)))
        (is (equal '("test.arr_i32" "test.arr_empty")
                   (map 'list (lambda (m) (gethash "key" m)) (gethash "metadata" json))))
        (is (null (gethash "tensors" json)))))
    (is (= 2 (run-exe (list "inspect" path "--filter" "(unclosed"))))
    (is (= 2 (run-exe (list "inspect" path "--no-tensors" "--tensors-only"))))
    (is (= 2 (run-exe (list "inspect" path "--json" "--markdown"))))
    (delete-file path)))

(test inspect-max-string-cuts-text-not-json
  (let ((path (tmp-path "long.gguf"))
        (long (make-string 100 :initial-element #\x)))
    (gguf:write path (gguf:make-file :metadata `(("k" :string ,long))))
    (is (search (format nil "k (string) = \"~A...\"" (make-string 57 :initial-element #\x))
                (nth-value 1 (run-exe (list "inspect" path)))))
    (is (search (format nil "k (string) = \"~A...\"" (make-string 7 :initial-element #\x))
                (nth-value 1 (run-exe (list "inspect" path "--max-string" "10")))))
    (is (search (format nil "\"~A\"" long) (nth-value 1 (run-exe (list "inspect" path "--max-string" "0")))))
    (is (search (format nil "\"~A\"" long) (nth-value 1 (run-exe (list "inspect" path "--json")))))
    (delete-file path)))

;;; Every command's --json is JSON a strict parser reads: python3's json
;;; module (no \xHH, no raw control characters, no NaN) and yason, and its
;;; strings give back the bytes of the keys, values, tensor names and file
;;; names they came from (under Python's surrogateescape).

(defparameter *strict-json-check*
  "import json, os, sys
def refuse(x):
    raise ValueError('not JSON: ' + x)
seen = set()
def walk(v):
    if isinstance(v, str):
        seen.add(v.encode('utf-8', 'surrogateescape'))
    elif isinstance(v, list):
        for x in v:
            walk(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            walk(k)
            walk(x)
text = open(sys.argv[1], 'rb').read().decode('utf-8')
docs = [d for d in text.split(chr(10)) if d] if sys.argv[2] == 'lines' else [text]
for doc in docs:
    walk(json.loads(doc, parse_constant=refuse))
want = [os.fsencode(sys.argv[3])] + [bytes.fromhex(h) for h in sys.argv[4:]]
missing = [w for w in want if w not in seen]
print('missing %s in %s' % (ascii(missing), ascii(text[:3000])) if missing else 'ok')
"
  "A python3 program: the file argv[1] (one JSON document, or with argv[2]
\"lines\" one a line) parsed by the strict json module, then whether its
strings hold the path argv[3] and the bytes of each hex argv[4...].")

(defparameter *hostile-name*
  "x$(printf '\\377\"\\\\\\001\\n\\302\\233')y"
  "Shell text for a file name with a byte that is not UTF-8, a quote, a
backslash, a C0 control, a newline and a C1 control.")

(defun hex-octets (octets)
  (format nil "~{~(~2,'0x~)~}" (coerce octets 'list)))

(defun strict-json-strings (command source mode &rest expected)
  "Run the shell COMMAND with $0 the executable, $f a copy of the file
SOURCE under a hostile name and $o a file for the JSON (the command writes
it there); answer what *STRICT-JSON-CHECK* says of $o with MODE (\"one\" or
\"lines\"), $f and the byte vectors EXPECTED, and as second value the
command's standard error."
  (multiple-value-bind (code out err)
      (sh (format nil "d=$(mktemp -d) && f=\"$d/~A.gguf\" && o=\"$d/out.json\" && cp \"$1\" \"$f\" &&
{ ~A; } && python3 -c \"$2\" \"$o\" ~A \"$f\" ~{~A~^ ~}; s=$?; rm -r \"$d\"; exit $s"
                  *hostile-name* command mode (mapcar #'hex-octets expected))
          source *strict-json-check*)
    (declare (ignore code))
    (values (string-trim '(#\Newline) out) err)))

(defun hostile-gguf ()
  "A GGUF file (bytes) whose keys, string values, string array and tensor
name hold bytes that are not UTF-8, controls, quotes and backslashes, and
the byte vectors of those strings as second value."
  (let* ((key (octets "k" #xff "\"\\" #x01 #x0a "ey"))
         (value (octets "v" #x1b "[0m\"\\" #xc2 #x9b #xe2 #x80 #xae #xc3 #xa9
                        #xf0 #x9f #x98 #x80 #xc0 #xaf #xed #xa0 #x80 #xed #xb2 #x80 #xff))
         (items (loop for bad in *invalid-utf8* collect (octets "a" bad "\"")))
         (name (octets "t" #xfe "\\" #x7f ".weight")))
    (values (raw-gguf :kvs `((,key (:string ,value))
                             (,(octets "tokens") (:array :string ,@(mapcar (lambda (o) `(:string ,o))
                                                                              items))))
                      :tensors `((,name (32 2) ,(make-array 64 :element-type 'single-float
                                                                :initial-element 0.5))))
            (list* key value name items))))

(test inspect-json-is-strict-json-holding-the-bytes
  (let ((path (tmp-path "hostile.gguf")))
    (multiple-value-bind (bytes strings) (hostile-gguf)
      (write-octets-file path bytes)
      (multiple-value-bind (verdict err)
          (apply #'strict-json-strings "\"$0\" inspect \"$f\" --json > \"$o\"" path "one" strings)
        (is (string= "ok" verdict) "~A ~A" verdict err))
      ;; yason reads the same strings back (an invalid byte B as U+DC00+B,
      ;; as the reader decodes it)
      (multiple-value-bind (code out) (run-exe-octets (list "inspect" path "--json"))
        (is (= 0 code))
        (let* ((json (parse-json-string (rontolisp::%utf8-string out)))
               (found (append (mapcar (lambda (m) (gethash "key" m)) (gethash "metadata" json))
                              (list (gethash "value" (first (gethash "metadata" json))))
                              (coerce (gethash "value" (second (gethash "metadata" json))) 'list)
                              (mapcar (lambda (m) (gethash "name" m)) (gethash "tensors" json)))))
          (dolist (o strings)
            (is (member (rontolisp::%utf8-string o) found :test #'string=)
                "~S not read back" o)))))
    (delete-file path)))

(test embed-and-eval-json-are-strict-json-holding-the-file-name
  (let ((path (tmp-path "hostile-pico.gguf")))
    (gguf:write path (command-line::random-model "s1-pico" :type :f32 :encoder-only t))
    (multiple-value-bind (verdict err)
        (strict-json-strings "\"$0\" embed \"$f\" --tokens 2,17 --json > \"$o\" &&
\"$0\" embed \"$f\" --tokens 2,17 --pooling mean --json >> \"$o\"" path "lines")
      (is (string= "ok" verdict) "embed: ~A ~A" verdict err))
    (multiple-value-bind (verdict err)
        (strict-json-strings "\"$0\" eval \"$f\" --sequences 1 --reps 1 --json > \"$o\"" path "one")
      (is (string= "ok" verdict) "eval: ~A ~A" verdict err))
    (delete-file path)))

(test bench-json-is-strict-json-holding-the-file-and-tensor-names
  (let ((path (tmp-path "hostile-bench.gguf")))
    (multiple-value-bind (bytes strings) (hostile-gguf)
      (write-octets-file path bytes)
      (multiple-value-bind (verdict err)
          (strict-json-strings "\"$0\" bench \"$f\" --iters 1 --json \"$o\" >/dev/null 2>&1" path "one"
                               (third strings))
        (is (string= "ok" verdict) "bench: ~A ~A" verdict err)))
    (delete-file path)))

(test json-writer-strings-read-back-whole
  "Every kind of character WRITE-JSON may meet (C0, DEL, C1, bidi
controls, quote, backslash, the U+DC80..U+DCFF of bytes that are not
UTF-8, letters beyond the BMP) is written so that yason reads the same
string back, in keys and values, and only as ASCII escapes or UTF-8."
  (let* ((codes (append (loop for c below 256 collect c)
                        (loop for c from #xdc80 to #xdcff collect c)
                        '(#x061c #x200e #x202e #x2066 #x2028 #xe9 #x4e2d #x1f600 #x10ffff)))
         (s (map 'string #'code-char codes))
         (text (with-output-to-string (out)
                 (text::write-json (list :object (cons s (vector s))) out))))
    (is (not (search "\\x" text)))
    (is (notany (lambda (c) (or (< (char-code c) 32) (<= #xd800 (char-code c) #xdfff))) text))
    (let ((back (parse-json-string text)))
      (is (equal (list s) (loop for k being the hash-keys of back collect k)))
      (is (string= s (aref (coerce (gethash s back) 'vector) 0))))))
