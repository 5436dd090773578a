;;;; repl.lisp - the REPL and the start-up conventions around it.
;;;;
;;;; At a terminal the REPL is ECL's own top level (SI::TPL) in package
;;;; RONTOLISP-USER, so an error enters the same debugger as (break) does:
;;;; numbered restarts, :b for a backtrace, :h for the commands.  Lines are
;;;; read through libedit (runtime/lineedit.c): editing keys, history in
;;;; ~/.rontolisp_history, completion of symbols.  Without a terminal the
;;;; REPL is a plain loop for piped input: an error prints one line, the
;;;; next form runs, and the exit status is 1 at the end if any form
;;;; failed.
;;;;
;;;; Start-up: ~/.rontolisprc is loaded before the REPL (not before a
;;;; command; --norc skips it); --eval FORM and --load FILE, repeatable,
;;;; run in order before the REPL or the command.  Files loaded by `script',
;;;; --load and the rc file may start with a #! line.

(in-package "COMMAND-LINE")

;;; The reader's nesting depth.  ECL's reader recurses on the C stack for
;;; every nested list, vector, quote or backquote and does not check it:
;;; some tens of thousands of "(" crash the process.  Every readtable the
;;; REPL, scripts, --eval, --load and the rc file read with counts the
;;; depth in its macro characters and refuses to go past the limit, and so
;;; does the standard readtable itself in the executable (a program's own
;;; READ under WITH-STANDARD-IO-SYNTAX, Swank's messages).

(defparameter *read-depth-limit* 1000
  "How deeply the forms read from Lisp source (scripts, loaded files,
--eval, the REPL) may nest: lists, vectors, quotes and every other reader
macro count one level each.  Deeper input is a READ-NESTING-ERROR.")

(defvar *read-depth* 0
  "How many reader macros are active in the read going on (see
*READ-DEPTH-LIMIT*).")

(defvar *depth-counting-functions* (make-hash-table :test 'eq)
  "The reader macro functions DEPTH-COUNTING made, so that a readtable
already bounded is not wrapped twice.")

(defun depth-counting (function)
  "FUNCTION, a reader macro function, wrapped to count one level of
*READ-DEPTH* while it runs and to signal READ-NESTING-ERROR past
*READ-DEPTH-LIMIT*; FUNCTION itself when it is such a wrapper already."
  (if (gethash function *depth-counting-functions*)
      function
      (let ((wrapper
              (lambda (stream &rest args)
                (let ((*read-depth* (1+ *read-depth*)))
                  (when (> *read-depth* *read-depth-limit*)
                    (let ((at (ignore-errors (file-position stream))))
                      (read-nesting-error stream *read-depth-limit* at
                                          "expected forms nested at most ~D deep, found deeper ~
                                           nesting~@[ at character ~D~]"
                                          *read-depth-limit* at)))
                  (apply function stream args)))))
        (setf (gethash wrapper *depth-counting-functions*) t)
        wrapper)))

(defun bound-readtable-depth (rt)
  "Make the macro characters of the readtable RT, and the sub-characters of
its dispatching ones, count how deeply a read nests and stop it at
*READ-DEPTH-LIMIT* (DEPTH-COUNTING); answers RT."
  (dotimes (code 256 rt)
    (let ((c (code-char code)))
      (multiple-value-bind (function non-terminating) (get-macro-character c rt)
        (when function
          (if (handler-case (progn (get-dispatch-macro-character c #\( rt) t)
                (error () nil))
              ;; A dispatching character (#): wrap what each sub-character does.
              (dotimes (sub 256)
                (let* ((d (code-char sub))
                       (f (and (char= d (char-upcase d))
                               (get-dispatch-macro-character c d rt))))
                  (when f
                    (set-dispatch-macro-character c d (depth-counting f) rt))))
              (set-macro-character c (depth-counting function) non-terminating rt)))))))

(defun depth-limited-readtable (&optional (from *readtable*))
  "A copy of the readtable FROM (NIL: the standard one) whose macro
characters, and the sub-characters of its dispatching ones, count how
deeply a read nests and stop it at *READ-DEPTH-LIMIT*."
  (bound-readtable-depth (copy-readtable from)))

(defun bound-standard-readtable ()
  "Bound the nesting of reads with the standard readtable itself (ECL's,
which WITH-STANDARD-IO-SYNTAX binds, so a program's own READ-FROM-STRING
under it is bounded too), unlocking it meanwhile.  The executable does it
at start-up, START-SWANK too (a stock ECL's Swank reads messages under
WITH-STANDARD-IO-SYNTAX); doing it again changes nothing."
  (let ((rt (si::standard-readtable)))
    (ext:readtable-lock rt nil)
    (unwind-protect (bound-readtable-depth rt)
      (ext:readtable-lock rt t))))

;;; Loading source files.

(defun skip-shebang-line (stream char arg)
  "The #! reader macro of loaded files: on a file's first line it is a
comment to the end of the line (so a script can be an executable, run by
`#!/usr/bin/env -S rontolisp script'); anywhere else it is an error."
  (declare (ignore char arg))
  (let ((at (ignore-errors (file-position stream))))
    (unless (eql 2 at)
      (rontolisp-error 'load "expected #! only at the start of a file's first line, found it ~
                              ~:[after that line~;~:*at character ~A~]" (and at (- at 2)))))
  (read-line stream nil)
  (values))

(defun load-source (file)
  "Load the Lisp source FILE in package RONTOLISP-USER with the standard
readtable (plus a leading #! line skipped).  A missing file, a directory
or a FIFO signals FILE-IO-ERROR naming FILE before anything is read."
  ;; Checked through the safe reader first: LOAD would wait forever on a
  ;; FIFO and say little about a directory.
  (multiple-value-bind (octets why)
      (%read-file-octets (path-octets file) "a Lisp source file to run")
    (unless octets
      ;; The message leaves the path to the caller's prefix, the slot keeps it.
      (error 'file-io-error :path file :message why)))
  (load-with-source-readtable file))

(defun load-with-source-readtable (source)
  "LOAD SOURCE (a file name or a character stream) in package
RONTOLISP-USER with the standard readtable plus the #! first line."
  (let ((*package* (find-package "RONTOLISP-USER"))
        (*readtable* (depth-limited-readtable nil)))
    (set-dispatch-macro-character #\# #\! (depth-counting #'skip-shebang-line))
    ;; Through LOAD's function cell (base/ecl-filenames.lisp's wrapper),
    ;; given the name as the user wrote it: names the script's own file
    ;; functions answer are then the user's too.
    (funcall 'load source :verbose nil :print nil)))

(defun load-standard-input ()
  "Load the Lisp forms of standard input as LOAD-SOURCE loads a file's
(`rontolisp script -'), each form run as soon as it is read; a first line
that starts with #! is skipped.  A pipe has no file position to tell the
first line by, so that line is looked at here, by its first two
characters."
  (let* ((in *standard-input*)
         (c1 (read-char in nil))
         (c2 (and (eql c1 #\#) (read-char in nil))))
    (cond ((null c1))                   ; no input: nothing to run
          ((not (eql c1 #\#)) (unread-char c1 in) (load-with-source-readtable in))
          ((eql c2 #\!) (read-line in nil) (load-with-source-readtable in))
          ;; "#" and what followed it go back in front of the rest.
          (t (load-with-source-readtable
              (make-concatenated-stream
               (make-string-input-stream (coerce (remove nil (list c1 c2)) 'string))
               in))))))

;;; --eval, --load, --norc.

(defun take-startup-options (args)
  "Split the start-up options off the front of ARGS: answers (values
ACTIONS NORC REST QUIT), ACTIONS a list of (:eval . string) and (:load .
path) in order, NORC true when --norc was given, REST the arguments after
them, QUIT true when --quit or --non-interactive was given (run the
actions, then exit instead of starting the REPL).  --script FILE ARGS...
(SBCL's spelling) ends the options: REST is then (\"script\" FILE
ARGS...), FILE - (standard input) when none follows.  Signals USAGE-ERROR
for --eval or --load without a value."
  (let ((actions '()) (norc nil) (quit nil))
    (loop
      (let* ((a (first args))
             (sign (and a (position #\= a)))
             (name (and a (subseq a 0 sign))))
        (cond ((equal a "--norc") (setf norc t) (pop args))
              ((member a '("--quit" "--non-interactive") :test #'equal) (setf quit t) (pop args))
              ((equal a "--script")
               (return (values (nreverse actions) norc (cons "script" (or (rest args) (list "-")))
                               quit)))
              ((member name '("--eval" "--load") :test #'equal)
               (pop args)
               (let ((value (cond (sign (subseq a (1+ sign)))
                                  (args (pop args))
                                  (t (usage-error "~A expects ~:[a form~;a file~], found nothing"
                                                  name (string= name "--load"))))))
                 (push (cons (if (string= name "--eval") :eval :load) value) actions)))
              (t (return (values (nreverse actions) norc args quit))))))))

(defun eval-option (string)
  "Read every form in STRING (an --eval value) in the current package and
evaluate them in order."
  (let ((*read-eval* t))
    (with-input-from-string (s string)
      (loop for form = (read s nil s)
            until (eq form s)
            do (eval form)))))

(defun run-startup (actions &key rc)
  "Load the rc file (when RC and it exists), then run ACTIONS in order.
Answers NIL when all went well, or an exit status after one line on
stderr naming what failed."
  (let ((hooks (debugger-hooks)))
    (install-batch-debugger)
    (flet ((run (prefix fn arg)
             (let ((status (with-batch-errors (prefix) (funcall fn arg) 0)))
               (unless (eql 0 status)
                 (return-from run-startup status)))))
      (let ((file (and rc (path-kind (rc-file)) (rc-file))))
        (when file
          (run (format nil "rontolisp: ~A (skip it with --norc)" file)
               #'load-source file)))
      (loop for (kind . value) in actions
            do (ecase kind
                 (:eval (run (one-line (format nil "rontolisp: --eval ~S" value))
                             #'eval-option value))
                 (:load (run (format nil "rontolisp: ~A" value) #'load-source value))))
      (install-batch-debugger hooks)
      nil)))

(defun rc-file ()
  "The REPL's init file, ~/.rontolisprc."
  (user-namestring (merge-pathnames ".rontolisprc" (user-homedir-pathname))))

(defun history-file ()
  "Where the REPL keeps the lines typed at a terminal, ~/.rontolisp_history."
  (user-namestring (merge-pathnames ".rontolisp_history" (user-homedir-pathname))))

;;; Where the sources are.  The build records each function's source file
;;; as a RONTOLISP logical pathname (RONTOLISP:LISP;QUANT;QMATRIX.LISP, see
;;; runtime/build-lisp.lisp), so M-. in SLIME and ED find the installed
;;; copy rather than the directory the program was built in.

(defun source-directory ()
  "The directory holding lisp/ for this executable: PREFIX/share/rontolisp/
beside an installed PREFIX/bin/rontolisp, else the source tree the
executable was built in (the parent of build/ or of build/asan/), else NIL."
  (let ((exe (ignore-errors (truename "/proc/self/exe"))))
    (when exe
      (let ((bin (make-pathname :name nil :type nil :version nil :defaults exe)))
        (loop for up in '("../share/rontolisp/" "../" "../../")
              for dir = (ignore-errors (truename (merge-pathnames up bin)))
              when (and dir (probe-file (merge-pathnames "lisp/session/repl.lisp" dir)))
                return dir)))))

(defun install-source-translations ()
  "Point the RONTOLISP logical host at SOURCE-DIRECTORY (when found)."
  (let ((dir (source-directory)))
    (when dir
      (setf (logical-pathname-translations "RONTOLISP")
            (list (list "**;*.*.*" (merge-pathnames "**/*.*" dir)))))))

;;; Completion at a terminal.

(defun completion-candidates (text)
  "The symbol names (and package prefixes) that complete TEXT as typed at
the REPL: \"pkg:x\" among PKG's external symbols, \"pkg::x\" among all its
symbols, \":x\" among keywords, else among the symbols accessible in
*PACKAGE* and the package names.  Answers them sorted, in TEXT's case."
  (let* ((colon (position #\: text))
         (double (and colon (< (1+ colon) (length text)) (char= #\: (char text (1+ colon)))))
         (prefix (if colon (subseq text 0 (+ colon (if double 2 1))) ""))
         (word (if colon (subseq text (+ colon (if double 2 1))) text))
         (package (cond ((null colon) *package*)
                        ((zerop colon) (find-package "KEYWORD"))
                        (t (find-package (string-upcase (subseq text 0 colon))))))
         (downcase (notany #'upper-case-p text))
         (found '()))
    (flet ((consider (name &optional (prefix prefix))
             (when (and (<= (length word) (length name))
                        (string-equal word name :end2 (length word)))
               (push (concatenate 'string prefix (if downcase (string-downcase name) name))
                     found))))
      (when package
        (cond ((and colon (not double) (plusp colon))
               (do-external-symbols (s package) (consider (symbol-name s))))
              (colon (do-symbols (s package)
                       (when (eq package (symbol-package s)) (consider (symbol-name s)))))
              (t (do-symbols (s package) (consider (symbol-name s)))
                 (dolist (p (list-all-packages))
                   (dolist (name (cons (package-name p) (package-nicknames p)))
                     (consider (concatenate 'string name ":") "")))))))
    (sort (remove-duplicates found :test #'string=) #'string<)))

(defun line-completions (text)
  "What the line editor offers for TEXT: COMPLETION-CANDIDATES as UTF-8
octet vectors; never signals (a completion runs inside libedit)."
  (ignore-errors (mapcar #'%utf8-octets (completion-candidates text))))

;;; The stream the terminal REPL reads.

(defclass line-editor-stream (gray:fundamental-character-input-stream)
  ((line :initform "" :documentation "The line being read, newline included.")
   (pos :initform 0 :documentation "The index of the next character of LINE.")
   (prompt :initform "> " :accessor line-editor-prompt
           :documentation "What the next line read is prompted with."))
  (:documentation "A character input stream of the lines typed at the
terminal through libedit: each line is edited, then kept in the history,
then read.  The first line of a form gets the top level's prompt, the
lines that continue it a blank one of the same width."))

(defmethod gray:stream-read-char ((s line-editor-stream))
  (with-slots (line pos prompt) s
    (loop
      (when (< pos (length line))
        (return (prog1 (char line pos) (incf pos))))
      ;; Output written so far ("Name? ") must show before libedit's prompt.
      (ignore-errors (finish-output *standard-output*))
      (let ((got (handler-case (%line-editor-read (%utf8-octets prompt))
                   (ext:interactive-interrupt () :interrupt))))
        (setf prompt (make-string (length prompt) :initial-element #\Space))
        (cond ((null got) (return :eof))
              ((eq got :interrupt)
               ;; Ctrl-C while typing: drop the form, back to the prompt.
               (setf line "" pos 0)
               (terpri)
               (throw si::*quit-tag* nil))
              (t (setf line (concatenate 'string got (string #\Newline)) pos 0)))))))

(defmethod gray:stream-unread-char ((s line-editor-stream) char)
  (declare (ignore char))
  (with-slots (pos) s
    (when (plusp pos) (decf pos)))
  nil)

(defmethod gray:stream-listen ((s line-editor-stream))
  (with-slots (line pos) s
    (< pos (length line))))

(defmethod gray:stream-clear-input ((s line-editor-stream))
  (with-slots (line pos) s
    (setf pos (length line)))
  nil)

(defmethod gray:stream-line-column ((s line-editor-stream))
  nil)

;;; The REPL.

(defparameter *repl-commands*
  '("rontolisp"
    ((:exit :eof) exit :eval
     ":exit or ^D      Leave rontolisp"
     ":exit &eval &optional (status 0)                [Top level command]~@
      ~@
      Leave rontolisp with exit status STATUS (an end of input too).~%"))
  "Top-level commands that replace ECL's: leaving ends RONTOLISP:MAIN
normally (streams flushed) instead of quitting from inside the loop.")

(defun terminal-prompter (editor)
  "The top level's prompt hook for EDITOR: the package name and one > per
debugger level, given to the line editor rather than printed.  ECL's
debugger rebinds *PACKAGE* to CL-USER and *READTABLE* to the standard
readtable (WITH-STANDARD-IO-SYNTAX); a new level starts in the package of
the level it broke from instead, and with its readtable (which bounds the
nesting depth, see *READ-DEPTH-LIMIT*)."
  ;; Per level: the level's quit tag (fresh for every entry into a level),
  ;; the package of its last prompt and its readtable.
  (let ((levels (make-array 4 :adjustable t :fill-pointer 0))
        (cl-user (find-package "CL-USER")))
    (lambda ()
      (let* ((level si::*tpl-level*)
             (known (and (< level (length levels)) (aref levels level))))
        (when (and (plusp level) (<= level (length levels))
                   (not (eq (first known) si::*quit-tag*)))
          (let ((outer (aref levels (1- level))))
            (when (eq *package* cl-user)
              (setf *package* (second outer)))
            (setf *readtable* (third outer))))
        (setf (fill-pointer levels) (min level (length levels)))
        (vector-push-extend (list si::*quit-tag* *package* *readtable*) levels)
        (setf (line-editor-prompt editor)
              (format nil "~A~V,,,'>A " (package-name *package*) (1+ level) ""))))))

(defun terminal-repl ()
  "The REPL at a terminal: ECL's top level and debugger, reading lines
through the line editor.  Answers 0; (rontolisp:exit n) leaves with N."
  (let* ((editor (make-instance 'line-editor-stream))
         (*terminal-io* (make-two-way-stream editor (two-way-stream-output-stream *terminal-io*)))
         (*standard-input* (make-synonym-stream '*terminal-io*))
         (*debugger-hook* nil))
    (%line-editor-start (ignore-errors (path-octets (history-file))))
    (format t "~A~%Type :h for help, (rontolisp:exit) or end of input to leave.~%" (version))
    (catch si::*quit-tag*
      (let ((si::*tpl-level* -1)
            (si::*tpl-prompt-hook* (terminal-prompter editor))
            (* nil) (** nil) (*** nil) (+ nil) (++ nil) (+++ nil)
            (/ nil) (// nil) (/// nil) (- nil))
        ;; MAIN answers any serious condition with one line and an exit
        ;; status; here the debugger answers first.
        (handler-bind ((serious-condition #'invoke-debugger))
          (si::tpl :commands (cons *repl-commands* si::*tpl-commands*) :quiet t))))
    0))

(defun fail-piped-form (condition hook)
  "The debugger of a form the piped REPL evaluates (see PIPED-REPL): no
one is there to answer it, so the form fails with CONDITION, as with an
error."
  (declare (ignore hook))
  (throw 'piped-form-failed condition))

(defun piped-repl ()
  "The REPL without a terminal: each form's values are printed; an error
(or BREAK) prints one line on stderr and the next form runs; at the end of
input the status is 0, or 1 when any form failed to read or evaluate."
  (let ((failed nil)
        (* nil) (** nil) (*** nil) (+ nil) (++ nil) (+++ nil)
        (/ nil) (// nil) (/// nil) (- nil))
    (install-batch-debugger)
    (loop
      (let ((form (handler-case (read *standard-input* nil :eof)
                    ;; Ctrl-C (SIGINT) while waiting: go on reading.
                    (ext:interactive-interrupt () :again)
                    (serious-condition (c)
                      (report-error "read error" c)
                      (setf failed t)
                      ;; Drop the rest of the offending line, not the
                      ;; whole input: the session goes on after it.
                      (ignore-errors (read-line *standard-input* nil))
                      :again))))
        (case form
          (:eof (return (if failed 1 0)))
          (:again)
          (t
           (let ((c (catch 'piped-form-failed
                      (handler-case
                          (let ((values (multiple-value-list
                                         ;; BREAK binds *DEBUGGER-HOOK* to NIL,
                                         ;; not this one.
                                         (let ((- form)
                                               (ext:*invoke-debugger-hook* #'fail-piped-form))
                                           (eval form)))))
                            (setf /// // // / / values
                                  *** ** ** * * (first values)
                                  +++ ++ ++ + + form)
                            (fresh-line)
                            (dolist (v values) (format t "~S~%" v))
                            (finish-output)
                            nil)
                        (serious-condition (c) c)))))
             (when c
               (setf failed t)
               (format *error-output* "~&; ~A: ~A~%" (type-of c) (condition-line c))
               (finish-output *error-output*)))))))))

(defun repl (&optional actions &key (rc t))
  "The read-eval-print loop in package RONTOLISP-USER, after the rc file
(when RC) and the start-up ACTIONS (see TAKE-STARTUP-OPTIONS); answers the
exit status."
  (let ((*package* (find-package "RONTOLISP-USER")))
    (or (run-startup actions :rc rc)
        (progn
          ;; Until here Ctrl-C ends the program (runtime/main.c); from the
          ;; prompt on it is ECL's interrupt, which returns to the prompt.
          (ext:catch-signal ext:+sigint+ t)
          (if (/= 0 (%isatty 0))
              (terminal-repl)
              (piped-repl))))))
