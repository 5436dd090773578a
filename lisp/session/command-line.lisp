;;;; command-line.lisp - the command line and the script runner.
;;;;
;;;; The C host boots ECL, registers the primitives, takes the global flags
;;;; (--simd, --no-simd, --threads N) and calls MAIN with the rest of the
;;;; command line.  MAIN dispatches: no argument runs the REPL, and every
;;;; subcommand (`script' here, the tools in their own files) is looked up
;;;; in *COMMANDS*, which DEFINE-COMMAND fills.  MAIN answers the exit
;;;; status; nothing here calls ext:quit, so the host always gets to flush
;;;; and shut ECL down cleanly.

(in-package "COMMAND-LINE")

;;; Subcommands.  Each one states its arguments, usage line, summary and
;;; options once, in DEFINE-COMMAND; its parser, its --help, its line in
;;; the top-level usage and its bad-usage report all come from that one
;;; statement, so every command answers them the same way.

(defstruct (command-option
            (:constructor make-command-option (var name metavar parser repeat help)))
  "An option of a subcommand: the variable VAR its value is bound to, its
NAME (\"--iters\"), the METAVAR of its value (NIL for a flag, which is T
when given), the PARSER of its value, whether it may REPEAT, its HELP."
  var name metavar parser repeat help)

(defstruct (command (:constructor make-command
                        (name usage summary details options min-args max-args
                         options-first function)))
  "A subcommand: its NAME, USAGE (the arguments after the name), one-line
SUMMARY, optional DETAILS for --help, OPTIONS, how many positional
arguments it takes (MIN-ARGS to MAX-ARGS, NIL for no limit), whether
options end at the first positional argument (OPTIONS-FIRST) and the
FUNCTION that runs it."
  name usage summary details options min-args max-args options-first function)

(defvar *commands* '()
  "Every subcommand besides the REPL, in the order of the usage string: a
list of COMMAND structures.")

(defun find-command (name)
  "The subcommand called NAME (a string), or NIL."
  (find name *commands* :key #'command-name :test #'string=))

(defun register-command (command)
  "Add COMMAND to *COMMANDS*, replacing one of its name in place."
  (let ((old (position (command-name command) *commands* :key #'command-name
                                                          :test #'string=)))
    (if old
        (setf (nth old *commands*) command)
        (setf *commands* (append *commands* (list command))))
    command))

;;; Numbers typed on the command line (edit --set, quantize --override-kv)
;;; are read here and not by the Lisp reader, which builds every digit of
;;; 1e999999999 as a bignum before anything could refuse it: the work here
;;; is bounded whatever the length of the exponent, and every number past
;;; 10^400 is refused as out of range at once.

(defconstant +number-max-digits+ 800
  "The significant digits SCAN-NUMBER keeps; any further ones only tell
whether the number lies above the digits kept (enough to round to a double
as the whole would: a double's halfway points have at most 767).")

(defun scan-number (string)
  "STRING as a decimal number: [+-]DIGITS[.DIGITS][(e|E)[+-]DIGITS], with
digits on at least one side of the point, nothing before or after.
Answers NIL for anything else, else the number and whether it was written
as a float (a point or an exponent): an integer for an integer; an exact
rational for a float (rounded to +NUMBER-MAX-DIGITS+ significant digits,
the last one sticky); :OVERFLOW (or :-OVERFLOW when negative) for any
number of magnitude 10^400 or more, and 0 for a nonzero float below
10^-400, which no double holds.  Bounded work for any exponent."
  (let ((n (length string)) (i 0) (sign 1) int-start int-end frac-start frac-end
        (exponent 0) (float nil))
    (flet ((digits ()
             (let ((start i))
               (loop while (and (< i n) (digit-char-p (char string i))) do (incf i))
               (values start i))))
      (when (and (< i n) (find (char string i) "+-"))
        (when (char= (char string i) #\-) (setf sign -1))
        (incf i))
      (setf (values int-start int-end) (digits))
      (setf (values frac-start frac-end) (values i i))
      (when (and (< i n) (char= (char string i) #\.))
        (incf i)
        (setf float t (values frac-start frac-end) (digits)))
      (when (and (= int-start int-end) (= frac-start frac-end))
        (return-from scan-number nil))
      (when (and (< i n) (char-equal (char string i) #\e))
        (incf i)
        (let ((exponent-sign 1))
          (when (and (< i n) (find (char string i) "+-"))
            (when (char= (char string i) #\-) (setf exponent-sign -1))
            (incf i))
          (multiple-value-bind (start end) (digits)
            (when (= start end) (return-from scan-number nil))
            (let ((first (or (position #\0 string :start start :end end :test #'char/=) end)))
              ;; past 7 digits the exponent alone says the number is out of range
              (setf exponent (* exponent-sign (if (> (- end first) 7)
                                                  100000000
                                                  (if (= first end) 0
                                                      (parse-integer string :start first :end end)))))))
          (setf float t)))
      (unless (= i n) (return-from scan-number nil))
      ;; the significant digits, from the first nonzero one of both parts
      (let* ((all (concatenate 'string (subseq string int-start int-end)
                               (subseq string frac-start frac-end)))
             (first (position #\0 all :test #'char/=))
             (point (- exponent (- frac-end frac-start))))
        (unless first
          (return-from scan-number (values 0 float)))
        (let* ((significant (- (length all) first))
               (magnitude (+ significant point))) ; 10^(magnitude-1) <= |x| < 10^magnitude
          (cond ((> magnitude 400)
                 (values (if (minusp sign) :-overflow :overflow) float))
                ((< magnitude -400) (values 0 float))
                (t
                 (let ((kept (min significant +number-max-digits+)))
                   (let ((m (parse-integer all :start first :end (+ first kept)))
                         (e (+ point (- significant kept))))
                     (when (find #\0 all :start (+ first kept) :test #'char/=)
                       ;; a digit dropped was not zero: the sticky last digit says so
                       (setf m (1+ (* 10 m)) e (1- e)))
                     (values (* sign m (expt 10 e)) float))))))))))

(defun scan-integer (string)
  "The integer STRING writes, read as SCAN-NUMBER reads it (a sign and
digits, no point, no exponent), or NIL (for one of 400 digits or more
too)."
  (multiple-value-bind (x float) (scan-number string)
    (and (integerp x) (not float) x)))

(defun number-range-text (type)
  "What a number of TYPE may be, for messages: the integer range (LOW
HIGH), or :F32 / :F64 (a float that rounds to a finite value)."
  (case type
    (:f32 "a number of magnitude at most 3.4028235e38 (the f32 range)")
    (:f64 "a number of magnitude at most 1.7976931348623157e308 (the f64 range)")
    (t (format nil "an integer from ~D to ~D" (first type) (second type)))))

(defun round-to-float (x format)
  "The rational X rounded to the nearest float of FORMAT (:F32 or :F64),
ties to even, subnormals included (as C's strtod and strtof round; Lisp's
COERCE of a ratio need not), or NIL when it rounds beyond the largest
finite value."
  (multiple-value-bind (precision min-exponent prototype)
      (if (eq format :f32) (values 24 -149 1.0) (values 53 -1074 1d0))
    (if (zerop x)
        (float 0 prototype)
        (let* ((r (abs x))
               ;; R in [2^(E-1), 2^E)
               (e (- (integer-length (numerator r)) (integer-length (denominator r)))))
          (when (>= r (expt 2 e)) (incf e))
          (when (< r (expt 2 (1- e))) (decf e))
          ;; S scales R to PRECISION bits, or to the subnormals' fixed step
          (let* ((s (min (- precision e) (- min-exponent)))
                 (q (round (* r (expt 2 s))))
                 (limit (if (eq format :f32) most-positive-single-float most-positive-double-float)))
            (and (<= (* q (expt 2 (- s))) limit)
                 (* (signum x) (scale-float (float q prototype) (- s)))))))))

(defun number-argument (argument string type)
  "STRING, the value given to ARGUMENT (such as \"--set KEY\"), as a number
of TYPE: an integer range (LOW HIGH), written as an integer, or :F32 or :F64
(a double-float for :F64; for :F32 the double rounded to a single-float, as
strtod and a cast do).  Anything else, or a number that rounds beyond the
type's largest finite value, signals USAGE-ERROR naming ARGUMENT and the
range."
  (multiple-value-bind (x float) (scan-number string)
    (flet ((bad () (usage-error "~A: expected ~A, found ~S" argument (number-range-text type) string)))
      (cond ((consp type)
             (unless (and (integerp x) (not float) (<= (first type) x (second type))) (bad))
             x)
            ((or (null x) (symbolp x)) (bad))
            (t (let ((d (round-to-float x :f64)))
                 (or (if (and d (eq type :f32)) (round-to-float (rational d) :f32) d)
                     (bad))))))))

;;; Parsers of option values: functions of (option string) that answer the
;;; value or signal USAGE-ERROR naming the option.

(defun integer-parser (&key min max)
  "A parser of integers from MIN to MAX (NIL: no limit on that side),
written as SCAN-NUMBER reads them."
  (lambda (option string)
    (let ((n (scan-integer string)))
      (unless (and n (or (null min) (<= min n)) (or (null max) (<= n max)))
        (usage-error "~A expects an integer~:[~; ~:*~A~], found ~S" option
                     (cond ((and min max) (format nil "from ~D to ~D" min max))
                           (min (format nil "of ~D or more" min))
                           (max (format nil "of ~D or less" max)))
                     string))
      n)))

(defmacro with-kernel-threads ((n) &body body)
  "Run BODY with the kernels' thread count N (NIL: as it is), and the knob
as it was set (never set included: the machine's cores) afterwards."
  (let ((old (gensym "KNOB")) (count (gensym "N")))
    `(let ((,old (%threads-knob nil)) (,count ,n))
       (unwind-protect (progn (when ,count (setf (threads) ,count)) ,@body)
         (%threads-knob ,old)))))

