;;;; test-files.lisp - files.lisp and gguf/fileio.c seen from Lisp and the
;;;; command line: writers refuse devices, FIFOs and directories, write
;;;; through symbolic links and leave no temporary file; readers refuse a
;;;; FIFO without hanging and a directory by name.

(in-package "RONTOLISP-TESTS")

(def-suite files :in all :description "Reading and writing files safely.")
(in-suite files)

(defun make-device (path)
  "A character device at PATH that a broken writer may replace without
harm: a fresh node (as root), else a link to /dev/null, which only root
could have replaced."
  (sh "mknod \"$1\" c 1 3 2>/dev/null || ln -s /dev/null \"$1\"" path)
  path)

(test writers-refuse-devices-fifos-and-directories
  (let ((dev (make-device (tmp-path "out.dev"))) (fifo (tmp-path "out.fifo"))
        (dir (tmp-path "out.dir")) (in (golden "q8_main.f32.gguf")))
    (sh "mkfifo \"$1\" && mkdir \"$2\"" fifo dir)
    (loop for target in (list dev fifo dir)
          for kind in '("character device" "is a FIFO" "is a directory")
          do (multiple-value-bind (code out err) (run-exe (list "quantize" in target "q8_0"))
               (declare (ignore out))
               (is (= 1 code))
               (is (contains err target))
               (is (contains err kind) "~A: ~A" target err)))
    (is (string= (format nil "c p d~%")
                 (nth-value 1 (sh "for f in \"$1\" \"$2\" \"$3\"; do ls -lLd \"$f\" | cut -c1; done | tr '\\n' ' ' | sed 's/ $/\\n/'"
                                  dev fifo dir))))
    (signals rontolisp:file-io-error (rontolisp::write-file-atomically fifo (list (rontolisp::%utf8-octets "x"))))
    (signals rontolisp:json-error (rontolisp:read-json-file fifo))
    (signals rontolisp:json-error (rontolisp:read-json-file dir))
    (sh "rm -f \"$1\" \"$2\"; rmdir \"$3\"" dev fifo dir)))

(test writers-write-through-symbolic-links
  (let ((real (tmp-path "real.gguf")) (link (tmp-path "link.gguf")))
    (sh "ln -s \"$1\" \"$2\"" real link)
    (is (= 0 (run-exe (list "quantize" (golden "q8_main.f32.gguf") link "q8_0"))))
    (is (string= (format nil "l-~%") (nth-value 1 (sh "for f in \"$1\" \"$2\"; do ls -ld \"$f\" | cut -c1; done | tr -d '\\n'; echo" link real))))
    (is (plusp (length (gguf:tensor-names (gguf:read real)))))
    (ignore-errors (delete-file real))
    (sh "rm -f \"$1\"" link)))

(defun check-command-refuses-fifo-and-directory (command what)
  "Run `rontolisp COMMAND X' with X a FIFO (no writer: a blocking open
would hang, the timeout ends it) and a directory; each must exit 1 at once
with a line saying what X is and WHAT was expected.  Answers the FIFO's
path (the caller removes it)."
  (let ((fifo (tmp-path "in.fifo")) (dir (tmp-path "in.dir")))
    (sh "mkfifo \"$1\" && mkdir \"$2\"" fifo dir)
    (loop for (target kind) in (list (list fifo "is a FIFO") (list dir "is a directory"))
          do (multiple-value-bind (code out err)
                 (sh (format nil "timeout 20 \"$0\" ~A \"$1\"" command) target)
               (declare (ignore out))
               (is (= 1 code))
               (is (contains err (format nil "~A: expected ~A" kind what)) "~A" err)))
    (sh "rmdir \"$1\"" dir)
    fifo))

(test readers-refuse-fifos-without-hanging
  (let ((fifo (check-command-refuses-fifo-and-directory "inspect" "a GGUF file")))
    (signals rontolisp:safetensors-error (rontolisp:read-safetensors fifo))
    (sh "rm -f \"$1\"" fifo)))

(defun temporary-files (dir)
  "The names under DIR (recursively) that hold the atomic writer's infix."
  (remove-if-not (lambda (p) (search ".rontolisp-tmp." (namestring p)))
                 (directory (merge-pathnames "**/*.*" dir))))

