;;;; html.lisp - what the two HTML pages share: the `serve' page (GET /,
;;;; lisp/jobs/serve-page.html) and the page `export' writes beside its
;;;; JSON (bench.html, lisp/jobs/bench-page.html).
;;;;
;;;; Each page is a file of the source tree, HTML with its CSS and script
;;;; inline, kept as a page so that it is edited and checked as one.  It is
;;;; read when the Lisp file that names it is compiled and becomes a string
;;;; constant of that file's object, so the executable carries it and needs
;;;; no file at run time; rontolisp.asd lists it (a :static-file before
;;;; the Lisp file that reads it), so a change to the page rebuilds that
;;;; file.

(in-package "TEXT")

(defmacro source-file-text (name)
  "The text (UTF-8) of the file NAME in the folder of the Lisp file being
compiled or loaded, read at that time: a string constant."
  (let ((here (or *compile-file-truename* *load-truename*)))
    (unless here
      (rontolisp-error nil "expected the page ~A read from beside a Lisp file being compiled or ~
loaded, found no such file" name))
    (let ((path (merge-pathnames name here)))
      (with-open-file (in path :external-format :utf-8)
        (let* ((text (make-string (file-length in)))
               (end (read-sequence text in)))
          (subseq text 0 end))))))

(defun html-text (string)
  "STRING as HTML text or an attribute value in double quotes: & < > \"
and ' written as character references."
  (with-output-to-string (out)
    (loop for c across string
          do (case c
               (#\& (write-string "&amp;" out))
               (#\< (write-string "&lt;" out))
               (#\> (write-string "&gt;" out))
               (#\" (write-string "&quot;" out))
               (#\' (write-string "&#39;" out))
               (t (write-char c out))))))

(defun fill-page (page &rest marks)
  "PAGE with each marker of MARKS (alternately a marker, a string found
once in PAGE, and its replacement) replaced; an error names a marker that
PAGE does not hold."
  (loop for (mark text) on marks by #'cddr
        for at = (search mark page)
        do (unless at
             (rontolisp-error nil "expected the marker ~A in the page, found none" mark))
           (setf page (concatenate 'string (subseq page 0 at) text
                                   (subseq page (+ at (length mark))))))
  page)
