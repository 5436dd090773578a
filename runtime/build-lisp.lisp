;;;; build-lisp.lisp - compiles the Lisp system into one static library for
;;;; the host, in the order rontolisp.asd states.
;;;;
;;;; Run by the Makefile as
;;;;   ecl --norc --shell runtime/build-lisp.lisp --list SYSTEM.asd
;;;;       prints the system's source files, one a line (the Makefile's
;;;;       prerequisites), and
;;;;   ecl --norc --shell runtime/build-lisp.lisp OUT.a SYSTEM.asd
;;;;       compiles them in that order, each loaded after compiling so later
;;;;       files see earlier macros and packages.
;;;;   ecl --norc --shell runtime/build-lisp.lisp --module OUT.fas SRC.lisp OBJ... -lLIB...
;;;;       compiles SRC.lisp and links it with the objects and libraries
;;;;       into a module a stock ECL can LOAD (runtime/prims-module.lisp).
;;;;   ecl --norc --shell runtime/build-lisp.lisp --asdf-output OBJDIR OUTDIR SYSTEM.asd
;;;;       links each object OBJDIR/REL.o that OUT.a was made of into the
;;;;       REL.fas (with a copy of REL.o) that ASDF's compile-op would
;;;;       write under OUTDIR, the system's :pathname directory mapped to
;;;;       OUTDIR, in load order, so that a stock ECL whose ASDF output
;;;;       translations map that directory to OUTDIR loads the system
;;;;       without compiling it a second time.
;;;; The .asd is read as data, never loaded: its DEFSYSTEM form must be
;;;; :serial t (file order is dependency order) with :file components under
;;;; an optional :pathname, naming every .lisp file there and in its
;;;; subfolders ("gguf/gguf" is lisp/gguf/gguf.lisp), and :static-file
;;;; components (a page a later file reads as it is compiled: listed by
;;;; --list, so that a change to it rebuilds the library, never compiled).  Anything else
;;;; stops the build with one line, rather than guessing an order.  The library's init function is
;;;; init_rontolisp_lisp (runtime/main.c).

(defun fail (fmt &rest args)
  (format *error-output* "~&build-lisp: ~?~%" fmt args)
  (ext:quit 1))

