;;;; ecl-filenames.lisp - ECL only: CL's own file functions (OPEN and
;;;; WITH-OPEN-FILE, LOAD, COMPILE-FILE, PROBE-FILE, TRUENAME, DIRECTORY,
;;;; DELETE-FILE, RENAME-FILE, FILE-WRITE-DATE, FILE-AUTHOR,
;;;; ENSURE-DIRECTORIES-EXIST) taking a name of any characters.
;;;;
;;;; ECL 21.2.1 hands a namestring to the system one character per byte:
;;;; it refuses a character above U+00FF ("The filesystem does not accept
;;;; filenames with extended characters") and writes one from U+0080 to
;;;; U+00FF as a single Latin-1 byte; a name it reads back (TRUENAME,
;;;; DIRECTORY) is its bytes one character each.  It has no setting for
;;;; the encoding of file names.  So, as ecl-aref.lisp does for AREF, this
;;;; file puts its own function in each of those CL symbols' function cells
;;;; (CL's package lock lifted meanwhile): the name goes to ECL's function
;;;; as the base string of its UTF-8 bytes (NATIVE-FILESPEC), and a
;;;; pathname ECL answers comes back as the user's string (USER-PATHNAME,
;;;; files.lisp's USER-NAMESTRING).
;;;;
;;;; Which calls this serves: the REPL, scripts, interpreted code, FUNCALL
;;;; and APPLY, and code compiled after start-up (COMPILE, COMPILE-FILE),
;;;; which calls these functions through their cells once the cells are
;;;; redefined.  rontolisp's own compiled Lisp calls ECL's C functions
;;;; directly and keeps using the path layer of files.lisp.
;;;;
;;;; A name may mix the user's text with ECL's form (MERGE-PATHNAMES of a
;;;; file name and a home or current directory ECL read from the system):
;;;; each part between slashes is taken on its own, as ECL's form when its
;;;; characters are all below U+0100 and, read as bytes, are UTF-8 with at
;;;; least one byte above 127, as the user's text otherwise.  (So a part
;;;; typed as "Ã¼" means the bytes C3 BC, that is "ü".)  A caller whose
;;;; name was all in ECL's form gets ECL's form back: compiled code that
;;;; had its names from ECL (ASDF's) hands them on to ECL's C functions.

(in-package "RONTOLISP")

(defun ascii-string-p (string)
  (every (lambda (c) (< (char-code c) 128)) string))

(defun native-part-p (part)
  "True when PART (text between slashes) is already in ECL's form: one
character per byte, the bytes UTF-8 and not all ASCII."
  (and (every (lambda (c) (< (char-code c) 256)) part)
       (notevery (lambda (c) (< (char-code c) 128)) part)
       (let ((decoded (%utf8-string (map '(simple-array (unsigned-byte 8) (*)) #'char-code part))))
         ;; %UTF8-STRING keeps a byte that is not UTF-8 as U+DC80..U+DCFF
         (notany (lambda (c) (<= #xDC80 (char-code c) #xDCFF)) decoded))))

(defun native-part (part)
  (if (or (ascii-string-p part) (native-part-p part))
      part
      (map 'string #'code-char (%utf8-octets part))))

(defun native-filespec (filespec)
  "FILESPEC (a string, pathname or stream) as ECL's file functions take it:
itself when its name is ASCII, already in ECL's form (see the file's
header) or it is a stream, else the base string of its name's UTF-8 bytes,
one character per byte.  A second value is true when the name was not
ASCII and already all in ECL's form: the caller then wants names answered
in that form."
  (let ((name (and (or (stringp filespec) (pathnamep filespec))
                   (ignore-errors (namestring filespec)))))
    (if (or (null name) (ascii-string-p name))
        (values filespec nil)
        (let ((parts (split-on #\/ name)))
          (if (every (lambda (p) (or (ascii-string-p p) (native-part-p p))) parts)
              (values filespec t)
              (values (coerce (format nil "~{~A~^/~}" (mapcar #'native-part parts)) 'base-string)
                      nil))))))

(defun replace-all (string old new)
  "STRING with every occurrence of OLD replaced by NEW."
  (with-output-to-string (s)
    (loop with start = 0
          for at = (search old string :start2 start)
          do (write-string string s :start start :end at)
          while at
          do (write-string new s)
             (setf start (+ at (length old))))))

(defun split-on (char string)
  "The parts of STRING between occurrences of CHAR (one more than there are
occurrences)."
  (loop for start = 0 then (1+ end)
        for end = (position char string :start start)
        collect (subseq string start end)
        while end))

(defvar *answer-native-names* nil
  "True when the names these functions answer are to be in ECL's form: for
a caller that named its file in that form, as compiled code does that got
its names from ECL (ASDF), and while ECL's own COMPILE-FILE runs, which
asks these functions for names through their cells and hands what they
answer to ECL's C functions.")

(defmacro with-native-filespec ((var filespec) &body body)
  "Run BODY with VAR bound to (NATIVE-FILESPEC FILESPEC), answering names in
ECL's form when FILESPEC was in it."
  (let ((ecl-form (gensym "ECL-FORM")))
    `(multiple-value-bind (,var ,ecl-form) (native-filespec ,filespec)
       (let ((*answer-native-names* (or ,ecl-form *answer-native-names*)))
         ,@body))))

(defun user-pathname (pathname)
  "PATHNAME as ECL answered it, with the user's characters: itself when its
name is ASCII, it is not a pathname or *ANSWER-NATIVE-NAMES* is true, else
parsed from USER-NAMESTRING."
  (if (and (pathnamep pathname) (not *answer-native-names*)
           (not (ascii-string-p (namestring pathname))))
      (pathname (user-namestring pathname))
      pathname))

(defun tell-user-name (condition)
  "Handle CONDITION, a FILE-ERROR, when ECL signalled it about a name in
its form that the caller gave in the user's: signal FILE-NAME-ERROR with
the user's name instead."
  (unless (or *answer-native-names* (typep condition 'file-name-error))
    (let ((native (ignore-errors (namestring (file-error-pathname condition)))))
      (when (and native (not (ascii-string-p native)))
        (let ((user (user-namestring native)))
          (error 'file-name-error :path user :pathname user
                                  :message (replace-all (princ-to-string condition) native user)))))))

(defvar *ecl-file-functions* (make-hash-table :test 'eq)
  "ECL's own function (or the wrapper it was already in) for each CL file
function whose cell holds ours.")

(defmacro define-native-names (name lambda-list &body body)
  "Put in NAME's function cell a function of LAMBDA-LIST running BODY, with
ORIGINAL bound to the function the cell held before.  ecl-aref.lisp keeps
its own wrapper in the cell of a compiler entry point (COMPILE-FILE) when
loading the compiler replaces it: ours becomes the one it keeps.  ECL's
FILE-ERROR about a name it had in its form is told with the user's name
(TELL-USER-NAME)."
  (let ((fn (intern (format nil "NATIVE-NAMES-~A" (symbol-name name)))))
    `(progn
       (defun ,fn ,lambda-list
         (let ((original (gethash ',name *ecl-file-functions*)))
           (handler-bind ((file-error #'tell-user-name))
             ,@body)))
       (unless (gethash ',name *ecl-file-functions*)
         (let ((inner (fdefinition ',name)))
           (setf (gethash ',name *ecl-file-functions*) inner)
           (when (eq inner (get ',name 'rontolisp-wrapper))
             (setf (get ',name 'rontolisp-wrapper) #',fn))
           (with-cl-unlocked (setf (fdefinition ',name) #',fn)))))))

(define-native-names open (filespec &rest keys)
  (apply original (native-filespec filespec) keys))

(define-native-names load (filespec &rest keys &key (verbose *load-verbose*)
                                      &allow-other-keys)
  ;; ECL's ";;; Loading" line would show the name's bytes: ours shows the name.
  (when verbose
    (let ((*answer-native-names* nil))
      (format t "~&;;; Loading ~S~%" (user-pathname (or (ignore-errors (pathname filespec))
                                                        filespec)))))
  (with-native-filespec (file filespec)
    (user-pathname (apply original file :verbose nil keys))))

(defun native-output-file (keys)
  "KEYS (of COMPILE-FILE) with the :OUTPUT-FILE name in ECL's form."
  (loop for (key value) on keys by #'cddr
        append (list key (if (eq key :output-file) (native-filespec value) value))))

(define-native-names compile-file (input &rest keys)
  (with-native-filespec (file input)
    (multiple-value-bind (output warnings-p failure-p)
        (let ((source-format ext:*default-external-format*)
              (*answer-native-names* t)
              ;; The C file it writes names its header by ECL's form of the
              ;; name: written a byte per character, it names the file.
              (ext:*default-external-format* :latin-1))
          (apply original file
                 (append (native-output-file keys) (list :external-format source-format))))
      (values (user-pathname output) warnings-p failure-p))))

(define-native-names compile-file-pathname (input &rest keys)
  (with-native-filespec (file input)
    (user-pathname (apply original file (native-output-file keys)))))

(define-native-names probe-file (filespec)
  (with-native-filespec (file filespec)
    (user-pathname (funcall original file))))

(define-native-names truename (filespec)
  (with-native-filespec (file filespec)
    (user-pathname (funcall original file))))

(define-native-names directory (filespec &rest keys)
  (with-native-filespec (file filespec)
    (mapcar #'user-pathname (apply original file keys))))

(define-native-names delete-file (filespec)
  (funcall original (native-filespec filespec)))

(define-native-names rename-file (filespec new-name &rest keys)
  ;; KEYS: ECL's own :if-exists
  (with-native-filespec (file filespec)
    (multiple-value-bind (new old-truename new-truename)
        (apply original file (native-filespec new-name) keys)
      (values (user-pathname new) (user-pathname old-truename) (user-pathname new-truename)))))

(define-native-names file-write-date (filespec)
  (funcall original (native-filespec filespec)))

(define-native-names file-author (filespec)
  (funcall original (native-filespec filespec)))

(define-native-names ensure-directories-exist (filespec &rest keys)
  (multiple-value-bind (path created) (apply original (native-filespec filespec) keys)
    (declare (ignore path))
    (values filespec created)))
