;;;; threads.lisp - a limit on live Lisp threads.  ECL 21.2.1 lists its
;;;; threads in a vector of 256 slots that it cannot grow (the grown copy
;;;; has no fill pointer, so it is grown again forever: the 256th thread
;;;; spins at 100% CPU until memory runs out).  MP:PROCESS-RUN-FUNCTION and
;;;; MP:PROCESS-ENABLE are wrapped here: before a thread starts, the vector
;;;; is made large enough once (%RESERVE-THREAD-SLOTS, prims/ecl/threads.c)
;;;; and a thread beyond *THREAD-LIMIT* is refused with THREAD-LIMIT-ERROR.
;;;; Swank's threads (lisp/session/swank.lisp) are made the same way.
;;;;
;;;; Before a thread starts, every special variable is also given its slot
;;;; in ECL's per-thread tables of bindings (GIVE-SPECIALS-THEIR-SLOTS):
;;;; ECL hands a slot out on a variable's first binding, unsynchronized, and
;;;; two threads binding a variable for the first time at once could each
;;;; take one, one of them then reading the global value inside its own LET.

(in-package "RONTOLISP")

(defparameter *thread-limit* 1000
  "The most Lisp threads alive at once (the main thread included): starting
one more signals THREAD-LIMIT-ERROR.")

(defconstant +thread-slack+ 64
  "Slots of ECL's thread vector kept beyond *THREAD-LIMIT*, for threads
started by code that calls ECL's C functions without the wrappers below.")

(defvar *thread-lock* (mp:make-lock :name "rontolisp thread limit" :recursive t)
  "Held from the count of live threads to the start of the new one, so two
threads starting at once cannot both take the last place.")

(defvar *original-process-enable* #'mp:process-enable
  "ECL's own MP:PROCESS-ENABLE (kept once, before it is wrapped).")

(defvar *original-process-run-function* #'mp:process-run-function
  "ECL's own MP:PROCESS-RUN-FUNCTION (kept once, before it is wrapped).")

(defun give-specials-their-slots ()
  "Bind, once and in this thread, every special variable (of every package)
that no thread has bound yet, so that ECL gives it its index in the
threads' tables of bindings now.  ECL 21.2.1 hands the index out on a
variable's first binding without a lock (ecl_bds_bind): two threads
binding it for the first time at once each took an index, the one stored
last won, and the other thread's LET bound a slot nobody reads, so that
thread saw the global value inside its own binding (a question rendered
with every template variable undefined, and no option markers).  A variable
given its index keeps it; a variable first defined after the last thread
started is not covered."
  (do-all-symbols (s)
    (when (and (si:specialp s) (not (constantp s)) (not (%special-slot-p s)))
      (progv (list s) (if (boundp s) (list (symbol-value s)) '())))))

(defun call-with-thread-room (name start)
  "Call START (which starts one thread named NAME and answers its process)
when fewer than *THREAD-LIMIT* Lisp threads are alive, else signal
THREAD-LIMIT-ERROR; also when START answers NIL (the system refused the
thread)."
  (mp:with-lock (*thread-lock*)
    (%reserve-thread-slots (+ *thread-limit* +thread-slack+))
    (give-specials-their-slots)
    (let ((live (length (mp:all-processes))))
      (when (>= live *thread-limit*)
        (thread-limit-error *thread-limit* "expected fewer than ~D live Lisp threads ~
(*THREAD-LIMIT*) to start thread ~S, found ~D" *thread-limit* name live)))
    (or (funcall start)
        (thread-limit-error *thread-limit* "expected the system to start thread ~S, found it ~
refused (memory or a process limit)" name))))

(defun guarded-process-enable (process)
  "MP:PROCESS-ENABLE within the thread limit (CALL-WITH-THREAD-ROOM)."
  (call-with-thread-room (mp:process-name process)
                         (lambda () (funcall *original-process-enable* process))))

(defun guarded-process-run-function (name function &rest arguments)
  "MP:PROCESS-RUN-FUNCTION within the thread limit (CALL-WITH-THREAD-ROOM)."
  (call-with-thread-room (if (consp name) (getf name :name) name)
                         (lambda () (apply *original-process-run-function* name function arguments))))

(setf (fdefinition 'mp:process-enable) #'guarded-process-enable
      (fdefinition 'mp:process-run-function) #'guarded-process-run-function)