(test write-laya-writes-every-file-atomically
  (let* ((dir (concatenate 'string (tmp-path "laya") "/")))
    ;; config.json already exists as a directory: refused by name, and
    ;; nothing half-written is left beside it.
    (ensure-directories-exist (concatenate 'string dir "config.json/"))
    (handler-case (progn (rontolisp:write-random-laya dir "s1-pico") (fail "no error"))
      (rontolisp:file-io-error (c)
        (is (contains (princ-to-string c) "config.json: is a directory"))))
    (is (null (temporary-files dir)))
    (sh "rmdir \"$1config.json\"" dir)
    (rontolisp:write-random-laya dir "s1-pico")
    (is (null (temporary-files dir)))
    (is (hash-table-p (rontolisp:read-json-file (concatenate 'string dir "tokenizer/tokenizer.json"))))
    (sh "rm -rf \"$1\"" dir)))

(test script-refuses-a-fifo-or-directory-without-hanging
  (sh "rm -f \"$1\"" (check-command-refuses-fifo-and-directory "script" "a Lisp source file to run")))

;;; Names of any characters.

(test files-of-non-ascii-names
  ;; script and --load of scrïpt.lisp, --write-laya lâya, convert of the
  ;; directory mödel/: every name written and read as its UTF-8 bytes, and
  ;; named as typed in messages, under LANG=C.UTF-8 as under no locale.
  (let ((dir (concatenate 'string (tmp-path "files") "/ünï/")))
    (rontolisp::ensure-directories dir)
    (rontolisp::write-file-atomically
     (concatenate 'string dir "scrïpt.lisp")
     (list (rontolisp::%utf8-octets "(format t \"~A ~A~%\" (first rontolisp:*args*) (and (probe-file *load-truename*) t))")))
    (dolist (lang '("C.UTF-8" "C"))
      (multiple-value-bind (code out err)
          (sh "cd \"$1\" && LANG=$2 \"$0\" --load \"$3\" script \"$3\" ok" (rontolisp::native-namestring dir)
              lang (native-arg "scrïpt.lisp"))
        (is (= 0 code) "~A" err)
        (is (equal '("NIL T" "ok T") (split-lines out)) "~A" out))
      (multiple-value-bind (code out err)
          (sh "cd \"$1\" && LANG=$2 \"$0\" script \"$3\"" (rontolisp::native-namestring dir) lang
              (native-arg "nöpe.lisp"))
        (declare (ignore out))
        (is (= 1 code))
        (is (contains err "rontolisp: nöpe.lisp: cannot open") "~A" err)))
    (multiple-value-bind (code out err)
        (sh "cd \"$1\" && \"$0\" convert --random s1-pico x.gguf --write-laya \"$2\""
            (rontolisp::native-namestring dir) (native-arg "lâya"))
      (is (= 0 code) "~A ~A" out err))
    (is (equal '("encoder" "model.safetensors" "tokenizer")
               (remove-if (lambda (n) (search ".json" n)) (names-in (concatenate 'string dir "lâya/")))))
    (sh "cd \"$1\" && mv \"$2\" \"$3\"" (rontolisp::native-namestring dir) (native-arg "lâya")
        (native-arg "mödel"))
    (multiple-value-bind (code out err)
        (sh "cd \"$1\" && LANG=C.UTF-8 \"$0\" convert \"$2\" \"$3\"" (rontolisp::native-namestring dir)
            (native-arg "mödel/") (native-arg "wéights.gguf"))
      (is (= 0 code) "~A ~A" out err))
    (is (equal '("mödel" "scrïpt.lisp" "wéights.gguf" "x.gguf") (names-in dir)))
    (is (equalp (file-octets (rontolisp::native-namestring (concatenate 'string dir "x.gguf")))
                (file-octets (rontolisp::native-namestring (concatenate 'string dir "wéights.gguf")))))
    (sh "rm -rf \"$1\"" (rontolisp::native-namestring (concatenate 'string dir "../")))))

(test directory-entries-names-and-kinds
  "DIRECTORY-ENTRIES lists every name as it is (non-ASCII, bytes that are
not UTF-8, the characters CL reads as wildcards), in byte order, each with
its own kind (a symbolic link not followed); a directory it cannot read
signals FILE-IO-ERROR naming it."
  (let* ((dir (concatenate 'string (tmp-path "entries") "/*?[ü]\\/")))
    (rontolisp::ensure-directories (concatenate 'string dir "sub/"))
    (dolist (name (list "a*b" "modèle" "x\\y" (rontolisp::%utf8-string (octets "bad" #xff))))
      (rontolisp::write-file-atomically (concatenate 'string dir name) '()))
    (sh "cd \"$1\" && ln -s sub link && ln -s nowhere dangling && mkfifo fifo"
        (rontolisp::native-namestring dir))
    (let ((entries (rontolisp::directory-entries dir)))
      (is (equal (names-in dir) (mapcar #'car entries)))
      (is (equal '(("a*b" . :file) ("dangling" . :link) ("fifo" . :fifo) ("link" . :link)
                   ("modèle" . :file) ("sub" . :directory) ("x\\y" . :file))
                 (remove-if (lambda (e) (search "bad" (car e))) entries))))
    (handler-case (progn (rontolisp::directory-entries (concatenate 'string dir "a*b")) (fail "no error"))
      (rontolisp:file-io-error (c)
        (is (contains (princ-to-string c) "a*b: cannot read the directory: Not a directory")
            "~A" c)))
    (sh "rm -rf \"$1\"" (rontolisp::native-namestring (concatenate 'string dir "../")))))

(test temporary-file-goes-however-the-body-is-left
  "WITH-TEMPORARY-FILE names the file after its target in the writer's
form and removes it when the body returns or exits."
  (let ((target (tmp-path "target.gguf")) (seen nil))
    (rontolisp::with-temporary-file (name target "f32")
      (setf seen name)
      (is (string= (format nil "~A.rontolisp-tmp.~D.f32" target (ext:getpid)) name))
      (rontolisp::write-file-atomically name '()))
    (is (null (rontolisp::path-kind seen)))
    (ignore-errors
     (rontolisp::with-temporary-file (name target "f32")
       (rontolisp::write-file-atomically name '())
       (error "leaving")))
    (is (null (rontolisp::path-kind seen)))))
