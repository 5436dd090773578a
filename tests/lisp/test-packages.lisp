;;;; test-packages.lisp - the packages of lisp/packages.lisp: which names
;;;; conflict when user code USEs them, and the internal interface between
;;;; the modules.

(in-package "RONTOLISP-TESTS")

(def-suite packages :in all :description "The packages, their conflicts and their interface.")
(in-suite packages)

(defun use-conflicts (used &optional (base '("CL")))
  "The names of the symbols USED (a package name) exports that a package
using BASE already has as other symbols: what USE-PACKAGE would signal."
  (sort (loop for s being the external-symbols of (find-package used)
              for other = (some (lambda (b)
                                  (multiple-value-bind (o status) (find-symbol (symbol-name s) b)
                                    (and (eq status :external) (not (eq o s)) o)))
                                base)
              when other collect (symbol-name s))
        #'string<))

(defmacro with-scratch-package ((var) &body body)
  "Run BODY with VAR bound to a fresh package using CL, deleted afterwards."
  `(let ((,var (make-package (format nil "RONTOLISP-TESTS-SCRATCH-~D" (random 1000000))
                             :use '("CL"))))
     (unwind-protect (progn ,@body) (delete-package ,var))))

(test use-package-conflicts-are-the-documented-ones
  ;; The docstrings promise: GGUF clashes with CL on READ, WRITE, CLOSE,
  ;; MODEL on LOAD, RONTOLISP, VEC and LINALG on nothing; GGUF and RONTOLISP
  ;; on VERSION.
  (is (equal '("CLOSE" "READ" "WRITE") (use-conflicts "GGUF")))
  (is (equal '("LOAD") (use-conflicts "MODEL")))
  (is (equal '() (use-conflicts "RONTOLISP")))
  (is (equal '() (use-conflicts "VEC")))
  (is (equal '() (use-conflicts "LINALG")))
  (is (equal '("VERSION") (use-conflicts "GGUF" '("RONTOLISP"))))
  (is (equal '() (use-conflicts "MODEL" '("RONTOLISP" "VEC" "LINALG"))))
  (dolist (p '("GGUF" "MODEL"))
    (is (search "shadowing-import" (documentation (find-package p) t) :test #'char-equal)
        "~A's docstring gives no recipe" p)))

(test use-package-of-gguf-in-a-user-package
  ;; Plain USE-PACKAGE is a name conflict (a PACKAGE-ERROR) and leaves the
  ;; package as it was; with the docstring's SHADOWING-IMPORT first it
  ;; works and READ is GGUF:READ.
  (with-scratch-package (p)
    (is (typep (handler-case (progn (use-package "GGUF" p) nil) (package-error (c) c))
               'package-error))
    (is (eq 'cl:read (find-symbol "READ" p)))
    (is (not (member (find-package "GGUF") (package-use-list p)))))
  (with-scratch-package (p)
    (shadowing-import '(gguf:read gguf:write gguf:close) p)
    (use-package "GGUF" p)
    (is (eq 'gguf:read (find-symbol "READ" p)))
    (is (eq 'gguf:tensor (find-symbol "TENSOR" p))))
  (with-scratch-package (p)
    (shadowing-import 'model:load p)
    (use-package "MODEL" p)
    (is (eq 'model:load (find-symbol "LOAD" p)))
    (is (eq 'model:encode (find-symbol "ENCODE" p)))))

(test internal-interface-symbols-live-in-their-modules
  ;; What the tools take from GGUF and MODEL is those modules' own symbol,
  ;; reached from RONTOLISP; the modules' code no longer reaches into
  ;; RONTOLISP by prefix.
  (is (eq (find-package "GGUF") (symbol-package (find-symbol "MAP-ELEMENTS" "RONTOLISP"))))
  (is (eq (find-package "MODEL") (symbol-package (find-symbol "ENCODER-PATH" "RONTOLISP"))))
  (is (fboundp (find-symbol "ENCODER-PATH" "RONTOLISP")))
  (is (eq (find-package "VEC") (symbol-package (find-symbol "KERNEL-FAILURE" "MODEL"))))
  (is (eq (find-package "MODEL") (symbol-package 'model::model-error)))
  (is (eq (find-package "GGUF") (symbol-package 'gguf::gguf-error)))
  (let ((c (handler-case (gguf::gguf-error "/x.gguf" :truncated 3 "at byte ~D" 3)
             (gguf:gguf-error (c) c))))
    (is (string= "/x.gguf: at byte 3" (princ-to-string c)))
    (is (typep c 'rontolisp:rontolisp-error))))