(defun system-form (asd)
  "The first DEFSYSTEM form in the file ASD, read as data."
  (or (with-open-file (s asd)
        (let ((*read-eval* nil)
              (*package* (make-package "BUILD-LISP-ASD" :use '("CL"))))
          (unwind-protect
               (loop for f = (read s nil s)
                     until (eq f s)
                     when (and (consp f) (string= "DEFSYSTEM" (symbol-name (first f))))
                       return f)
            (delete-package *package*))))
      (fail "~A: expected a (defsystem ...) form, found none" asd)))

(defun system-files (asd)
  "The source files of the one DEFSYSTEM form in the file ASD, in order,
as strings relative to the directory the build runs in; the directory of
the sources, and the static files (pages a Lisp file reads when it is
compiled) as a third value."
  (let ((form (system-form asd)))
    (let* ((options (cddr form))
           (dir (getf options :pathname ""))
           (base (directory-namestring asd)))
      (unless (eq t (getf options :serial))
        (fail "~A: expected :serial t (file order is the load order), found ~S"
              asd (getf options :serial)))
      (let ((files '()) (statics '()))
        (dolist (c (getf options :components))
          (cond ((not (and (consp c) (symbolp (first c)) (stringp (second c))))
                 (fail "~A: expected components (:file \"name\") or (:static-file \"name\"), ~
found ~S" asd c))
                ((string= "FILE" (symbol-name (first c)))
                 (push (format nil "~A~A~A.lisp" base dir (second c)) files))
                ((string= "STATIC-FILE" (symbol-name (first c)))
                 (push (format nil "~A~A~A" base dir (second c)) statics))
                (t (fail "~A: expected components (:file \"name\") or (:static-file \"name\"), ~
found ~S" asd c))))
        (setf files (nreverse files) statics (nreverse statics))
        ;; A source file the system does not list would silently stay out
        ;; of the executable.
        (dolist (p (directory (format nil "~A~A**/*.lisp" base dir)))
          (unless (member (truename p) files :test #'equal :key #'probe-file)
            (fail "~A: expected every ~A**/*.lisp among the components, found ~A missing"
                  asd dir (enough-namestring (truename p) (truename (format nil "~A~A" base dir))))))
        (values files (format nil "~A~A" base dir) statics)))))

(defun build (out files root)
  "Compile FILES (under the directory ROOT) in order into the static
library OUT, each object at its file's place under OUT's directory (two
folders may hold files of the same name)."
  (let ((*compile-verbose* nil)
        (*load-verbose* nil)
        (objs '()))
    (require 'cmp)
    ;; Every compiled function pushes a frame of the interpreter's history
    ;; stack naming it (a few stores on entry and exit), so that backtraces
    ;; (the REPL's debugger, SLIME's) show RONTOLISP:QUANTIZE rather than
    ;; nothing: at ECL's default policy only code compiled at (debug 3),
    ;; which also keeps every local variable, has such frames.
    (proclaim '(ext::debug-ihs-frame))
    ;; Each function remembers its source as RONTOLISP:LISP;NAME.LISP, a
    ;; logical pathname the program points at the installed sources when
    ;; it starts (lisp/repl.lisp), so no path of the build machine is kept.
    (setf (logical-pathname-translations "RONTOLISP")
          (list (list "**;*.*.*" (merge-pathnames "**/*.*" (truename "./")))))
    (dolist (f files)
      (let ((o (ensure-directories-exist
                (make-pathname :type "o"
                               :defaults (merge-pathnames (enough-namestring (truename f)
                                                                             (truename root))
                                                          (merge-pathnames out)))))
            (logical (format nil "RONTOLISP:~{~A;~}~A.LISP"
                             (mapcar #'string-upcase
                                     (rest (pathname-directory (enough-namestring (truename f)
                                                                                  (truename "./")))))
                             (string-upcase (pathname-name f)))))
        (multiple-value-bind (fasl warnings-p failure-p)
            (compile-file f :output-file o :system-p t :source-truename (pathname logical))
          (declare (ignore warnings-p))
          (when (or (null fasl) failure-p)
            (fail "compiling ~A failed" f)))
        (load f)
        (push (namestring o) objs)))
    ;; The compiler's package exists only once cmp is loaded, which --list
    ;; does not need.  Given a string, build-static-library would add a
    ;; second lib prefix.
    (funcall (find-symbol "BUILD-STATIC-LIBRARY" "C") (merge-pathnames out)
             :lisp-files (reverse objs)
             :init-name "init_rontolisp_lisp")))

(defun build-module (out source objects)
  (require 'cmp)
  (let* ((*compile-verbose* nil)
         (o (make-pathname :defaults (merge-pathnames out) :type "o")))
    (multiple-value-bind (fasl warnings-p failure-p)
        (compile-file source :output-file o :system-p t)
      (declare (ignore warnings-p))
      (when (or (null fasl) failure-p)
        (fail "compiling ~A failed" source)))
    (funcall (find-symbol "BUILD-FASL" "C") (merge-pathnames out)
             :lisp-files (list o) :ld-flags objects)))

(defun copy-octets (from to)
  (with-open-file (in from :element-type '(unsigned-byte 8))
    (with-open-file (out to :direction :output :element-type '(unsigned-byte 8)
                            :if-exists :supersede)
      (let ((buffer (make-array 65536 :element-type '(unsigned-byte 8))))
        (loop for n = (read-sequence buffer in)
              while (plusp n) do (write-sequence buffer out :end n))))))

(defun asdf-output (objdir outdir asd files)
  "For each of FILES in order, OBJDIR/REL.o (where BUILD put it) copied to
OUTDIR/REL.o and linked into OUTDIR/REL.fas, REL the file's path under the
system's directory without its type (\"quant/qmatrix\").  Made one after the other, each output is
newer than the outputs of the files before it, as ASDF requires of
outputs it is to reuse."
  (require 'cmp)
  (let ((src-root (truename (merge-pathnames (getf (cddr (system-form asd)) :pathname "")
                                             (directory-namestring (truename asd)))))
        (outdir (merge-pathnames (concatenate 'string (string-right-trim "/" outdir) "/"))))
    (dolist (f files)
      (let* ((rel (enough-namestring (truename f) src-root))
             (o (merge-pathnames (make-pathname :type "o" :defaults rel)
                                 (merge-pathnames (concatenate 'string
                                                               (string-right-trim "/" objdir) "/"))))
             (out-o (merge-pathnames (make-pathname :type "o" :defaults rel) outdir)))
        (ensure-directories-exist out-o)
        (copy-octets o out-o)
        (funcall (find-symbol "BUILD-FASL" "C") (make-pathname :type "fas" :defaults out-o)
                 :lisp-files (list out-o))))))

(let ((args (rest (member "build-lisp.lisp" ext:*command-args*
                          :test #'string= :key #'file-namestring))))
  (when (equal "--module" (first args))
    (unless (>= (length args) 3)
      (fail "expected --module OUT.fas SRC.lisp OBJ..., found ~S" args))
    (build-module (second args) (third args) (nthcdr 3 args))
    (ext:quit 0))
  (when (equal "--asdf-output" (first args))
    (unless (= 4 (length args))
      (fail "expected --asdf-output OBJDIR OUTDIR SYSTEM.asd, found ~S" args))
    (destructuring-bind (objdir outdir asd) (rest args)
      (asdf-output objdir outdir asd (system-files asd)))
    (ext:quit 0))
  (unless (= 2 (length args))
    (fail "expected --list SYSTEM.asd or OUT.a SYSTEM.asd, found ~S" args))
  (destructuring-bind (what asd) args
    (multiple-value-bind (files root statics) (system-files asd)
      (if (string= what "--list")
          (format t "~{~A~%~}" (append files statics))
          (build what files root))
      (ext:quit 0))))
