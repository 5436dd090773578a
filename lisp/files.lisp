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

(in-package "RONTOLISP")

(defun path-octets (path)
  "PATH (a string or pathname) made absolute, as the UTF-8 bytes C opens."
  (%utf8-octets (namestring (merge-pathnames path))))

(defun read-file-octets (path &key (what "a regular file"))
  "The bytes of the regular file PATH as an (unsigned-byte 8) vector.  A
missing file, a directory, FIFO or device signals FILE-IO-ERROR naming PATH;
WHAT (a string such as \"a JSON file\") says what was expected."
  (multiple-value-bind (octets message) (%read-file-octets (path-octets path) what)
    (or octets (file-io-error (namestring path) "~A" message))))

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
