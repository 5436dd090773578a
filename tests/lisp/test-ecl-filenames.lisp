;;;; test-ecl-filenames.lisp - CL's own file functions on names of any
;;;; characters (ecl-filenames.lisp): the name reaches the system as its
;;;; UTF-8 bytes and comes back as the same string, in this process (the
;;;; test files are loaded from source, as the REPL and scripts run code)
;;;; and in a `rontolisp script' child, whose script has such a name too.

(in-package "RONTOLISP-TESTS")

(def-suite ecl-filenames :in all
  :description "OPEN, LOAD, COMPILE-FILE, DIRECTORY ... on names beyond ASCII.")
(in-suite ecl-filenames)

(defun utf8-arg (string)
  "STRING as an argument of a child process: its UTF-8 bytes."
  (octets-arg (rontolisp::%utf8-octets string)))

(defun extended-name-dir ()
  "A fresh directory whose name has Cyrillic letters and a ü, made with the
shell (not with the functions under test), as a string ending in a slash."
  (let ((dir (tmp-path "каталог-ü/")))
    (sh "mkdir \"$1\"" (utf8-arg dir))
    dir))

(defun file-round-trip-forms (dir compile)
  "Forms that take a file named in Cyrillic and ü through the CL file
functions in DIR (COMPILE-FILE too when COMPILE) and evaluate to a list of
what each step answered, names as strings."
  `((let* ((dir ,dir)
           (src (concatenate 'string dir "тест-ü.lisp"))
           (new (concatenate 'string dir "новый-ü.lisp"))
           (sub (concatenate 'string dir "папка-ü/")))
      (flet ((names (list) (mapcar #'namestring list))
             (listing () (sort (mapcar #'namestring (directory (concatenate 'string dir "*.*")))
                               #'string<)))
        (list
         (with-open-file (s src :direction :output)
           (write-line "(defun extended-name-greeting () \"привет\")" s)
           :written)
         (namestring (probe-file src))
         (namestring (truename src))
         (integerp (file-write-date src))
         (listing)
         (and (load src) (funcall 'extended-name-greeting))
         ,(if compile
              `(let ((fas (compile-file src)))
                 (fmakunbound 'extended-name-greeting)
                 (list (namestring fas) (and (load fas) (funcall 'extended-name-greeting))
                       (delete-file fas)))
              :not-compiled)
         (names (multiple-value-list (rename-file src new)))
         (probe-file src)
         (nth-value 1 (ensure-directories-exist (concatenate 'string sub "x")))
         (namestring (probe-file sub))
         (with-open-file (s new) (read-line s))
         (delete-file new)
         (listing))))))

(defun expected-round-trip (dir compile &optional others)
  "What FILE-ROUND-TRIP-FORMS evaluate to, with the files OTHERS (names
in DIR) there throughout."
  (let ((src (concatenate 'string dir "тест-ü.lisp"))
        (new (concatenate 'string dir "новый-ü.lisp"))
        (others (mapcar (lambda (name) (concatenate 'string dir name)) others)))
    (list :written src src t (sort (cons src (copy-list others)) #'string<) "привет"
          (if compile
              (list (concatenate 'string dir "тест-ü.fas") "привет" t)
              :not-compiled)
          (list new src new) nil t (concatenate 'string dir "папка-ü/")
          "(defun extended-name-greeting () \"привет\")" t others)))

(defun disk-names (dir)
  "The names in DIR as the shell lists them (UTF-8 bytes decoded)."
  (split-lines (nth-value 1 (sh "cd \"$1\" && LC_ALL=C ls -A" (utf8-arg dir)))))

(test cl-file-functions-take-extended-names
  "OPEN, PROBE-FILE, TRUENAME, FILE-WRITE-DATE, DIRECTORY, LOAD,
RENAME-FILE, ENSURE-DIRECTORIES-EXIST and DELETE-FILE on a name with
Cyrillic letters and a ü; the file on disk has the UTF-8 bytes of the
name.  (COMPILE-FILE runs in the child below: the test process does not
load ECL's compiler.)"
  (let ((dir (extended-name-dir)))
    (unwind-protect
         (let ((results (eval (first (file-round-trip-forms dir nil)))))
           (is (equal (expected-round-trip dir nil) results) "~S" results)
           (is (equal '("папка-ü") (disk-names dir))))
      (sh "rm -rf \"$1\"" (utf8-arg dir)))))

(test cl-file-functions-take-extended-names-in-a-script
  "The same in a `rontolisp script' child, COMPILE-FILE and loading what it
wrote included, from a script file with such a name."
  (let* ((dir (extended-name-dir))
         (script (concatenate 'string dir "сценарий-ü.lisp")))
    (unwind-protect
         (progn
           (sh "printf '%s\\n' \"$2\" >\"$1\"" (utf8-arg script)
               (utf8-arg
                (let ((*package* (find-package "RONTOLISP-TESTS")))
                 (format nil "(prin1 ~S)"
                          (first (file-round-trip-forms dir t))))))
           (multiple-value-bind (code out err) (run-exe (list "script" (utf8-arg script)))
             (is (= 0 code) "~A" err)
             (is (equal (expected-round-trip dir t '("сценарий-ü.lisp"))
                        (ignore-errors (let ((*package* (find-package "RONTOLISP-TESTS")))
                                         (read-from-string out))))
                 "~A~A" out err))
           (is (equal '("папка-ü" "сценарий-ü.lisp") (disk-names dir))))
      (sh "rm -rf \"$1\"" (utf8-arg dir)))))

(test native-filespec-keeps-ecls-own-form
  "A name part ECL answered (its UTF-8 bytes a character each), merged
with the user's text, is not encoded twice; ASCII names pass untouched."
  (let ((ecl-form (map 'string #'code-char (rontolisp::%utf8-octets "домой"))))
    (is (string= (map 'string #'code-char
                      (rontolisp::%utf8-octets "/домой/тест-ü.txt"))
                 (rontolisp::native-filespec
                  (concatenate 'string "/" ecl-form "/тест-ü.txt"))))
    (let ((ascii "/tmp/x.txt"))
      (is (eq ascii (rontolisp::native-filespec ascii))))))

(test cl-file-functions-answer-ecls-form-to-a-name-in-it
  "A name given in ECL's form (its UTF-8 bytes a character each, as compiled
code such as ASDF's has it from ECL) is answered in that form, which ECL's
C functions take as they are."
  (let* ((dir (extended-name-dir))
         (file (concatenate 'string dir "тест-ü.txt"))
         (ecl-form (lambda (name) (map 'string #'code-char (rontolisp::%utf8-octets name)))))
    (unwind-protect
         (progn
           (sh "echo x >\"$1\"" (utf8-arg file))
           (is (string= (funcall ecl-form file) (namestring (probe-file (funcall ecl-form file)))))
           (is (equal (list (funcall ecl-form file))
                      (mapcar #'namestring (directory (funcall ecl-form (concatenate 'string dir "*.*"))))))
           (is (string= file (namestring (probe-file file)))))
      (sh "rm -rf \"$1\"" (utf8-arg dir)))))

(test cl-file-functions-take-extended-names-at-the-repl
  "The REPL (reading a pipe) writes, lists and deletes a file named in
Cyrillic and ü."
  (let* ((dir (extended-name-dir))
         (file (concatenate 'string dir "тест-ü.txt")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (run-exe '()
                      :input (format nil "(with-open-file (s ~S :direction :output) (write-line \"x\" s))~%~
                                          (mapcar #'namestring (directory ~S))~%~
                                          (delete-file ~S)~%"
                                     file (concatenate 'string dir "*.*") file))
           (is (= 0 code) "~A" err)
           (is (contains out (format nil "(~S)" file)) "~A~A" out err)
           (is (null (disk-names dir))))
      (sh "rm -rf \"$1\"" (utf8-arg dir)))))

(test cl-file-errors-name-the-file-as-given
  "ECL's FILE-ERROR about a missing file named beyond ASCII names it as the
user wrote it, not by its bytes, and is still a FILE-ERROR."
  (let ((missing (tmp-path "нет-ü.txt")))
    (dolist (call (list (lambda () (open missing))
                        (lambda () (truename missing))
                        (lambda () (delete-file missing))
                        (lambda () (load missing))))
      (handler-case (progn (funcall call) (fail "no error for ~A" missing))
        (file-error (e)
          (is (typep e 'rontolisp:file-io-error))
          (is (equal missing (namestring (file-error-pathname e))))
          (is (contains (princ-to-string e) missing) "~A" e))))))
