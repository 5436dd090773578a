;;;; build-lisp.lisp - compiles lisp/ into one static library for the host.
;;;;
;;;; Run by the Makefile as
;;;;   ecl --norc --shell runtime/build-lisp.lisp OUT.a FILE.lisp ...
;;;; Files are compiled in the order given (dependency order) and each is
;;;; loaded after compiling, so later files see earlier macros and packages.
;;;; The library's init function is init_rontolisp_lisp (runtime/main.c).

(require 'cmp)

(let* ((args (rest (member "build-lisp.lisp" ext:*command-args*
                           :test #'string= :key #'file-namestring)))
       (out (first args))
       (files (rest args))
       (objs '()))
  (let ((*compile-verbose* nil)
        (*load-verbose* nil))
    (dolist (f files)
      (let ((o (make-pathname :defaults (merge-pathnames out)
                              :name (pathname-name f) :type "o")))
        (multiple-value-bind (fasl warnings-p failure-p)
            (compile-file f :output-file o :system-p t)
          (declare (ignore warnings-p))
          (when (or (null fasl) failure-p)
            (format *error-output* "~&build-lisp: compiling ~A failed~%" f)
            (ext:quit 1)))
        (load f)
        (push (namestring o) objs)))
    ;; Given a string, build-static-library would add a second lib prefix.
    (c:build-static-library (merge-pathnames out)
                            :lisp-files (reverse objs)
                                :init-name "init_rontolisp_lisp")
    (ext:quit 0)))
