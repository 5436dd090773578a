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
  ;; What the command line takes from GGUF and MODEL is those packages' own
  ;; symbol, imported; RONTOLISP, the bottom layer, takes nothing from them.
  (is (eq (find-package "GGUF") (symbol-package (find-symbol "MAP-ELEMENTS" "COMMAND-LINE"))))
  (is (eq (find-package "MODEL") (symbol-package (find-symbol "ENCODER-PATH" "COMMAND-LINE"))))
  (is (fboundp (find-symbol "ENCODER-PATH" "COMMAND-LINE")))
  (is (null (find-symbol "ENCODER-PATH" "RONTOLISP")))
  (is (eq (find-package "VEC") (symbol-package (find-symbol "KERNEL-FAILURE" "MODEL"))))
  (is (eq (find-package "MODEL") (symbol-package 'model::model-error)))
  (is (eq (find-package "GGUF") (symbol-package 'gguf::gguf-error)))
  (let ((c (handler-case (gguf::gguf-error "/x.gguf" :truncated 3 "at byte ~D" 3)
             (gguf:gguf-error (c) c))))
    (is (string= "/x.gguf: at byte 3" (princ-to-string c)))
    (is (typep c 'rontolisp:rontolisp-error))))

;;; The layers (README.org's Layout): each package of lisp/ is a layer, and
;;; a file uses only its own layer and the ones below it.  Two layers of
;;; one rank (TEXT and VEC) do not use each other.

(defparameter *layers*
  '(("RONTOLISP" . 0) ("TEXT" . 1) ("VEC" . 1) ("LINALG" . 1) ("GGUF" . 2) ("MODEL" . 3)
    ("COMMAND-LINE" . 4))
  "Each package of lisp/ with its rank: a package uses only those of a
lower rank.")

(defparameter *cross-layer-internal-limit* 19
  "The most internal names (not exported from their home package) that
another package imports: each is coupling no export states.  The count
this tree has, so that it cannot grow unseen: the primitives several
layers share, three of VEC's kernels and the outlier matrix's constructor
that the encoder calls, a parsed question's readers and a tokenizer's
path, and QUANTIZABLE-TENSOR-P (see packages.lisp).  Lower it as names
leave.")

(defun layer-rank (package)
  (cdr (assoc (package-name package) *layers* :test #'string=)))

(defun system-source-files ()
  "The Lisp files of the system rontolisp, in load order, as paths under
lisp/ without the type (\"gguf/gguf\"), read from rontolisp.asd as data
(its :static-file pages left out)."
  (with-open-file (s (merge-pathnames "rontolisp.asd" *root*))
    (let ((*read-eval* nil)
          (*package* (make-package "RONTOLISP-TESTS-ASD" :use '("CL"))))
      (unwind-protect
           (let ((form (loop for f = (read s)
                             when (and (consp f) (string= "DEFSYSTEM" (symbol-name (first f))))
                               return f)))
             (loop for c in (getf (cddr form) :components)
                   when (string= "FILE" (symbol-name (first c)))
                     collect (second c)))
        (delete-package *package*)))))

(defun source-forms (file)
  "The top-level forms of lisp/FILE.lisp, each read in the package its
IN-PACKAGE forms select, as (package . form)."
  (let ((*package* (find-package "CL-USER"))
        (forms '()))
    (with-open-file (s (merge-pathnames (format nil "lisp/~A.lisp" file) *root*))
      (loop for form = (read s nil s)
            until (eq form s)
            do (push (cons *package* form) forms)
               (when (and (consp form) (eq (first form) 'in-package))
                 (setf *package* (find-package (second form))))))
    (nreverse forms)))

(defun defined-names (form)
  "The global names FORM (a top-level form) defines: functions, macros,
variables, classes, conditions (with DEFINE-ERROR's readers) and a
structure's constructor, predicate, copier and accessors."
  (when (and (consp form) (symbolp (first form)))
    (let ((head (symbol-name (first form)))
          (name (second form)))
      (flet ((named (fmt &rest args)
               (intern (apply #'format nil fmt args) (symbol-package (if (consp name) (first name) name)))))
        (cond ((member head '("PROGN" "EVAL-WHEN" "LOCALLY") :test #'string=)
               (mapcan #'defined-names (rest form)))
              ((string= head "DEFSTRUCT")
               (let* ((n (if (consp name) (first name) name))
                      (options (if (consp name) (rest name) '()))
                      (conc (find :conc-name options :key (lambda (o) (and (consp o) (first o)))))
                      (prefix (if conc (if (second conc) (string (second conc)) "") (format nil "~A-" n))))
                 (append (list n (named "MAKE-~A" n) (named "~A-P" n) (named "COPY-~A" n))
                         (loop for o in options
                               when (and (consp o) (eq (first o) :constructor) (second o))
                                 collect (second o))
                         (loop for slot in (nthcdr (if (stringp (third form)) 3 2) form)
                               collect (named "~A~A" prefix (if (consp slot) (first slot) slot))))))
              ((string= head "DEFINE-ERROR")
               (cons name (loop for (slot) in (fourth form) collect (named "~A-~A" name slot))))
              ((string= head "DEFINE-COMMAND")
               (list (intern (format nil "COMMAND-~:@(~A~)" name) (symbol-package (first form)))))
              ((member head '("DEFUN" "DEFMACRO" "DEFGENERIC" "DEFVAR" "DEFPARAMETER"
                              "DEFCONSTANT" "DEFCLASS" "DEFINE-CONDITION" "DEFTYPE"
                              "DEFINE-COMPILER-MACRO" "DEFINE-SYMBOL-MACRO")
                       :test #'string=)
               (cond ((symbolp name) (list name))
                     ((and (consp name) (eq (first name) 'setf)) (list (second name))))))))))

(defun map-symbols (fn x)
  (cond ((symbolp x) (funcall fn x))
        ((consp x) (loop for tail on x
                         do (map-symbols fn (car tail))
                            (unless (listp (cdr tail)) (map-symbols fn (cdr tail)))))
        ((and (vectorp x) (not (stringp x))) (map nil (lambda (e) (map-symbols fn e)) x))))

(defun layer-violations ()
  "Each use of a name defined in a layer not below the using file's, as
\"FILE (PACKAGE) uses NAME of FILE (PACKAGE)\"."
  (let* ((files (system-source-files))
         (forms (mapcar #'source-forms files))
         (home (make-hash-table))
         (package-of (make-hash-table :test 'equal))
         (violations '()))
    (loop for file in files for f in forms
          do (setf (gethash file package-of) (car (first (last f))))
             (dolist (pf f)
               (dolist (name (defined-names (cdr pf)))
                 (unless (gethash name home) (setf (gethash name home) file)))))
    (loop for file in files for f in forms
          for p = (gethash file package-of)
          do (let ((seen (make-hash-table)))
               (dolist (pf f) (map-symbols (lambda (s) (setf (gethash s seen) t)) (cdr pf)))
               (loop for s being the hash-keys of seen
                     for where = (gethash s home)
                     for q = (and where (gethash where package-of))
                     when (and q (not (eq p q)) (layer-rank p) (layer-rank q)
                                (>= (layer-rank q) (layer-rank p)))
                       do (push (format nil "~A (~A) uses ~S of ~A (~A)"
                                        file (package-name p) s where (package-name q))
                                violations))))
    (sort violations #'string<)))

(defun cross-layer-internals ()
  "The internal names one package of lisp/ imports from another, as
\"PACKAGE::NAME\" strings (a name several packages import counts once)."
  (let ((names '()))
    (dolist (entry *layers*)
      (do-symbols (s (car entry))
        (let ((home (symbol-package s)))
          (when (and home (not (eq home (find-package (car entry))))
                     (layer-rank home)
                     (eq :internal (nth-value 1 (find-symbol (symbol-name s) home))))
            (pushnew (format nil "~A::~A" (package-name home) (symbol-name s)) names
                     :test #'string=)))))
    (sort names #'string<)))

(test layers-use-only-the-layers-below
  ;; Every file's references, read from the sources: a name defined in a
  ;; file of a higher (or the same-rank, other) layer fails the test.
  (let ((files (system-source-files)))
    (is (< 40 (length files)) "expected the system's files, found ~D" (length files))
    (is (equal '() (layer-violations)))))

(test layers-import-only-from-below
  ;; What a package takes from another (USE, IMPORT) comes from a lower rank.
  (dolist (entry *layers*)
    (let ((p (find-package (car entry))))
      (dolist (used (package-use-list p))
        (when (layer-rank used)
          (is (< (layer-rank used) (cdr entry)) "~A uses ~A" (car entry) (package-name used))))
      (do-symbols (s p)
        (let ((home (symbol-package s)))
          (when (and home (layer-rank home) (not (eq home p)))
            (is (< (layer-rank home) (cdr entry))
                "~A takes ~S from ~A" (car entry) s (package-name home))))))))

(test layers-cross-few-internal-names
  (let ((names (cross-layer-internals)))
    (is (<= (length names) *cross-layer-internal-limit*)
        "expected at most ~D internal names imported across packages, found ~D:~%~{~A~^ ~}"
        *cross-layer-internal-limit* (length names) names)))

(defun primitives-misplaced ()
  "Each primitive (C, registered by prims/ecl/) living in RONTOLISP that no
file of RONTOLISP names while files of exactly one higher package do, as
\"NAME (used only by PACKAGE)\": it belongs in that package."
  (let* ((files (system-source-files))
         (users (make-hash-table)))
    (dolist (file files)
      (let ((forms (source-forms file)))
        (let ((p (car (first (last forms)))))
          (dolist (pf forms)
            (map-symbols (lambda (s) (pushnew p (gethash s users))) (cdr pf))))))
    (sort (loop for (s) in (rontolisp::%primitives)
                for ps = (gethash s users)
                when (and (eq (symbol-package s) (find-package "RONTOLISP"))
                          (= 1 (length ps))
                          (not (eq (first ps) (find-package "RONTOLISP"))))
                  collect (format nil "~A (used only by ~A)" s (package-name (first ps))))
          #'string<)))

(test primitives-live-in-the-package-that-uses-them
  ;; A primitive only one higher layer calls is registered in that layer's
  ;; package (prims/ecl/'s tables name it), not imported from RONTOLISP.
  (let ((prims (rontolisp::%primitives)))
    (is (< 50 (length prims)) "expected the primitives, found ~D" (length prims))
    (is (eq (find-package "VEC") (symbol-package (find-symbol "%MATVEC" "VEC"))))
    (is (eq (find-package "MODEL") (symbol-package (find-symbol "%QKV-ROPE" "MODEL"))))
    (is (equal '() (primitives-misplaced)))))

(test layers-keep-rontolisp-a-third
  ;; At most a third of lisp/'s files are in the package RONTOLISP.
  (let* ((files (system-source-files))
         (ours (count-if (lambda (file)
                           (eq (find-package "RONTOLISP") (car (first (last (source-forms file))))))
                         files)))
    (is (<= (* 3 ours) (length files)) "~D of ~D files in RONTOLISP" ours (length files))))
