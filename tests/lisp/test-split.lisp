;;;; test-split.lisp - shard sets (lisp/gguf/shards.lisp) and `rontolisp split'
;;;; / `merge': split then merged is the same bytes, by tensor count and by
;;;; size, for tensors of every ggml type; the keys and names llama.cpp's
;;;; gguf-split writes; llama.cpp's loader reads the shards; a set that does
;;;; not hold together gives our conditions; a failed split leaves nothing.

(in-package "RONTOLISP-TESTS")

(def-suite split :in all :description "Shard sets, split and merge.")
(in-suite split)

(defun shard-names (prefix count)
  (loop for i below count collect (gguf:shard-path prefix i count)))

(defun delete-files (paths)
  (dolist (p paths) (ignore-errors (delete-file p))))

(defun every-type-file ()
  "A file of every ggml type (test-gguf.lisp's tensors), written by us."
  (let ((path (tmp-path "split-every.gguf")))
    (gguf:write path (gguf:make-file :metadata '(("general.name" :string "every type")
                                                 ("general.architecture" :string "none"))
                                     :tensors (every-type-tensors)))
    path))

(defun big-file (&key (alignment 32))
  "A file of 2.1 MB of F32 tensors (5 x 420 kB) and a few of every type."
  (let ((path (tmp-path "split-big.gguf"))
        (state (make-random-state t)))
    (gguf:write path (gguf:make-file
                      :alignment alignment
                      :metadata '(("general.name" :string "big"))
                      :tensors (append (loop for i below 5
                                             collect (list (format nil "big.~D" i)
                                                           (random-matrix 105 1000 :state state)))
                                       (subseq (every-type-tensors) 0 6))))
    path))

(test shard-path-as-llama-names-them
  (is (string= "m-00001-of-00003.gguf" (gguf:shard-path "m" 0 3)))
  (is (string= "/a/b-00012-of-00100.gguf" (gguf:shard-path "/a/b" 11 100))))