(defun threads-given ()
  "The thread count --threads N (or (setf threads)) set, or NIL when none
was set."
  (let ((n (%threads-knob nil)))
    (and (plusp n) n)))

(defun thread-count-parser (option string)
  "The parser of a thread count: 1 to (MAX-THREADS), read when the option
is parsed (the primitives do not exist yet when commands are defined)."
  (funcall (integer-parser :min 1 :max (max-threads)) option string))

(defun choice-parser (choices &key (key #'identity))
  "A parser that takes one of the strings CHOICES (in any case) and answers
KEY of the choice as spelled in CHOICES."
  (lambda (option string)
    (let ((choice (find string choices :test #'string-equal)))
      (unless choice
        (usage-error "~A expects one of ~{~A~^, ~}, found ~S" option choices string))
      (funcall key choice))))

(defun option-like-p (arg)
  (and (> (length arg) 1) (char= #\- (char arg 0))))

(defun parse-command-line (command args)
  "Split ARGS, the argument strings of COMMAND, into (values POSITIONAL
OPTIONS): the positional arguments in order and an alist of (var . value)
for the options given, a repeatable one's values in order.  Answers :HELP
when --help or -h is among the options.  \"--\" ends the options, and so
does the first positional argument of an OPTIONS-FIRST command.  Signals
USAGE-ERROR for an unknown option, a missing or bad value, or the wrong
number of positional arguments."
  (let ((positional '()) (given '()) (options-done nil))
    (loop while args
          do (let ((a (pop args)))
               (cond ((or options-done (not (option-like-p a)))
                      (push a positional)
                      (when (command-options-first command) (setf options-done t)))
                     ((string= a "--") (setf options-done t))
                     ((member a '("--help" "-h") :test #'string=)
                      (return-from parse-command-line :help))
                     (t
                      (let* ((sign (position #\= a)) ; --name=value
                             (name (subseq a 0 sign))
                             (opt (find name (command-options command)
                                        :key #'command-option-name :test #'string=)))
                        (unless opt (usage-error "unknown option ~S" a))
                        (let* ((metavar (command-option-metavar opt))
                               (value (cond ((null metavar)
                                             (when sign
                                               (usage-error "~A takes no value, found ~S" name a))
                                             t)
                                            ;; "[FILE]": the value may be left out (T)
                                            ((char= #\[ (char metavar 0))
                                             (cond (sign (subseq a (1+ sign)))
                                                   ((and args (not (option-like-p (first args))))
                                                    (pop args))
                                                   (t t)))
                                            ;; "OLD NEW": one value per word, as a list
                                            ((find #\Space metavar)
                                             (when sign
                                               (usage-error "~A expects ~A as separate arguments, ~
found ~S" name metavar a))
                                             (loop repeat (1+ (count #\Space metavar))
                                                   collect (or (pop args)
                                                               (usage-error "~A expects ~A, found too few ~
arguments" name metavar))))
                                            (sign (subseq a (1+ sign)))
                                            (args (pop args))
                                            (t (usage-error "~A expects ~A, found nothing"
                                                            name metavar))))
                               (value (if (and metavar (not (eq value t))
                                               (command-option-parser opt))
                                          (funcall (command-option-parser opt) name value)
                                          value))
                               (var (command-option-var opt))
                               (old (assoc var given)))
                          (cond ((not (command-option-repeat opt)) (push (cons var value) given))
                                (old (setf (cdr old) (append (cdr old) (list value))))
                                (t (push (cons var (list value)) given)))))))))
    (setf positional (nreverse positional))
    (let ((n (length positional)))
      (when (< n (command-min-args command))
        (usage-error "expected ~A, found ~:[nothing~;only ~:*~{~S~^ ~}~]"
                     (command-usage command) positional))
      (when (and (command-max-args command) (> n (command-max-args command)))
        (usage-error "expected ~A, found the extra argument~P ~{~S~^ ~}"
                     (command-usage command) (- n (command-max-args command))
                     (nthcdr (command-max-args command) positional))))
    (values positional given)))

(defmacro define-command (name lambda-list (&key usage summary details options options-first)
                          &body body)
  "Define the subcommand NAME (a string).  LAMBDA-LIST takes its positional
arguments (required, &optional and &rest variables); OPTIONS binds one
variable per option around BODY, each given as
  (var \"--name[ METAVAR]\" &key parse default repeat help)
where an option with a METAVAR takes a value (a list of one per word for
a METAVAR of several words, \"OLD NEW\"; an optional one, T when left out,
for a METAVAR in brackets, \"[FILE]\"; PARSE, a function of the
option's name and the string, turns it into the value; by default it stays
a string), one without is a flag, DEFAULT (evaluated) is the value when the
option is absent, and a REPEAT option collects its values in a list.
USAGE is the argument part of the usage line, SUMMARY one line for the
top-level --help, DETAILS more text for the command's --help (a string, or
a function answering one when the help is printed).  With
OPTIONS-FIRST, the options end at the first positional argument (the rest
belongs to it).  BODY answers the exit status (an integer; NIL means 0) and
signals USAGE-ERROR for bad usage.  `--help' prints the command's usage and
options on stdout and answers 0."
  (let* ((fn (intern (format nil "COMMAND-~:@(~A~)" name)))
         (required (or (position-if (lambda (x) (member x lambda-list-keywords)) lambda-list)
                       (length lambda-list)))
         (max-args (unless (member '&rest lambda-list)
                     (+ required (length (rest (member '&optional lambda-list))))))
         (args (gensym "ARGS")) (positional (gensym "POSITIONAL")) (given (gensym "GIVEN"))
         (entry (gensym "ENTRY")))
    `(progn
       (defun ,fn (,args)
         ,(format nil "Run `rontolisp ~A' on its list of argument strings and answer
its exit status; see DEFINE-COMMAND." name)
         (multiple-value-bind (,positional ,given) (parse-command-line (find-command ,name) ,args)
           (declare (ignorable ,given))
           (if (eq ,positional :help)
               (progn (print-command-help (find-command ,name) *standard-output*) 0)
               (let ,(loop for (var nil . keys) in options
                           collect `(,var (let ((,entry (assoc ',var ,given)))
                                            (if ,entry (cdr ,entry) ,(getf keys :default)))))
                 (declare (ignorable ,@(mapcar #'first options)))
                 (destructuring-bind ,lambda-list ,positional
                   ,@body)))))
       (register-command
        (make-command ,name ,usage ,summary ,details
                      (list ,@(loop for option in options
                                    collect (destructuring-bind
                                                (var spec &key parse default repeat help) option
                                              (declare (ignore default))
                                              (let ((space (position #\Space spec)))
                                                `(make-command-option
                                                  ',var ,(subseq spec 0 space)
                                                  ,(and space (subseq spec (1+ space)))
                                                  ,parse ,repeat ,help)))))
                      ,required ,max-args ,options-first ',fn))
       ',fn)))

(defun print-command-usage (command &optional (stream *error-output*))
  "COMMAND's usage line and where to find more, on STREAM (stderr)."
  (format stream "usage: rontolisp ~A ~A~%Try `rontolisp ~A --help' for its options.~%"
          (command-name command) (command-usage command) (command-name command))
  (finish-output stream))

(defun print-command-help (command &optional (stream *standard-output*))
  "COMMAND's usage line, summary, options and details on STREAM."
  (format stream "usage: rontolisp ~A ~A~%~%~A~%"
          (command-name command) (command-usage command) (command-summary command))
  (let* ((lines (append (loop for o in (command-options command)
                              collect (cons (format nil "~A~@[ ~A~]" (command-option-name o)
                                                    (command-option-metavar o))
                                            (or (command-option-help o) "")))
                        (list (cons "--help" "print this help and exit"))))
         (width (reduce #'max lines :key (lambda (l) (length (car l))))))
    (format stream "~%Options:~%")
    (loop for (name . help) in lines
          do (format stream "  ~vA  ~A~%" width name
                     ;; continuation lines of a help text line up under its first
                     (with-output-to-string (s)
                       (loop for c across help
                             do (write-char c s)
                                (when (char= c #\Newline)
                                  (dotimes (i (+ width 4)) (write-char #\Space s))))))))
  (let ((details (command-details command)))
    (when details
      (format stream "~%~A~%" (if (functionp details) (funcall details) details))))
  (format stream "~%Exit status: 0 success, 1 an error (one line on stderr), 2 bad usage.~%")
  (finish-output stream))

(defun usage-string ()
  (with-output-to-string (s)
    (format s "usage: rontolisp [--simd | --no-simd] [--threads N] [--norc] [--quit]~%")
    (format s "                 [--eval FORM | --load FILE]... [COMMAND ARGS...]~%~%")
    (format s "  rontolisp                          a REPL in package RONTOLISP-USER~%")
    (dolist (c *commands*)
      (format s "  rontolisp ~A ~A~%      ~A~%" (command-name c) (command-usage c)
              (command-summary c)))
    (format s "  rontolisp --help | --version~%~%")
    (format s "Every command answers --help with its usage and options.~%~%")
    (format s "Global flags (before the command):~%")
    (format s "  --simd, --no-simd   use (the default) or avoid the CPU's SIMD kernels~%")
    (format s "  --threads N         threads for the kernels (default: every core)~%")
    (format s "  --eval FORM         evaluate FORM (in RONTOLISP-USER) before the REPL or command~%")
    (format s "  --load FILE         load FILE before the REPL or command (with --eval, in order)~%")
    (format s "  --norc              do not load ~~/.rontolisprc (the REPL loads it first)~%")
    (format s "  --quit, --non-interactive~%")
    (format s "                      run the rc file, --eval and --load, then exit instead of~%")
    (format s "                      starting the REPL (as SBCL's)~%")
    (format s "  --script FILE [ARGS...]~%")
    (format s "                      the same as `script FILE ARGS...' (FILE - or none: standard~%")
    (format s "                      input), as SBCL's; it ends the options~%")
    (format s "~%Exit status: 0 success, 1 an error (one line on stderr), 2 bad usage.~%")))

(defparameter *top-level-options*
  '("--help" "--version" "--simd" "--no-simd" "--threads" "--eval" "--load" "--norc"
    "--quit" "--non-interactive" "--script")
  "The options of the command line before a command, for the guess of what
an unknown one meant.")

(defun edit-distance (a b)
  "The Levenshtein distance of the strings A and B: the fewest characters
inserted, deleted or replaced that turn A into B."
  (let ((row (make-array (1+ (length b)))))
    (dotimes (j (1+ (length b))) (setf (aref row j) j))
    (dotimes (i (length a) (aref row (length b)))
      (let ((diagonal (aref row 0)))
        (setf (aref row 0) (1+ i))
        (dotimes (j (length b))
          (let ((above (aref row (1+ j))))
            (setf (aref row (1+ j))
                  (min (1+ above) (1+ (aref row j))
                       (+ diagonal (if (char-equal (char a i) (char b j)) 0 1))))
            (setf diagonal above)))))))

(defun closest-name (name candidates)
  "The string of CANDIDATES nearest NAME by edit distance (the first of
equals), when it is near enough to be what was meant: at most two edits,
or half of NAME's length; else NIL."
  (let ((best nil) (best-distance nil))
    (dolist (c candidates)
      (let ((d (edit-distance name c)))
        (when (or (null best-distance) (< d best-distance))
          (setf best c best-distance d))))
    (and best (<= best-distance (max 2 (floor (length name) 2))) best)))

(defun report-unknown-command (word)
  "Say on stderr, in two lines, that WORD is no command (or no option, when
it starts with -) and what was probably meant: the nearest command or
option, or `script WORD' when WORD names a file."
  (let* ((option (and (plusp (length word)) (char= #\- (char word 0))))
         (guess (cond (option
                       (closest-name (subseq word 0 (position #\= word)) *top-level-options*))
                      ((closest-name word (mapcar #'command-name *commands*)))
                      ((ignore-errors (eq :file (path-kind word)))
                       (format nil "`rontolisp script ~A'" word)))))
    (format *error-output* "rontolisp: unknown ~:[command~;option~] ~S~@[; did you mean ~A?~]~%~
Try `rontolisp --help' for the commands and options.~%"
            option word guess)
    (finish-output *error-output*)))

(defun print-usage (&optional (stream *error-output*))
  (write-string (usage-string) stream)
  (finish-output stream))

;;; Reporting errors in batch modes.

(defun condition-text (condition)
  "CONDITION's report with the printer set for messages: a simple
condition's arguments summarized as our own messages summarize them (ECL's
type errors print their datum whole), an arithmetic error (which ECL
reports as #<a FLOATING-POINT-OVERFLOW ...>) by its kind, operation and
operands."
  (with-message-printing ()
    (typecase condition
      (rontolisp-error (princ-to-string condition))
      (simple-condition
       (format nil "~?" (simple-condition-format-control condition)
               (mapcar #'summarize-argument (simple-condition-format-arguments condition))))
      (arithmetic-error
       ;; "division by zero in (/ 1 0)": the kind, then the call that failed.
       (let ((op (ignore-errors (arithmetic-error-operation condition))))
         (format nil "~(~A~)~@[ in (~(~S~)~{ ~S~})~]"
                 (substitute #\Space #\- (symbol-name (type-of condition)))
                 op (and op (mapcar #'summarize-argument
                                    (ignore-errors (arithmetic-error-operands condition)))))))
      (t (princ-to-string condition)))))

(defun condition-line (condition)
  "CONDITION's report on one short line (see ONE-LINE), never failing itself."
  (one-line (handler-case (condition-text condition)
              (serious-condition ()
                (format nil "~S (its report failed)" (type-of condition))))))

(defun report-error (prefix condition)
  (format *error-output* "~&~A: ~A~%" prefix (condition-line condition))
  (finish-output *error-output*))

(defun output-closed-p ()
  "True when standard output is a pipe whose reader has gone (`inspect |
head'): the reader took what it wanted, so the run ends quietly."
  (%output-closed-p 1))

(defun failure-status (prefix condition)
  "The exit status for CONDITION ending a batch run: 0, silently, when it
came from writing to a closed pipe; else 1 after one line on stderr."
  (cond ((and (typep condition 'stream-error) (output-closed-p)) 0)
        (t (ignore-errors (report-error prefix condition)) 1)))

(defmacro with-batch-errors ((prefix &optional command) &body body)
  "Run BODY; an unhandled serious condition prints one line on stderr and
answers exit status 1 (2 for a usage error, after the usage of COMMAND, or
of rontolisp when COMMAND is NIL; 0 and nothing printed when standard
output is a closed pipe)."
  (let ((c (gensym "COMMAND")))
    `(let ((,c ,command))
       (handler-case (progn ,@body)
         (usage-error (e)
           (report-error ,prefix e)
           (if ,c (print-command-usage ,c) (print-usage))
           2)
         (serious-condition (e)
           (failure-status ,prefix e))))))

(defun die-in-any-thread (condition hook)
  "The debugger hook of batch runs: no one is there to answer a debugger,
so a condition that reaches it in any thread (an unhandled serious
condition, or BREAK) prints one line and ends the process with status 1
(temporary files of unfinished writes removed)."
  (declare (ignore hook))
  (let ((status (failure-status "rontolisp" condition)))
    (ignore-errors (finish-output *standard-output*))
    (%exit-process status)))

(defun debugger-hooks ()
  "The debugger hooks in force, to be given back to INSTALL-BATCH-DEBUGGER."
  (list *debugger-hook* ext:*invoke-debugger-hook*))

(defun install-batch-debugger (&optional (hooks (list #'die-in-any-thread #'die-in-any-thread)))
  "Make DIE-IN-ANY-THREAD the debugger of every thread, or put back HOOKS
(as DEBUGGER-HOOKS answered them).  BREAK binds *DEBUGGER-HOOK* to NIL
before it enters the debugger; EXT:*INVOKE-DEBUGGER-HOOK* is still
called (as SBCL's --disable-debugger does it)."
  ;; SETF, not LET: threads see the global value, not the caller's binding.
  (setf *debugger-hook* (first hooks)
        ext:*invoke-debugger-hook* (second hooks)))

;;; The script runner.

(defun run-script (file args)
  (install-batch-debugger)
  (let ((stdin (string= file "-")))
    (with-batch-errors ((format nil "rontolisp: ~A" (if stdin "standard input" file)))
      (let ((*args* args))
        (if stdin (load-standard-input) (load-source file)))
      0)))

(defun buffer-standard-output ()
  "Make *STANDARD-OUTPUT* a fully buffered UTF-8 stream on descriptor 1, as
a command does when its output is not a terminal (the REPL never does: a
program driving it through a pipe waits for each answer).
ECL's own standard output makes a system call of every string written to
it: six million of them for the JSON listing of a file of 100,000 tensors,
where the buffer leaves the 1.4 million forced by printing objects (ECL
flushes after each).  FLUSH-OUTPUT empties the buffer at the end; a write
that fails meanwhile (a closed pipe, a full device) signals as before."
  (setf *standard-output*
        (ext:make-stream-from-fd 1 :output :buffering :full :element-type 'character
                                   :external-format :utf-8))
  (%keep-escaped-bytes))

;;; The entry point the C host calls.

(defun dispatch (args)
  (ignore-errors (install-source-translations))
  (multiple-value-bind (actions norc args quit) (take-startup-options args)
    (let ((cmd (first args)))
      (cond ((and (null args) quit)
             ;; --quit, --non-interactive: the rc file and the start-up
             ;; options as before the REPL, then no REPL.
             (let ((*package* (find-package "RONTOLISP-USER")))
               (or (run-startup actions :rc (not norc)) 0)))
            ((null args) (repl actions :rc (not norc)))
            ((member cmd '("--help" "-h" "help") :test #'string=)
             (print-usage *standard-output*) 0)
            ((string= cmd "--version") (format t "~A~%" (version)) 0)
            (t
             (let ((c (find-command cmd)))
               (cond (c
                      (when (zerop (%isatty 1))
                        (buffer-standard-output))
                      (or (let ((*package* (find-package "RONTOLISP-USER")))
                            (run-startup actions))
                          (with-batch-errors ((format nil "rontolisp ~A" cmd) c)
                            (or (funcall (command-function c) (rest args)) 0))))
                     (t
                      (report-unknown-command cmd)
                      2))))))))

(defun flush-output (status)
  "Flush standard output and error at the end of a run and answer the exit
status: STATUS, or 1 after one line when the output cannot be written (a
full device); a closed pipe keeps STATUS.  Unwritable output is dropped so
that nothing tries to flush it again."
  (handler-case (progn (finish-output *standard-output*) status)
    (serious-condition (c)
      (ignore-errors (clear-output *standard-output*))
      (cond ((output-closed-p) status)
            (t (ignore-errors (report-error "rontolisp: cannot write the output" c))
               1)))))

(defun main (args)
  "The command line's entry point: run ARGS (a list of strings, global flags
already taken by the host) and answer the exit status."
  (let ((status 1))
    ;; Paths and keys that are not UTF-8 hold U+DC80..U+DCFF for their
    ;; bytes: printed, they must be those bytes again.
    (%keep-escaped-bytes)
    (bound-standard-readtable)
    (unwind-protect
         (setf status
               (catch '%exit
                 ;; Whatever reads Lisp source from here on (the REPL,
                 ;; --eval) stops at *READ-DEPTH-LIMIT* levels of nesting.
                 (handler-case (let ((*readtable* (depth-limited-readtable)))
                                 (dispatch args))
                   (usage-error (c)
                     (report-error "rontolisp" c)
                     (print-usage)
                     2)
                   (serious-condition (c)
                     (failure-status "rontolisp" c)))))
      (setf status (flush-output status))
      (ignore-errors (finish-output *error-output*)))
    status))
