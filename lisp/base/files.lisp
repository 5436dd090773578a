;;;; files.lisp - every file the Lisp side reads or writes goes through
;;;; here, to the same C code as the GGUF and safetensors readers and the
;;;; GGUF writer (gguf/fileio.c).
;;;;
;;;; Reading refuses a FIFO, device or directory at once (ECL's OPEN would
;;;; block on a FIFO, or fail later with a bare "Is a directory").  Writing
;;;; is atomic: the bytes go to TARGET.rontolisp-tmp.PID.N beside the target
;;;; and are renamed over it when complete, so a full disk or an interrupt
;;;; never leaves a truncated file; an existing target that is not a
;;;; regular file is refused and a symbolic link is written through.  Paths
;;;; go to C as UTF-8 bytes (command-line bytes that are not UTF-8 included,
;;;; see runtime/main.c), and every error names the path.
;;;;
;;;; Names.  A path is held as the user wrote it (a Lisp string of any
;;;; characters) and becomes bytes only here: C gets its UTF-8 bytes.  ECL's
;;;; own file functions (OPEN, LOAD, PROBE-FILE, DIRECTORY ...) hand a
;;;; namestring to the system one character per byte, refuse a character
;;;; above U+00FF (ecl-filenames.lisp mends that for a user's code, not for
;;;; ours, which is compiled to call ECL's C functions), and merge relative
;;;; names in ways that move files (its
;;;; RENAME-FILE fills in a missing directory or type from the old name).  So
;;;; the files' existence, kinds, removal, directories, listings and sets
;;;; of files renamed together are asked of C by the bytes (PATH-KIND,
;;;; DELETE-PATH, ENSURE-DIRECTORIES, DIRECTORY-ENTRIES, GGUF:WRITE-STAGED);
;;;; what must go through ECL gets NATIVE-NAMESTRING (one character per
;;;; byte), and a name ECL answers (TRUENAME, DIRECTORY, *LOAD-TRUENAME*)
;;;; comes back with USER-NAMESTRING.
;;;;
;;;; Temporary files.  Every temporary name is TARGET.rontolisp-tmp.PID.SUFFIX
;;;; (the writer's, a set's, WITH-TEMPORARY-FILE's), entered in one table
;;;; that an interrupt clears; what a SIGKILL leaves is removed by the next
;;;; write of TARGET once process PID has ended (gguf/fileio.h).

(in-package "RONTOLISP")

(defun user-namestring (native)
  "The name as the user writes it of NATIVE, a pathname or namestring in
ECL's form (as TRUENAME, DIRECTORY, USER-HOMEDIR-PATHNAME, EXT:GETENV or
*LOAD-TRUENAME* answer them): each character one byte of UTF-8, decoded (a
byte that is not UTF-8 kept as U+DC80..U+DCFF).  A name with a character
above U+00FF is already the user's, and is answered as it is."
  (let ((name (namestring native)))
    (if (or (every (lambda (c) (< (char-code c) 128)) name)
            (some (lambda (c) (> (char-code c) 255)) name))
        name
        (%utf8-string (map '(simple-array (unsigned-byte 8) (*)) #'char-code name)))))

(defun absolute-namestring (path)
  "PATH (a string or pathname, as the user wrote it) as an absolute name:
itself when it starts with a slash, else after the current directory
(*DEFAULT-PATHNAME-DEFAULTS*, read with USER-NAMESTRING)."
  (let ((name (if (pathnamep path) (namestring path) path)))
    (if (and (plusp (length name)) (char= #\/ (char name 0)))
        name
        (concatenate 'string
                     (user-namestring (make-pathname :name nil :type nil :version nil
                                                     :defaults *default-pathname-defaults*))
                     name))))

(defun path-octets (path)
  "PATH (a string or pathname) made absolute, as the UTF-8 bytes C opens."
  (%utf8-octets (absolute-namestring path)))

(defun native-namestring (path)
  "PATH (a string or pathname of any characters, as the user wrote it) made
absolute, in the form ECL's OPEN and LOAD hand to the system: a base string
of one character per byte of its UTF-8 form."
  (map 'base-string #'code-char (path-octets path)))

(defun path-kind (path)
  "What the path PATH names, symbolic links followed: :FILE, :DIRECTORY,
:FIFO, :DEVICE, :SOCKET or :OTHER, or NIL when nothing is there."
  (%path-kind (path-octets path)))

(defun directory-entries (dir)
  "The entries of the directory DIR but . and .., as a list of (NAME . KIND)
in the byte order of their names: NAME as the user writes it (any name, a
\"*\" or \"\\\" included: DIRECTORY would take it for a pattern), KIND the
entry's own, as PATH-KIND names kinds, with :LINK for a symbolic link (not
followed) and NIL for an entry gone while listed.  A DIR that cannot be read
as a directory signals FILE-IO-ERROR naming it."
  (multiple-value-bind (entries message) (%directory-entries (path-octets dir))
    (when (and (null entries) message)
      (file-io-error (namestring dir) "~A" message))
    entries))

(defun temporary-path (name)
  "A path for a temporary file NAME in $TMPDIR (/tmp without it), made
unique to this process: the benchmarks' copies of a model."
  (format nil "~A/rl-~D-~A" (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp"))
          (ext:getpid) name))

(defvar *scratch-entries* (make-hash-table :test 'equal)
  "The scratch files of SCRATCH-FILE-PATH not yet removed: path -> the entry
of the table of files an interrupt removes.")

(defvar *scratch-lock* (mp:make-lock :name "scratch files")
  "Held while *SCRATCH-ENTRIES* changes (the benchmarks run threads).")

(defun scratch-file-path (name)
  "TEMPORARY-PATH of NAME, entered in the table of files an interrupt
(SIGINT, SIGTERM, SIGHUP) removes, for a file the caller writes, uses and
removes with REMOVE-SCRATCH-FILE however it leaves: the benchmarks' copies
of a model, which an interrupt would otherwise leave behind.  A full table
signals FILE-IO-ERROR."
  (let ((path (temporary-path name)))
    (multiple-value-bind (entry message) (%temporary-begin (path-octets path))
      (unless entry
        (file-io-error path "~A" message))
      (mp:with-lock (*scratch-lock*)
        (setf (gethash path *scratch-entries*) entry)))
    path))

(defun remove-scratch-file (path)
  "Remove the file PATH of SCRATCH-FILE-PATH (nothing when it was never
written) and its entry in the interrupt's table."
  (let ((entry (mp:with-lock (*scratch-lock*)
                 (prog1 (gethash path *scratch-entries*)
                   (remhash path *scratch-entries*)))))
    (if entry
        (%temporary-end entry)
        (ignore-errors (delete-file path)))
    nil))

(defun temporary-name (target word)
  "The name TARGET.rontolisp-tmp.PID.WORD beside the file TARGET, of a
temporary file of this process (WORD: lowercase letters and digits, as
\"set\" or \"f32\"), in the form the writer takes for a temporary of TARGET
(gguf/fileio.h), so that what a killed run leaves is removed by the next
write of TARGET."
  (format nil "~A.rontolisp-tmp.~D.~A" target (ext:getpid) word))

(defun call-with-temporary-file (target word function)
  "Call FUNCTION with (TEMPORARY-NAME TARGET WORD), entered first in the
table of files an interrupt removes; remove the file when FUNCTION returns
or exits.  Answers FUNCTION's values."
  (let ((name (temporary-name target word)) (entry nil))
    (unwind-protect
         (multiple-value-bind (slot message) (%temporary-begin (path-octets name))
           (unless slot
             (file-io-error (namestring target) "~A" message))
           (setf entry slot)
           (funcall function name))
      (when entry (%temporary-end entry)))))

(defmacro with-temporary-file ((var target word) &body body)
  "Run BODY with VAR bound to the name of a temporary file beside TARGET
(TEMPORARY-NAME), for BODY to write and use: however BODY is left the file
is removed, and an interrupt (SIGINT, SIGTERM, SIGHUP) removes it as it
removes the writer's own temporary files."
  `(call-with-temporary-file ,target ,word (lambda (,var) ,@body)))

(defun delete-path (path)
  "Remove the file PATH (not a directory); a failure signals FILE-IO-ERROR
naming PATH.  Answers PATH."
  (multiple-value-bind (ok message) (%delete-path (path-octets path))
    (unless ok
      (file-io-error (namestring path) "~A" message))
    path))

(defun ensure-directories (path)
  "Make every missing directory of PATH up to its last slash (PATH itself
too when it ends in one); a failure signals FILE-IO-ERROR naming PATH.
Answers PATH."
  (multiple-value-bind (ok message) (%make-directories (path-octets path))
    (unless ok
      (file-io-error (namestring path) "~A" message))
    path))

(defun read-file-octets (path &key (what "a regular file"))
  "The bytes of the regular file PATH as an (unsigned-byte 8) vector.  A
missing file, a directory, FIFO or device signals FILE-IO-ERROR naming PATH;
WHAT (a string such as \"a JSON file\") says what was expected."
  (multiple-value-bind (octets message) (%read-file-octets (path-octets path) what)
    (or octets (file-io-error (namestring path) "~A" message))))

(defun open-input-octets (path &key (what "a regular file"))
  "An (unsigned-byte 8) input stream on the regular file PATH (any name: a
\"*\" or \"[\" is no wildcard) and the file's size, to be closed by the
caller.  A missing file, a directory, FIFO or device signals FILE-IO-ERROR
naming PATH; WHAT says what was expected."
  (multiple-value-bind (fd size) (open-input-fd path :what what)
    (values (ext:make-stream-from-fd fd :input :element-type '(unsigned-byte 8))
            size)))

(defun open-input-fd (path &key (what "a regular file") streams)
  "The descriptor of the file PATH opened for reading and its size, as
OPEN-INPUT-OCTETS opens it; with STREAMS a FIFO or a device (/dev/stdin, a
named pipe) is taken too, its size 0.  The caller closes the descriptor."
  (multiple-value-bind (fd size-or-message) (%open-input (path-octets path) what streams)
    (unless fd
      (file-io-error (namestring path) "~A" size-or-message))
    (values fd size-or-message)))

(defun write-file-atomically (path chunks)
  "Write CHUNKS, a list of (unsigned-byte 8) vectors, one after the other
to the file PATH, atomically (see the file's header).  Answers PATH; a
refused target or a failed write signals FILE-IO-ERROR naming PATH, and
leaves any previous file at PATH as it was."
  (multiple-value-bind (ok message) (%write-file-atomically (path-octets path) chunks)
    (unless ok
      (file-io-error (namestring path) "~A" message))
    path))

(defmacro with-output-to-file ((stream path) &body body)
  "Run BODY with STREAM bound to a character output stream and write what
it wrote to the file PATH as UTF-8, atomically, once BODY has returned (a
non-local exit from BODY writes nothing).  Answers PATH."
  (let ((text (gensym "TEXT")))
    `(let ((,text (with-output-to-string (,stream) ,@body)))
       (write-file-atomically ,path (list (%utf8-octets ,text))))))