(test split-merge-by-tensor-count-is-byte-identical
  (let* ((in (every-type-file))
         (prefix (tmp-path "every"))
         (out (tmp-path "every-merged.gguf"))
         (n (gguf:with-file (f in) (length (gguf:tensor-infos f))))
         (count (ceiling n 7))
         (names (shard-names prefix count)))
    (multiple-value-bind (code stdout stderr) (run-exe (list "split" in prefix "--max-tensors" "7"))
      (is (= 0 code) "split: ~A" stderr)
      (is (search (format nil "~D shards written" count) stdout)))
    (is (every #'probe-file names))
    ;; The keys gguf-split writes, in its order; the first shard has the rest.
    (loop for name in names
          for i from 0
          do (gguf:with-file (f name)
               (is (equal `(("split.no" :u16 ,i) ("split.tensors.count" :i32 ,n)
                            ("split.count" :u16 ,count))
                          (last (gguf:metadata f) 3)))
               (is (= (if (= i (1- count)) (- n (* 7 (1- count))) 7)
                      (length (gguf:tensor-infos f))))
               (is (eq (zerop i) (and (gguf:value f "general.name") t)))))
    (multiple-value-bind (code stdout stderr) (run-exe (list "merge" (first names) out))
      (declare (ignore stdout))
      (is (= 0 code) "merge: ~A" stderr))
    (is (equalp (file-octets in) (file-octets out)) "merged file differs from the original")
    ;; The set read as one: every tensor's bytes, of every type.
    (let ((set (gguf:read (first names) :shards t)))
      (unwind-protect
           (gguf:with-file (f in)
             (is (equal (gguf:tensor-names f) (gguf:tensor-names set)))
             (dolist (name (gguf:tensor-names f))
               (is (equalp (gguf:tensor-octets f name) (gguf:tensor-octets set name))
                   "~A differs read through the set" name)))
        (gguf:close set)))
    (delete-files (list* in out names))))

(test split-merge-by-size-is-byte-identical
  (dolist (alignment '(32 256))
    (let* ((in (big-file :alignment alignment))
           (prefix (tmp-path "big"))
           (out (tmp-path "big-merged.gguf")))
      (multiple-value-bind (code stdout stderr) (run-exe (list "split" in prefix "--max-size" "1M"))
        (is (= 0 code) "split: ~A" stderr)
        (is (search "3 shards written" stdout) "~A" stdout))
      (let ((names (shard-names prefix 3)))
        ;; 420 kB each: two big tensors fit in 10^6 bytes, three do not.
        (is (equal '(2 2 7) (mapcar (lambda (name) (gguf:with-file (f name)
                                                     (length (gguf:tensor-infos f))))
                                    names)))
        (gguf:with-file (f (second names))
          (is (= alignment (gguf:alignment f)))
          (is (eq (= alignment 32) (null (gguf:value f "general.alignment")))))
        (is (= 0 (run-exe (list "merge" (first names) out))))
        (is (equalp (file-octets in) (file-octets out)) "alignment ~D: merged file differs" alignment)
        (let ((set (gguf:read (first names) :shards t)))
          (gguf:with-file (f in)
            (is (equalp (gguf:tensor f "big.4") (gguf:tensor set "big.4"))))
          (gguf:close set))
        (delete-files (list* in out names))))))

(test a-set-splits-anew-from-its-first-shard
  (let* ((in (every-type-file))
         (n (gguf:with-file (f in) (length (gguf:tensor-infos f))))
         (a (tmp-path "resplit-a")) (b (tmp-path "resplit-b"))
         (out (tmp-path "resplit.gguf"))
         (first-a (first (gguf:with-file (f in) (gguf:write-shards a f :max-tensors 7)))))
    (is (= 0 (run-exe (list "split" first-a b "--max-tensors" "10"))))
    (is (= 0 (run-exe (list "merge" (gguf:shard-path b 0 (ceiling n 10)) out))))
    (is (equalp (file-octets in) (file-octets out)) "split, split again and merged differs")
    (delete-files (list* in out (append (shard-names a (ceiling n 7)) (shard-names b (ceiling n 10)))))))

(test split-options-are-checked
  (is (= 2 (run-exe (list "split" "x.gguf" "p" "--max-size" "2K"))))
  (is (= 2 (run-exe (list "split" "x.gguf" "p" "--max-size" "0M"))))
  (is (= 2 (run-exe (list "split" "x.gguf" "p" "--max-size" "1M" "--max-tensors" "3"))))
  (is (= 2 (run-exe (list "split" "x.gguf" "p" "--max-tensors" "0"))))
  (is (= (* 2 1000 1000 1000) (command-line::split-size-parser "--max-size" "2G")))
  (is (= 0 (run-exe (list "split" "--help"))))
  (is (= 0 (run-exe (list "merge" "--help")))))

(test split-dry-run-writes-nothing
  (let ((in (every-type-file)) (prefix (tmp-path "dry")))
    (multiple-value-bind (code stdout) (run-exe (list "split" in prefix "--max-tensors" "10" "--dry-run"))
      (is (= 0 code))
      (is (search (gguf:shard-path prefix 0 (ceiling (gguf:with-file (f in) (length (gguf:tensor-infos f))) 10))
                  stdout)))
    (is (null (files-named prefix)))
    (delete-file in)))

(defun split-set (&key (max-tensors 5))
  "An every-type file split in shards of MAX-TENSORS: (input shard-names)."
  (let* ((in (every-type-file)) (prefix (tmp-path "set")))
    (gguf:with-file (f in)
      (list in (gguf:write-shards prefix f :max-tensors max-tensors)))))

(defun rewrite-with (path fn)
  "Rewrite the GGUF file PATH with its metadata passed through FN."
  (let ((copy (gguf:with-file (f path)
                (gguf:make-file :metadata (funcall fn (gguf:metadata f))
                                :alignment (gguf:alignment f)
                                :tensors (loop for ti in (gguf:tensor-infos f)
                                               collect (list (gguf:tensor-info-name ti)
                                                             (copy-seq (gguf:tensor-octets
                                                                        f (gguf:tensor-info-name ti)))
                                                             :type (gguf:tensor-info-type-id ti)
                                                             :dims (gguf:tensor-info-dims ti)))))))
    (gguf:write path copy)))

(defun files-named (prefix)
  "The names of the files and directories whose path starts with PREFIX."
  (split-lines (nth-value 1 (sh "ls -d \"$1\"* 2>/dev/null" prefix))))

(defun shard-key-setter (key value)
  (lambda (metadata)
    (mapcar (lambda (e) (if (string= (first e) key) (list key (second e) value) e)) metadata)))

(test hostile-shard-sets-give-shard-errors
  ;; A missing shard.
  (destructuring-bind (in names) (split-set)
    (delete-file (third names))
    (let ((c (handler-case (progn (gguf:read (first names) :shards t) nil)
               (gguf:shard-error (c) c))))
      (is (typep c 'gguf:missing-shard-error))
      (is (search (file-namestring (third names)) (princ-to-string c))))
    (is (= 1 (run-exe (list "merge" (first names) (tmp-path "never.gguf")))))
    (delete-files (cons in names)))
  ;; A shard of another set in a shard's place: its split.no is wrong.
  (destructuring-bind (in names) (split-set)
    (rewrite-with (second names) (shard-key-setter "split.no" 3))
    (signals gguf:foreign-shard-error (gguf:read (first names) :shards t))
    (delete-files (cons in names)))
  ;; Counts that disagree: split.count, split.tensors.count.
  (destructuring-bind (in names) (split-set)
    (rewrite-with (second names) (shard-key-setter "split.count" 9))
    (let ((c (handler-case (progn (gguf:read (first names) :shards t) nil)
               (gguf:shard-error (c) c))))
      (is (typep c 'gguf:shard-count-error))
      (is (eq :shard-count (gguf:gguf-error-reason c))))
    (delete-files (cons in names)))
  (destructuring-bind (in names) (split-set)
    (rewrite-with (first names) (shard-key-setter "split.tensors.count" 3))
    (signals gguf:shard-count-error (gguf:read (first names) :shards t))
    (delete-files (cons in names)))
  ;; The first shard said to be a later one, or named as another count.
  (destructuring-bind (in names) (split-set)
    (rewrite-with (first names) (shard-key-setter "split.no" 1))
    (signals gguf:foreign-shard-error (gguf:read (first names) :shards t))
    (rewrite-with (first names) (shard-key-setter "split.no" 0))
    (rewrite-with (first names) (shard-key-setter "split.count" (1+ (length names))))
    (signals gguf:foreign-shard-error (gguf:read (first names) :shards t))
    ;; Without :shards it is one file like any other.
    (gguf:with-file (f (first names)) (is (= 5 (length (gguf:tensor-infos f)))))
    (delete-files (cons in names))))

(test failed-split-leaves-no-shard-behind
  (let* ((in (every-type-file))
         (prefix (tmp-path "fail"))
         (count (ceiling (gguf:with-file (f in) (length (gguf:tensor-infos f))) 10))
         ;; The staging name of the second shard taken by a directory.
         (blocker (format nil "~A.rontolisp-tmp.~D.set/" (gguf:shard-path prefix 1 count)
                          (ext:getpid))))
    (ensure-directories-exist blocker)
    (gguf:with-file (f in)
      (signals gguf:gguf-error (gguf:write-shards prefix f :max-tensors 10)))
    (is (equal (list (string-right-trim "/" blocker)) (files-named prefix)))
    (sh "rmdir \"$1\"" blocker)
    ;; A shard's target that is a directory is refused before writing.
    (ensure-directories-exist (concatenate 'string (gguf:shard-path prefix 2 count) "/"))
    (gguf:with-file (f in)
      (signals gguf:gguf-error (gguf:write-shards prefix f :max-tensors 10)))
    (is (equal (list (gguf:shard-path prefix 2 count)) (files-named prefix)))
    (sh "rmdir \"$1\"" (gguf:shard-path prefix 2 count))
    (delete-file in)))

(test llama-cpp-loads-the-shards
  ;; The shards of a random encoder-only s1-pico model give llama.cpp's
  ;; encoder the same numbers as the file they came from.
  (let* ((in (tmp-path "pico.gguf"))
         (prefix (tmp-path "pico"))
         (ids '(1 5 9 200 17)))
    (is (= 0 (run-exe (list "convert" "--random" "s1-pico" in "--encoder-only"))))
    (is (= 0 (run-exe (list "split" in prefix "--max-tensors" "4"))))
    (let* ((count (ceiling (gguf:with-file (f in) (length (gguf:tensor-infos f))) 4))
           (names (shard-names prefix count))
           (whole (command-line::llama-encode in (list ids))))
      (if (null whole)
          (skip-reference "llama.cpp's libraries or build/tools/llama_embed are missing (run sh ~
tests/fetch-llama-lib.sh and make tools, or set RL_LLAMA_LIB)")
          (let ((sharded (command-line::llama-encode (first names) (list ids))))
            (is (< 2 count))
            (is (equalp (cdr (first whole)) (cdr (first sharded)))
                "llama.cpp's embeddings of the shards differ from the whole file's")))
      (delete-files (list* in names)))))

;;; Relative prefixes, non-ASCII names, sets replaced all or none.

(test split-into-a-relative-prefix-writes-there
  ;; `split pico.gguf out/model' run in a directory holding out/ (and then
  ;; out/out/ too) writes out/model-*, never out/out/model-*.
  (let* ((dir (concatenate 'string (tmp-path "rel") "/"))
         (in (concatenate 'string dir "in.gguf"))
         (count 0))
    (ensure-directories-exist (concatenate 'string dir "out/"))
    (let ((every (every-type-file)))
      (write-octets-file in (file-octets every))
      (setf count (ceiling (gguf:with-file (f every) (length (gguf:tensor-infos f))) 10))
      (delete-file every))
    (dolist (out-out '(nil t))
      (when out-out (ensure-directories-exist (concatenate 'string dir "out/out/")))
      (multiple-value-bind (code stdout stderr)
          (sh "cd \"$1\" && \"$0\" split in.gguf out/model --max-tensors 10" dir)
        (is (= 0 code) "split: ~A ~A" stdout stderr))
      (is (equal (append (shard-names "model" count) (and out-out '("out")))
                  (names-in (concatenate 'string dir "out/"))))
      (when out-out (is (null (names-in (concatenate 'string dir "out/out/"))))))
    ;; Split again over the set with its last shard missing: all written.
    (delete-file (concatenate 'string dir (gguf:shard-path "out/model" (1- count) count)))
    (is (= 0 (sh "cd \"$1\" && \"$0\" split in.gguf out/model --max-tensors 10" dir)))
    (is (equal (append (shard-names "model" count) '("out"))
                (names-in (concatenate 'string dir "out/"))))
    (sh "rm -rf \"$1\"" dir)))

(test split-merge-and-read-sets-of-non-ascii-names
  ;; Under LANG=C.UTF-8 as under no locale: the shards are written under the
  ;; names' UTF-8 bytes, read back by those names, merged.
  (let* ((dir (concatenate 'string (tmp-path "names") "/dïr/"))
         (in (every-type-file))
         (n (gguf:with-file (f in) (length (gguf:tensor-infos f))))
         (count (ceiling n 10)))
    (rontolisp::ensure-directories dir)
    (dolist (lang '("C.UTF-8" "C"))
      (multiple-value-bind (code stdout stderr)
          (sh "cd \"$1\" && LANG=$3 \"$0\" split \"$2\" \"$4\" --max-tensors 10"
              (rontolisp::native-namestring dir) in lang (native-arg "ém"))
        (is (= 0 code) "split: ~A ~A" stdout stderr))
      (is (equal (shard-names "ém" count) (names-in dir)))
      (multiple-value-bind (code stdout stderr)
          (sh "cd \"$1\" && LANG=$2 \"$0\" merge \"$3\" \"$4\"" (rontolisp::native-namestring dir) lang
              (native-arg (gguf:shard-path "ém" 0 count)) (native-arg "mérgé.gguf"))
        (is (= 0 code) "merge: ~A ~A" stdout stderr))
      (is (equal (cons "mérgé.gguf" (shard-names "ém" count)) (names-in dir)))
      (is (equalp (file-octets in) (file-octets (rontolisp::native-namestring (concatenate 'string dir "mérgé.gguf")))))
      (let ((set (gguf:read (concatenate 'string dir (gguf:shard-path "ém" 0 count)) :shards t)))
        (is (= n (length (gguf:tensor-infos set))))
        (gguf:close set))
      (sh "rm -f \"$1\"*" (rontolisp::native-namestring dir)))
    ;; A missing shard is named as it is written.
    (gguf:with-file (f in) (gguf:write-shards (concatenate 'string dir "ém") f :max-tensors 10))
    (rontolisp::delete-path (concatenate 'string dir (gguf:shard-path "ém" 1 count)))
    (handler-case (progn (gguf:read (concatenate 'string dir (gguf:shard-path "ém" 0 count)) :shards t)
                         (fail "a set missing a shard read"))
      (gguf:missing-shard-error (c)
        (is (contains (princ-to-string c) (gguf:shard-path "dïr/ém" 1 count)) "~A" c)))
    (sh "rm -rf \"$1\"" (rontolisp::native-namestring (concatenate 'string dir "../")))
    (delete-file in)))

(defun old-set (prefix count)
  "COUNT small files named as the shards of PREFIX, file I holding the
byte I eight times; answers their names."
  (loop for name in (shard-names prefix count)
        for i from 0
        do (rontolisp::write-file-atomically
            name (list (make-array 8 :element-type '(unsigned-byte 8) :initial-element i)))
        collect name))

(defun old-set-intact-p (names)
  (loop for name in names
        for i from 0
        always (equalp (make-array 8 :element-type '(unsigned-byte 8) :initial-element i)
                       (file-octets name))))

(test a-set-is-replaced-all-or-none
  (let* ((prefix (tmp-path "all"))
         (names (old-set prefix 3))
         (f (gguf:make-file :tensors (list (list "t" (random-matrix 2 32))))))
    ;; The last shard's write fails: no file changed, no temporary left.
    (signals error (gguf:write-staged names (lambda (temp i)
                                              (gguf:write temp f)
                                              (when (= i 2) (error "the third shard fails")))))
    (is (old-set-intact-p names))
    (is (equal (mapcar #'file-namestring names) (mapcar #'file-namestring (files-named prefix))))
    ;; The last target became a directory meanwhile: refused, nothing changed.
    (signals gguf:gguf-error
      (gguf:write-staged names (lambda (temp i)
                                 (gguf:write temp f)
                                 (when (= i 2)
                                   (delete-file (third names))
                                   (ensure-directories-exist (concatenate 'string (third names) "/x/"))))))
    (is (old-set-intact-p (subseq names 0 2)))
    (is (equal (mapcar #'file-namestring names) (mapcar #'file-namestring (files-named prefix))))
    (sh "rm -rf \"$1\"" (third names))
    (old-set prefix 3)
    ;; The last rename fails (its temporary file vanished): the shards
    ;; already renamed get their old files back.
    (signals gguf:gguf-error
      (gguf:write-staged names (lambda (temp i)
                                 (gguf:write temp f)
                                 (when (= i 2) (delete-file temp)))))
    (is (old-set-intact-p names))
    (is (equal (mapcar #'file-namestring names) (mapcar #'file-namestring (files-named prefix))))
    (delete-file (third names))
    ;; A shard missing from the older set: every one written.
    (is (equal names (gguf:write-staged (subseq names 0 3) (lambda (temp i) (declare (ignore i)) (gguf:write temp f)))))
    (is (every (lambda (name) (gguf:with-file (g name) (equal '("t") (gguf:tensor-names g)))) names))
    (is (equal (mapcar #'file-namestring names) (mapcar #'file-namestring (files-named prefix))))
    (delete-files names)))

(test a-set-writes-through-symbolic-links
  ;; A shard's name that is a symbolic link (here to a file in another
  ;; directory) stays a link and the file it names gets the new shard, as
  ;; for a single file; the set's temporary file goes beside that file.
  (let* ((prefix (tmp-path "linked"))
         (elsewhere (tmp-path "linked-dir"))
         (real (concatenate 'string elsewhere "/real.gguf"))
         (names (old-set prefix 2))
         (f (gguf:make-file :tensors (list (list "t" (random-matrix 2 32))))))
    (sh "mkdir -p \"$1\" && mv \"$2\" \"$3\" && ln -s \"$3\" \"$2\"" elsewhere (first names) real)
    (is (equal names (gguf:write-staged names (lambda (temp i) (declare (ignore i)) (gguf:write temp f)))))
    (is (eql 0 (sh "test -L \"$1\"" (first names))) "the link was replaced by a file")
    (is-true (gguf:with-file (g real) (equal '("t") (gguf:tensor-names g))))
    (is-true (gguf:with-file (g (second names)) (equal '("t") (gguf:tensor-names g))))
    (multiple-value-bind (code out) (sh "ls -A \"$1\"" elsewhere)
      (declare (ignore code))
      (is (string= (format nil "real.gguf~%") out) "left in the link's directory: ~S" out))
    (delete-files names)
    (sh "rm -rf \"$1\"" elsewhere)))

(test an-interrupted-set-leaves-no-temporary-file
  ;; SIGTERM while the second of three shards is being written: the process
  ;; ends with 143, the older set is whole and no temporary file is left.
  (let* ((prefix (tmp-path "term"))
         (names (old-set prefix 3))
         (script (tmp-path "term.lisp")))
    (write-file-string script (format nil "(let ((f (gguf:make-file :tensors (list (list \"t\" ~
(make-array 32 :element-type 'single-float :initial-element 1.0))))))
  (gguf:write-staged '~S
    (lambda (temp i)
      (gguf:write temp f)
      (when (= i 1)
        (ext:run-program \"/bin/sh\" (list \"-c\" (format nil \"kill -TERM ~~D\" (ext:getpid)))
                         :output nil)
        ;; the signal's deadline: without it the set is written, exit 0
        (loop repeat 200 do (sleep 0.05))))))" names))
    (is (= 143 (run-exe (list "script" script))))
    (is (old-set-intact-p names))
    (is (equal (mapcar #'file-namestring names) (mapcar #'file-namestring (files-named prefix))))
    (delete-files (cons script names))))

(defun tiny-tensors-file (n)
  "A file of N one-value F32 tensors."
  (let ((path (tmp-path (format nil "tiny-~D.gguf" n)))
        (data (make-array 1 :element-type 'single-float :initial-element 1.0)))
    (gguf:write path (gguf:make-file :tensors (loop for i below n
                                                    collect (list (format nil "t~D" i) data))))
    path))

(test split-dry-run-checks-as-the-real-run-in-linear-time
  ;; 70,000 tensors one per shard: more shards than split.count holds,
  ;; refused by the dry run as by the real run, with the same line.
  (let ((small (tiny-tensors-file 10000)) (big (tiny-tensors-file 70000))
        (prefix (tmp-path "many")))
    (multiple-value-bind (code out err) (run-exe (list "split" big prefix "--max-tensors" "1" "--dry-run"))
      (is (= 1 code) "~A" (subseq out 0 (min 200 (length out))))
      (is (contains err "expected at most 65535 shards") "~A" err)
      (is (string= err (nth-value 2 (run-exe (list "split" big prefix "--max-tensors" "1"))))))
    (is (null (files-named prefix)))
    ;; Planning 35,000 shards costs at most 7 times 5,000 (7 times the
    ;; tensors); planning quadratic in them cost 17 times.
    (let ((t-small (child-cpu-seconds "\"$0\" split \"$1\" \"$2\" --max-tensors 2 --dry-run" small prefix))
          (t-big (child-cpu-seconds "\"$0\" split \"$1\" \"$2\" --max-tensors 2 --dry-run" big prefix)))
      (is (< t-big (* 7 t-small)) "7 times the tensors: ~,2F s of CPU against ~,2F s" t-big t-small))
    (delete-files (list small big))))

(test shard-count-errors-name-the-shard-at-fault
  ;; The first shard's split.tensors.count wrong, the others right: merge
  ;; names the first shard; a later shard's wrong: that one is named.
  (destructuring-bind (in names) (split-set)
    (let ((n (gguf:with-file (f in) (length (gguf:tensor-infos f)))))
      (loop for bad in (list (first names) (third names))
            do (rewrite-with bad (shard-key-setter "split.tensors.count" 3))
               (multiple-value-bind (code stdout stderr)
                   (run-exe (list "merge" (first names) (tmp-path "never.gguf")))
                 (declare (ignore stdout))
                 (is (= 1 code))
                 (is (contains stderr (format nil "~A: expected split.tensors.count ~D" bad n)) "~A" stderr))
               (rewrite-with bad (shard-key-setter "split.tensors.count" n))))
    (let ((merged (tmp-path "merged.gguf")))
      (is (= 0 (run-exe (list "merge" (first names) merged))))
      (delete-files (list* in merged names)))))
